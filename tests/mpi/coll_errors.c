/* mpi-test coll_errors: what a faulty collective call gets, by the first
 * argument (each a clear message naming the call, the rank and the
 * problem, exit 3; or the deadlock report, exit 4):
 *   root       MPI_Bcast from root = size: MPI_ERR_ROOT;
 *   op_type    MPI_BAND on MPI_DOUBLE: MPI_ERR_OP naming both and what
 *              MPI_BAND takes;
 *   op_bad     an op handle that is none: MPI_ERR_OP;
 *   op_freed   a user op used after MPI_Op_free: MPI_ERR_OP;
 *   op_replace MPI_REPLACE in MPI_Allreduce (one-sided only): MPI_ERR_OP;
 *   in_place   MPI_IN_PLACE as a non-root's sendbuf of MPI_Reduce:
 *              MPI_ERR_BUFFER;
 *   count      a negative count: MPI_ERR_COUNT;
 *   type       a datatype that is none: MPI_ERR_TYPE;
 *   op_mixed   MPI_SUM on a struct of an int and a double: MPI_ERR_OP;
 *   uncommitted  a derived type not committed: MPI_ERR_TYPE;
 *   free       MPI_Request_free of a non-blocking collective's request
 *              (erroneous, MPI 3.1 5.12): MPI_ERR_REQUEST;
 *   deadlock   the last rank skips a barrier: the report names each
 *              other rank's MPI_Barrier, or MPI_Wait of an Ibarrier. */
#include <mpi.h>
#include <string.h>

static void noop(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)in, (void)inout, (void)len, (void)type;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* what = argc > 1 ? argv[1] : "";
  double x = 1, y = 0;
  if (strcmp(what, "root") == 0) {
    MPI_Bcast(&x, 1, MPI_DOUBLE, size, MPI_COMM_WORLD);
  } else if (strcmp(what, "op_type") == 0) {
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
  } else if (strcmp(what, "op_bad") == 0) {
    MPI_Reduce(&x, &y, 1, MPI_DOUBLE, (MPI_Op)999, 0, MPI_COMM_WORLD);
  } else if (strcmp(what, "op_freed") == 0) {
    MPI_Op op;
    MPI_Op_create(noop, 1, &op);
    MPI_Op keep = op;
    MPI_Op_free(&op);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, keep, MPI_COMM_WORLD);
  } else if (strcmp(what, "op_replace") == 0) {
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_REPLACE, MPI_COMM_WORLD);
  } else if (strcmp(what, "in_place") == 0) {
    MPI_Reduce(rank == 1 ? MPI_IN_PLACE : &x, &y, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  } else if (strcmp(what, "count") == 0) {
    MPI_Allreduce(&x, &y, -1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  } else if (strcmp(what, "type") == 0) {
    MPI_Bcast(&x, 1, (MPI_Datatype)555, 0, MPI_COMM_WORLD);
  } else if (strcmp(what, "op_mixed") == 0 || strcmp(what, "uncommitted") == 0) {
    struct {
      int i;
      double d;
    } in = {1, 2}, out;
    const int lengths[2] = {1, 1};
    const MPI_Aint displs[2] = {0, 8};
    const MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Datatype pair;
    MPI_Type_create_struct(2, lengths, displs, types, &pair);
    if (strcmp(what, "op_mixed") == 0) MPI_Type_commit(&pair);
    MPI_Allreduce(&in, &out, 1, pair, MPI_SUM, MPI_COMM_WORLD);
  } else if (strcmp(what, "free") == 0) {
    MPI_Request q;
    MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
    MPI_Request_free(&q);
  } else if (strcmp(what, "deadlock") == 0) {
    if (rank == 0) {
      MPI_Request q;
      MPI_Ibarrier(MPI_COMM_WORLD, &q);
      MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else if (rank != size - 1) {
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  MPI_Finalize();
  return 0;
}
