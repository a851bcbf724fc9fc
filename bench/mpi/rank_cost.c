/* What a rank costs (issue 28): every rank reports to rank 0, which, once
 * all are alive, reads the process's peak resident memory and the time
 * since it entered main itself, then releases them. Run at two rank counts
 * (bench/mpi/compare.sh times the whole run too: --weft:vp=16 and 4096)
 * and take the differences: the memory and the start-up time per rank.
 * Prints "rank_cost: ranks=R maxrss_kib=M seconds_to_all_alive=T". */
#include <mpi.h>
#include <stdio.h>
#include <sys/resource.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const double t0 = MPI_Wtime();
  int rank, size, token = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    for (int r = 1; r < size; ++r)
      MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("rank_cost: ranks=%d maxrss_kib=%ld seconds_to_all_alive=%.4f\n", size, ru.ru_maxrss,
           MPI_Wtime() - t0);
    for (int r = 1; r < size; ++r) MPI_Send(&token, 1, MPI_INT, r, 2, MPI_COMM_WORLD);
  } else {
    MPI_Send(&token, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
