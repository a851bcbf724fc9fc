/* mpi-test breadth: calls unmodified programs make beyond the core
 * (docs/mpi.md "What is provided"): info objects and a communicator's
 * hints, MPI_Pcontrol, MPI_Reduce_local with every predefined op, user
 * ops and derived types, MPI-1's deprecated names, and the subarray and
 * distributed-array datatypes, sent around the ring of ranks.
 *
 * With an argument, one faulty call under MPI_ERRORS_ARE_FATAL (exit 3
 * and the message):
 *   info_key     MPI_Info_set with a key of MPI_MAX_INFO_KEY + 1 chars;
 *   info_value   MPI_Info_set with a value of MPI_MAX_INFO_VAL + 1 chars;
 *   info_nokey   MPI_Info_delete of a key that is not there;
 *   info_handle  MPI_Info_get_nkeys of a freed info;
 *   subarray     MPI_Type_create_subarray with a start past the size;
 *   darray       MPI_Type_create_darray with a grid not of `size`;
 *   reduce_local MPI_Reduce_local of MPI_BAND on MPI_DOUBLE. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ranks of a process share the program's globals: the rank and the
 * size are asked where needed, never kept in one. */
static int me(void) {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
static int nranks(void) {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

#define CHECK(cond)                                                \
  do {                                                             \
    if (!(cond)) {                                                 \
      printf("FAIL rank %d line %d: %s\n", me(), __LINE__, #cond); \
      fflush(stdout);                                              \
      exit(1);                                                     \
    }                                                              \
  } while (0)

static void test_info(void) {
  const int rank = me(), size = nranks();
  (void)rank, (void)size;
  MPI_Info info;
  CHECK(MPI_Info_create(&info) == MPI_SUCCESS);
  CHECK(info != MPI_INFO_NULL);
  int n = -1, flag = -1, len = -1;
  MPI_Info_get_nkeys(info, &n);
  CHECK(n == 0);
  MPI_Info_set(info, "alpha", "one");
  MPI_Info_set(info, "beta", "twenty-two");
  MPI_Info_set(info, "alpha", "1"); /* replaces, keeps its place */
  MPI_Info_get_nkeys(info, &n);
  CHECK(n == 2);
  char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
  MPI_Info_get_nthkey(info, 0, key);
  CHECK(strcmp(key, "alpha") == 0);
  MPI_Info_get_nthkey(info, 1, key);
  CHECK(strcmp(key, "beta") == 0);
  MPI_Info_get(info, "alpha", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag == 1 && strcmp(value, "1") == 0);
  MPI_Info_get_valuelen(info, "beta", &len, &flag);
  CHECK(flag == 1 && len == 10);
  /* valuelen 3: three characters and the NUL. */
  memset(value, 'x', sizeof value);
  MPI_Info_get(info, "beta", 3, value, &flag);
  CHECK(flag == 1 && strcmp(value, "twe") == 0 && value[4] == 'x');
  int buflen = 0;
  MPI_Info_get_string(info, "beta", &buflen, value, &flag);
  CHECK(flag == 1 && buflen == 11);
  buflen = 5;
  MPI_Info_get_string(info, "beta", &buflen, value, &flag);
  CHECK(flag == 1 && buflen == 11 && strcmp(value, "twen") == 0);
  MPI_Info_get(info, "gamma", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag == 0);
  MPI_Info_get_valuelen(info, "gamma", &len, &flag);
  CHECK(flag == 0);

  MPI_Info copy;
  MPI_Info_dup(info, &copy);
  CHECK(copy != info);
  MPI_Info_delete(info, "alpha");
  MPI_Info_get_nkeys(info, &n);
  CHECK(n == 1);
  MPI_Info_get_nkeys(copy, &n);
  CHECK(n == 2);
  MPI_Info_get(copy, "alpha", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag == 1 && strcmp(value, "1") == 0);

  /* Errors, returned. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  char long_key[MPI_MAX_INFO_KEY + 2];
  memset(long_key, 'k', sizeof long_key - 1);
  long_key[sizeof long_key - 1] = '\0';
  CHECK(MPI_Info_set(info, long_key, "v") == MPI_ERR_INFO_KEY);
  CHECK(MPI_Info_set(info, "", "v") == MPI_ERR_INFO_KEY);
  char long_value[MPI_MAX_INFO_VAL + 2];
  memset(long_value, 'v', sizeof long_value - 1);
  long_value[sizeof long_value - 1] = '\0';
  CHECK(MPI_Info_set(info, "k", long_value) == MPI_ERR_INFO_VALUE);
  long_value[MPI_MAX_INFO_VAL] = '\0'; /* exactly the longest */
  CHECK(MPI_Info_set(info, "k", long_value) == MPI_SUCCESS);
  CHECK(MPI_Info_set(copy, "empty", "") == MPI_SUCCESS);
  CHECK(MPI_Info_get_valuelen(copy, "empty", &len, &flag) == MPI_SUCCESS && flag && len == 0);
  CHECK(MPI_Info_delete(info, "missing") == MPI_ERR_INFO_NOKEY);
  CHECK(MPI_Info_get_nthkey(info, 5, key) == MPI_ERR_ARG);
  CHECK(MPI_Info_get_nkeys(MPI_INFO_NULL, &n) == MPI_ERR_INFO);
  CHECK(MPI_Info_free(&copy) == MPI_SUCCESS && copy == MPI_INFO_NULL);
  CHECK(MPI_Info_set(MPI_INFO_ENV, "k", "v") == MPI_ERR_INFO);
  char msg[MPI_MAX_ERROR_STRING];
  MPI_Error_string(MPI_ERR_INFO_NOKEY, msg, &len);
  CHECK(strstr(msg, "MPI_ERR_INFO_NOKEY") != NULL);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

  /* MPI_INFO_ENV: the job's ranks. */
  MPI_Info_get(MPI_INFO_ENV, "maxprocs", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag == 1 && atoi(value) == size);
  MPI_Info_get(MPI_INFO_ENV, "command", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag == 1 && strstr(value, "breadth") != NULL);

  /* A communicator's hints: kept, and handed back as a new object. */
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Info used;
  MPI_Comm_get_info(comm, &used);
  MPI_Info_get_nkeys(used, &n);
  CHECK(n == 0);
  MPI_Info_free(&used);
  MPI_Comm_set_info(comm, info); /* beta, k */
  MPI_Info_set(info, "beta", "changed");
  MPI_Comm_get_info(comm, &used);
  CHECK(used != info);
  MPI_Info_get_nkeys(used, &n);
  CHECK(n == 2);
  MPI_Info_get(used, "beta", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag == 1 && strcmp(value, "twenty-two") == 0);
  MPI_Info_free(&used);
  /* A dup keeps them; a dup with info has that info's instead. */
  MPI_Comm copy_comm;
  MPI_Comm_dup(comm, &copy_comm);
  MPI_Comm_get_info(copy_comm, &used);
  MPI_Info_get_nkeys(used, &n);
  CHECK(n == 2);
  MPI_Info_free(&used);
  MPI_Comm_free(&copy_comm);
  MPI_Info only;
  MPI_Info_create(&only);
  MPI_Info_set(only, "gamma", "3");
  MPI_Comm_dup_with_info(comm, only, &copy_comm);
  MPI_Info_free(&only);
  MPI_Comm_get_info(copy_comm, &used);
  MPI_Info_get_nkeys(used, &n);
  MPI_Info_get(used, "gamma", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(n == 1 && flag == 1 && strcmp(value, "3") == 0);
  MPI_Info_free(&used);
  MPI_Comm_free(&copy_comm);
  MPI_Comm_dup_with_info(comm, MPI_INFO_NULL, &copy_comm);
  MPI_Comm_get_info(copy_comm, &used);
  MPI_Info_get_nkeys(used, &n);
  CHECK(n == 0);
  MPI_Info_free(&used);
  MPI_Comm_free(&copy_comm);
  MPI_Comm_free(&comm);
  MPI_Info_free(&info);
  CHECK(info == MPI_INFO_NULL);
}

/* inoutvec[i] = invec[i] * 10 + inoutvec[i]: not commutative, so the
 * order of the operands shows. */
static void shift_add(void* in, void* inout, int* len, MPI_Datatype* type) {
  CHECK(*type == MPI_INT);
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) b[i] = a[i] * 10 + b[i];
}

/* A user op on a derived type: pairs of ints a stride of 3 apart. */
static void pair_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) {
    b[3 * i] += a[3 * i];
    b[3 * i + 1] += 2 * a[3 * i + 1];
  }
}

static void test_reduce_local(void) {
  const MPI_Op ops[] = {MPI_MAX, MPI_MIN,  MPI_SUM,  MPI_PROD, MPI_LAND,
                        MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR,  MPI_BXOR};
  const int a[4] = {3, 0, -2, 12}, b[4] = {5, 7, 0, 10};
  for (unsigned k = 0; k < sizeof ops / sizeof ops[0]; ++k) {
    int out[4];
    memcpy(out, b, sizeof out);
    CHECK(MPI_Reduce_local(a, out, 4, MPI_INT, ops[k]) == MPI_SUCCESS);
    for (int i = 0; i < 4; ++i) {
      int want = 0;
      switch (k) {
        case 0:
          want = a[i] > b[i] ? a[i] : b[i];
          break;
        case 1:
          want = a[i] < b[i] ? a[i] : b[i];
          break;
        case 2:
          want = a[i] + b[i];
          break;
        case 3:
          want = a[i] * b[i];
          break;
        case 4:
          want = a[i] && b[i];
          break;
        case 5:
          want = a[i] || b[i];
          break;
        case 6:
          want = !a[i] != !b[i];
          break;
        case 7:
          want = a[i] & b[i];
          break;
        case 8:
          want = a[i] | b[i];
          break;
        case 9:
          want = a[i] ^ b[i];
          break;
      }
      CHECK(out[i] == want);
    }
  }
  double x[3] = {1.5, -2, 4}, y[3] = {0.5, 3, 4};
  MPI_Reduce_local(x, y, 3, MPI_DOUBLE, MPI_SUM);
  CHECK(y[0] == 2 && y[1] == 1 && y[2] == 8);
  struct {
    double v;
    int i;
  } p[2] = {{1, 4}, {9, 2}}, q[2] = {{1, 3}, {5, 0}};
  MPI_Reduce_local(p, q, 2, MPI_DOUBLE_INT, MPI_MAXLOC);
  CHECK(q[0].v == 1 && q[0].i == 3 && q[1].v == 9 && q[1].i == 2);

  MPI_Op op;
  MPI_Op_create(shift_add, 0, &op);
  int in[2] = {1, 2}, io[2] = {3, 4};
  MPI_Reduce_local(in, io, 2, MPI_INT, op);
  CHECK(io[0] == 13 && io[1] == 24);
  MPI_Op_free(&op);

  /* A predefined op on a vector (the gaps untouched), and a user op on
   * it. */
  MPI_Datatype vec;
  MPI_Type_vector(2, 2, 3, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  int vi[6] = {1, 2, 100, 3, 4, 200}, vo[6] = {10, 20, -1, 30, 40, -2};
  MPI_Reduce_local(vi, vo, 1, vec, MPI_SUM);
  CHECK(vo[0] == 11 && vo[1] == 22 && vo[2] == -1 && vo[3] == 33 && vo[4] == 44 && vo[5] == -2);
  MPI_Datatype pair;
  MPI_Type_vector(1, 2, 3, MPI_INT, &pair);
  MPI_Datatype strided;
  MPI_Type_create_resized(pair, 0, 3 * sizeof(int), &strided);
  MPI_Type_commit(&strided);
  MPI_Op_create(pair_sum, 1, &op);
  int si[6] = {1, 2, 7, 3, 4, 7}, so[6] = {10, 20, -1, 30, 40, -2};
  MPI_Reduce_local(si, so, 2, strided, op);
  CHECK(so[0] == 11 && so[1] == 24 && so[2] == -1 && so[3] == 33 && so[4] == 48 && so[5] == -2);
  MPI_Op_free(&op);
  MPI_Type_free(&vec);
  MPI_Type_free(&pair);
  MPI_Type_free(&strided);

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK(MPI_Reduce_local(x, y, -1, MPI_DOUBLE, MPI_SUM) == MPI_ERR_COUNT);
  CHECK(MPI_Reduce_local(x, y, 1, MPI_DOUBLE, MPI_BXOR) == MPI_ERR_OP);
  CHECK(MPI_Reduce_local(MPI_IN_PLACE, y, 1, MPI_DOUBLE, MPI_SUM) == MPI_ERR_BUFFER);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Per rank, for the same reason. */
enum { max_ranks = 64 };
static int copies[max_ranks], deletes[max_ranks], handled[max_ranks];
static int copy_fn(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)keyval, (void)extra;
  ++copies[me()];
  *(void**)out = (char*)in + 1;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm, (void)keyval, (void)value, (void)extra;
  ++deletes[me()];
  return MPI_SUCCESS;
}
static void handler(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  handled[me()] = *code;
}

static void test_deprecated(void) {
  const int rank = me(), size = nranks();
  (void)rank, (void)size;
  CHECK(MPI_Pcontrol(0) == MPI_SUCCESS && MPI_Pcontrol(2, "extra") == MPI_SUCCESS);
  char value[4];
  int key, dupkey, flag;
  MPI_Keyval_create(copy_fn, delete_fn, &key, NULL);
  MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &dupkey, NULL);
  MPI_Comm comm, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Attr_put(comm, key, value);
  MPI_Attr_put(comm, dupkey, value + 2);
  void* got = NULL;
  MPI_Attr_get(comm, key, &got, &flag);
  CHECK(flag == 1 && got == value);
  MPI_Comm_dup(comm, &copy);
  CHECK(copies[rank] == 1);
  MPI_Attr_get(copy, key, &got, &flag);
  CHECK(flag == 1 && got == value + 1);
  MPI_Attr_get(copy, dupkey, &got, &flag);
  CHECK(flag == 1 && got == value + 2);
  MPI_Attr_delete(comm, key);
  CHECK(deletes[rank] == 1);
  MPI_Attr_get(comm, key, &got, &flag);
  CHECK(flag == 0);
  int* tag_ub;
  MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  CHECK(flag == 1 && *tag_ub >= 32767);
  MPI_Comm_free(&copy);
  CHECK(deletes[rank] == 2);
  MPI_Keyval_free(&key);
  CHECK(key == MPI_KEYVAL_INVALID);
  MPI_Keyval_free(&dupkey);

  MPI_Errhandler h, now;
  MPI_Errhandler_create(handler, &h);
  MPI_Errhandler_set(comm, h);
  MPI_Errhandler_get(comm, &now);
  CHECK(now == h);
  MPI_Send(value, 1, MPI_CHAR, size, 0, comm); /* no such rank */
  CHECK(handled[rank] == MPI_ERR_RANK);
  MPI_Errhandler_free(&h);
  MPI_Comm_free(&comm);

  /* MPI_Type_hindexed and MPI_Type_struct: as their MPI-2 forms. */
  int lengths[2] = {2, 1};
  MPI_Aint displs[2] = {0, 3 * sizeof(int)};
  MPI_Datatype hi, st, types[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_hindexed(2, lengths, displs, MPI_INT, &hi);
  int tsize;
  MPI_Aint lb, extent;
  MPI_Type_size(hi, &tsize);
  MPI_Type_get_extent(hi, &lb, &extent);
  CHECK(tsize == 3 * (int)sizeof(int) && extent == 4 * sizeof(int));
  displs[1] = 8;
  MPI_Type_struct(2, lengths, displs, types, &st);
  MPI_Type_size(st, &tsize);
  MPI_Type_get_extent(st, &lb, &extent);
  CHECK(tsize == 2 * (int)sizeof(int) + (int)sizeof(double) && extent == 16);
  int ni, na, nt, combiner;
  MPI_Type_get_envelope(st, &ni, &na, &nt, &combiner);
  CHECK(combiner == MPI_COMBINER_STRUCT && nt == 2);
  MPI_Type_free(&hi);
  MPI_Type_free(&st);
}

/* Ring exchange of a block of a 3-D array (C order) and of a 2-D one
 * (Fortran order): every element of the block arrives, the gaps keep
 * their sentinel. */
enum { D0 = 4, D1 = 5, D2 = 6 };

static int value_at(int from, int i) {
  return from * 100000 + i;
}

static void test_subarray(void) {
  const int rank = me(), size = nranks();
  (void)rank, (void)size;
  const int to = (rank + 1) % size, from = (rank + size - 1) % size;
  const int sizes[3] = {D0, D1, D2}, subs[3] = {2, 3, 4}, starts[3] = {1, 2, 1};
  MPI_Datatype sub;
  MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub);
  MPI_Type_commit(&sub);
  int tsize;
  MPI_Aint lb, extent;
  MPI_Type_size(sub, &tsize);
  MPI_Type_get_extent(sub, &lb, &extent);
  CHECK(tsize == 2 * 3 * 4 * (int)sizeof(int));
  CHECK(lb == 0 && extent == D0 * D1 * D2 * (MPI_Aint)sizeof(int));
  int ni, na, nt, combiner;
  MPI_Type_get_envelope(sub, &ni, &na, &nt, &combiner);
  CHECK(combiner == MPI_COMBINER_SUBARRAY && ni == 3 * 3 + 2 && na == 0 && nt == 1);

  /* Two arrays in a row: count 2 steps by the whole array. */
  int out[2][D0][D1][D2], in[2][D0][D1][D2];
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < D0 * D1 * D2; ++i) {
      (&out[a][0][0][0])[i] = value_at(rank, a * 1000 + i);
      (&in[a][0][0][0])[i] = -7;
    }
  MPI_Sendrecv(out, 2, sub, to, 5, in, 2, sub, from, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < D0; ++i)
      for (int j = 0; j < D1; ++j)
        for (int k = 0; k < D2; ++k) {
          const int inside = i >= 1 && i < 3 && j >= 2 && j < 5 && k >= 1 && k < 5;
          const int want = inside ? value_at(from, a * 1000 + (i * D1 + j) * D2 + k) : -7;
          CHECK(in[a][i][j][k] == want);
        }
  /* Packed in the array's order: row by row of the last dimension. */
  int packed[2 * 3 * 4], n = 0;
  MPI_Sendrecv(out, 1, sub, to, 6, packed, 24, MPI_INT, from, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 1; i < 3; ++i)
    for (int j = 2; j < 5; ++j)
      for (int k = 1; k < 5; ++k) CHECK(packed[n++] == value_at(from, (i * D1 + j) * D2 + k));
  MPI_Type_free(&sub);

  /* Fortran order: a(0:6, 0:4), the block a(2:4, 1:3); column-major. */
  const int fsizes[2] = {7, 5}, fsubs[2] = {3, 3}, fstarts[2] = {2, 1};
  MPI_Type_create_subarray(2, fsizes, fsubs, fstarts, MPI_ORDER_FORTRAN, MPI_DOUBLE, &sub);
  MPI_Type_commit(&sub);
  double fo[35], fi[35];
  for (int i = 0; i < 35; ++i) {
    fo[i] = value_at(rank, i);
    fi[i] = -1;
  }
  MPI_Sendrecv(fo, 1, sub, to, 7, fi, 1, sub, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int j = 0; j < 5; ++j)
    for (int i = 0; i < 7; ++i) {
      const int inside = i >= 2 && i < 5 && j >= 1 && j < 4;
      CHECK(fi[i + 7 * j] == (inside ? value_at(from, i + 7 * j) : -1));
    }
  MPI_Type_get_extent(sub, &lb, &extent);
  CHECK(extent == 35 * (MPI_Aint)sizeof(double));
  MPI_Type_free(&sub);

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int bad_starts[3] = {3, 0, 0};
  CHECK(MPI_Type_create_subarray(3, sizes, subs, bad_starts, MPI_ORDER_C, MPI_INT, &sub) ==
        MPI_ERR_ARG);
  CHECK(MPI_Type_create_subarray(3, sizes, subs, starts, 3, MPI_INT, &sub) == MPI_ERR_ARG);
  CHECK(MPI_Type_create_subarray(0, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub) ==
        MPI_ERR_ARG);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Every rank's darray share of a G0 x G1 array, block over the first
 * dimension and cyclic(2) over the second, on the grid MPI_Dims_create
 * gives: each element lies in exactly its owner's share, and the shares
 * are in the array's order. */
enum { G0 = 5, G1 = 7 };

static void test_darray(int order) {
  const int rank = me(), size = nranks();
  (void)rank, (void)size;
  int psizes[2] = {0, 0};
  MPI_Dims_create(size, 2, psizes);
  const int gsizes[2] = {G0, G1};
  const int distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
  const int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2};
  const int block0 = (G0 + psizes[0] - 1) / psizes[0];
  int array[G0 * G1];
  for (int i = 0; i < G0 * G1; ++i) array[i] = -1;
  for (int r = 0; r < size; ++r) {
    MPI_Datatype t;
    MPI_Type_create_darray(size, r, 2, gsizes, distribs, dargs, psizes, order, MPI_INT, &t);
    MPI_Type_commit(&t);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(t, &lb, &extent);
    CHECK(lb == 0 && extent == G0 * G1 * (MPI_Aint)sizeof(int));
    int tsize;
    MPI_Type_size(t, &tsize);
    const int n = tsize / (int)sizeof(int);
    int values[G0 * G1];
    for (int k = 0; k < n; ++k) values[k] = r * 1000 + k;
    int pos = 0;
    int share[G0 * G1];
    for (int i = 0; i < G0 * G1; ++i) share[i] = -1;
    MPI_Unpack(values, (int)sizeof values, &pos, share, 1, t, MPI_COMM_SELF);
    CHECK(pos == tsize);
    int last = -1;
    for (int m = 0; m < G0 * G1; ++m) {
      if (share[m] < 0) continue;
      CHECK(array[m] == -1);
      array[m] = share[m];
      CHECK(share[m] > last); /* the array's order */
      last = share[m];
    }
    MPI_Type_free(&t);
  }
  for (int i = 0; i < G0; ++i)
    for (int j = 0; j < G1; ++j) {
      const int owner = (i / block0) * psizes[1] + (j / 2) % psizes[1];
      const int m = order == MPI_ORDER_C ? i * G1 + j : i + G0 * j;
      CHECK(array[m] >= 0 && array[m] / 1000 == owner);
    }
}

static void fatal(const char* what) {
  const int rank = me(), size = nranks();
  (void)rank, (void)size;
  char long_key[MPI_MAX_INFO_KEY + 2];
  memset(long_key, 'k', sizeof long_key - 1);
  long_key[sizeof long_key - 1] = '\0';
  char long_value[MPI_MAX_INFO_VAL + 2];
  memset(long_value, 'v', sizeof long_value - 1);
  long_value[sizeof long_value - 1] = '\0';
  MPI_Info info;
  MPI_Info_create(&info);
  if (strcmp(what, "info_key") == 0) {
    MPI_Info_set(info, long_key, "v");
  } else if (strcmp(what, "info_value") == 0) {
    MPI_Info_set(info, "key", long_value);
  } else if (strcmp(what, "info_nokey") == 0) {
    MPI_Info_delete(info, "absent");
  } else if (strcmp(what, "info_handle") == 0) {
    MPI_Info keep = info;
    MPI_Info_free(&info);
    int n;
    MPI_Info_get_nkeys(keep, &n);
  } else if (strcmp(what, "subarray") == 0) {
    const int sizes[2] = {4, 4}, subs[2] = {2, 2}, starts[2] = {0, 3};
    MPI_Datatype t;
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t);
  } else if (strcmp(what, "darray") == 0) {
    const int gsizes[1] = {8}, distribs[1] = {MPI_DISTRIBUTE_BLOCK},
              dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG}, psizes[1] = {size + 1};
    MPI_Datatype t;
    MPI_Type_create_darray(size, rank, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT,
                           &t);
  } else if (strcmp(what, "reduce_local") == 0) {
    double x = 1, y = 2;
    MPI_Reduce_local(&x, &y, 1, MPI_DOUBLE, MPI_BAND);
  } else {
    printf("FAIL unknown case %s\n", what);
    exit(1);
  }
  printf("FAIL the call returned\n");
  exit(1);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rank = me(), size = nranks();
  if (size > max_ranks) {
    printf("FAIL at most %d ranks\n", max_ranks);
    return 1;
  }
  if (argc > 1) fatal(argv[1]);
  test_info();
  test_reduce_local();
  test_deprecated();
  test_subarray();
  test_darray(MPI_ORDER_C);
  test_darray(MPI_ORDER_FORTRAN);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("breadth: ok %d ranks\n", size);
  MPI_Finalize();
  return 0;
}
