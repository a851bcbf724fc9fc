# Sampled tracing (--weft:trace-sample=N) and coroutine entry methods in the
# trace (issue 30): tests/trace/sample_program, traced and read back by
# tests/trace/sampled_run.py (what each case checks is written there). 4 PEs
# on the 2 cores of the reference machine: oversubscribed on purpose.
add_executable(sample_program ${CMAKE_CURRENT_SOURCE_DIR}/sample_program.cpp)
target_link_libraries(sample_program PRIVATE weft::weft)

set(weft_sampled_run /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/sampled_run.py
    --tool ${PROJECT_SOURCE_DIR}/tools/weft-trace --pings 200 --spin-us 2000)
add_test(NAME trace.sample.coroutine
         COMMAND ${weft_sampled_run} --
                 $<TARGET_FILE:sample_program> 200 2000 --weft:threads=4 --weft:quiet
                 --weft:timeout=200)
add_test(NAME trace.sample.every4
         COMMAND ${weft_sampled_run} --sample 4 --
                 $<TARGET_FILE:sample_program> 200 2000 --weft:threads=4 --weft:quiet
                 --weft:timeout=200)
set_tests_properties(trace.sample.coroutine trace.sample.every4 PROPERTIES TIMEOUT 300
                     LABELS trace)

# A factor that is not a positive integer, sampling in summary mode or without
# a trace: one line naming the problem (and the accepted forms), exit status 2.
foreach(bad 0 -3 x 1.5 "")
  string(MAKE_C_IDENTIFIER "v${bad}" name)
  add_test(NAME trace.sample.bad_${name}
           COMMAND ${CMAKE_COMMAND}
                   "-DCMD=$<TARGET_FILE:sample_program>;1;0;--weft:trace-sample=${bad}"
                   -DEXPECT_CODE=2
                   "-DEXPECT_REGEX=--weft:trace-sample=[^ ]*: .*accepted: integer 1..1000000"
                   -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
  set_tests_properties(trace.sample.bad_${name} PROPERTIES TIMEOUT 60 LABELS trace)
endforeach()
add_test(NAME trace.sample.bad_summary
         COMMAND ${CMAKE_COMMAND}
                 "-DCMD=$<TARGET_FILE:sample_program>;1;0;--weft:trace=${CMAKE_CURRENT_BINARY_DIR}/sample_bad_summary;--weft:trace-mode=summary;--weft:trace-sample=4"
                 -DEXPECT_CODE=2
                 "-DEXPECT_REGEX=--weft:trace-sample=4 applies only with --weft:trace-mode=full"
                 -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
set_tests_properties(trace.sample.bad_summary PROPERTIES TIMEOUT 60 LABELS trace)
# Summary mode's timing stride (--weft:trace-time-every): not a positive
# integer, or given in full mode, is one line naming it, exit status 2.
add_test(NAME trace.time_every.bad_zero
         COMMAND ${CMAKE_COMMAND}
                 "-DCMD=$<TARGET_FILE:sample_program>;1;0;--weft:trace=${CMAKE_CURRENT_BINARY_DIR}/time_every_zero;--weft:trace-mode=summary;--weft:trace-time-every=0"
                 -DEXPECT_CODE=2
                 "-DEXPECT_REGEX=--weft:trace-time-every=0: .*accepted: integer 1..1000000"
                 -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
add_test(NAME trace.time_every.full_mode
         COMMAND ${CMAKE_COMMAND}
                 "-DCMD=$<TARGET_FILE:sample_program>;1;0;--weft:trace=${CMAKE_CURRENT_BINARY_DIR}/time_every_full;--weft:trace-time-every=4"
                 -DEXPECT_CODE=2
                 "-DEXPECT_REGEX=--weft:trace-time-every=4 applies only with --weft:trace-mode=summary"
                 -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
set_tests_properties(trace.time_every.bad_zero trace.time_every.full_mode PROPERTIES TIMEOUT 60
                     LABELS trace)
add_test(NAME trace.sample.without_trace
         COMMAND ${CMAKE_COMMAND}
                 "-DCMD=$<TARGET_FILE:sample_program>;1;0;--weft:trace-sample=4"
                 -DEXPECT_CODE=2
                 "-DEXPECT_REGEX=--weft:trace-sample=4 applies only with --weft:trace=DIR"
                 -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
set_tests_properties(trace.sample.without_trace PROPERTIES TIMEOUT 60 LABELS trace)
