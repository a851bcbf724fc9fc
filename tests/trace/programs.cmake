# Traced runs of tests/trace/trace_program (every kind of event), read back by
# tools/weft-trace through tests/trace/traced_run.py. 4 PEs on the 2 cores of
# the reference machine: oversubscribed on purpose, as every test must pass so.
add_executable(trace_program ${CMAKE_CURRENT_SOURCE_DIR}/trace_program.cpp)
target_link_libraries(trace_program PRIVATE weft::weft)

set(weft_trace_tool ${PROJECT_SOURCE_DIR}/tools/weft-trace)
set(weft_traced_run /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/traced_run.py
    --tool ${weft_trace_tool})
# Open MPI's allocations at exit are not weft's (as in tests/net).
set(weft_trace_env ASAN_OPTIONS=detect_leaks=0)

foreach(c full summary truncated)
  add_test(NAME trace.program.${c}
           COMMAND ${weft_traced_run} --case ${c} --
                   $<TARGET_FILE:trace_program> 60 --weft:threads=4 --weft:quiet
                   --weft:timeout=200)
  set_tests_properties(trace.program.${c} PROPERTIES TIMEOUT 300 LABELS trace)
endforeach()
# Summary mode on one PE: every slice counted where nothing is ever stolen
# or sent to another PE (the counts as a full trace's, as above).
add_test(NAME trace.program.summary_1pe
         COMMAND ${weft_traced_run} --case summary --
                 $<TARGET_FILE:trace_program> 60 --weft:threads=1 --weft:quiet
                 --weft:timeout=200)
set_tests_properties(trace.program.summary_1pe PROPERTIES TIMEOUT 300 LABELS trace)

# A fatal error half way: what the PEs had recorded is written, and the
# metadata says the run aborted.
add_test(NAME trace.program.abort
         COMMAND ${weft_traced_run} --case abort --
                 $<TARGET_FILE:trace_program> 40 abort --weft:threads=4 --weft:quiet
                 --weft:timeout=200)
set_tests_properties(trace.program.abort PROPERTIES TIMEOUT 300 LABELS trace
                     ENVIRONMENT "${weft_trace_env}")

# Runs that end early (issue 24): the program hangs in a handler after a
# few steps and is ended by --weft:timeout, SIGTERM or SIGKILL; a 1 MiB
# buffer, so that the hanging PE has flushed before it hangs. The trace keeps
# what the PEs recorded (all of it, but for SIGKILL: what was flushed), and
# weft-trace says how the run ended and where each PE was.
foreach(c timeout sigterm sigkill)
  if(c STREQUAL "timeout")
    set(limit --weft:timeout=8)
  else()
    set(limit --weft:timeout=200)
  endif()
  add_test(NAME trace.program.${c}
           COMMAND ${weft_traced_run} --case ${c} --
                   $<TARGET_FILE:trace_program> 2 hang --weft:threads=4 --weft:quiet
                   --weft:trace-buffer=1 ${limit})
  set_tests_properties(trace.program.${c} PROPERTIES TIMEOUT 300 LABELS trace
                       ENVIRONMENT "${weft_trace_env}")
endforeach()

# Arguments that are not UTF-8: the trace's JSON and the tools' stay valid
# UTF-8 (issue 24, item 6).
add_test(NAME trace.program.utf8
         COMMAND ${weft_traced_run} --case utf8 --
                 $<TARGET_FILE:trace_program> 4 --weft:threads=2 --weft:quiet
                 --weft:timeout=200)
set_tests_properties(trace.program.utf8 PROPERTIES TIMEOUT 300 LABELS trace)

# --weft:stats without --weft:counters: nobody asked for counters, so no line
# about those the kernel refuses (issue 24, item 8). Meaningful on a machine
# without hardware counters, as the reference VM is; the unit test
# Session.RefusedCountersAreSaidOnlyWhenAsked drives both paths anywhere.
set(quiet_cmd $<TARGET_FILE:trace_program> 2 --weft:stats --weft:threads=2)
add_test(NAME trace.stats_quiet_counters
         COMMAND ${CMAKE_COMMAND} "-DCMD=${quiet_cmd}"
                 -DEXPECT_CODE=0 "-DEXPECT_REGEX=trace_program: steps=2"
                 "-DFORBID_REGEX=counters not available"
                 -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
set_tests_properties(trace.stats_quiet_counters PROPERTIES TIMEOUT 120 LABELS trace)

# Each PE's CPU over time (issue 29): with bind=none every PE has cpu
# records within the process's CPU set and `weft-trace migrations` counts
# what they hold; bound (compact, 4 PEs on the 2 CPUs of the reference
# machine), each PE's records all name its one CPU and no migration is counted.
add_test(NAME trace.program.cpus
         COMMAND ${weft_traced_run} --case cpus --
                 $<TARGET_FILE:trace_program> 60 --weft:threads=4 --weft:bind=none
                 --weft:quiet --weft:timeout=200)
add_test(NAME trace.program.cpus_bound
         COMMAND ${weft_traced_run} --case cpus-bound --
                 $<TARGET_FILE:trace_program> 60 --weft:threads=4 --weft:bind=compact
                 --weft:quiet --weft:timeout=200)
set_tests_properties(trace.program.cpus trace.program.cpus_bound PROPERTIES TIMEOUT 300
                     LABELS trace)

# The writer thread falls behind (made slow, two buffers per track): the
# PEs drop events and count them, the trace says how many and the tools
# read it (issue 30).
add_test(NAME trace.program.dropped
         COMMAND ${weft_traced_run} --case dropped --
                 $<TARGET_FILE:trace_program> 4 marks --weft:threads=4 --weft:quiet
                 --weft:trace-buffer=1 --weft:timeout=200)
set_tests_properties(trace.program.dropped PROPERTIES TIMEOUT 300 LABELS trace)

# One PE, no tasks to steal: the non-SMP shape.
add_test(NAME trace.program.one_pe
         COMMAND ${weft_traced_run} --case full --no-tasks --no-idle --
                 $<TARGET_FILE:trace_program> 20 --weft:threads=1 --weft:quiet
                 --weft:timeout=200)
set_tests_properties(trace.program.one_pe PROPERTIES TIMEOUT 300 LABELS trace)

# Two processes of two PEs over shm (a comm thread each when the host has a
# CPU to spare): one directory, one metadata file per node, arrows between
# the nodes. Not under ThreadSanitizer, which runs Open MPI's launcher badly.
find_package(MPI COMPONENTS C)
if(MPIEXEC_EXECUTABLE AND NOT WEFT_SANITIZE STREQUAL "thread")
  add_test(NAME trace.program.two_nodes
           COMMAND ${weft_traced_run} --case full --
                   ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none ${MPIEXEC_NUMPROC_FLAG} 2
                   $<TARGET_FILE:trace_program> 30 --weft:threads=2 --weft:transport=shm
                   --weft:quiet --weft:timeout=200)
  set_tests_properties(trace.program.two_nodes PROPERTIES TIMEOUT 300 LABELS trace
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${weft_trace_env};OMPI_MCA_rmaps_base_oversubscribe=1")
  # Non-SMP with a comm thread per process: its track, with progress slices.
  add_test(NAME trace.program.comm_thread
           COMMAND ${weft_traced_run} --case full --no-tasks --no-idle --comm --
                   ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none ${MPIEXEC_NUMPROC_FLAG} 2
                   $<TARGET_FILE:trace_program> 20 --weft:threads=1 --weft:transport=shm
                   --weft:comm=thread --weft:quiet --weft:timeout=200)
  set_tests_properties(trace.program.comm_thread PROPERTIES TIMEOUT 300 LABELS trace
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${weft_trace_env};OMPI_MCA_rmaps_base_oversubscribe=1")
endif()

# A plain OpenMP program on libweft-omp (tests/omp's loops, linked with it):
# the attached node's trace, asked for through the environment; its regions
# are "omp parallel" slices on thread 0's PE. Not with the sanitizers' own
# runtime preloading of tests/omp: the program links libweft-omp itself.
if(TARGET omp_weft_loops)
  add_test(NAME trace.omp.loops
           COMMAND ${weft_traced_run} --case full --trace-env --no-tasks
                   --expect-name "omp parallel" -- $<TARGET_FILE:omp_weft_loops>)
  set_tests_properties(trace.omp.loops PROPERTIES TIMEOUT 300 LABELS trace
                       ENVIRONMENT "WEFT_THREADS=2;OMP_NUM_THREADS=2;WEFT_QUIET=1")
endif()

# Balancing steps in the trace (issue 30): an array that balances at_sync
# steps, then one on demand; each step is a span on every PE with its
# phases, its migrations are those --weft:lb-stats says it planned, and
# `weft-trace lb` reports it (tests/trace/lb_run.py).
add_executable(trace_lb_program ${CMAKE_CURRENT_SOURCE_DIR}/lb_program.cpp)
target_link_libraries(trace_lb_program PRIVATE weft::weft)
foreach(c balanced off)
  if(c STREQUAL "balanced")
    set(lb --weft:lb=greedy)
  else()
    set(lb --weft:lb=off)
  endif()
  add_test(NAME trace.lb.${c}
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/lb_run.py --tool ${weft_trace_tool}
                   --case ${c} -- $<TARGET_FILE:trace_lb_program> 16 3 --weft:threads=4 ${lb}
                   --weft:quiet --weft:timeout=200)
  set_tests_properties(trace.lb.${c} PROPERTIES TIMEOUT 300 LABELS "trace;lb")
endforeach()
