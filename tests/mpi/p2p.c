/* mpi-test p2p: point-to-point semantics at any number of ranks.
 *  - non-overtaking: each rank sends 2000 numbered messages, one tag, to
 *    the next rank, which receives them with MPI_ANY_SOURCE and checks the
 *    numbers come in order (the previous rank is the only sender);
 *  - wildcards: rank 0 takes one message from every rank (itself included)
 *    with MPI_ANY_SOURCE and MPI_ANY_TAG; the status names the source, the
 *    tag (source * 10 + 3) and the count;
 *  - tags select: the next rank sends tag 5 then tag 7; the receiver asks
 *    for 7 first;
 *  - non-blocking: 16 MPI_Irecv posted before the matching sends arrive,
 *    completed by MPI_Waitall, MPI_Waitany and an MPI_Test loop;
 *  - MPI_PROC_NULL, MPI_Sendrecv around the ring, a short message into a
 *    longer buffer (MPI_Get_count), MPI_COMM_SELF, MPI_Request_free.
 * Every failed check prints a line; rank 0 prints "p2p: ok N ranks". */
#include <mpi.h>
#include <stdio.h>

static int failures = 0;
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      ++failures;                             \
      printf("p2p: FAIL on rank %d: ", rank); \
      printf(__VA_ARGS__);                    \
      printf("\n");                           \
    }                                         \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, flag = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Initialized(&flag);
  CHECK(flag == 1, "MPI_Initialized says %d", flag);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;

  /* Non-overtaking. */
  enum { kMessages = 2000 };
  MPI_Request sends[kMessages];
  int numbers[kMessages]; /* on the rank's stack: ranks share the program's globals */
  for (int i = 0; i < kMessages; ++i) {
    numbers[i] = i;
    MPI_Isend(&numbers[i], 1, MPI_INT, next, 1, MPI_COMM_WORLD, &sends[i]);
  }
  for (int i = 0; i < kMessages; ++i) {
    int got = -1;
    MPI_Status st;
    MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st);
    if (got != i || st.MPI_SOURCE != prev) {
      CHECK(0, "message %d from rank %d arrived as %d (from %d)", i, prev, got, st.MPI_SOURCE);
      break;
    }
  }
  MPI_Waitall(kMessages, sends, MPI_STATUSES_IGNORE);

  /* Wildcards at rank 0. */
  int mine = rank * 100;
  MPI_Request to0;
  MPI_Isend(&mine, 1, MPI_INT, 0, rank * 10 + 3, MPI_COMM_WORLD, &to0);
  if (rank == 0) {
    int seen[64] = {0};
    for (int i = 0; i < size; ++i) {
      int v = -1, count = -1;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_INT, &count);
      CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size, "source %d", st.MPI_SOURCE);
      CHECK(st.MPI_TAG == st.MPI_SOURCE * 10 + 3, "tag %d from %d", st.MPI_TAG, st.MPI_SOURCE);
      CHECK(v == st.MPI_SOURCE * 100, "value %d from %d", v, st.MPI_SOURCE);
      CHECK(count == 1, "count %d", count);
      if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < 64) seen[st.MPI_SOURCE]++;
    }
    for (int i = 0; i < size && i < 64; ++i)
      CHECK(seen[i] == 1, "rank %d seen %d times", i, seen[i]);
  }
  MPI_Wait(&to0, MPI_STATUS_IGNORE);
  CHECK(to0 == MPI_REQUEST_NULL, "a completed request is not MPI_REQUEST_NULL");
  /* No rank sends rank 0 anything else before its wildcard receives are
   * done (they would match those too): rank 0 says when. */
  int go = 1;
  if (rank == 0) {
    for (int i = 1; i < size; ++i) MPI_Send(&go, 1, MPI_INT, i, 2, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&go, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }

  /* Tags select. */
  int five = 5, seven = 7, a = 0, b = 0;
  MPI_Send(&five, 1, MPI_INT, next, 5, MPI_COMM_WORLD);
  MPI_Send(&seven, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
  MPI_Recv(&b, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Recv(&a, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(a == 5 && b == 7, "tag 5 gave %d, tag 7 gave %d", a, b);

  /* Non-blocking receives posted first. */
  enum { kPosted = 16 };
  double in[kPosted], out[kPosted];
  MPI_Request recvs[kPosted], outs[kPosted];
  for (int i = 0; i < kPosted; ++i)
    MPI_Irecv(&in[i], 1, MPI_DOUBLE, prev, 100 + i, MPI_COMM_WORLD, &recvs[i]);
  for (int i = kPosted - 1; i >= 0; --i) {
    out[i] = rank + i / 100.0;
    MPI_Isend(&out[i], 1, MPI_DOUBLE, next, 100 + i, MPI_COMM_WORLD, &outs[i]);
  }
  int index = -1;
  MPI_Status st;
  MPI_Waitany(kPosted, recvs, &index, &st);
  CHECK(index >= 0 && index < kPosted && st.MPI_TAG == 100 + index, "waitany index %d tag %d",
        index, st.MPI_TAG);
  for (int done = 0; !done;) MPI_Testall(kPosted, recvs, &done, MPI_STATUSES_IGNORE);
  for (int i = 0; i < kPosted; ++i)
    CHECK(in[i] == prev + i / 100.0, "posted receive %d got %g", i, in[i]);
  for (int i = 0; i < kPosted; ++i) {
    int done = 0;
    while (!done) MPI_Test(&outs[i], &done, MPI_STATUS_IGNORE);
  }

  /* MPI_PROC_NULL. */
  int x = 42;
  MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
  int count = -1;
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(x == 42 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
        "MPI_PROC_NULL receive: x %d source %d tag %d count %d", x, st.MPI_SOURCE, st.MPI_TAG,
        count);

  /* Sendrecv shift, and a short message into a longer buffer. */
  long shift_out[3] = {rank, rank, rank}, shift_in[8] = {0};
  MPI_Sendrecv(shift_out, 3, MPI_LONG, next, 9, shift_in, 8, MPI_LONG, prev, 9, MPI_COMM_WORLD,
               &st);
  MPI_Get_count(&st, MPI_LONG, &count);
  CHECK(count == 3 && shift_in[0] == prev && shift_in[2] == prev, "sendrecv: count %d first %ld",
        count, shift_in[0]);
  MPI_Get_count(&st, MPI_DOUBLE, &count);
  CHECK(count == 3, "24 bytes as doubles: %d", count);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(count == 6, "24 bytes as ints: %d", count);

  /* MPI_COMM_SELF, and a freed request. */
  int self_rank = -1, self_size = -1, back = 0, there = rank + 1;
  MPI_Comm_rank(MPI_COMM_SELF, &self_rank);
  MPI_Comm_size(MPI_COMM_SELF, &self_size);
  CHECK(self_rank == 0 && self_size == 1, "MPI_COMM_SELF rank %d size %d", self_rank, self_size);
  MPI_Request self_send;
  MPI_Isend(&there, 1, MPI_INT, 0, 4, MPI_COMM_SELF, &self_send);
  MPI_Request_free(&self_send);
  MPI_Recv(&back, 1, MPI_INT, 0, 4, MPI_COMM_SELF, &st);
  CHECK(back == rank + 1 && st.MPI_SOURCE == 0, "MPI_COMM_SELF got %d from %d", back,
        st.MPI_SOURCE);

  /* Everyone done before rank 0 reports (a message from each to rank 0). */
  int token = failures;
  if (rank != 0) {
    MPI_Send(&token, 1, MPI_INT, 0, 999, MPI_COMM_WORLD);
  } else {
    for (int i = 1; i < size; ++i) {
      MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      failures += token;
    }
    if (failures == 0) printf("p2p: ok %d ranks\n", size);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
