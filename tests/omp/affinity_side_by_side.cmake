# Runs the affinity program built for libgomp (GOMP) and for libweft-omp
# (WEFT) with `--print` under the same environment (ENV: VAR=value items)
# and fails unless they print the same places, partitions and policies:
# a team's placement is what libgomp reports for the same variables
# (issue 29). Used where weft's PEs can be where OpenMP puts the threads
# (no more threads than places).
set(outputs "")
foreach(program ${GOMP} ${WEFT})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ENV} ${program} --print
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${program} --print (${ENV}): exit ${rc}\n${out}")
  endif()
  list(APPEND outputs "${out}")
endforeach()
list(GET outputs 0 gomp)
list(GET outputs 1 weft)
if(NOT gomp STREQUAL weft)
  message(FATAL_ERROR "placement differs (${ENV}):\nlibgomp:\n${gomp}libweft-omp:\n${weft}")
endif()
message(STATUS "same placement (${ENV}):\n${weft}")
