/* mpi-test errors: what a faulty program gets, by the first argument:
 *   truncate  rank 0 receives 4 bytes where 8 were sent: MPI_ERR_TRUNCATE,
 *             a message naming the call and the rank, exit 3;
 *   rank      a send to a rank past the communicator: MPI_ERR_RANK;
 *   comm      MPI_Comm_size of a communicator that is not one: MPI_ERR_COMM;
 *   deadlock  every rank receives first: the deadlock report names each
 *             rank's call, peer and tag, and the job exits 4;
 *   abort     rank 1 (or 0 alone) calls MPI_Abort(MPI_COMM_WORLD, 7): exit 7;
 *   exitcode  rank 1 returns 5 from main, the others 0: exit 5;
 *   overflow  rank 1 (or 0 alone) recurses until its stack overflows: the
 *             report names the rank (run with a small --weft:ult-stack);
 *   spin      rank 0 computes for ever while the others wait for it: with
 *             --weft:timeout the dump lists each rank and what it waits in. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* Deep enough to overflow any stack; the frame's bytes are used so that
 * the compiler keeps them. */
static int recurse(int depth) {
  volatile char frame[4096];
  frame[depth % 4096] = (char)depth;
  return depth > (1 << 30) ? frame[0] : recurse(depth + 1) + frame[depth % 4096];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* what = argc > 1 ? argv[1] : "";
  long eight = 8;
  int four = 0;
  if (strcmp(what, "truncate") == 0) {
    if (rank == 0) {
      MPI_Send(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
      MPI_Recv(&four, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (strcmp(what, "rank") == 0) {
    if (rank == 0) MPI_Send(&eight, 1, MPI_LONG, size, 1, MPI_COMM_WORLD);
  } else if (strcmp(what, "comm") == 0) {
    int n = 0;
    if (rank == 0) MPI_Comm_size((MPI_Comm)77, &n);
  } else if (strcmp(what, "deadlock") == 0) {
    MPI_Recv(&four, 1, MPI_INT, (rank + 1) % size, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (strcmp(what, "abort") == 0) {
    if (rank == (size > 1 ? 1 : 0)) MPI_Abort(MPI_COMM_WORLD, 7);
    MPI_Recv(&four, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (strcmp(what, "overflow") == 0) {
    if (rank == (size > 1 ? 1 : 0)) printf("%d\n", recurse(0));
  } else if (strcmp(what, "spin") == 0) {
    if (rank == 0) {
      volatile unsigned long spins = 0;
      for (;;) ++spins;
    }
    MPI_Recv(&four, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (strcmp(what, "exitcode") == 0) {
    MPI_Finalize();
    return rank == (size > 1 ? 1 : 0) ? 5 : 0;
  }
  MPI_Finalize();
  return 0;
}
