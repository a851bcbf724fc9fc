# Transport conformance (mp_transport.cpp): the same program and cases for
# every backend that runs several processes, at 2, 3 and 4 processes (more
# processes than the 2 cores CI has, on purpose).
# Open MPI is not built with ThreadSanitizer (its own threads and atomics
# would drown the report): the TSan build checks shm only.
set(conformance_transports shm)
if(WEFT_HAVE_MPI AND NOT WEFT_SANITIZE STREQUAL "thread")
  list(APPEND conformance_transports mpi)
endif()
foreach(transport ${conformance_transports})
  foreach(nprocs 2 3 4)
    weft_add_mpirun_test(net_${transport}_${nprocs} mp_transport ${nprocs} --transport=${transport})
  endforeach()
endforeach()

# The same over TCP, the path between hosts. On one host Open MPI's shared
# memory finishes even a 4 MiB receive inside the call that starts it, so
# only here do receives stay in flight and the per-source delivery order
# behind a large message (lesson 9) gets exercised.
if("mpi" IN_LIST conformance_transports)
  weft_add_mpirun_test(net_mpi_tcp_3 mp_transport 3 --transport=mpi)
endif()
if(TEST net_mpi_tcp_3)
  set_property(TEST net_mpi_tcp_3 APPEND PROPERTY ENVIRONMENT
               "OMPI_MCA_btl=self,tcp" "OMPI_MCA_btl_tcp_if_include=lo")
endif()

# A transport name the build does not know is a usage error: exit 2 and a
# message naming it. Run without mpirun: the name is checked before any
# bootstrap.
if(TARGET net_mp_transport)
  # CMD is a list (program;arguments); the escaped ";" keeps it one -D value.
  add_test(NAME net_bogus_transport
           COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:net_mp_transport>\;--transport=bogus
                   -DEXPECT_CODE=2 "-DEXPECT_REGEX=transport=bogus: unknown transport"
                   -DENV=ASAN_OPTIONS=detect_leaks=0
                   -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake)
  set_tests_properties(net_bogus_transport PROPERTIES TIMEOUT 60 LABELS net)
endif()
