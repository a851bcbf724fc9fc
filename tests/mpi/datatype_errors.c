/* mpi-test datatype_errors: what a faulty use of derived datatypes gets
 * (MPI_ERRORS_ARE_FATAL: one line naming the call, the rank and the
 * problem, exit 3), by the first argument; rank 0 makes the mistake:
 *   uncommitted   a vector sent before MPI_Type_commit (MPI_ERR_TYPE);
 *   freed         a type used after MPI_Type_free (MPI_ERR_TYPE);
 *   null          MPI_DATATYPE_NULL in MPI_Recv (MPI_ERR_TYPE);
 *   count         MPI_Type_contiguous of -1 (MPI_ERR_COUNT);
 *   blocklength   MPI_Type_vector with blocklength -1 (MPI_ERR_ARG);
 *   lengths       MPI_Type_indexed with a negative block length;
 *   free_named    MPI_Type_free of MPI_INT (MPI_ERR_TYPE);
 *   pack          MPI_Pack past the end of its buffer (MPI_ERR_ARG);
 *   unpack        MPI_Unpack past the end of its data (MPI_ERR_TRUNCATE);
 *   truncate      3 ints received as a vector of 2 (MPI_ERR_TRUNCATE);
 *   send_count    MPI_Send of -2 elements of a vector (MPI_ERR_COUNT);
 *   contents      MPI_Type_get_contents of MPI_DOUBLE (MPI_ERR_TYPE). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* what = argc > 1 ? argv[1] : "";
  int ints[8] = {0};
  MPI_Datatype v;
  MPI_Type_vector(2, 1, 2, MPI_INT, &v);
  if (rank == 0) {
    if (strcmp(what, "uncommitted") == 0) {
      MPI_Send(ints, 1, v, 0, 1, MPI_COMM_WORLD);
    } else if (strcmp(what, "freed") == 0) {
      MPI_Type_commit(&v);
      MPI_Datatype stale = v;
      MPI_Type_free(&v);
      MPI_Send(ints, 1, stale, 0, 1, MPI_COMM_WORLD);
    } else if (strcmp(what, "null") == 0) {
      MPI_Recv(ints, 1, MPI_DATATYPE_NULL, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(what, "count") == 0) {
      MPI_Datatype t;
      MPI_Type_contiguous(-1, MPI_INT, &t);
    } else if (strcmp(what, "blocklength") == 0) {
      MPI_Datatype t;
      MPI_Type_vector(2, -1, 2, MPI_INT, &t);
    } else if (strcmp(what, "lengths") == 0) {
      MPI_Datatype t;
      int lens[2] = {1, -3}, disps[2] = {0, 4};
      MPI_Type_indexed(2, lens, disps, MPI_INT, &t);
    } else if (strcmp(what, "free_named") == 0) {
      MPI_Datatype t = MPI_INT;
      MPI_Type_free(&t);
    } else if (strcmp(what, "pack") == 0) {
      char out[8];
      int pos = 4;
      MPI_Type_commit(&v);
      MPI_Pack(ints, 1, v, out, sizeof out, &pos, MPI_COMM_WORLD);
    } else if (strcmp(what, "unpack") == 0) {
      char in[8] = {0};
      int pos = 2;
      MPI_Unpack(in, sizeof in, &pos, ints, 2, MPI_INT, MPI_COMM_WORLD);
    } else if (strcmp(what, "truncate") == 0) {
      MPI_Type_commit(&v);
      MPI_Send(ints, 3, MPI_INT, 0, 1, MPI_COMM_WORLD);
      MPI_Recv(ints, 1, v, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(what, "send_count") == 0) {
      MPI_Type_commit(&v);
      MPI_Send(ints, -2, v, 0, 1, MPI_COMM_WORLD);
    } else if (strcmp(what, "contents") == 0) {
      int i;
      MPI_Aint a;
      MPI_Datatype t;
      MPI_Type_get_contents(MPI_DOUBLE, 1, 1, 1, &i, &a, &t);
    } else {
      printf("datatype_errors: unknown case '%s'\n", what);
      return 2;
    }
    printf("datatype_errors: '%s' was not refused\n", what);
  }
  MPI_Finalize();
  return 0;
}
