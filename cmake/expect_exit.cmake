# Runs PROG with ARGS ('|'-separated) and fails unless it exits with EXPECT and, when MATCH is
# given, its output matches the regular expression MATCH.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${PROG}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc STREQUAL "${EXPECT}")
  message(FATAL_ERROR "${PROG} ${ARGS}: exit status ${rc}, expected ${EXPECT}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "${PROG} ${ARGS}: output does not match '${MATCH}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "${PROG} ${ARGS}: exit ${rc} as expected")
