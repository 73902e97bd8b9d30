# Writes the build's evidence manifest that `capsule lint` checks test-suite, fuzz-oracle and
# shared-definition evidence against: every doctest suite of the test binary and the
# (op, provider, device, obligation) cases each declares (tests/suite_coverage.hpp; format in
# docs/decisions.md, "Evidence names"). Inputs: TESTS (the capsule_tests binary), OUT (the file).
foreach(var TESTS OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "write_suite_manifest.cmake needs -D${var}=...")
  endif()
endforeach()

# The binary prints the manifest itself, so its declarations and the reader in capsule lint share
# one writer (capsule/evidence_manifest.hpp); listing runs no test.
execute_process(COMMAND "${TESTS}" --evidence-manifest
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TESTS} --evidence-manifest failed (${rc}): ${out} ${err}")
endif()
if(NOT out MATCHES "\\[\\[test-suite\\]\\]")
  message(FATAL_ERROR "${TESTS} --evidence-manifest listed no test suites:\n${out}")
endif()

# Rewritten only when a suite or a claim changes, so relinking the tests does not touch it.
file(WRITE "${OUT}.new" "${out}")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
