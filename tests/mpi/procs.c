/* mpi-test procs: what a job of several processes must keep, by the first
 * argument (run under mpiexec, the ranks spread over the processes):
 *   order     every rank sends every other rank 300 numbered messages of
 *             mixed sizes (8 B; 20 KiB, which shm lends from its pool;
 *             200 KiB, which ucx sends by rendezvous) and receives theirs
 *             with MPI_ANY_SOURCE: from each source they come in the order
 *             sent, each its size, its bytes intact; prints
 *             "procs: order ok N ranks";
 *   exitcode  the last rank (on the last process) returns 5, the others 0:
 *             the job exits 5;
 *   abort     the last rank calls MPI_Abort(MPI_COMM_WORLD, 7) while rank
 *             0 computes without calling MPI (it never waits, so only an
 *             abort that does not wait for it ends its process) and the
 *             others wait in MPI_Recv: the job exits 7, before rank 0's
 *             60 s are over ("procs: FAIL: rank 0 still running" if not);
 *   deadlock  the odd ranks return; each even rank waits for a message from
 *             the next rank, which never comes: the deadlock report names
 *             every waiting rank, whichever process it is on, and the job
 *             exits 4;
 *   dies      the last rank, once every rank has checked in, kills its own
 *             process (SIGKILL: no handler runs) while the others wait in
 *             MPI_Recv for a message from it: the job must end, non-zero,
 *             without waiting for them ("procs: FAIL: ..." if a wait
 *             returns). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMessages = 300, kLarge = 200 * 1024 };

static int size_of(int i) {
  return i % 50 == 49 ? kLarge : i % 10 == 9 ? 20 * 1024 : 8;
}

/* The byte at `at` of message i from rank `from`. */
static unsigned char byte_of(int from, int i, int at) {
  return (unsigned char)(from * 31 + i * 7 + at);
}

static int order(int rank, int size) {
  int failures = 0;
  const int outgoing = (size - 1) * kMessages;
  MPI_Request* sends = malloc(sizeof(MPI_Request) * (size_t)(outgoing > 0 ? outgoing : 1));
  unsigned char** bufs = malloc(sizeof(unsigned char*) * (size_t)(outgoing > 0 ? outgoing : 1));
  int n = 0;
  /* Interleaved over the destinations, so that every process sends to the
   * others all the time. */
  for (int i = 0; i < kMessages; ++i)
    for (int d = 1; d < size; ++d) {
      const int to = (rank + d) % size, bytes = size_of(i);
      unsigned char* b = malloc((size_t)bytes);
      memcpy(b, &i, sizeof i);
      for (int at = (int)sizeof i; at < bytes; ++at) b[at] = byte_of(rank, i, at);
      bufs[n] = b;
      MPI_Isend(b, bytes, MPI_BYTE, to, 3, MPI_COMM_WORLD, &sends[n++]);
    }
  int* next = calloc((size_t)size, sizeof(int));
  unsigned char* in = malloc(kLarge);
  for (int k = 0; k < outgoing && failures < 10; ++k) {
    MPI_Status st;
    int count = -1, i = -1;
    MPI_Recv(in, kLarge, MPI_BYTE, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    const int from = st.MPI_SOURCE;
    memcpy(&i, in, sizeof i);
    if (from < 0 || from >= size || from == rank || st.MPI_TAG != 3) {
      printf("procs: FAIL on rank %d: a message from %d, tag %d\n", rank, from, st.MPI_TAG);
      ++failures;
      continue;
    }
    if (i != next[from] || count != size_of(i)) {
      printf("procs: FAIL on rank %d: from rank %d came message %d of %d bytes, expected %d\n",
             rank, from, i, count, next[from]);
      ++failures;
    } else {
      for (int at = (int)sizeof i; at < count; ++at)
        if (in[at] != byte_of(from, i, at)) {
          printf("procs: FAIL on rank %d: message %d from %d differs at byte %d\n", rank, i, from,
                 at);
          ++failures;
          break;
        }
    }
    next[from] = i + 1;
  }
  MPI_Waitall(n, sends, MPI_STATUSES_IGNORE);
  for (int k = 0; k < n; ++k) free(bufs[k]);
  free(bufs);
  free(sends);
  free(next);
  free(in);
  /* Rank 0 reports for all. */
  if (rank != 0) {
    MPI_Send(&failures, 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
  } else {
    for (int r = 1; r < size; ++r) {
      int theirs = 0;
      MPI_Recv(&theirs, 1, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      failures += theirs;
    }
    if (failures == 0) printf("procs: order ok %d ranks\n", size);
  }
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, code = 0, none = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* what = argc > 1 ? argv[1] : "";
  if (strcmp(what, "order") == 0) {
    code = order(rank, size);
  } else if (strcmp(what, "exitcode") == 0) {
    code = rank == size - 1 ? 5 : 0;
  } else if (strcmp(what, "abort") == 0) {
    if (rank == 0) {
      /* Told that every other rank runs, then busy. */
      for (int r = 1; r < size; ++r)
        MPI_Recv(&none, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double until = MPI_Wtime() + 60;
      volatile unsigned long spin = 0;
      while (MPI_Wtime() < until) ++spin;
      printf("procs: FAIL: rank 0 still running\n");
      code = 1;
    } else {
      MPI_Send(&none, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
      if (rank == size - 1) MPI_Abort(MPI_COMM_WORLD, 7);
      MPI_Recv(&none, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (strcmp(what, "dies") == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) raise(SIGKILL);
    MPI_Recv(&none, 1, MPI_INT, size - 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("procs: FAIL: rank %d got a message from the killed rank\n", rank);
    code = 1;
  } else if (strcmp(what, "deadlock") == 0) {
    if (rank % 2 == 0)
      MPI_Recv(&none, 1, MPI_INT, (rank + 1) % size, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    if (rank == 0) fprintf(stderr, "procs: order|exitcode|abort|deadlock, not '%s'\n", what);
    code = 2;
  }
  MPI_Finalize();
  return code;
}
