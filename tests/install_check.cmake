# Installs the build into PREFIX and runs the installed `capsule lint` from an unrelated working
# directory (/, which holds no catalogs/ or profiles/), so it can only succeed if the binary
# finds catalogs/profiles relative to itself.
#
# The prefix must lie outside every git work tree, as a real installation does: inside one, lint
# reads provenance files only if git tracks them, and the build tree is ignored. PREFIX names a
# scratch directory under the system's temporary directory, made unique per run.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(scratch "$ENV{TMPDIR}")
else()
  set(scratch "/tmp")
endif()
string(RANDOM LENGTH 12 unique)
set(PREFIX "${scratch}/capsule-install-check-${unique}")
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}" RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
# The manual page generated from the command table is installed (GNUInstallDirs' default MANDIR).
if(NOT EXISTS "${PREFIX}/share/man/man1/capsule.1")
  message(FATAL_ERROR "capsule(1) was not installed under share/man/man1")
endif()
set(ENV{CAPSULE_CATALOGS} "")
set(ENV{CAPSULE_PROFILES} "")
execute_process(COMMAND "${PREFIX}/bin/capsule" lint WORKING_DIRECTORY /
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installed capsule lint failed (${rc}): ${out} ${err}")
endif()
if(NOT out MATCHES "${PREFIX}/share/capsule/catalogs" AND NOT out MATCHES "4 modules")
  message(FATAL_ERROR "unexpected lint output: ${out}")
endif()
execute_process(COMMAND "${PREFIX}/bin/capsule" plan --profile checked_cpu --ops matmul WORKING_DIRECTORY /
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "share/capsule/catalogs/reference.toml sha256")
  message(FATAL_ERROR "installed capsule plan did not use installed catalogs (${rc}): ${out} ${err}")
endif()
file(REMOVE_RECURSE "${PREFIX}")
message(STATUS "installed binary found its data: OK")
