# Generates a synthetic catalog and lints it alone (an empty profile directory), expecting a
# clean load: exit 0, every capsule loaded, no error. The catalog models size, not this build:
# its test suites, fuzz oracles, shared definitions and provenance files are invented, so the
# evidence-integrity rules about them (names and coverage) are allowed, and its many providers without a compiled handler leave warnings.
# Inputs: GEN (capsule_gen_catalog), CAPSULE (the capsule CLI), WORK_DIR, CAPSULES.
foreach(var GEN CAPSULE WORK_DIR CAPSULES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "generated_catalog_lints.cmake needs -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/catalogs" "${WORK_DIR}/profiles")

execute_process(COMMAND "${GEN}" --capsules ${CAPSULES} --out "${WORK_DIR}/catalogs/synthetic.toml"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "capsule_gen_catalog failed (${rc}): ${out} ${err}")
endif()

execute_process(COMMAND "${CAPSULE}" lint --catalogs "${WORK_DIR}/catalogs" --profiles "${WORK_DIR}/profiles"
                        --allow unknown-test-suite --allow unknown-evidence-source --allow uncovered-evidence
                        --allow missing-provenance-file
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "capsule lint rejected the generated catalog (exit ${rc}):\n${out}\n${err}")
endif()
if(NOT out MATCHES "1 modules, ${CAPSULES} capsules, 0 profiles: 0 errors, ")
  message(FATAL_ERROR "unexpected lint summary:\n${out}\n${err}")
endif()
message(STATUS "generated ${CAPSULES}-capsule catalog lints clean")
