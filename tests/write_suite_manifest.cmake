# Writes the doctest suites of the test binary to the manifest `capsule lint` checks test-suite
# evidence against: a catalog's `test-suite` evidence must name a suite this build has.
# Inputs: TESTS (the capsule_tests binary), OUT (the manifest file).
foreach(var TESTS OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "write_suite_manifest.cmake needs -D${var}=...")
  endif()
endforeach()

execute_process(COMMAND "${TESTS}" --list-test-suites --no-colors=true
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TESTS} --list-test-suites failed (${rc}): ${out} ${err}")
endif()

# doctest frames the names with `[doctest] ...` lines and `=====` rules.
string(REPLACE "\n" ";" lines "${out}")
set(suites "")
foreach(line IN LISTS lines)
  string(STRIP "${line}" line)
  if(line STREQUAL "" OR line MATCHES "^\\[doctest\\]" OR line MATCHES "^====")
    continue()
  endif()
  list(APPEND suites "${line}")
endforeach()
if(NOT suites)
  message(FATAL_ERROR "${TESTS} listed no test suites:\n${out}")
endif()
list(REMOVE_DUPLICATES suites)
list(SORT suites)
list(JOIN suites "\n" body)

# Rewritten only when the list changes, so relinking the tests does not touch it.
file(WRITE "${OUT}.new" "# Test suites of capsule_tests, written by the build for `capsule lint`.\n${body}\n")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
