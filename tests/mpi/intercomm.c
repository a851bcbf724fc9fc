/* mpi-test intercomm: intercommunicators at 2 or more ranks.
 *  - the world split in two groups (ranks of one parity each, keys that
 *    reverse the odd group's order), joined by MPI_Intercomm_create with
 *    leaders that are not rank 0 of their group where the group has more
 *    than one rank, through MPI_COMM_WORLD with a tag;
 *  - test_inter, size and rank (the local group's), remote_size,
 *    remote_group (translated to world ranks), compare;
 *  - point-to-point across: every rank sends its world rank to every rank
 *    of the other group and receives from each by rank, then once from
 *    MPI_ANY_SOURCE (status names the remote rank), probe, a persistent
 *    send/receive pair, MPI_PROC_NULL, a bad remote rank (MPI_ERR_RANK);
 *  - a collective on it returns MPI_ERR_COMM (not implemented) under
 *    MPI_ERRORS_RETURN, and so does MPI_Comm_dup;
 *  - MPI_Intercomm_merge with high = (odd group): the even group first,
 *    then with both high alike (the group of world rank 0 first); an
 *    allreduce and a ring on the merged communicators;
 *  - merge of an intracommunicator is MPI_ERR_COMM; free.
 * -DREFERENCE_MPI leaves out what is weft's own (the calls not
 * implemented), so that the test can be checked under another MPI.
 * Every failed check prints a line; rank 0 prints "intercomm: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TEST_NAME "intercomm"
#define MAX_RANKS 256
static int failures[MAX_RANKS];
#include "tally.h"

/* The world rank of rank `r` of the group of parity `parity`, whose
 * ranks are in reverse world order for the odd group. */
static int world_of(int parity, int r, int size) {
  const int n = (size - parity + 1) / 2;
  return parity == 0 ? 2 * r : 2 * (n - 1 - r) + 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) printf("intercomm: FAIL: needs at least 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  const int parity = rank % 2;
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, parity, parity == 0 ? rank : -rank, &half);
  int hs, hr;
  MPI_Comm_size(half, &hs);
  MPI_Comm_rank(half, &hr);
  const int other = 1 - parity;
  const int other_size = (size - other + 1) / 2;
  /* Leaders: the last rank of each group (world ranks differ by group). */
  const int local_leader = hs - 1;
  const int remote_leader = world_of(other, other_size - 1, size);
  MPI_Comm inter;
  int rc = MPI_Intercomm_create(half, local_leader, MPI_COMM_WORLD, remote_leader, 42, &inter);
  CHECK(rc == MPI_SUCCESS, "MPI_Intercomm_create returned %d", rc);

  int flag = -1, is, ir, rs;
  MPI_Comm_test_inter(inter, &flag);
  CHECK(flag == 1, "test_inter on the intercommunicator gave %d", flag);
  MPI_Comm_test_inter(half, &flag);
  CHECK(flag == 0, "test_inter on an intracommunicator gave %d", flag);
  MPI_Comm_size(inter, &is);
  MPI_Comm_rank(inter, &ir);
  MPI_Comm_remote_size(inter, &rs);
  CHECK(is == hs && ir == hr, "size/rank %d/%d, local group %d/%d", is, ir, hs, hr);
  CHECK(rs == other_size, "remote size %d, expected %d", rs, other_size);

  MPI_Group remote, world_group;
  MPI_Comm_remote_group(inter, &remote);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int gs = -1;
  MPI_Group_size(remote, &gs);
  CHECK(gs == other_size, "remote group size %d", gs);
  for (int r = 0; r < other_size && r < MAX_RANKS; ++r) {
    int w = -1;
    MPI_Group_translate_ranks(remote, 1, &r, world_group, &w);
    CHECK(w == world_of(other, r, size), "remote rank %d is world rank %d, expected %d", r, w,
          world_of(other, r, size));
  }
  MPI_Group_free(&remote);
  MPI_Group_free(&world_group);
  int cmp = -1;
  MPI_Comm_compare(inter, inter, &cmp);
  CHECK(cmp == MPI_IDENT, "compare with itself: %d", cmp);
  MPI_Comm_compare(inter, half, &cmp);
  CHECK(cmp == MPI_UNEQUAL, "compare with an intracommunicator: %d", cmp);

  /* Every rank to every remote rank, by rank; then one from anywhere. */
  int* got = malloc(sizeof(int) * (size_t)rs);
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)rs);
  for (int r = 0; r < rs; ++r) {
    got[r] = -1;
    MPI_Irecv(&got[r], 1, MPI_INT, r, 5, inter, &reqs[r]);
  }
  for (int r = 0; r < rs; ++r) MPI_Isend(&rank, 1, MPI_INT, r, 5, inter, &reqs[rs + r]);
  MPI_Waitall(2 * rs, reqs, MPI_STATUSES_IGNORE);
  for (int r = 0; r < rs; ++r)
    CHECK(got[r] == world_of(other, r, size), "from remote rank %d got %d, expected %d", r, got[r],
          world_of(other, r, size));
  /* Remote rank ir % rs gets one more message from this rank: each rank
   * receives from MPI_ANY_SOURCE one message from each remote rank r with
   * r % (this group's size) == its rank. */
  const int target = ir % rs;
  MPI_Request sreq;
  MPI_Isend(&rank, 1, MPI_INT, target, 6, inter, &sreq);
  int expect = 0;
  for (int r = 0; r < rs; ++r)
    if (r % is == ir) ++expect;
  for (int k = 0; k < expect; ++k) {
    int from = -1;
    MPI_Status st;
    MPI_Probe(MPI_ANY_SOURCE, 6, inter, &st);
    CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rs, "probe source %d", st.MPI_SOURCE);
    MPI_Recv(&from, 1, MPI_INT, MPI_ANY_SOURCE, 6, inter, &st);
    CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rs && from == world_of(other, st.MPI_SOURCE, size),
          "MPI_ANY_SOURCE: source %d sent world rank %d", st.MPI_SOURCE, from);
  }
  MPI_Wait(&sreq, MPI_STATUS_IGNORE);
  /* A persistent pair with remote rank ir % rs (partner of this rank's
   * rank in the same position when the groups are equal). */
  if (is == rs) {
    int out = rank * 10, in = -1;
    MPI_Request p[2];
    MPI_Recv_init(&in, 1, MPI_INT, ir, 7, inter, &p[0]);
    MPI_Send_init(&out, 1, MPI_INT, ir, 7, inter, &p[1]);
    for (int round = 0; round < 3; ++round) {
      in = -1;
      MPI_Startall(2, p);
      MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
      CHECK(in == world_of(other, ir, size) * 10, "persistent round %d got %d", round, in);
    }
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);
  }
  MPI_Status st;
  rc = MPI_Send(&rank, 1, MPI_INT, MPI_PROC_NULL, 0, inter);
  CHECK(rc == MPI_SUCCESS, "send to MPI_PROC_NULL returned %d", rc);
  rc = MPI_Recv(&flag, 1, MPI_INT, MPI_PROC_NULL, 0, inter, &st);
  CHECK(rc == MPI_SUCCESS && st.MPI_SOURCE == MPI_PROC_NULL, "receive from MPI_PROC_NULL");

  /* Errors, returned. */
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  int cls = -1;
  rc = MPI_Send(&rank, 1, MPI_INT, rs, 0, inter);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_RANK, "send to remote rank %d (of %d) gave class %d", rs, rs, cls);
#ifndef REFERENCE_MPI
  /* weft's own: not implemented on intercommunicators. (Built with
   * -DREFERENCE_MPI, the rest of this test runs under another MPI, to
   * check the test itself: mpicc -DREFERENCE_MPI intercomm.c.) */
  rc = MPI_Barrier(inter);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_COMM, "MPI_Barrier on an intercommunicator gave class %d", cls);
  MPI_Comm dup = MPI_COMM_NULL;
  rc = MPI_Comm_dup(inter, &dup);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_COMM && dup == MPI_COMM_NULL, "MPI_Comm_dup of an intercommunicator: %d",
        cls);
  MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
  MPI_Comm bad = MPI_COMM_NULL;
  rc = MPI_Intercomm_merge(half, 0, &bad);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_COMM, "merge of an intracommunicator gave class %d", cls);
#endif

  /* Merge: the even group first (high = 1 on the odd one). */
  MPI_Comm merged;
  MPI_Intercomm_merge(inter, parity, &merged);
  int ms, mr;
  MPI_Comm_size(merged, &ms);
  MPI_Comm_rank(merged, &mr);
  const int evens = (size + 1) / 2;
  CHECK(ms == size, "merged size %d", ms);
  CHECK(mr == (parity == 0 ? hr : evens + hr), "merged rank %d (group rank %d)", mr, hr);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, merged);
  CHECK(sum == size * (size - 1) / 2, "allreduce on the merged communicator: %d", sum);
  int token = mr, from = -1;
  MPI_Sendrecv(&token, 1, MPI_INT, (mr + 1) % ms, 8, &from, 1, MPI_INT, (mr + ms - 1) % ms, 8,
               merged, MPI_STATUS_IGNORE);
  CHECK(from == (mr + ms - 1) % ms, "ring on the merged communicator: got %d", from);
  /* Both pass the same high: the group of world rank 0 (the even one)
   * comes first as well; its messages stay apart from the first merge's. */
  MPI_Comm merged2;
  MPI_Intercomm_merge(inter, 1, &merged2);
  int m2;
  MPI_Comm_rank(merged2, &m2);
  CHECK(m2 == mr, "second merge: rank %d, first %d", m2, mr);
  MPI_Comm_compare(merged, merged2, &cmp);
  CHECK(cmp == MPI_CONGRUENT, "the two merges compare %d", cmp);
  MPI_Barrier(merged2);
  MPI_Comm_free(&merged2);
  MPI_Comm_free(&merged);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  free(got);
  free(reqs);

  const int code = tally(TEST_NAME, rank, size, failures[rank]);
  MPI_Finalize();
  return code;
}
