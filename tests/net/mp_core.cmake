# Core messaging across processes (mp_core.cpp), under mpirun: every case in
# 2 processes x 2 PEs and 4 processes x 1 PE (non-SMP), over each transport
# built; the comm modes on the all-to-all case; and the faults.
if(NOT MPIEXEC_EXECUTABLE)
  return()
endif()
add_executable(net_mp_core ${CMAKE_CURRENT_SOURCE_DIR}/mp_core.cpp)
target_link_libraries(net_mp_core PRIVATE weft::weft)

# mp_core_test(<name> CODE <n> NP <procs> ARGS <args...> [EXPECT <regex...>] [ENV <VAR=v...>])
# A case that must pass (CODE 0) must also print mp_core's last line, which
# node 0 prints only after the case and every check after weft::run have
# run: a process that ends early with code 0 fails the test. The line names
# the case and the job's shape (NP processes x --weft:threads PEs).
function(mp_core_test name)
  cmake_parse_arguments(T "" "CODE;NP" "ARGS;EXPECT;ENV" ${ARGN})
  set(expect ${T_EXPECT})
  if(T_CODE STREQUAL "0")
    set(c "")
    set(threads "")
    foreach(a ${T_ARGS})
      if(a MATCHES "^--case=(.+)$")
        set(c ${CMAKE_MATCH_1})
      elseif(a MATCHES "^--weft:threads=([0-9]+)$")
        set(threads ${CMAKE_MATCH_1})
      endif()
    endforeach()
    if(c STREQUAL "" OR threads STREQUAL "")
      message(FATAL_ERROR "mp_core_test(${name}): a CODE 0 case needs --case= and --weft:threads=")
    endif()
    math(EXPR pes "${T_NP} * ${threads}")
    list(APPEND expect "mp_core: ${c} passed on ${pes} PEs in ${T_NP} processes")
  endif()
  set(more)
  if(expect)
    list(APPEND more EXPECT ${expect})
  endif()
  if(T_ENV)
    list(APPEND more ENV ${T_ENV})
  endif()
  weft_mp_program_test(${name} TARGET net_mp_core CODE ${T_CODE} NP ${T_NP} ARGS ${T_ARGS} ${more})
endfunction()

foreach(t ${weft_mp_transports})
  foreach(c pingpong alltoall broadcast nodequeue quiescence large)
    mp_core_test(net.core.${t}.2x2.${c} CODE 0 NP 2
                 ARGS --case=${c} --weft:transport=${t} --weft:threads=2)
    mp_core_test(net.core.${t}.4x1.${c} CODE 0 NP 4
                 ARGS --case=${c} --weft:transport=${t} --weft:threads=1)
  endforeach()
  mp_core_test(net.core.${t}.2x2.exitcode CODE 0 NP 2
               ARGS --case=exitcode --weft:transport=${t} --weft:threads=2)
  # A job that forgets weft::exit ends with 4 in every process and one
  # message from node 0; the last node's output is kept.
  foreach(shape 2x2 4x1)
    string(REGEX MATCH "^[0-9]+" np ${shape})
    string(REGEX MATCH "[0-9]+$" per ${shape})
    math(EXPR last_node "${np} - 1")
    mp_core_test(net.core.${t}.${shape}.forget CODE 0 NP ${np}
                 ARGS --case=forget --weft:transport=${t} --weft:threads=${per}
                 EXPECT "weft: node 0: error: the job is quiescent and weft::exit was not called: [^\n]*The last thing run was [^\n]* on PE [0-9]+\\. Nothing is left to do: ending the job with exit status 4"
                        "mp_core: forget: node ${last_node} handled the last message")
  endforeach()
  foreach(mode thread workers hybrid)
    mp_core_test(net.core.${t}.2x2.comm_${mode} CODE 0 NP 2
                 ARGS --case=alltoall --weft:transport=${t} --weft:threads=2 --weft:comm=${mode})
  endforeach()
  # An idle PE keeps the transport while it spins, and the other PE's sends
  # queue behind it. This machine is oversubscribed by 2x2 PEs, which turns
  # the spin off by default: it is asked for here.
  foreach(mode workers hybrid)
    foreach(c alltoall large)
      mp_core_test(net.core.${t}.2x2.comm_${mode}_spinning.${c} CODE 0 NP 2
                   ARGS --case=${c} --weft:transport=${t} --weft:threads=2 --weft:comm=${mode}
                        --weft:idle-spin-us=2000)
    endforeach()
  endforeach()
  mp_core_test(net.core.${t}.fatal CODE nonzero NP 2
               ARGS --case=fatal --weft:transport=${t} --weft:threads=1
               EXPECT "weft: node 1: fatal: mp_core: node 1 fails on purpose")
  # Faults: a killed process ends the job (tests/net/kill_one.sh).
  add_test(NAME net.core.${t}.kill_one
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/kill_one.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:net_mp_core> ${t})
  set_tests_properties(net.core.${t}.kill_one PROPERTIES TIMEOUT 120 LABELS net
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;ASAN_OPTIONS=detect_leaks=0")
endforeach()

# The composites (shm inside a host, mpi or ucx between hosts). On this one
# host every node is in one host group, so they run as shm does, through the
# composite's routing, waits and finalize (tests/net/mp_composite.cmake splits
# the host; tests/net/two_hosts.sh uses two). A subset of the cases: the
# rest would only repeat shm's.
set(mp_composites)
if(WEFT_HAVE_MPI)
  list(APPEND mp_composites shm+mpi)
endif()
if(WEFT_HAVE_UCX)
  list(APPEND mp_composites shm+ucx)
endif()
if(WEFT_SANITIZE STREQUAL "thread")
  set(mp_composites)
endif()
foreach(t ${mp_composites})
  string(REPLACE "+" "_" n ${t})
  foreach(c pingpong alltoall quiescence large)
    mp_core_test(net.core.${n}.2x2.${c} CODE 0 NP 2
                 ARGS --case=${c} --weft:transport=${t} --weft:threads=2)
    mp_core_test(net.core.${n}.4x1.${c} CODE 0 NP 4
                 ARGS --case=${c} --weft:transport=${t} --weft:threads=1)
  endforeach()
  mp_core_test(net.core.${n}.2x2.exitcode CODE 0 NP 2
               ARGS --case=exitcode --weft:transport=${t} --weft:threads=2)
  foreach(mode thread workers hybrid)
    mp_core_test(net.core.${n}.2x2.comm_${mode} CODE 0 NP 2
                 ARGS --case=alltoall --weft:transport=${t} --weft:threads=2 --weft:comm=${mode})
  endforeach()
  mp_core_test(net.core.${n}.fatal CODE nonzero NP 2
               ARGS --case=fatal --weft:transport=${t} --weft:threads=1
               EXPECT "weft: node 1: fatal: mp_core: node 1 fails on purpose")
  add_test(NAME net.core.${n}.kill_one
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/kill_one.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:net_mp_core> ${t})
  set_tests_properties(net.core.${n}.kill_one PROPERTIES TIMEOUT 120 LABELS net
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;ASAN_OPTIONS=detect_leaks=0")
endforeach()

# Processes of different builds (handler tables differ) refuse to start.
mp_core_test(net.core.different_builds CODE 2 NP 2
             ARGS --case=pingpong --weft:transport=shm --weft:threads=1
             ENV MP_CORE_EXTRA_HANDLER=1
             EXPECT "different handler table .* every process of a job must run the same program build")
mp_core_test(net.core.bad_transport CODE 2 NP 2
             ARGS --case=pingpong --weft:transport=pigeon
             EXPECT "--weft:transport=pigeon: unknown value")
# A process that does not arrive within --weft:startup-timeout is named.
mp_core_test(net.core.shm.startup_timeout CODE nonzero NP 2
             ARGS --case=pingpong --weft:transport=shm --weft:threads=1 --weft:startup-timeout=1
             ENV MP_CORE_LATE_RANK=1
             EXPECT "node 0: fatal: .*did not arrive.*node.s. 1")
# auto: processes of one host meet over shm.
mp_core_test(net.core.auto_transport CODE 0 NP 2
             ARGS --case=pingpong --weft:threads=1)

# tools/weftrun: the mpirun command it builds, its errors, and a real run.
set(weftrun ${PROJECT_SOURCE_DIR}/tools/weftrun)
function(weftrun_test name code)
  cmake_parse_arguments(T "" "FORBID" "ARGS;EXPECT" ${ARGN})
  # Quoted arguments of add_test keep their ';' lists whole.
  set(cmd ${weftrun} ${T_ARGS})
  set(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0
      MPIRUN=${MPIEXEC_EXECUTABLE} WEFTRUN_MPIRUN_ARGS=--oversubscribe)
  add_test(NAME net.weftrun.${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=${cmd}" -DEXPECT_CODE=${code}
                   "-DEXPECT_REGEX=${T_EXPECT}" "-DENV=${env}" "-DFORBID_REGEX=${T_FORBID}"
                   -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
  set_tests_properties(net.weftrun.${name} PROPERTIES TIMEOUT 120 LABELS net)
endfunction()
weftrun_test(dry_run 0 ARGS --nodes 2 --threads 3 --transport shm --comm workers --dry-run ./app -v
             EXPECT "-n 2 --bind-to none .*\\./app --weft:threads=3 --weft:transport=shm --weft:comm=workers -v")
weftrun_test(bad_nodes 2 ARGS --nodes 0 ./app
             EXPECT "weftrun: error: --nodes=0: expected a number of nodes")
weftrun_test(bad_transport 2 ARGS --nodes 2 --transport pigeon ./app
             EXPECT "weftrun: error: --transport=pigeon: accepted: auto, shm, mpi, ucx, shm\\+mpi, shm\\+ucx")
weftrun_test(no_program 2 ARGS --nodes 2 EXPECT "weftrun: error: no program given")
# --help: the usage text alone, exit 0 (it printed the script's next line and
# exited 2 before).
weftrun_test(help 0 ARGS --help EXPECT "^weftrun: start a weft program" "--nodes N \\[--threads T\\]"
             "WEFTRUN_MPIRUN_ARGS=\"--oversubscribe\"" FORBID "set -euo|pipefail")
weftrun_test(runs_a_job 0 ARGS --nodes 2 --threads 2 $<TARGET_FILE:net_mp_core> --case=alltoall
             --weft:quiet EXPECT "mp_core: alltoall passed on 4 PEs in 2 processes")
