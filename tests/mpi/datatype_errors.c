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
 *   contents      MPI_Type_get_contents of MPI_DOUBLE (MPI_ERR_TYPE);
 *   returns       under MPI_ERRORS_RETURN, every mistake above that a
 *                 rank's call can return (and a few more) gives its class,
 *                 sets no new handle, and types still work after:
 *                 "datatype_errors: ok returns". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures = 0; /* rank 0 only */
#define EXPECT(call, cls)                                                              \
  do {                                                                                 \
    const int rc = (call);                                                             \
    if (rc != (cls)) {                                                                 \
      ++failures;                                                                      \
      printf("datatype_errors: FAIL: %s returned %d, expected %s\n", #call, rc, #cls); \
    }                                                                                  \
  } while (0)

static void returns(void) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int ints[8] = {0}, lens[2] = {1, -3}, disps[2] = {0, 4}, n = 0, pos = 4;
  char buf[8] = {0};
  MPI_Datatype v, t = MPI_DATATYPE_NULL, freed;
  MPI_Type_vector(2, 1, 2, MPI_INT, &v);
  EXPECT(MPI_Send(ints, 1, v, 0, 1, MPI_COMM_WORLD), MPI_ERR_TYPE); /* not committed */
  MPI_Type_dup(MPI_INT, &freed);
  MPI_Type_free(&freed);
  MPI_Type_commit(&v);
  MPI_Type_dup(v, &freed);
  const MPI_Datatype stale = freed;
  MPI_Type_free(&freed);
  EXPECT(MPI_Send(ints, 1, stale, 0, 1, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT(MPI_Type_commit(&freed), MPI_ERR_TYPE); /* MPI_DATATYPE_NULL */
  EXPECT(MPI_Recv(ints, 1, MPI_DATATYPE_NULL, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
         MPI_ERR_TYPE);
  EXPECT(MPI_Type_contiguous(-1, MPI_INT, &t), MPI_ERR_COUNT);
  EXPECT(MPI_Type_vector(2, -1, 2, MPI_INT, &t), MPI_ERR_ARG);
  EXPECT(MPI_Type_indexed(2, lens, disps, MPI_INT, &t), MPI_ERR_ARG);
  EXPECT(MPI_Type_contiguous(2, MPI_INT, NULL), MPI_ERR_ARG);
  /* A struct whose second type is freed: the first is let go again. */
  int slens[2] = {1, 1};
  MPI_Aint sdisps[2] = {0, 8};
  MPI_Datatype stypes[2] = {v, stale};
  EXPECT(MPI_Type_create_struct(2, slens, sdisps, stypes, &t), MPI_ERR_TYPE);
  if (t != MPI_DATATYPE_NULL) {
    ++failures;
    printf("datatype_errors: FAIL: a refused constructor set the new type (%d)\n", t);
  }
  MPI_Datatype named = MPI_INT;
  EXPECT(MPI_Type_free(&named), MPI_ERR_TYPE);
  EXPECT(MPI_Pack(ints, 1, v, buf, sizeof buf, &pos, MPI_COMM_WORLD), MPI_ERR_ARG);
  pos = 2;
  EXPECT(MPI_Unpack(buf, sizeof buf, &pos, ints, 2, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
  EXPECT(MPI_Send(ints, -2, v, 0, 1, MPI_COMM_WORLD), MPI_ERR_COUNT);
  EXPECT(MPI_Pack_size(-1, v, MPI_COMM_WORLD, &n), MPI_ERR_COUNT);
  int ci;
  MPI_Aint ca;
  MPI_Datatype ct;
  EXPECT(MPI_Type_get_contents(MPI_DOUBLE, 1, 1, 1, &ci, &ca, &ct), MPI_ERR_TYPE);
  EXPECT(MPI_Type_get_contents(v, 2, 0, 1, ints, &ca, &ct), MPI_ERR_ARG); /* needs 3 ints */
  EXPECT(MPI_Get_count(MPI_STATUS_IGNORE, v, &n), MPI_ERR_ARG);
  /* And types work after. */
  int src[4] = {1, 2, 3, 4}, got[2] = {0, 0};
  EXPECT(MPI_Send(src, 1, v, 0, 2, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT(MPI_Recv(got, 2, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
  if (got[0] != 1 || got[1] != 3) {
    ++failures;
    printf("datatype_errors: FAIL: the vector after the errors sent %d %d\n", got[0], got[1]);
  }
  EXPECT(MPI_Type_free(&v), MPI_SUCCESS);
  if (failures == 0) printf("datatype_errors: ok returns\n");
}

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
    } else if (strcmp(what, "returns") == 0) {
      returns();
      MPI_Finalize();
      return failures == 0 ? 0 : 1;
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
