/* mpi-test globals: what tools/weft-globals must find (and leave out) in a
 * program: a global, a file static, a function static and a thread-local
 * are writable and listed; a constant and the stack are not. The program
 * also runs (as one rank per PE) so that it is a real MPI program. */
#include <mpi.h>
#include <stdio.h>

int shared_counter = 0;
static double file_table[16];
__thread int per_thread_scratch;
const int read_only_limit = 42;

static int next_id(void) {
  static int last_id = 0;
  return ++last_id;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  file_table[rank % 16] += 1.0;
  per_thread_scratch = rank;
  shared_counter += next_id() > 0 ? read_only_limit / 42 : 0;
  if (rank == 0) printf("globals: ok\n");
  MPI_Finalize();
  return 0;
}
