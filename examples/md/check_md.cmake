# CTest driver for examples/md (cmake -DMD=<md> -DMODE=same|usage -P check_md.cmake).
#
# MODE=same: the same small system with balancing off and on (greedy-refine,
# rotate, which moves every element at every step, and comm placing cells and
# computes together on their communication graph) on 1 and 4 PEs; each
# run must pass md's own energy-drift check (exit 0), and every run must print
# the same checksum line: the result does not depend on placement.
# MODE=usage: bad options exit 2 naming the option and what is accepted.
if(NOT MD OR NOT MODE)
  message(FATAL_ERROR "usage: cmake -DMD=<md> -DMODE=same|usage -P check_md.cmake")
endif()

set(small --md:cells=3 --md:cell-size=5 --md:atoms=600 --md:cluster=0.5 --md:steps=60
          --md:lb-every=5 --weft:timeout=120)

if(MODE STREQUAL "same")
  set(reference "")
  foreach(run "1;off" "1;greedy-refine" "4;off" "4;greedy-refine" "4;rotate"
              "4;comm;--weft:lb-arrays=together")
    list(GET run 0 threads)
    list(GET run 1 lb)
    set(extra "")
    list(LENGTH run fields)
    if(fields GREATER 2)
      list(GET run 2 extra)
    endif()
    execute_process(COMMAND ${MD} ${small} --weft:threads=${threads} --weft:lb=${lb} ${extra}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "md --weft:threads=${threads} --weft:lb=${lb}: exit ${rc}\n${out}\n${err}")
    endif()
    if(NOT out MATCHES "md: energy drift [0-9.e+-]+ at the end")
      message(FATAL_ERROR "md --weft:lb=${lb}: no energy-drift line\n${out}")
    endif()
    string(REGEX MATCH "md: checksum sum_x=[0-9.e+-]+ hash=[0-9a-f]+" sum "${out}")
    if(sum STREQUAL "")
      message(FATAL_ERROR "md --weft:lb=${lb}: no checksum line\n${out}")
    endif()
    message(STATUS "threads=${threads} lb=${lb}: ${sum}")
    if(reference STREQUAL "")
      set(reference "${sum}")
    elseif(NOT sum STREQUAL reference)
      message(FATAL_ERROR "threads=${threads} lb=${lb} gives\n  ${sum}\nthe first run gave\n  ${reference}")
    endif()
  endforeach()
  message(STATUS "passed: the same checksum in every run")
elseif(MODE STREQUAL "usage")
  foreach(case "--md:cells=2|--md:cells=2: must be an integer in 3..64"
               "--md:cluster=1.5|--md:cluster=1.5: must be a number in 0..1"
               "--md:lb-every=0|--md:lb-every=0: must be an integer in 1..10000000"
               "--md:loads=gpu|--md:loads=gpu: must be cpu or wall"
               "--md:bogus=1|unknown option --md:bogus"
               "stray|unknown argument 'stray'"
               "--md:atoms=1000000|the cluster (600000 atoms"
               "--md:cluster=0 --md:atoms=1000000|too many atoms for the box")
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts 0 arg)
    list(GET parts 1 want)
    separate_arguments(arg)
    execute_process(COMMAND ${MD} ${arg} --weft:threads=2 --weft:timeout=60
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    if(NOT rc EQUAL 2)
      message(FATAL_ERROR "md ${arg}: exit ${rc}, want 2\n${out}\n${err}")
    endif()
    string(FIND "${err}" "${want}" at)
    if(at EQUAL -1 OR NOT err MATCHES "usage: md ")
      message(FATAL_ERROR "md ${arg}: stderr lacks the usage line and '${want}':\n${err}")
    endif()
  endforeach()
  message(STATUS "passed: bad options exit 2")
else()
  message(FATAL_ERROR "MODE must be same or usage, not '${MODE}'")
endif()
