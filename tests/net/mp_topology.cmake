# One topology discovery per host (docs/net.md, "Running"): in a job of 2
# and of 3 processes on this host, local rank 0 discovers the machine and the
# others load its file, which is gone after the job; a job of one process
# discovers on its own. The "topology: ..." line that --weft:stats prints
# tells which (check_topology_share.cmake).
if(NOT MPIEXEC_EXECUTABLE OR NOT TARGET net_mp_core)
  return()
endif()

foreach(np 1 2 3)
  set(cmd ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none ${MPIEXEC_NUMPROC_FLAG} ${np}
      $<TARGET_FILE:net_mp_core> --case=pingpong --weft:transport=shm --weft:threads=1
      --weft:stats --weft:quiet --weft:timeout=90)
  if(np EQUAL 1)
    list(TRANSFORM cmd REPLACE "^--weft:transport=shm$" "--weft:transport=local")
  endif()
  set(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0)
  foreach(v cmd env)
    string(REPLACE ";" "\\;" ${v} "${${v}}")
  endforeach()
  set(args "-DCMD=${cmd}" "-DNP=${np}" "-DENV=${env}")
  add_test(NAME net.topology.shared.${np}
           COMMAND ${CMAKE_COMMAND} ${args}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/check_topology_share.cmake)
  set_tests_properties(net.topology.shared.${np} PROPERTIES TIMEOUT 150 LABELS net)
endforeach()

# --weft:transport=local under a launcher that started 2 processes: each is a
# job of its own (a warning says so), and they take different slices of the
# host's CPUs (their startup lines) instead of both binding PE 0 to CPU 0.
set(cmd ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none ${MPIEXEC_NUMPROC_FLAG} 2
    $<TARGET_FILE:net_mp_core> --case=pingpong --weft:transport=local --weft:threads=1
    --weft:timeout=90)
set(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0)
set(expect "runs it as a job of its own" "PE->CPU: 0->0\n" "PE->CPU: 0->1\n")
foreach(v cmd env expect)
  string(REPLACE ";" "\\;" ${v} "${${v}}")
endforeach()
set(args "-DCMD=${cmd}" -DEXPECT_CODE=0 "-DENV=${env}" "-DEXPECT_REGEX=${expect}")
add_test(NAME net.topology.local_under_launcher
         COMMAND ${CMAKE_COMMAND} ${args} -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
set_tests_properties(net.topology.local_under_launcher PROPERTIES TIMEOUT 150 LABELS net)
