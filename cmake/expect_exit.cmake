# Runs PROG with ARGS ('|'-separated) and fails unless it exits with EXPECT and, when MATCH is
# given, its output matches the regular expression MATCH. TIMEOUT: seconds the run may take
# (default 60; lab_expect_run's GPU runs pass their test's limit).
string(REPLACE "|" ";" args "${ARGS}")
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 60)
endif()
execute_process(COMMAND "${PROG}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
if(NOT rc STREQUAL "${EXPECT}")
  message(FATAL_ERROR "${PROG} ${ARGS}: exit status ${rc}, expected ${EXPECT}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "${PROG} ${ARGS}: output does not match '${MATCH}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "${PROG} ${ARGS}: exit ${rc} as expected")
