# CTest schemas.sarif_multitool (cmake -P): Microsoft's SARIF Multitool (`Sarif.Multitool validate
# --rule-kind "Gh;Sarif"`, npm @microsoft/sarif-multitool, pinned in package.json) must report no
# error and no warning on lint's SARIF logs of the shipped tree and of every lint entry of the
# invalid gallery (validate.mjs sarif-logs writes them). Notes (suggestions such as context
# regions) are allowed. A control log without a rule's help must draw GH2012, so a pass is never
# vacuous. Where the multitool is not installed or cannot run, the test prints SKIP and why
# (SKIP_REGULAR_EXPRESSION), never a silent pass.
#
# Variables: CAPSULE (the CLI), NODE, SOURCE_DIR, WORK_DIR (scratch, recreated), MULTITOOL
# (optional: the Sarif.Multitool binary; default: the one npm installed in tools/schema-check).
foreach(var CAPSULE NODE SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "sarif_multitool.cmake needs -D${var}=...")
  endif()
endforeach()

set(here "${SOURCE_DIR}/tools/schema-check")
if(NOT MULTITOOL)
  # The package's main module exports the path of the platform binary it depends on.
  execute_process(COMMAND "${NODE}" -p "require('@microsoft/sarif-multitool')"
                  WORKING_DIRECTORY "${here}" RESULT_VARIABLE status OUTPUT_VARIABLE MULTITOOL
                  ERROR_VARIABLE resolve_error OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    string(REGEX MATCH "Cannot find module '[^']*'" reason "${resolve_error}")
    message("SKIP: @microsoft/sarif-multitool is not installed in tools/schema-check/node_modules "
            "(${reason}); run `npm ci --prefix tools/schema-check` (tools/setup.sh does it)")
    return()
  endif()
endif()
# Invariant globalization: the .NET runtime then needs no libicu, and validation is culture-free.
set(run_env "${CMAKE_COMMAND}" -E env DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1)
execute_process(COMMAND ${run_env} "${MULTITOOL}" --version RESULT_VARIABLE status OUTPUT_VARIABLE version
                ERROR_VARIABLE version_error OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT status EQUAL 0)
  message("SKIP: the SARIF Multitool at ${MULTITOOL} cannot run here (exit ${status}): ${version_error}")
  return()
endif()
message("${version}")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/logs")
execute_process(COMMAND "${NODE}" "${here}/validate.mjs" sarif-logs "${WORK_DIR}/logs" "${SOURCE_DIR}/tests/data/invalid"
                        "${CAPSULE}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "could not write the SARIF logs to validate")
endif()
file(GLOB logs "${WORK_DIR}/logs/*.sarif")
list(LENGTH logs log_count)

# The control: the shipped log with the first rule's help removed.
file(READ "${WORK_DIR}/logs/shipped.sarif" shipped)
string(JSON control REMOVE "${shipped}" runs 0 tool driver rules 0 help)
file(WRITE "${WORK_DIR}/control/control.sarif" "${control}")

# Runs the multitool on `files`; sets `findings` (its error and warning lines) and `output`.
function(validate out_name)
  execute_process(COMMAND ${run_env} "${MULTITOOL}" validate --rule-kind "Gh;Sarif" --level "Error;Warning;Note"
                          --threads 2 -o "${WORK_DIR}/${out_name}-report.sarif" ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  string(REGEX MATCHALL "[^\n]*: (error|warning) [A-Z]+[0-9]+: [^\n]*" found "${output}")
  if(NOT status EQUAL 0 OR NOT output MATCHES "Analysis completed successfully")
    list(APPEND found "the multitool exited ${status} without completing:\n${output}")
  endif()
  set(findings "${found}" PARENT_SCOPE)
endfunction()

validate(control "${WORK_DIR}/control/control.sarif")
if(NOT findings MATCHES "GH2012")
  message(FATAL_ERROR "control: the multitool did not report GH2012 for a rule without help; it checks nothing:\n${findings}")
endif()

validate(logs ${logs})
if(findings)
  list(JOIN findings "\n" lines)
  message(FATAL_ERROR "the SARIF Multitool reports errors or warnings on capsule lint's SARIF:\n${lines}")
endif()
message("sarif_multitool: ${log_count} logs (shipped tree and invalid gallery): no errors or warnings; "
        "control log without help: GH2012 reported")
