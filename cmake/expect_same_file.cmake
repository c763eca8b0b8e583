# Runs PROG with ARGS ('|'-separated) in the folder DIR, after copying the files INPUTS
# ('|'-separated) there, expects exit status 0, then expects the file OUTPUT (in DIR), which the
# run writes, to be byte for byte the file EXPECTED: a committed table is what the program makes of
# the committed data, never typed by hand.
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
string(REPLACE "|" ";" inputs "${INPUTS}")
file(COPY ${inputs} DESTINATION "${DIR}")
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${PROG}" ${args} WORKING_DIRECTORY "${DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 600)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROG} ${ARGS}: exit status ${rc}, expected 0\nstdout:\n${out}\nstderr:\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${DIR}/${OUTPUT}" "${EXPECTED}" RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "${DIR}/${OUTPUT}, which ${PROG} wrote from the committed data, is not ${EXPECTED}: "
                      "make it again with the same command (see the results folder's README) and commit it")
endif()
message(STATUS "${EXPECTED} is what ${PROG} ${ARGS} writes")
