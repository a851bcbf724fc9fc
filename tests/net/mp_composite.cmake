# The composite transports (src/net/composite.cpp: shm inside a host, mpi or
# ucx between hosts). mp_composite.cpp splits this machine into "hosts" of
# consecutive nodes (the composite's host-key knob), so the mixed paths run
# without namespaces; tests/net/two_hosts.sh runs them across real network
# namespaces. Open MPI and UCX are not built with ThreadSanitizer.
if(NOT MPIEXEC_EXECUTABLE OR WEFT_SANITIZE STREQUAL "thread")
  return()
endif()
set(composite_inters)
if(WEFT_HAVE_MPI)
  list(APPEND composite_inters mpi)
endif()
if(WEFT_HAVE_UCX)
  list(APPEND composite_inters ucx)
endif()
foreach(inter ${composite_inters})
  # Two hosts of two: shm inside each, the inter backend between them.
  weft_add_mpirun_test(net_shm_${inter}_split_2x2 mp_composite 4 --inter=${inter} --split=2
                       --expect-group=2)
  # A host of two and a host of one (no shm backend there).
  weft_add_mpirun_test(net_shm_${inter}_split_2_1 mp_composite 3 --inter=${inter} --split=2)
  # One host: shm for everybody; the counters prove the inter backend idle.
  weft_add_mpirun_test(net_shm_${inter}_one_host_3 mp_composite 3 --inter=${inter}
                       --expect-group=3)
  # The conformance program of mp_transport.cmake, by name (one host).
  weft_add_mpirun_test(net_shm_${inter}_conformance_3 mp_transport 3 --transport=shm+${inter})
endforeach()

# The stall shm+ucx had (docs/net.md, "The composites"): a node waiting in
# its host's shm barrier must keep its queued UCX sends moving. Two-slot UCX
# FIFOs make such queued sends the rule; without the fix each run hung about
# one time in two, so three runs catch it seven times in eight.
if("ucx" IN_LIST composite_inters AND TARGET net_mp_composite)
  foreach(i 1 2 3)
    weft_add_mpirun_test(net_shm_ucx_split_2x2_tiny_fifo.${i} mp_composite 4 --inter=ucx
                         --split=2 --expect-group=2)
    set_property(TEST net_shm_ucx_split_2x2_tiny_fifo.${i} APPEND PROPERTY ENVIRONMENT
                 "UCX_POSIX_FIFO_SIZE=2;UCX_SYSV_FIFO_SIZE=2")
  endforeach()
endif()

# A node that dies is reported by its host group through shm, by its job
# number: node 3 is the second node of the host {2, 3}. The launcher's exit
# code is its own; the output is checked.
if("mpi" IN_LIST composite_inters AND TARGET net_mp_composite)
  set(cmd ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} 4
          $<TARGET_FILE:net_mp_composite> --inter=mpi --split=2 --lose=3)
  set(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0)
  string(REPLACE ";" "$<SEMICOLON>" cmd "${cmd}")
  string(REPLACE ";" "$<SEMICOLON>" env "${env}")
  add_test(NAME net_shm_mpi_lost_4
           COMMAND ${CMAKE_COMMAND} "-DCMD=${cmd}" -DEXPECT_CODE=nonzero
                   "-DEXPECT_REGEX=node 2 was told node 3 is lost \\(process [0-9]+ \\(node 3\\)"
                   "-DENV=${env}" -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
  set_tests_properties(net_shm_mpi_lost_4 PROPERTIES TIMEOUT 120 LABELS net)
endif()
