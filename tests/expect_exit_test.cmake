# weft_expect_exit_test(<test> LABEL <label> CODE <n> COMMAND <prog> <args>...
#                       [EXPECT <regex>...] [FORBID <regex>] [ENV <VAR=value>...]
#                       [JSON_LINES] [TIMEOUT <s>])
# A real process checked for its exit code and what it prints
# (tests/cli/expect_exit.cmake): every EXPECT regex must match
# stdout+stderr, FORBID must not; JSON_LINES: every output line that starts
# with '{' must parse as JSON, and one must. TIMEOUT defaults to 120 s.
# Used by tests/cli (weft_cli_test) and tests/mpi (weft_mpi_test).
function(weft_expect_exit_test test)
  cmake_parse_arguments(T "JSON_LINES" "LABEL;CODE;FORBID;TIMEOUT" "COMMAND;EXPECT;ENV" ${ARGN})
  if(NOT DEFINED T_CODE OR NOT T_COMMAND OR NOT T_LABEL)
    message(FATAL_ERROR "weft_expect_exit_test(${test}): LABEL, CODE and COMMAND are required")
  endif()
  # The lists travel as one -D value each; "\;" keeps them whole in `args`.
  foreach(list_arg COMMAND EXPECT ENV)
    string(REPLACE ";" "\\;" T_${list_arg} "${T_${list_arg}}")
  endforeach()
  set(args "-DCMD=${T_COMMAND}" "-DEXPECT_CODE=${T_CODE}")
  if(T_EXPECT)
    list(APPEND args "-DEXPECT_REGEX=${T_EXPECT}")
  endif()
  if(DEFINED T_FORBID)
    list(APPEND args "-DFORBID_REGEX=${T_FORBID}")
  endif()
  if(T_ENV)
    list(APPEND args "-DENV=${T_ENV}")
  endif()
  if(T_JSON_LINES)
    list(APPEND args "-DJSON_LINES=1")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${test} COMMAND ${CMAKE_COMMAND} ${args}
           -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
  set_tests_properties(${test} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${T_LABEL})
endfunction()
