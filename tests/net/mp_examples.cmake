# The examples (examples/) and bench/kneighbor at both levels across
# processes, under mpirun: each in 2 processes x 2 PEs over every transport
# built, and in 4 processes x 1 PE (non-SMP) over shm, their output checked
# as examples/CMakeLists.txt checks it in one process. Names:
# net.examples.<transport>.<2x2|4x1>.<program>.
if(NOT MPIEXEC_EXECUTABLE)
  return()
endif()

# weft_mp_example_test(<name> NP <procs> TARGET <target> ARGS <args...>
#                      EXPECT <regex...> [JSON_LINES]): exit code 0 expected.
function(weft_mp_example_test name)
  weft_mp_program_test(${name} CODE 0 ${ARGN})
endfunction()

# examples/ and bench/ are added after tests/ by the top-level CMakeLists, so
# their targets do not exist yet here: this runs deferred, at the end of the
# top-level directory (the tests are then registered there).
# The transports reach the deferred call through a global property (it runs
# in another directory's scope).
set_property(GLOBAL PROPERTY weft_mp_example_transports ${weft_mp_transports})
function(weft_mp_example_tests)
  get_property(transports GLOBAL PROPERTY weft_mp_example_transports)

  # Layouts "<processes>x<PEs per process>": 2x2 over every transport, 4x1
  # over shm.
  foreach(t ${transports})
    set(layouts 2x2)
    if(t STREQUAL "shm")
      list(APPEND layouts 4x1)
    endif()
    foreach(layout ${layouts})
      string(REPLACE "x" ";" np_threads ${layout})
      list(GET np_threads 0 np)
      list(GET np_threads 1 threads)
      math(EXPR pes "${np} * ${threads}")
      set(prefix net.examples.${t}.${layout})
      set(weft_args --weft:transport=${t} --weft:threads=${threads})

      if(TARGET ring)
        # Hop h (1-based) is taken by PE (h-1) % pes; laps count the visits to PE 0.
        set(hops 5000)
        math(EXPR last_pe "(${hops} - 1) % ${pes}")
        math(EXPR laps "(${hops} - 1) / ${pes} + 1")
        weft_mp_example_test(${prefix}.ring NP ${np} TARGET ring ARGS ${hops} ${weft_args}
          EXPECT "ring: done on PE ${last_pe} after ${laps} laps of ${pes} PEs")
      endif()
      if(TARGET hello)
        # Every element's line, checked one by one: mpirun forwards each
        # process's output on its own, so lines of different processes may
        # interleave in any order (in one process they keep theirs). The
        # default block map puts element i of 8 on PE i * pes / 8.
        set(hello_expect "hello: element 0 \\(PE 0\\) greeted by main\n")
        foreach(i RANGE 1 7)
          math(EXPR from "${i} - 1")
          math(EXPR pe "${i} * ${pes} / 8")
          list(APPEND hello_expect
               "hello: element ${i} \\(PE ${pe}\\) greeted by element ${from}\n")
        endforeach()
        weft_mp_example_test(${prefix}.hello NP ${np} TARGET hello ARGS ${weft_args}
          EXPECT ${hello_expect} "hello: done, 8 elements on ${pes} PEs\n")
      endif()
      if(TARGET jacobi2d)
        # Bit for bit equal to the serial run, whatever the layout.
        weft_mp_example_test(${prefix}.jacobi2d NP ${np} TARGET jacobi2d
          ARGS 64 4 200 1e-8 ${weft_args}
          EXPECT "jacobi2d: 64x64 grid in 4x4 blocks of 16x16 on ${pes} PEs"
                 "jacobi2d: iterations=200 residual=[0-9.e+-]+ max_diff_vs_serial=0\n")
        # Balancing every 10 sweeps: blocks move inside a process (their
        # coroutines with them), stay across processes; the same result.
        weft_mp_example_test(${prefix}.jacobi2d.lb NP ${np} TARGET jacobi2d
          ARGS 64 4 200 1e-8 10 --weft:lb=rotate ${weft_args}
          EXPECT "jacobi2d: 64x64 grid in 4x4 blocks of 16x16 on ${pes} PEs"
                 "jacobi2d: iterations=200 residual=[0-9.e+-]+ max_diff_vs_serial=0\n")
      endif()
      if(TARGET nqueens)
        weft_mp_example_test(${prefix}.nqueens NP ${np} TARGET nqueens ARGS 10 3 ${weft_args}
          EXPECT "solutions=724 tasks=83 time_s=[0-9.]+\n")
      endif()
      if(TARGET md)
        # The checksum of one process (examples/md/check_md.cmake's small
        # system), with elements moving between processes.
        weft_mp_example_test(${prefix}.md NP ${np} TARGET md
          ARGS --md:cells=3 --md:cell-size=5 --md:atoms=600 --md:cluster=0.5 --md:steps=60
               --md:lb-every=5 --weft:lb=greedy-refine ${weft_args}
          EXPECT "md: checksum sum_x=12659.812380122923 hash=87fa78deea9b2306\n")
      endif()
      if(TARGET kneighbor)
        # Every byte checked (touch); the objects level with each payload kind.
        set(kn_args --json --iters=50 --repeat 1 --bytes=16,4096 --touch=true ${weft_args})
        if(threads GREATER 1)
          set(mode smp)
        else()
          set(mode nonsmp-${t})
        endif()
        set(row "(^|\n)\\{\"bench\":\"kneighbor\",\"mode\":\"${mode}\",\"pes\":${pes},[^\n]*")
        set(job "[^\n]*\"nodes\":${np},\"transport\":\"${t}\"[^\n]*\"metric\":\"iter_us\"")
        weft_mp_example_test(${prefix}.kneighbor_core NP ${np} TARGET kneighbor
          ARGS --level=core ${kn_args}
          EXPECT "${row}\"level\":\"core\",\"payload\":\"message\",\"bytes\":4096,${job}"
          JSON_LINES)
        set(objects_expect)
        foreach(payload span buffer vector)
          list(APPEND objects_expect
               "${row}\"level\":\"objects\",\"payload\":\"${payload}\",\"bytes\":4096,${job}")
        endforeach()
        weft_mp_example_test(${prefix}.kneighbor_objects NP ${np} TARGET kneighbor
          ARGS --level=objects --payload=all ${kn_args}
          EXPECT ${objects_expect} JSON_LINES)
      endif()
    endforeach()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL weft_mp_example_tests)
