# Runs one program and checks its exit code and output (cmake -P script).
#
#   cmake -DCMD=<prog;arg;...> -DEXPECT_CODE=<n|nonzero> [-DEXPECT_REGEX=<re;...>]
#         [-DFORBID_REGEX=<re>] [-DENV=<VAR=value;...>] [-DJSON_LINES=1]
#         -P expect_exit.cmake
#
# Each regex of the EXPECT_REGEX list must match, and FORBID_REGEX must not
# match, the combined stdout and stderr (CMake regex: '^' is the start of the
# whole output, '.' also matches a newline). JSON_LINES: every output line
# that starts with '{' must parse as a JSON object, and there must be one.
# ENV entries are set for the program only (this script runs in its own cmake
# process). A failure prints the command, the code and the whole output, so
# the CTest log alone explains it.
cmake_minimum_required(VERSION 3.22)

if(NOT DEFINED CMD OR CMD STREQUAL "")
  message(FATAL_ERROR "expect_exit.cmake: CMD is required")
endif()
if(NOT DEFINED EXPECT_CODE)
  message(FATAL_ERROR "expect_exit.cmake: EXPECT_CODE is required")
endif()

foreach(kv IN LISTS ENV)
  if(NOT kv MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
    message(FATAL_ERROR "expect_exit.cmake: ENV entry '${kv}' is not VAR=value")
  endif()
  set(ENV{${CMAKE_MATCH_1}} "${CMAKE_MATCH_2}")
endforeach()

execute_process(COMMAND ${CMD}
  RESULT_VARIABLE code
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
set(all "${out}${err}")

string(REPLACE ";" " " shown "${CMD}")
if(ENV)
  string(REPLACE ";" " " env_shown "${ENV}")
  set(shown "${env_shown} ${shown}")
endif()
set(report "command: ${shown}\nexit code: ${code}\n---- stdout ----\n${out}\n---- stderr ----\n${err}\n----")

set(problems "")
if(EXPECT_CODE STREQUAL "nonzero")
  # A job under a launcher: which non-zero code it passes on is the
  # launcher's choice.
  if(code STREQUAL "0" OR NOT code MATCHES "^[0-9]+$")
    string(APPEND problems "exit code ${code}, expected a non-zero exit code\n")
  endif()
elseif(NOT code STREQUAL "${EXPECT_CODE}")
  string(APPEND problems "exit code ${code}, expected ${EXPECT_CODE}\n")
endif()
foreach(re IN LISTS EXPECT_REGEX)
  if(NOT all MATCHES "${re}")
    string(APPEND problems "output does not match '${re}'\n")
  endif()
endforeach()
if(DEFINED FORBID_REGEX AND NOT FORBID_REGEX STREQUAL "")
  if(all MATCHES "${FORBID_REGEX}")
    string(APPEND problems "output matches the forbidden '${FORBID_REGEX}' (at '${CMAKE_MATCH_0}')\n")
  endif()
endif()

if(JSON_LINES)
  # Lines are split by hand: a CMake list would break at ';' and '[' ']'.
  set(rest "${all}")
  set(objects 0)
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "\n" nl)
    if(nl EQUAL -1)
      set(line "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${nl} line)
      math(EXPR next "${nl} + 1")
      string(SUBSTRING "${rest}" ${next} -1 rest)
    endif()
    if(line MATCHES "^{")
      string(JSON type ERROR_VARIABLE json_error TYPE "${line}")
      if(json_error OR NOT type STREQUAL "OBJECT")
        string(APPEND problems "not a JSON object: ${line} (${json_error})\n")
      else()
        math(EXPR objects "${objects} + 1")
      endif()
    endif()
  endwhile()
  if(objects EQUAL 0)
    string(APPEND problems "no JSON line in the output\n")
  endif()
endif()

if(problems)
  message(FATAL_ERROR "${problems}${report}")
endif()
message(STATUS "ok: ${shown} -> ${code}")
