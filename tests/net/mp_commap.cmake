# --weft:commap (mp_commap.cpp): under mpirun, the comm thread of every
# process is bound to the CPU given, and no other thread is (the PEs run
# unbound); without it no thread is bound (the control). comm=thread and
# comm=hybrid (a comm thread beside PEs that drive the network too). shm
# only: where the comm thread runs does not depend on the transport.
# A job of one process has no comm thread: commap and comm are refused
# there (exit 2), with a launcher or without, whatever the transport.
if(NOT MPIEXEC_EXECUTABLE)
  return()
endif()
add_executable(net_mp_commap ${CMAKE_CURRENT_SOURCE_DIR}/mp_commap.cpp)
target_link_libraries(net_mp_commap PRIVATE weft::weft)

# The CPUs this process may use (nproc honours taskset and cgroups): a
# single-CPU binding is told apart from "any CPU" only with two or more.
execute_process(COMMAND nproc OUTPUT_VARIABLE weft_commap_nproc
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE weft_commap_rc ERROR_QUIET)
if(NOT weft_commap_rc EQUAL 0 OR NOT weft_commap_nproc MATCHES "^[0-9]+$")
  set(weft_commap_nproc 1)
endif()

set(commap_common --weft:transport=shm --weft:threads=1 --weft:bind=none)
if(weft_commap_nproc GREATER_EQUAL 2)
  foreach(cpu 0 1)
    weft_mp_program_test(net.commap.thread.cpu${cpu} TARGET net_mp_commap NP 2 CODE 0
                         ARGS --expect=${cpu} ${commap_common} --weft:comm=thread
                              --weft:commap=${cpu}
                         EXPECT "node 0: [0-9]+ threads, 1 bound to one CPU, 1 to CPU ${cpu}"
                                "node 1: [0-9]+ threads, 1 bound to one CPU, 1 to CPU ${cpu}"
                                "mp_commap: passed in 2 processes")
  endforeach()
  weft_mp_program_test(net.commap.hybrid.cpu1 TARGET net_mp_commap NP 2 CODE 0
                       ARGS --expect=1 ${commap_common} --weft:comm=hybrid --weft:commap=1
                       EXPECT "mp_commap: passed in 2 processes")
  weft_mp_program_test(net.commap.thread.none TARGET net_mp_commap NP 2 CODE 0
                       ARGS --expect=none ${commap_common} --weft:comm=thread
                       EXPECT "node 1: [0-9]+ threads, 0 bound to one CPU"
                              "mp_commap: passed in 2 processes")
endif()

# One process: refused before anything runs.
weft_mp_program_test(net.commap.one_process_launched TARGET net_mp_commap NP 1 CODE 2
                     ARGS --expect=0 ${commap_common} --weft:comm=thread --weft:commap=0
                     EXPECT "weft: error: --weft:comm=thread: [^\n]*this run is one process")
weft_mp_program_test(net.commap.one_process_launched_commap TARGET net_mp_commap NP 1 CODE 2
                     ARGS --expect=0 ${commap_common} --weft:commap=0
                     EXPECT "weft: error: --weft:commap=0: [^\n]*this run is one process")
set(commap_cmd $<TARGET_FILE:net_mp_commap> --expect=0 --weft:transport=shm --weft:commap=0
    --weft:quiet)
# "\;" keeps the command one -D value; the unquoted ${commap_args} turns
# it back into ";" (as weft_cli_test does).
string(REPLACE ";" "\\;" commap_cmd "${commap_cmd}")
set(commap_args "-DCMD=${commap_cmd}" -DEXPECT_CODE=2
    "-DEXPECT_REGEX=weft: error: --weft:commap=0: [^\n]*this run is one process")
add_test(NAME net.commap.one_process_shm
         COMMAND ${CMAKE_COMMAND} ${commap_args} -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
set_tests_properties(net.commap.one_process_shm PROPERTIES TIMEOUT 60 LABELS net)
