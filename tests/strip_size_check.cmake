# A stripped install keeps the CLI small (docs/cmake-package.md, "Size"): installs the build with
# `cmake --install --strip` into a scratch prefix and compares bin/capsule's size with LIMIT
# (bytes). Arguments: BUILD_DIR, LIMIT. LIMIT is empty when this build's size is not comparable
# (sanitizers, no optimisation); SKIP_REASON then says why and the test reports a skip.
if(NOT LIMIT)
  message("capsule-skip: ${SKIP_REASON}")
  return()
endif()
include("${CMAKE_CURRENT_LIST_DIR}/scratch_prefix.cmake")
capsule_scratch_dir(PREFIX capsule-strip-check)
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}" --strip
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install --strip failed (${rc}): ${err}")
endif()
file(SIZE "${PREFIX}/bin/capsule" size)
file(REMOVE_RECURSE "${PREFIX}")
if(size GREATER LIMIT)
  message(FATAL_ERROR "the stripped capsule is ${size} bytes, over the limit of ${LIMIT} "
                      "(tests/CMakeLists.txt; docs/cmake-package.md says where it comes from)")
endif()
message(STATUS "stripped capsule: ${size} bytes (limit ${LIMIT})")
