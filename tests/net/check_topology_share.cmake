# Runs one job (cmake -P script) and checks how its processes got the machine
# topology, from the "topology: ..." line each prints under --weft:stats:
#
#   cmake -DCMD=<mpirun;...> -DNP=<processes> [-DENV=<VAR=value;...>]
#         -P check_topology_share.cmake
#
# NP = 1: the process discovered the topology itself and no file was written.
# NP > 1 (all on this host): one process discovered it and shared it through
# a file, the NP - 1 others loaded that file, and the file is gone once the
# job has ended. A failure prints the command and the whole output.
cmake_minimum_required(VERSION 3.22)

foreach(v CMD NP)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "check_topology_share.cmake: ${v} is required")
  endif()
endforeach()
foreach(kv IN LISTS ENV)
  if(NOT kv MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
    message(FATAL_ERROR "check_topology_share.cmake: ENV entry '${kv}' is not VAR=value")
  endif()
  set(ENV{${CMAKE_MATCH_1}} "${CMAKE_MATCH_2}")
endforeach()

execute_process(COMMAND ${CMD} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
string(REPLACE ";" " " shown "${CMD}")
set(report "command: ${shown}\nexit code: ${code}\n---- stdout ----\n${out}\n---- stderr ----\n${err}\n----")

set(problems "")
if(NOT code STREQUAL "0")
  string(APPEND problems "exit code ${code}, expected 0\n")
endif()

string(REGEX MATCHALL "topology: [^\n]*" lines "${all}")
list(LENGTH lines n_lines)
if(NOT n_lines EQUAL NP)
  string(APPEND problems "${n_lines} 'topology: ' lines, expected one per process (${NP})\n")
endif()
set(discovered 0)
set(shared 0)
set(loaded 0)
set(files "")
foreach(line IN LISTS lines)
  if(line STREQUAL "topology: discovered")
    math(EXPR discovered "${discovered} + 1")
  elseif(line MATCHES "^topology: discovered and shared through ([^ ]+) with the job's ([0-9]+) other process")
    math(EXPR shared "${shared} + 1")
    list(APPEND files "${CMAKE_MATCH_1}")
    math(EXPR others "${NP} - 1")
    if(NOT CMAKE_MATCH_2 EQUAL others)
      string(APPEND problems "'${line}': expected ${others} other processes\n")
    endif()
  elseif(line MATCHES "^topology: loaded from ([^ ]+) \\(discovered by local rank 0\\)$")
    math(EXPR loaded "${loaded} + 1")
    list(APPEND files "${CMAKE_MATCH_1}")
  else()
    string(APPEND problems "unexpected line '${line}'\n")
  endif()
endforeach()

if(NP EQUAL 1)
  if(NOT discovered EQUAL 1)
    string(APPEND problems "the one process did not discover the topology itself\n")
  endif()
else()
  math(EXPR readers "${NP} - 1")
  if(NOT shared EQUAL 1 OR NOT loaded EQUAL readers OR NOT discovered EQUAL 0)
    string(APPEND problems
           "expected 1 process to discover and share and ${readers} to load; got ${shared} "
           "sharing, ${loaded} loading, ${discovered} discovering on their own\n")
  endif()
  list(REMOVE_DUPLICATES files)
  list(LENGTH files n_files)
  if(NOT n_files EQUAL 1)
    string(APPEND problems "the processes name different files: ${files}\n")
  elseif(EXISTS "${files}")
    string(APPEND problems "${files} is still there after the job\n")
  endif()
endif()

if(problems)
  message(FATAL_ERROR "${problems}${report}")
endif()
message(STATUS "ok: ${shown}: ${discovered} discovered, ${shared} shared, ${loaded} loaded")
