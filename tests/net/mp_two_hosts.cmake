# Two hosts (tests/net/two_hosts.sh): the job's two processes in two network
# namespaces joined by a veth pair, made by the test (needs root; skipped,
# exit code 77, where namespaces cannot be made). mpirun runs in one and
# starts its orted in the other through an rsh agent; MPI/TCP and UCX/TCP go
# through the veth, whose counters are checked. Cases pingpong, alltoall,
# broadcast, 2 processes x 2 PEs; for the composites (shm+mpi, shm+ucx) 4
# processes x 1 PE, 2 per host, plus mp_composite's counters of which path
# the messages took, and the default transport's choice.
if(NOT MPIEXEC_EXECUTABLE OR NOT TARGET net_mp_core)
  return()
endif()
# Open MPI and UCX are not built with ThreadSanitizer (see mp_core.cmake).
if(WEFT_SANITIZE STREQUAL "thread")
  return()
endif()

set(two_hosts_transports)
if(WEFT_HAVE_MPI)
  list(APPEND two_hosts_transports mpi)
endif()
if(WEFT_HAVE_UCX)
  list(APPEND two_hosts_transports ucx)
endif()
foreach(t ${two_hosts_transports})
  add_test(NAME net.two_hosts.${t}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/two_hosts.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:net_mp_core> ${t})
  set_tests_properties(net.two_hosts.${t} PROPERTIES TIMEOUT 180 LABELS net
    SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;ASAN_OPTIONS=detect_leaks=0")
endforeach()
# The composites; net_mp_composite comes from mp_composite.cmake.
set(two_hosts_composites ${two_hosts_transports})
foreach(t ${two_hosts_composites})
  set(composite_prog)
  if(TARGET net_mp_composite)
    set(composite_prog $<TARGET_FILE:net_mp_composite>)
  endif()
  add_test(NAME net.two_hosts.shm_${t}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/two_hosts.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:net_mp_core> shm+${t} ${composite_prog})
  set_tests_properties(net.two_hosts.shm_${t} PROPERTIES TIMEOUT 300 LABELS net
    SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;ASAN_OPTIONS=detect_leaks=0")
endforeach()
