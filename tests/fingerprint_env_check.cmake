# Runs the real `capsule plan` with different OPENBLAS_CORETYPE values (tests/CMakeLists.txt:
# fingerprint.follows_blas_core_type). Inputs (-D): CAPSULE (the binary), SOURCE_DIR.
cmake_minimum_required(VERSION 3.25)

# The digest of the environment block that `capsule plan` prints with OPENBLAS_CORETYPE = `core`
# (unset when `core` is "<unset>"); also returns the whole output.
function(plan_fingerprint core out_digest out_text)
  if(core STREQUAL "<unset>")
    unset(ENV{OPENBLAS_CORETYPE})
  else()
    set(ENV{OPENBLAS_CORETYPE} "${core}")
  endif()
  execute_process(
    COMMAND "${CAPSULE}" plan --profile checked_cpu --ops matmul,relu
            --catalogs "${SOURCE_DIR}/catalogs" --profiles "${SOURCE_DIR}/profiles"
    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "capsule plan with OPENBLAS_CORETYPE=${core} exited ${rc}:\n${text}${err}")
  endif()
  if(NOT text MATCHES "\nenvironment: sha256 ([0-9a-f]+)\n")
    message(FATAL_ERROR "no environment block in:\n${text}")
  endif()
  set(${out_digest} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${out_text} "${text}" PARENT_SCOPE)
endfunction()

plan_fingerprint("Haswell" haswell haswell_text)
plan_fingerprint("Zen" zen zen_text)
plan_fingerprint("Haswell" haswell_again ignored)
plan_fingerprint("<unset>" unset unset_text)

if(haswell STREQUAL zen)
  message(FATAL_ERROR "OPENBLAS_CORETYPE Haswell and Zen gave the same fingerprint ${haswell}")
endif()
if(NOT haswell STREQUAL haswell_again)
  message(FATAL_ERROR "two runs in the same environment gave different fingerprints: ${haswell} and ${haswell_again}")
endif()
if(haswell STREQUAL unset)
  message(FATAL_ERROR "setting OPENBLAS_CORETYPE did not change the fingerprint")
endif()
if(NOT haswell_text MATCHES "\n  env.OPENBLAS_CORETYPE Haswell\n" OR NOT zen_text MATCHES "\n  env.OPENBLAS_CORETYPE Zen\n"
   OR NOT unset_text MATCHES "\n  env.OPENBLAS_CORETYPE unset\n")
  message(FATAL_ERROR "the environment block does not show OPENBLAS_CORETYPE:\n${haswell_text}")
endif()
if(NOT haswell_text MATCHES "\n  build.commit [0-9a-fu]" OR NOT haswell_text MATCHES "\n  provider.reference.sha256 [0-9a-f]+\n")
  message(FATAL_ERROR "the environment block lacks the build identity:\n${haswell_text}")
endif()

# A value that tries to start a line of its own (a forged GitHub workflow command) stays inside
# its entry's line.
plan_fingerprint("Haswell\n::error::forged" hostile hostile_text)
if(hostile_text MATCHES "\n::error::" OR NOT hostile_text MATCHES "\n  env.OPENBLAS_CORETYPE Haswell\\\\n::error::forged\n")
  message(FATAL_ERROR "a newline in OPENBLAS_CORETYPE reached the report:\n${hostile_text}")
endif()
message(STATUS "fingerprints: Haswell ${haswell}, Zen ${zen}, unset ${unset}")
