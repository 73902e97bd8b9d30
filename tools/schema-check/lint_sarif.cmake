# CTest schemas.lint_sarif_validates (cmake -P): copies the shipped catalogs and profiles into a
# scratch tree, adds files with one finding of each level (a misaligned contract: error; lapsed
# trust: an error under lint; a profile naming an unknown module: error), runs
# `capsule lint --format sarif` on it and validates the log against the official SARIF 2.1.0
# schema with validate.mjs (which also checks that a log without `version` is rejected).
#
# Variables: CAPSULE (the CLI), NODE, SOURCE_DIR (repository root), WORK_DIR (scratch, recreated).
foreach(var CAPSULE NODE SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "lint_sarif.cmake needs -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(COPY "${SOURCE_DIR}/catalogs" "${SOURCE_DIR}/profiles" DESTINATION "${WORK_DIR}")

set(contracts [=[
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "scratch shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "reference.vjps" } }
]=])
file(WRITE "${WORK_DIR}/catalogs/scratch.toml" "schema = 1
module = \"scratch\"

[defaults]
provider = \"reference\"
device = \"cpu\"
trust = \"checked\"
vjp = \"torchlean-tape\"
reduction = \"n/a\"
${contracts}
# error: a value test filed in the shape field
[[capsule]]
name = \"scratch.misfiled\"
op = \"relu\"
contracts.shape = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.values\" } }

# error under lint (expired-trust): trust that lapsed before CAPSULE_TODAY
[[capsule]]
name = \"scratch.vendor_relu\"
op = \"relu\"
provider = \"external\"
device = \"external\"
trust = \"trusted-external\"
reason = \"vendor kernel\"
expires = 2020-01-01
")
file(WRITE "${WORK_DIR}/profiles/scratch.toml" "schema = 1
name = \"scratch\"
device = \"cpu\"
modules = [\"reference\", \"refrence\"]

[availability]
devices = [\"cpu\"]
providers = [\"reference\"]
")

set(log "${WORK_DIR}/lint.sarif")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env CAPSULE_TODAY=2026-11-29
          "${CAPSULE}" lint --format sarif --catalogs "${WORK_DIR}/catalogs" --profiles "${WORK_DIR}/profiles"
  OUTPUT_FILE "${log}"
  ERROR_VARIABLE lint_stderr
  RESULT_VARIABLE lint_status)
if(NOT lint_status EQUAL 1)
  message(FATAL_ERROR "capsule lint --format sarif exited ${lint_status}, expected 1 (findings)\n${lint_stderr}")
endif()

execute_process(
  COMMAND "${NODE}" "${SOURCE_DIR}/tools/schema-check/validate.mjs" sarif "${log}" --expect-results
  RESULT_VARIABLE check_status)
if(NOT check_status EQUAL 0)
  message(FATAL_ERROR "the SARIF log of capsule lint is not valid SARIF 2.1.0 (${log})")
endif()
