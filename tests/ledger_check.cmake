# The evidence ledger end to end, with the real binaries (issue 9, "What it must show"):
#  1. `capsule check --profile checked_cpu --ledger LEDGER` accepts: every reference capsule's
#     evidence passed in the ledger the tests just wrote (coverage.declarations_match_runs);
#  2. `capsule check --profile checked_cuda --ledger LEDGER` rejects every CUDA capsule as
#     "not run here"; so does `--profile libtorch_cuda`, and `--profile vendor_cuda` where the CUDA providers are built (CUDA=ON):
#     their handler library exists, but no GPU parity suite ran on this build;
#  3. a suite made to fail (capsule_tests --tamper-op relu adds 1 to relu's first output) records
#     the failure, and the gate and lint then reject reference.relu naming the failing test case.
# Inputs: CAPSULE, TESTS, SOURCE_DIR, LEDGER, WORK_DIR; LIBTORCH_LEDGER where the build has the
# LibTorch provider (its suites run in their own binary and write their own ledger run); CUDA
# (ON/OFF) whether it has the CUDA providers.
foreach(var CAPSULE TESTS SOURCE_DIR LEDGER WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "ledger_check.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(expect_run expected_rc out_var)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected_rc}")
    message(FATAL_ERROR "`${ARGN}` exited ${rc}, expected ${expected_rc}:\n${out}\n${err}")
  endif()
  set(${out_var} "${out}\n${err}" PARENT_SCOPE)
endfunction()

function(expect_text text)
  foreach(part IN LISTS ARGN)
    string(FIND "${text}" "${part}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "expected `${part}` in:\n${text}")
    endif()
  endforeach()
endfunction()

if(NOT EXISTS "${LEDGER}")
  message(FATAL_ERROR "no ledger at ${LEDGER}: coverage.declarations_match_runs writes it")
endif()

set(ledgers --ledger "${LEDGER}")
if(LIBTORCH_LEDGER)
  if(NOT EXISTS "${LIBTORCH_LEDGER}")
    message(FATAL_ERROR "no ledger at ${LIBTORCH_LEDGER}: coverage.libtorch_declarations_match_runs writes it")
  endif()
  list(APPEND ledgers --ledger "${LIBTORCH_LEDGER}")
endif()

# 1. Every reference capsule of checked_cpu has passing evidence on this build.
expect_run(0 out "${CAPSULE}" check --profile checked_cpu --ledger "${LEDGER}")
expect_text("${out}" "checking every op the profile's modules declare on cpu: 53 ops"
            "reference.matmul value: passed:" "reference.attention vjp: passed:"
            " without a passing entry" "checked: accepted")
string(FIND "${out}" "ledger rejected" rejected_at)
if(NOT rejected_at EQUAL -1)
  message(FATAL_ERROR "checked_cpu had a ledger rejection:\n${out}")
endif()
expect_run(0 out "${CAPSULE}" lint ${ledgers})
expect_text("${out}" "warning[evidence-not-run-here]: evidence of module `native-cuda` never passed on this build")

# 1b. With the LibTorch provider, libtorch_cpu's LibTorch capsules passed their parity suites here.
if(LIBTORCH_LEDGER)
  expect_run(0 out "${CAPSULE}" check --profile libtorch_cpu ${ledgers})
  expect_text("${out}" "libtorch.matmul value: passed:" "libtorch.matmul vjp: passed:" "checked: accepted")
endif()

# 2. Nothing on this GPU-less build ran a CUDA capsule.
expect_run(1 out "${CAPSULE}" check --profile checked_cuda --ledger "${LEDGER}")
expect_text("${out}" "checked: ledger rejected native_cuda.matmul value"
            "not run here: this build has no compiled native-cuda handler library"
            "checked: rejected by the evidence ledger")
# libtorch_cuda, the CUDA twin of libtorch_cpu, plans LibTorch's CUDA twins, whose parity suites
# (libtorch.cuda.*) run only on a GPU machine's build.
expect_run(1 out "${CAPSULE}" check --profile libtorch_cuda ${ledgers})
expect_text("${out}" "checked: ledger rejected libtorch_cuda.add value"
            "not run here: " "checked: ledger rejected libtorch_cuda.layer_norm vjp"
            "checked: ledger rejected libtorch_cuda.matmul value" "checked: rejected by the evidence ledger")
if(CUDA)
  expect_run(1 out "${CAPSULE}" check --profile vendor_cuda --ledger "${LEDGER}")
  expect_text("${out}" "checked: ledger rejected cublas.matmul value"
              "not run here: the ledger has no run of test-suite cublas.values for value of matmul on cublas/cuda with this build's cublas handler library"
              "checked: rejected by the evidence ledger")
  # Lint: the handlers exist, but their device is unusable here, so this is not run here (a
  # warning naming the probe's reason), not a failure of the evidence.
  expect_run(0 out "${CAPSULE}" lint ${ledgers})
  expect_text("${out}" "warning[evidence-not-run-here]: evidence of module `cublas` never passed on this build: its capsules have handlers whose device this machine cannot use"
              "no usable device `cuda`: ")
endif()

# 3. A suite made to fail.
set(tampered "${WORK_DIR}/tampered-ledger.json")
expect_run(1 out "${TESTS}" --ledger "${tampered}" --tamper-op relu)
expect_text("${out}" "ledger: check failed in" "1 failed")
expect_run(1 out "${CAPSULE}" check --profile checked_cpu --ops relu,add --ledger "${tampered}")
expect_text("${out}" "checked: ledger rejected reference.relu value" "failed:" "first failure in test case"
            "tests/test_reference_" "reference.add value: passed:" "checked: rejected by the evidence ledger")
expect_run(1 out "${CAPSULE}" lint --ledger "${tampered}")
expect_text("${out}" "catalogs/reference.toml:" "error[evidence-not-passed]: test-suite `reference.values` evidence of 1 obligation (reference.relu value) failed on this build")
message(STATUS "ledger checks passed")
