# A chapter README's table of programs is the registry's, not typed by hand: this script (a CPU
# test) writes the table with `compare --list --chapter CHAPTER --markdown OUT` and fails when the
# README's text between <!-- results:programs:begin --> and <!-- results:programs:end --> differs.
# A subfolder's README (ch04's attention/README.md), with -DSUBFOLDER=attention, lists the programs
# of that subfolder (`compare --list --chapter CHAPTER --subfolder attention --markdown OUT`).
#   cmake -DCOMPARE=... -DMANIFEST=... -DCHAPTER=ch01 [-DSUBFOLDER=...] -DREADME=.../README.md -DOUT=... -P check_readme_programs.cmake
set(which "")
set(regenerate "compare --list --chapter ${CHAPTER}")
if(SUBFOLDER)
  set(which --subfolder "${SUBFOLDER}")
  set(regenerate "compare --list --chapter ${CHAPTER} --subfolder ${SUBFOLDER}")
endif()
execute_process(COMMAND "${COMPARE}" --manifest "${MANIFEST}" --list --chapter "${CHAPTER}" ${which} --markdown "${OUT}"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${regenerate} --markdown failed (${rc}): ${err}")
endif()
file(READ "${OUT}" table)
file(READ "${README}" readme)
set(begin "<!-- results:programs:begin -->")
set(end "<!-- results:programs:end -->")
string(FIND "${readme}" "${begin}" b)
string(FIND "${readme}" "${end}" e)
if(b LESS 0 OR e LESS b)
  message(FATAL_ERROR "${README} has no ${begin} ... ${end} markers")
endif()
string(LENGTH "${begin}" blen)
math(EXPR start "${b} + ${blen}")
math(EXPR len "${e} - ${start}")
string(SUBSTRING "${readme}" ${start} ${len} section)
string(STRIP "${section}" section)
string(STRIP "${table}" table)
if(NOT section STREQUAL table)
  message(FATAL_ERROR "${README}: the table of programs is stale. Regenerate it:\n"
                      "  ${regenerate} --markdown programs.md && "
                      "tools/update_readme_results.py ${README} programs.md --section programs")
endif()
message(STATUS "${README}: the table of programs matches the registry")
