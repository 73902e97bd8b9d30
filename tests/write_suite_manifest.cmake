# Writes the build's evidence manifest that `capsule lint` checks test-suite, fuzz-oracle and
# shared-definition evidence against: every doctest suite of the test binaries and the
# (op, provider, device, obligation) cases each declares (tests/suite_coverage.hpp; format in
# docs/decisions.md, "Evidence names"). Inputs: TESTS (the test binaries, separated by `|`: the
# engine tests, then the LibTorch tests and the GPU tests where the build has them), OUT (the file).
foreach(var TESTS OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "write_suite_manifest.cmake needs -D${var}=...")
  endif()
endforeach()

# Each binary prints the manifest itself, so its declarations and the reader in capsule lint share
# one writer (capsule/evidence_manifest.hpp); listing runs no test. A later binary merges the
# manifest of the earlier ones (--merge-manifest), so the last one prints the union.
string(REPLACE "|" ";" binaries "${TESTS}")
set(out "")
set(previous "")
foreach(binary IN LISTS binaries)
  set(merge "")
  if(previous)
    set(merge --merge-manifest "${previous}")
  endif()
  execute_process(COMMAND "${binary}" --evidence-manifest ${merge}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${binary} --evidence-manifest failed (${rc}): ${out} ${err}")
  endif()
  if(NOT out MATCHES "\\[\\[test-suite\\]\\]")
    message(FATAL_ERROR "${binary} --evidence-manifest listed no test suites:\n${out}")
  endif()
  set(previous "${OUT}.part")
  file(WRITE "${previous}" "${out}")
endforeach()
file(REMOVE "${OUT}.part")

# Rewritten only when a suite or a claim changes, so relinking the tests does not touch it.
file(WRITE "${OUT}.new" "${out}")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
