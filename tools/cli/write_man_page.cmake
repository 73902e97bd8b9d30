# Writes capsule(1): runs `CAPSULE man` into OUT, failing the build when the program fails.
execute_process(COMMAND ${CAPSULE} man OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "`capsule man` failed (${status})")
endif()
file(RENAME ${OUT}.tmp ${OUT})
