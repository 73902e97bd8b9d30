# Runs the loader fuzzer once over a scratch corpus plus the seed directories (cmake -P script,
# used by the `fuzz.loaders_bounded` test and the `fuzz_loaders_long` target).
#   FUZZER        the fuzzer executable
#   WORK_DIR      scratch corpus: libFuzzer writes new inputs here (first corpus argument);
#                 emptied first unless KEEP_WORK_DIR is set, so bounded runs are reproducible
#   SEEDS         seed directories, read only ("|"-separated)
#   DICT          optional libFuzzer dictionary
#   ARGS          libFuzzer flags, "|"-separated (-runs=...|-seed=...)
# Crash, leak and timeout inputs land in WORK_DIR/../fuzz-artifacts/.
foreach(var FUZZER WORK_DIR SEEDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: ${var} is not set")
  endif()
endforeach()

string(REPLACE "|" ";" SEEDS "${SEEDS}")
string(REPLACE "|" ";" ARGS "${ARGS}")

if(NOT KEEP_WORK_DIR)
  file(REMOVE_RECURSE "${WORK_DIR}")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")
get_filename_component(_parent "${WORK_DIR}" DIRECTORY)
set(_artifacts "${_parent}/fuzz-artifacts")
file(MAKE_DIRECTORY "${_artifacts}")

set(_command "${FUZZER}" ${ARGS} "-artifact_prefix=${_artifacts}/")
if(DEFINED DICT AND EXISTS "${DICT}")
  list(APPEND _command "-dict=${DICT}")
endif()
list(APPEND _command "${WORK_DIR}" ${SEEDS})

string(REPLACE ";" " " _shown "${_command}")
message(STATUS "running: ${_shown}")
execute_process(COMMAND ${_command} RESULT_VARIABLE _status)
if(NOT _status EQUAL 0)
  message(FATAL_ERROR "fuzzer exited with ${_status}; reproduce with: ${FUZZER} ${_artifacts}/<crash file>")
endif()
