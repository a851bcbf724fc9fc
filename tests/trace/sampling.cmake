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

# A trace option given a bad value, or where it does not apply: sample_program
# run with `args` (a list) exits with status 2 and one line matching `regex`.
function(weft_trace_option_error name args regex)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:sample_program>;1;0;${args}"
                   -DEXPECT_CODE=2 "-DEXPECT_REGEX=${regex}"
                   -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 60 LABELS trace)
endfunction()
set(weft_trace_dir ${CMAKE_CURRENT_BINARY_DIR})

# A factor that is not a positive integer, sampling in summary mode or without
# a trace: one line naming the problem (and the accepted forms), exit status 2.
foreach(bad 0 -3 x 1.5 "")
  string(MAKE_C_IDENTIFIER "v${bad}" name)
  weft_trace_option_error(trace.sample.bad_${name} "--weft:trace-sample=${bad}"
                          "--weft:trace-sample=[^ ]*: .*accepted: integer 1..1000000")
endforeach()
weft_trace_option_error(
  trace.sample.bad_summary
  "--weft:trace=${weft_trace_dir}/sample_bad_summary;--weft:trace-mode=summary;--weft:trace-sample=4"
  "--weft:trace-sample=4 applies only with --weft:trace-mode=full")
weft_trace_option_error(trace.sample.without_trace "--weft:trace-sample=4"
                        "--weft:trace-sample=4 applies only with --weft:trace=DIR")
# Summary mode's timing stride (--weft:trace-time-every): not a positive
# integer, or given in full mode, is one line naming it, exit status 2.
weft_trace_option_error(
  trace.time_every.bad_zero
  "--weft:trace=${weft_trace_dir}/time_every_zero;--weft:trace-mode=summary;--weft:trace-time-every=0"
  "--weft:trace-time-every=0: .*accepted: integer 1..1000000")
weft_trace_option_error(
  trace.time_every.full_mode
  "--weft:trace=${weft_trace_dir}/time_every_full;--weft:trace-time-every=4"
  "--weft:trace-time-every=4 applies only with --weft:trace-mode=summary")
