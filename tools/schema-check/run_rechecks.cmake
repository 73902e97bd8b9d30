# CTest schemas.run_output_validates (cmake -P): copies the shipped catalogs and profiles into a
# scratch tree, adds a module whose matmul capsule (the reference kernel) has checker evidence for
# its value and its VJP and a profile that selects it first, runs
# `capsule run mlp_regression --format json` under that profile, and validates the output against
# tools/schemas/run.schema.json with validate.mjs, which also requires value and vjp rechecks and
# checks that mutated outputs are rejected; then does the same for `capsule run causal_attention`
# under the profiles whose [target] names another platform (`target_declaration`) and for a refusal.
#
# Variables: CAPSULE (the CLI), NODE, SOURCE_DIR (repository root), WORK_DIR (scratch, recreated).
foreach(var CAPSULE NODE SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_rechecks.cmake needs -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(COPY "${SOURCE_DIR}/catalogs" "${SOURCE_DIR}/profiles" DESTINATION "${WORK_DIR}")

file(WRITE "${WORK_DIR}/catalogs/rechecked.toml" [=[
schema = 1
module = "rechecked"

[defaults]
provider = "reference"
device = "cpu"
trust = "checked"
vjp = "torchlean-tape"
reduction = "fixed-left"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "portable runtime shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed tensor layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "checker", name = "freivalds.matmul", coverage = "full" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "checker", name = "freivalds.matmul.vjp", coverage = "full" } }

[[capsule]]
name = "rechecked.matmul"
op = "matmul"
]=])
file(WRITE "${WORK_DIR}/profiles/rechecked_cpu.toml" [=[
schema = 1
name = "rechecked_cpu"
device = "cpu"
provider = "auto"
assurance = "checked"
vjp = "torchlean-tape"
modules = ["rechecked", "reference"]
recheck = { every = 2 }

[availability]
devices = ["cpu"]
providers = ["reference"]
]=])

# Runs `capsule run EXAMPLE --profile PROFILE --format json` on the scratch tree into OUTPUT,
# requires exit status EXPECTED_STATUS, and validates the document against run.schema.json
# (validate.mjs, with any further arguments, such as --expect-rechecks).
function(run_and_validate example profile output expected_status)
  execute_process(
    COMMAND "${CAPSULE}" run ${example} --profile ${profile} --format json
            --catalogs "${WORK_DIR}/catalogs" --profiles "${WORK_DIR}/profiles"
    OUTPUT_FILE "${output}"
    ERROR_VARIABLE run_stderr
    RESULT_VARIABLE run_status)
  if(NOT run_status EQUAL expected_status)
    message(FATAL_ERROR "capsule run ${example} --profile ${profile} exited ${run_status}, expected "
                        "${expected_status}\n${run_stderr}")
  endif()
  execute_process(
    COMMAND "${NODE}" "${SOURCE_DIR}/tools/schema-check/validate.mjs" run "${output}" ${ARGN}
    RESULT_VARIABLE check_status)
  if(NOT check_status EQUAL 0)
    message(FATAL_ERROR "the JSON output of capsule run ${example} under ${profile} is not valid against "
                        "run.schema.json (${output})")
  endif()
endfunction()

run_and_validate(mlp_regression rechecked_cpu "${WORK_DIR}/run.json" 0 --expect-rechecks)

# A profile whose [target] names another platform than this build's: on every platform one of
# macos_cpu (macOS aarch64) and windows_cpu (Windows x86_64) does, so at least one of the two
# outputs carries `target_declaration`, and both must be valid.
set(declared_runs 0)
foreach(profile macos_cpu windows_cpu)
  set(declared "${WORK_DIR}/${profile}.json")
  run_and_validate(causal_attention ${profile} "${declared}" 0)
  file(READ "${declared}" declared_text)
  if(declared_text MATCHES "\"target_declaration\":")
    math(EXPR declared_runs "${declared_runs} + 1")
  endif()
endforeach()
if(declared_runs EQUAL 0)
  message(FATAL_ERROR "neither macos_cpu nor windows_cpu printed a target_declaration")
endif()

# A refusal under --format json is a JSON document too (exit 1), valid against the same schema.
set(refusal "${WORK_DIR}/refusal.json")
run_and_validate(mlp_regression checked_cuda "${refusal}" 1)
file(READ "${refusal}" refusal_text)
if(NOT refusal_text MATCHES "\"error\":{\"code\":\"device-unavailable\"")
  message(FATAL_ERROR "the JSON refusal does not carry the device-unavailable code: ${refusal_text}")
endif()
