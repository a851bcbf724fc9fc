# The objects layer across processes (mp_objects.cpp), under mpirun: every
# case in 2 processes x 2 PEs and 4 processes x 1 PE (non-SMP), over each
# transport built (weft_mp_transports and weft_mp_program_test() come from
# CMakeLists.txt).
if(NOT MPIEXEC_EXECUTABLE)
  return()
endif()
add_executable(net_mp_objects ${CMAKE_CURRENT_SOURCE_DIR}/mp_objects.cpp)
target_link_libraries(net_mp_objects PRIVATE weft::weft)

# mp_objects_test(<name> CODE <n|nonzero> NP <procs> ARGS <args...> [EXPECT <regex>]
#                 [ENV <VAR=v...>])
function(mp_objects_test name)
  weft_mp_program_test(${name} TARGET net_mp_objects ${ARGN})
endfunction()

# Cases that end with "mp_objects: <case> passed on 4 PEs in <N> processes".
set(mp_objects_cases array1d array2d group nodegroup chares migration bcast_history insert futures coroutines
    readonly setup_group buffer priorities exitcode tree)
foreach(t ${weft_mp_transports})
  # 4 PEs in all: 2 processes x 2 PEs, 4 x 1.
  foreach(np 2 4)
    math(EXPR threads "4 / ${np}")
    set(lname ${np}x${threads})
    set(run ARGS --weft:transport=${t} --weft:threads=${threads})
    foreach(c ${mp_objects_cases})
      mp_objects_test(net.objects.${t}.${lname}.${c} CODE 0 NP ${np}
                      ${run} --case=${c}
                      EXPECT "mp_objects: ${c} passed on 4 PEs in ${np} processes")
    endforeach()
    # Balancing steps across processes: every element moves every step.
    mp_objects_test(net.objects.${t}.${lname}.lb_rotate CODE 0 NP ${np}
                    ${run} --weft:lb=rotate --case=lb_rotate
                    EXPECT "mp_objects: lb_rotate passed on 4 PEs in ${np} processes")
    # Steps without at_sync (periodic, on demand) while the elements keep
    # sending: every message in order per sender (sync_pause.cpp).
    mp_objects_test(net.objects.${t}.${lname}.lb_periodic CODE 0 NP ${np}
                    ${run} --weft:lb=rotate --weft:lb-period=0.002 --case=lb_unassisted
                    EXPECT "mp_objects: lb_unassisted passed on 4 PEs in ${np} processes")
    # Elements that never wait flood the network while periodic steps move
    # them (4.8 KB each): every message is handled, no PE sleeps on a
    # message that arrived.
    mp_objects_test(net.objects.${t}.${lname}.flood CODE 0 NP ${np}
                    ${run} --weft:lb=rotate --weft:lb-period=0.002 --case=flood
                    EXPECT "mp_objects: flood passed on 4 PEs in ${np} processes")
    mp_objects_test(net.objects.${t}.${lname}.lb_on_demand CODE 0 NP ${np}
                    ${run} --weft:lb=random --case=lb_unassisted
                    EXPECT "mp_objects: lb_unassisted passed on 4 PEs in ${np} processes")
    # The hierarchical tree across processes: load leaves the heavy node.
    # One group (the default 16 nodes per group): the root leads it and
    # hears from every node.
    mp_objects_test(net.objects.${t}.${lname}.lb_tree CODE 0 NP ${np}
                    ${run} --weft:lb=hierarchical --weft:lb-stats --case=lb_tree
                    EXPECT "mp_objects: lb_tree passed on 4 PEs in ${np} processes"
                           "step 2: [^\n]*a tree over ${np} node\\(s\\) in 1 group\\(s\\), ${np} summaries at the root")
    # Every node its own group: the root's level and the groups' levels
    # both run (a group's leader is its node's first PE).
    mp_objects_test(net.objects.${t}.${lname}.lb_tree_group1 CODE 0 NP ${np}
                    ${run} --weft:lb=hierarchical --weft:lb-tree-group=1 --weft:lb-stats
                    --case=lb_tree
                    EXPECT "mp_objects: lb_tree passed on 4 PEs in ${np} processes"
                           "step 2: [^\n]*a tree over ${np} node\\(s\\) in ${np} group\\(s\\), ${np} summaries at the root")
    # Two groups of two nodes: the root hears from the two groups' leaders
    # only (O(groups)), and the heavy group (nodes 0 and 1) sheds to the
    # other, which places the load among its nodes.
    if(np EQUAL 4)
      mp_objects_test(net.objects.${t}.${lname}.lb_tree_group2 CODE 0 NP ${np}
                      ${run} --weft:lb=hierarchical --weft:lb-tree-group=2 --weft:lb-stats
                      --case=lb_tree
                      EXPECT "mp_objects: lb_tree passed on 4 PEs in ${np} processes"
                             "step 2: [^\n]*a tree over 4 node\\(s\\) in 2 group\\(s\\), 2 summaries at the root")
    endif()
    # The tree with comm at the node level (--weft:lb-comm=element selects
    # it): each PE's communication records go to its node's leader with
    # its records, and METIS places the node's elements on its PEs.
    mp_objects_test(net.objects.${t}.${lname}.lb_tree_comm CODE 0 NP ${np}
                    ${run} --weft:lb=hierarchical --weft:lb-comm=element --weft:lb-stats
                    --case=lb_tree
                    EXPECT "mp_objects: lb_tree passed on 4 PEs in ${np} processes"
                           "step 2: [^\n]*a tree over ${np} node\\(s\\) in 1 group\\(s\\)")
    # hierarchical with two arrays in joint steps: PE 0 gathers both arrays'
    # records and runs the offline strategy (the tree's levels in one place).
    mp_objects_test(net.objects.${t}.${lname}.lb_tree_together CODE 0 NP ${np}
                    ${run} --weft:lb=hierarchical --weft:lb-arrays=together --weft:lb-stats
                    --case=lb_tree
                    EXPECT "mp_objects: lb_tree passed on 4 PEs in ${np} processes"
                           "step 2: [^\n]*, hierarchical: max/avg [^\n]*\\(over [0-9]+ elements of 2 arrays\\)")
    # Two arrays placed in joint steps on PE 0 (--weft:lb-arrays=together),
    # with the elements' communication records: each array's root gathers
    # its records from every process and sends them to PE 0, whose joint
    # step has them as edges (the stats line's off-PE traffic).
    mp_objects_test(net.objects.${t}.${lname}.lb_together CODE 0 NP ${np}
                    ${run} --weft:lb=rotate --weft:lb-arrays=together --weft:lb-comm=element
                    --weft:lb-stats --case=lb_rotate
                    EXPECT "mp_objects: lb_rotate passed on 4 PEs in ${np} processes"
                           "off-PE [1-9][0-9]* messages [^\n]*\\(over [0-9]+ elements of 2 arrays\\)")
    # The same with at most 1 KiB of packed elements in flight per PE: each
    # (about 5 KB) goes alone, when the one before it was acknowledged; the
    # steps' peak is one element (four digits).
    mp_objects_test(net.objects.${t}.${lname}.lb_bounded CODE 0 NP ${np}
                    ${run} --weft:lb=rotate --weft:lb-max-bytes=1K --weft:lb-stats
                    --case=lb_rotate
                    EXPECT "mp_objects: lb_rotate passed on 4 PEs in ${np} processes"
                           "step 4: [^\n]*, peak [0-9][0-9][0-9][0-9] bytes in flight;")
    # An element on node 1 sends to an index out of the array's bounds: the
    # sending node names it and the whole job fails.
    mp_objects_test(net.objects.${t}.${lname}.error CODE nonzero NP ${np}
                    ${run} --case=error
                    EXPECT "node 1: fatal: index \\[9\\] is out of range for array [^ ]*Victim#0\\.[0-9]+ \\(bounds \\[4\\]\\) in a call of [^ ]*Victim::ping")
    # An element on node 1 sends to a deleted element whose home is on
    # node 0: whichever node finds it deleted names it, and the job fails.
    mp_objects_test(net.objects.${t}.${lname}.deleted CODE nonzero NP ${np}
                    ${run} --case=deleted
                    EXPECT "fatal: a message for [^ ]*Victim::ping was sent to element \\[0\\] of array [^ ]*Victim#0\\.[0-9]+, which was deleted")
  endforeach()
endforeach()

# Processes whose objects layers registered different entry methods (the
# same core handlers) refuse to start.
mp_objects_test(net.objects.different_builds CODE 2 NP 2
                ARGS --weft:transport=shm --weft:threads=1 --case=array1d
                ENV MP_OBJECTS_EXTRA_ENTRY=1
                EXPECT "different handler table .* every process of a job must run the same program build")
# A deeper tree of nodes: 6 processes (node 0 has four children, node 1 one).
mp_objects_test(net.objects.shm.6x1.tree CODE 0 NP 6
                ARGS --weft:transport=shm --weft:threads=1 --case=tree
                EXPECT "mp_objects: tree passed on 6 PEs in 6 processes")
# The hierarchical tree with groups of unequal size: 6 nodes in groups of
# 4 and 2; the heavy nodes 0-2 are in the first.
mp_objects_test(net.objects.shm.6x1.lb_tree_group4 CODE 0 NP 6
                ARGS --weft:transport=shm --weft:threads=1 --weft:lb=hierarchical
                     --weft:lb-tree-group=4 --weft:lb-stats --case=lb_tree
                EXPECT "mp_objects: lb_tree passed on 6 PEs in 6 processes"
                       "step 2: [^\n]*a tree over 6 node\\(s\\) in 2 group\\(s\\), 2 summaries at the root")
