/* mpi-test coll: every collective at any number of ranks, each element of
 * each result checked against what the standard defines:
 *  - barrier; bcast, reduce, gather, scatter from every root; counts 0, 1,
 *    a few and 100000 doubles;
 *  - allreduce with every predefined op on its types (MAXLOC/MINLOC on
 *    the pair types, ties resolved to the lesser index), MPI_IN_PLACE
 *    wherever the standard takes it;
 *  - a non-commutative user op (2x2 matrix product, checked against the
 *    product in rank order) in reduce from two roots, allreduce, scan,
 *    exscan and reduce_scatter_block; a commutative user op;
 *  - gatherv, scatterv, allgatherv with blocks of different sizes and
 *    gaps between them (the gaps stay untouched); alltoall(v,w);
 *    reduce_scatter(_block); scan, exscan;
 *  - the non-blocking forms, and two of them outstanding on one
 *    communicator completed in reverse order, and a blocking collective
 *    called while a non-blocking one is outstanding;
 *  - every collective with zero elements and null buffers;
 *  - derived datatypes: a matrix column, mixed send and receive types, a
 *    predefined op on a vector (gaps untouched), user ops on derived
 *    types;
 *  - MPI_COMM_SELF, the halves of MPI_COMM_WORLD (MPI_Comm_split) and a
 *    dup at once, and MPI_ERRORS_RETURN.
 * Every failed check prints a line; rank 0 prints "coll: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ranks share the program's globals (docs/mpi.md): each test takes the
 * rank, the size and the rank's failure count as arguments. */
#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      if (++*failures < 20) {                    \
        printf("coll: FAIL on rank %d: ", rank); \
        printf(__VA_ARGS__);                     \
        printf("\n");                            \
      }                                          \
    }                                            \
  } while (0)

static double val(int r, int i) {
  return r * 1000.0 + i;
}

/* 2x2 matrices of unsigned (wrapping), row major: inout = in * inout. */
static void matmul(const unsigned* a, const unsigned* b, unsigned* out) {
  unsigned t[4];
  t[0] = a[0] * b[0] + a[1] * b[2];
  t[1] = a[0] * b[1] + a[1] * b[3];
  t[2] = a[2] * b[0] + a[3] * b[2];
  t[3] = a[2] * b[1] + a[3] * b[3];
  memcpy(out, t, sizeof t);
}
/* On MPI_UNSIGNED (4 a matrix) or on a type that is one matrix. */
static void matmul_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  const int n = *type == MPI_UNSIGNED ? *len / 4 : *len;
  for (int k = 0; k < n; ++k)
    matmul((unsigned*)in + 4 * k, (unsigned*)inout + 4 * k, (unsigned*)inout + 4 * k);
}
static void rank_matrix(int r, int k, unsigned* m) {
  m[0] = (unsigned)(r + 2 + k);
  m[1] = 1;
  m[2] = (unsigned)(r + 1);
  m[3] = (unsigned)k;
}
/* The product of ranks lo..hi-1's matrices k, in rank order. */
static void product(int lo, int hi, int k, unsigned* out) {
  unsigned m[4];
  out[0] = out[3] = 1;
  out[1] = out[2] = 0;
  for (int r = lo; r < hi; ++r) {
    rank_matrix(r, k, m);
    matmul(out, m, out);
  }
}

static void my_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((long*)inout)[i] += ((long*)in)[i];
}

static void test_bcast_reduce(int rank, int size, int* failures) {
  const int counts[] = {0, 1, 7, 100000};
  double* buf = malloc(100000 * sizeof(double));
  double* out = malloc(100000 * sizeof(double));
  for (int root = 0; root < size; ++root)
    for (int c = 0; c < 4; ++c) {
      const int n = counts[c];
      if (n == 100000 && root > 1) continue;
      for (int i = 0; i < n; ++i) buf[i] = rank == root ? val(root, i) : -1;
      MPI_Bcast(buf, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
      for (int i = 0; i < n; ++i)
        if (buf[i] != val(root, i)) {
          CHECK(0, "bcast root %d count %d: [%d] = %g", root, n, i, buf[i]);
          break;
        }
      for (int i = 0; i < n; ++i) buf[i] = val(rank, i), out[i] = -1;
      MPI_Reduce(buf, out, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
      if (rank == root)
        for (int i = 0; i < n; ++i) {
          const double want = 1000.0 * size * (size - 1) / 2 + (double)size * i;
          if (out[i] != want) {
            CHECK(0, "reduce root %d count %d: [%d] = %g, not %g", root, n, i, out[i], want);
            break;
          }
        }
      /* In place at the root; MAX. */
      for (int i = 0; i < n; ++i) buf[i] = val(rank, i);
      MPI_Reduce(rank == root ? MPI_IN_PLACE : buf, buf, n, MPI_DOUBLE, MPI_MAX, root,
                 MPI_COMM_WORLD);
      if (rank == root)
        for (int i = 0; i < n; ++i)
          if (buf[i] != val(size - 1, i)) {
            CHECK(0, "reduce in place root %d: [%d] = %g", root, i, buf[i]);
            break;
          }
    }
  free(buf);
  free(out);
}

static void test_allreduce(int rank, int size, int* failures) {
  const int counts[] = {0, 1, 8, 100000};
  double* in = malloc(100000 * sizeof(double));
  double* out = malloc(100000 * sizeof(double));
  for (int c = 0; c < 4; ++c) {
    const int n = counts[c];
    for (int i = 0; i < n; ++i) in[i] = val(rank, i), out[i] = -1;
    MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i)
      if (out[i] != 1000.0 * size * (size - 1) / 2 + (double)size * i) {
        CHECK(0, "allreduce count %d: [%d] = %g", n, i, out[i]);
        break;
      }
    MPI_Allreduce(MPI_IN_PLACE, in, n, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i)
      if (in[i] != val(0, i)) {
        CHECK(0, "allreduce in place MIN count %d: [%d] = %g", n, i, in[i]);
        break;
      }
  }
  free(in);
  free(out);

  /* Integer ops. */
  int v[3] = {rank + 1, rank % 2, 1 << (rank % 16)}, r[3];
  long long prod = 1;
  int land = 1, lor = 0, lxor = 0, band = ~0, bor = 0, bxor = 0;
  for (int q = 0; q < size; ++q) {
    prod *= q + 1;
    land = land && (q % 2);
    lor = lor || (q % 2);
    lxor = lxor != (q % 2);
    band &= 1 << (q % 16);
    bor |= 1 << (q % 16);
    bxor ^= 1 << (q % 16);
  }
  long long lv = rank + 1, lr = 0;
  MPI_Allreduce(&lv, &lr, 1, MPI_LONG_LONG, MPI_PROD, MPI_COMM_WORLD);
  CHECK(lr == prod, "PROD %lld, not %lld", lr, prod);
  MPI_Allreduce(&v[1], &r[0], 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  MPI_Allreduce(&v[1], &r[1], 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  MPI_Allreduce(&v[1], &r[2], 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD);
  CHECK(r[0] == land && r[1] == lor && r[2] == lxor, "LAND/LOR/LXOR %d %d %d, not %d %d %d", r[0],
        r[1], r[2], land, lor, lxor);
  MPI_Allreduce(&v[2], &r[0], 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD);
  MPI_Allreduce(&v[2], &r[1], 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
  MPI_Allreduce(&v[2], &r[2], 1, MPI_INT, MPI_BXOR, MPI_COMM_WORLD);
  CHECK(r[0] == band && r[1] == bor && r[2] == bxor, "BAND/BOR/BXOR %d %d %d, not %d %d %d", r[0],
        r[1], r[2], band, bor, bxor);
  unsigned char b = (unsigned char)(1 << (rank % 8)), br = 0;
  MPI_Allreduce(&b, &br, 1, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
  CHECK(br == (unsigned char)(size >= 8 ? 0xff : (1 << size) - 1), "BOR of MPI_BYTE: %#x", br);
  _Bool t = rank % 2 == 1, tr = 0;
  MPI_Allreduce(&t, &tr, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD);
  CHECK(tr == (size > 1), "LOR of MPI_C_BOOL: %d", tr);
  short s = (short)(size - rank), sr = 0;
  MPI_Allreduce(&s, &sr, 1, MPI_SHORT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(sr == size, "MAX of MPI_SHORT: %d", sr);
  long double ld = rank + 0.5L, ldr = 0;
  MPI_Allreduce(&ld, &ldr, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  CHECK(ldr == size * (size - 1) / 2.0L + size * 0.5L, "SUM of MPI_LONG_DOUBLE: %Lg", ldr);
  unsigned long long u = ~0ull - (unsigned long long)rank, ur = 0;
  MPI_Allreduce(&u, &ur, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  CHECK(ur == ~0ull - (unsigned long long)(size - 1), "MIN of MPI_UINT64_T: %llu", ur);

  /* MAXLOC / MINLOC: values rank % 3 (ties), pairs of each type. */
  struct {
    double v;
    int i;
  } d = {rank % 3, rank}, dr[2];
  struct {
    int v, i;
  } ii = {-(rank % 3), rank}, ir;
  struct {
    float v;
    int i;
  } f = {(float)(rank % 3), rank}, fr;
  struct {
    short v;
    int i;
  } sh = {(short)(rank % 3), rank}, shr;
  const int top = size >= 3 ? 2 : size - 1; /* the largest value, first at index top */
  MPI_Allreduce(&d, &dr[0], 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  MPI_Allreduce(&d, &dr[1], 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
  CHECK(dr[0].v == top && dr[0].i == top, "MAXLOC (%g, %d)", dr[0].v, dr[0].i);
  CHECK(dr[1].v == 0 && dr[1].i == 0, "MINLOC (%g, %d)", dr[1].v, dr[1].i);
  MPI_Allreduce(&ii, &ir, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
  CHECK(ir.v == -top && ir.i == top, "MINLOC of MPI_2INT (%d, %d)", ir.v, ir.i);
  MPI_Allreduce(&f, &fr, 1, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(fr.v == top && fr.i == top, "MAXLOC of MPI_FLOAT_INT (%g, %d)", fr.v, fr.i);
  MPI_Allreduce(&sh, &shr, 1, MPI_SHORT_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(shr.v == top && shr.i == top, "MAXLOC of MPI_SHORT_INT (%d, %d)", shr.v, shr.i);
}

static void check_matrix(int rank, int* failures, const char* what, const unsigned* got, int lo,
                         int hi, int k) {
  unsigned want[4];
  product(lo, hi, k, want);
  CHECK(memcmp(got, want, sizeof want) == 0, "%s matrix %d: {%u %u %u %u}, not {%u %u %u %u}", what,
        k, got[0], got[1], got[2], got[3], want[0], want[1], want[2], want[3]);
}

static void test_user_ops(int rank, int size, int* failures) {
  MPI_Op op, sum;
  int commute = 1;
  MPI_Op_create(matmul_op, 0, &op);
  MPI_Op_create(my_sum, 1, &sum);
  MPI_Op_commutative(op, &commute);
  CHECK(commute == 0, "MPI_Op_commutative says %d for a non-commutative op", commute);
  enum { K = 3 };
  unsigned mine[4 * K], out[4 * K];
  for (int k = 0; k < K; ++k) rank_matrix(rank, k, mine + 4 * k);
  const int roots[2] = {0, size - 1};
  for (int j = 0; j < 2; ++j) {
    MPI_Reduce(mine, out, 4 * K, MPI_UNSIGNED, op, roots[j], MPI_COMM_WORLD);
    if (rank == roots[j])
      for (int k = 0; k < K; ++k) check_matrix(rank, failures, "reduce", out + 4 * k, 0, size, k);
  }
  MPI_Allreduce(mine, out, 4 * K, MPI_UNSIGNED, op, MPI_COMM_WORLD);
  for (int k = 0; k < K; ++k) check_matrix(rank, failures, "allreduce", out + 4 * k, 0, size, k);
  MPI_Scan(mine, out, 4 * K, MPI_UNSIGNED, op, MPI_COMM_WORLD);
  for (int k = 0; k < K; ++k) check_matrix(rank, failures, "scan", out + 4 * k, 0, rank + 1, k);
  memcpy(out, mine, sizeof out);
  MPI_Exscan(MPI_IN_PLACE, out, 4 * K, MPI_UNSIGNED, op, MPI_COMM_WORLD);
  if (rank > 0)
    for (int k = 0; k < K; ++k) check_matrix(rank, failures, "exscan", out + 4 * k, 0, rank, k);
  /* Reduce_scatter_block: rank r gets matrix r % K of the product. */
  unsigned* all = malloc(sizeof(unsigned) * 4 * (size_t)size);
  for (int q = 0; q < size; ++q) rank_matrix(rank, q % K, all + 4 * q);
  MPI_Reduce_scatter_block(all, out, 4, MPI_UNSIGNED, op, MPI_COMM_WORLD);
  check_matrix(rank, failures, "reduce_scatter_block", out, 0, size, rank % K);
  free(all);
  /* A commutative user op from every root. */
  for (int root = 0; root < size; ++root) {
    long x[2] = {rank, 2 * rank}, y[2] = {0, 0};
    MPI_Reduce(x, y, 2, MPI_LONG, sum, root, MPI_COMM_WORLD);
    if (rank == root)
      CHECK(y[0] == (long)size * (size - 1) / 2 && y[1] == 2 * y[0], "user sum root %d: %ld %ld",
            root, y[0], y[1]);
  }
  MPI_Op_free(&op);
  MPI_Op_free(&sum);
  CHECK(op == MPI_OP_NULL, "MPI_Op_free left %d", op);
}

/* Block i (rank i's) of a v-collective: i + 1 elements, at displacement
 * i * (i + 1) / 2 + 2 * i (gaps of 2 between blocks). */
static int vcount(int i) {
  return i + 1;
}
static int vdispl(int i) {
  return i * (i + 1) / 2 + 2 * i;
}

static void test_gather_scatter(int rank, int size, int* failures) {
  const int n = 5, span = vdispl(size);
  double* all = malloc(sizeof(double) * (size_t)(n * size + span + 1));
  double mine[5 + 16], got[5 + 16];
  int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
  for (int i = 0; i < size; ++i) counts[i] = vcount(i), displs[i] = vdispl(i);
  for (int root = 0; root < size; ++root) {
    for (int i = 0; i < n; ++i) mine[i] = val(rank, i);
    for (int i = 0; i < n * size; ++i) all[i] = -1;
    MPI_Gather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
    if (rank == root)
      for (int i = 0; i < n * size; ++i) CHECK(all[i] == val(i / n, i % n), "gather [%d]", i);
    /* In place at the root. */
    for (int i = 0; i < n * size; ++i) all[i] = rank == root ? val(i / n, i % n) : -1;
    MPI_Gather(rank == root ? MPI_IN_PLACE : mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, root,
               MPI_COMM_WORLD);
    if (rank == root)
      for (int i = 0; i < n * size; ++i) CHECK(all[i] == val(i / n, i % n), "gather in place");
    /* Scatter back, and in place at the root. */
    for (int i = 0; i < n; ++i) got[i] = -1;
    MPI_Scatter(all, n, MPI_DOUBLE, got, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) CHECK(got[i] == val(rank, i), "scatter root %d [%d]", root, i);
    MPI_Scatter(all, n, MPI_DOUBLE, rank == root ? MPI_IN_PLACE : got, n, MPI_DOUBLE, root,
                MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) CHECK(got[i] == val(rank, i), "scatter in place [%d]", i);
    /* Gatherv / scatterv with gaps. */
    for (int i = 0; i < vcount(rank); ++i) mine[i] = val(rank, i);
    for (int i = 0; i < span; ++i) all[i] = -7;
    MPI_Gatherv(mine, vcount(rank), MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, root,
                MPI_COMM_WORLD);
    if (rank == root)
      for (int q = 0; q < size; ++q) {
        for (int i = 0; i < vcount(q); ++i)
          CHECK(all[vdispl(q) + i] == val(q, i), "gatherv block %d [%d]", q, i);
        CHECK(all[vdispl(q) + vcount(q)] == -7, "gatherv wrote a gap after block %d", q);
      }
    for (int i = 0; i < 5 + 16; ++i) got[i] = -3;
    MPI_Scatterv(all, counts, displs, MPI_DOUBLE, got, vcount(rank), MPI_DOUBLE, root,
                 MPI_COMM_WORLD);
    for (int i = 0; i < vcount(rank); ++i) CHECK(got[i] == val(rank, i), "scatterv [%d]", i);
    CHECK(got[vcount(rank)] == -3, "scatterv wrote past the block");
  }
  /* Allgather, allgatherv (and in place). */
  for (int i = 0; i < n; ++i) mine[i] = val(rank, i);
  MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int i = 0; i < n * size; ++i) CHECK(all[i] == val(i / n, i % n), "allgather [%d]", i);
  for (int i = 0; i < n * size; ++i) all[i] = i / n == rank ? val(rank, i % n) : -1;
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int i = 0; i < n * size; ++i) CHECK(all[i] == val(i / n, i % n), "allgather in place");
  for (int i = 0; i < span; ++i) all[i] = -7;
  MPI_Allgatherv(mine, vcount(rank), MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q) {
    for (int i = 0; i < vcount(q); ++i)
      CHECK(all[vdispl(q) + i] == val(q, i), "allgatherv block %d [%d]", q, i);
    CHECK(all[vdispl(q) + vcount(q)] == -7, "allgatherv wrote a gap after block %d", q);
  }
  for (int i = 0; i < span; ++i) all[i] = -7;
  for (int i = 0; i < vcount(rank); ++i) all[vdispl(rank) + i] = val(rank, i);
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_DOUBLE,
                 MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < vcount(q); ++i)
      CHECK(all[vdispl(q) + i] == val(q, i), "allgatherv in place block %d [%d]", q, i);
  free(all);
  free(counts);
  free(displs);
}

static void test_alltoall(int rank, int size, int* failures) {
  const int n = 3;
  int* s = malloc(sizeof(int) * (size_t)(size * size + n * size + 8));
  int* r = malloc(sizeof(int) * (size_t)(size * size + n * size + 8));
  int *sc = malloc(sizeof(int) * (size_t)size * 4), *sd = sc + size, *rc = sd + size,
      *rd = rc + size;
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * (size_t)size);
  /* Block for q: rank * 100 + q * 10 + i. */
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < n; ++i) s[q * n + i] = rank * 100 + q * 10 + i;
  MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < n; ++i)
      CHECK(r[q * n + i] == q * 100 + rank * 10 + i, "alltoall from %d [%d] = %d", q, i,
            r[q * n + i]);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, n, MPI_INT, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < n; ++i)
      CHECK(s[q * n + i] == q * 100 + rank * 10 + i, "alltoall in place from %d [%d]", q, i);
  /* Alltoallv: rank sends q + 1 elements to q; receives rank + 1 from each,
   * at reversed places. */
  int off = 0;
  for (int q = 0; q < size; ++q) {
    sc[q] = q + 1;
    sd[q] = off;
    for (int i = 0; i < q + 1; ++i) s[off + i] = rank * 100 + q * 10 + i;
    off += q + 1;
  }
  for (int q = 0; q < size; ++q) rc[q] = rank + 1, rd[q] = (size - 1 - q) * (rank + 1);
  MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < rank + 1; ++i)
      CHECK(r[rd[q] + i] == q * 100 + rank * 10 + i, "alltoallv from %d [%d]", q, i);
  /* Alltoallw: the same in bytes, ints; in place with recvcounts. */
  for (int q = 0; q < size; ++q) {
    sd[q] *= (int)sizeof(int);
    rd[q] *= (int)sizeof(int);
    types[q] = MPI_INT;
  }
  memset(r, 0, sizeof(int) * (size_t)(size * (rank + 1)));
  MPI_Alltoallw(s, sc, sd, types, r, rc, rd, types, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < rank + 1; ++i)
      CHECK(r[rd[q] / 4 + i] == q * 100 + rank * 10 + i, "alltoallw from %d [%d]", q, i);
  for (int q = 0; q < size; ++q) {
    rc[q] = n;
    rd[q] = q * n * (int)sizeof(int);
    for (int i = 0; i < n; ++i) r[q * n + i] = rank * 100 + q * 10 + i;
  }
  MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, r, rc, rd, types, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < n; ++i)
      CHECK(r[q * n + i] == q * 100 + rank * 10 + i, "alltoallw in place from %d [%d]", q, i);
  free(s);
  free(r);
  free(sc);
  free(types);
}

static void test_reduce_scatter_scan(int rank, int size, int* failures) {
  int total = 0;
  int* counts = malloc(sizeof(int) * (size_t)size);
  for (int q = 0; q < size; ++q) total += (counts[q] = vcount(q));
  long* in = malloc(sizeof(long) * (size_t)(total + 2 * size)); /* and 2 per rank below */
  long out[16];
  for (int i = 0; i < total; ++i) in[i] = rank * 1000 + i;
  MPI_Reduce_scatter(in, out, counts, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const int first = vdispl(rank) - 2 * rank; /* packed: no gaps */
  for (int i = 0; i < vcount(rank); ++i)
    CHECK(out[i] == 1000L * size * (size - 1) / 2 + (long)size * (first + i),
          "reduce_scatter [%d] = %ld", i, out[i]);
  MPI_Reduce_scatter(MPI_IN_PLACE, in, counts, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  for (int i = 0; i < vcount(rank); ++i)
    CHECK(in[i] == (size - 1) * 1000L + first + i, "reduce_scatter in place [%d] = %ld", i, in[i]);
  for (int i = 0; i < 2 * size; ++i) in[i] = rank + i;
  MPI_Reduce_scatter_block(in, out, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < 2; ++i)
    CHECK(out[i] == (long)size * (size - 1) / 2 + (long)size * (2 * rank + i),
          "reduce_scatter_block [%d] = %ld", i, out[i]);
  long x[2] = {rank + 1, 1}, y[2] = {-1, -1};
  MPI_Scan(x, y, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK(y[0] == (long)(rank + 1) * (rank + 2) / 2 && y[1] == rank + 1, "scan %ld %ld", y[0], y[1]);
  MPI_Scan(MPI_IN_PLACE, x, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  CHECK(x[0] == rank + 1 && x[1] == 1, "scan in place %ld %ld", x[0], x[1]);
  y[0] = y[1] = -1;
  MPI_Exscan(x, y, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank > 0)
    CHECK(y[0] == (long)rank * (rank + 1) / 2 && y[1] == rank, "exscan %ld %ld", y[0], y[1]);
  else
    CHECK(y[0] == -1 && y[1] == -1, "exscan wrote rank 0's recvbuf");
  free(in);
  free(counts);
}

static void test_nonblocking(int rank, int size, int* failures) {
  enum { N = 1000 };
  double a[N], b[N], c[N];
  for (int i = 0; i < N; ++i) a[i] = val(rank, i), c[i] = rank == size - 1 ? val(7, i) : 0;
  MPI_Request q[16];
  /* Two outstanding, completed in reverse order. */
  MPI_Iallreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[0]);
  MPI_Ibcast(c, N, MPI_DOUBLE, size - 1, MPI_COMM_WORLD, &q[1]);
  MPI_Wait(&q[1], MPI_STATUS_IGNORE);
  MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(q[0] == MPI_REQUEST_NULL && q[1] == MPI_REQUEST_NULL, "requests not freed");
  for (int i = 0; i < N; ++i) {
    CHECK(b[i] == 1000.0 * size * (size - 1) / 2 + (double)size * i, "iallreduce [%d]", i);
    CHECK(c[i] == val(7, i), "ibcast [%d]", i);
    if (*failures) break;
  }
  /* A blocking collective while a non-blocking one is outstanding. */
  long mine = rank, sum = -1;
  MPI_Iallreduce(a, b, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &q[0]);
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(sum == (long)size * (size - 1) / 2, "allreduce beside an iallreduce: %ld", sum);
  for (int i = 0; i < N; ++i)
    if (b[i] != val(size - 1, i)) {
      CHECK(0, "iallreduce beside an allreduce [%d] = %g", i, b[i]);
      break;
    }
  /* Ibarrier completed by a Test loop; point-to-point between ranks while
   * a collective is outstanding. */
  int flag = 0, token = rank;
  MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
  MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 5, &token, 1, MPI_INT,
               (rank + size - 1) % size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(token == (rank + size - 1) % size, "sendrecv during ibarrier: %d", token);
  while (!flag) MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
  /* Every other form, all outstanding at once, completed by Waitall. */
  int one = rank, all[64], all2[64], sc[64], sd[64], out1 = -1, out2 = -1;
  long s1 = rank, r1 = -1, r2 = -1, r3 = -1, r4 = -1, r5 = -1;
  double rs_in[64], rs_out[2];
  MPI_Datatype types[64];
  for (int i = 0; i < size; ++i) {
    sc[i] = 1;
    sd[i] = i;
    types[i] = MPI_INT;
    all2[i] = rank * 10 + i;
    rs_in[2 * i] = rs_in[2 * i + 1] = rank;
  }
  int w_s[64], w_r[64], w_sd[64];
  for (int i = 0; i < size; ++i) w_s[i] = rank * 10 + i, w_sd[i] = i * (int)sizeof(int);
  MPI_Ireduce(&s1, &r1, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD, &q[0]);
  MPI_Igather(&one, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD, &q[1]);
  MPI_Iscatter(all2, 1, MPI_INT, &out1, 1, MPI_INT, 0, MPI_COMM_WORLD, &q[2]);
  MPI_Iscan(&s1, &r2, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &q[3]);
  MPI_Iexscan(&s1, &r3, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &q[4]);
  MPI_Ireduce_scatter_block(rs_in, rs_out, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[5]);
  MPI_Ialltoallw(w_s, sc, w_sd, types, w_r, sc, w_sd, types, MPI_COMM_WORLD, &q[6]);
  MPI_Iallreduce(&s1, &r4, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD, &q[7]);
  MPI_Iscatterv(all2, sc, sd, MPI_INT, &out2, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &q[8]);
  int ag[64], agv[64], a2a[64], a2av[64], gv[64];
  MPI_Iallgather(&one, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD, &q[9]);
  MPI_Iallgatherv(&one, 1, MPI_INT, agv, sc, sd, MPI_INT, MPI_COMM_WORLD, &q[10]);
  MPI_Ialltoall(all2, 1, MPI_INT, a2a, 1, MPI_INT, MPI_COMM_WORLD, &q[11]);
  MPI_Ialltoallv(all2, sc, sd, MPI_INT, a2av, sc, sd, MPI_INT, MPI_COMM_WORLD, &q[12]);
  MPI_Igatherv(&one, 1, MPI_INT, gv, sc, sd, MPI_INT, size - 1, MPI_COMM_WORLD, &q[13]);
  int rsc[64];
  double rsv_out = -1;
  for (int i = 0; i < size; ++i) rsc[i] = 1;
  MPI_Ireduce_scatter(rs_in, &rsv_out, rsc, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &q[14]);
  MPI_Iallreduce(MPI_IN_PLACE, &r5, 0, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &q[15]);
  MPI_Waitall(16, q, MPI_STATUSES_IGNORE);
  if (rank == 0) {
    CHECK(r1 == (long)size * (size - 1) / 2, "ireduce %ld", r1);
    for (int i = 0; i < size; ++i) CHECK(all[i] == i, "igather [%d] = %d", i, all[i]);
  }
  CHECK(out1 == rank, "iscatter %d", out1);
  CHECK(out2 == (size - 1) * 10 + rank, "iscatterv %d", out2);
  CHECK(r2 == (long)rank * (rank + 1) / 2, "iscan %ld", r2);
  if (rank > 0) CHECK(r3 == (long)rank * (rank - 1) / 2, "iexscan %ld", r3);
  CHECK(rs_out[0] == size * (size - 1) / 2.0 && rs_out[1] == rs_out[0], "ireduce_scatter_block");
  CHECK(r4 == size - 1, "iallreduce max %ld", r4);
  CHECK(r5 == -1, "iallreduce of 0 elements wrote");
  CHECK(rsv_out == size - 1, "ireduce_scatter %g", rsv_out);
  for (int i = 0; i < size; ++i) {
    CHECK(w_r[i] == i * 10 + rank, "ialltoallw from %d: %d", i, w_r[i]);
    CHECK(ag[i] == i && agv[i] == i, "iallgather(v) [%d]: %d %d", i, ag[i], agv[i]);
    CHECK(a2a[i] == i * 10 + rank && a2av[i] == a2a[i], "ialltoall(v) from %d", i);
    if (rank == size - 1) CHECK(gv[i] == i, "igatherv [%d]", i);
  }
}

/* Zero elements everywhere, with null buffers: each call completes and
 * writes nothing. */
static void test_empty(int rank, int size, int* failures) {
  int zeros[16] = {0}, displs[16] = {0};
  MPI_Datatype types[16];
  for (int i = 0; i < 16; ++i) types[i] = MPI_INT;
  const int root = size - 1;
  MPI_Gather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD);
  MPI_Gatherv(NULL, 0, MPI_INT, NULL, zeros, displs, MPI_INT, root, MPI_COMM_WORLD);
  MPI_Scatter(NULL, 0, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD);
  MPI_Scatterv(NULL, zeros, displs, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD);
  MPI_Allgather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgatherv(NULL, 0, MPI_INT, NULL, zeros, displs, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoall(NULL, 0, MPI_INT, NULL, 0, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoallv(NULL, zeros, displs, MPI_INT, NULL, zeros, displs, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoallw(NULL, zeros, displs, types, NULL, zeros, displs, types, MPI_COMM_WORLD);
  MPI_Reduce_scatter(NULL, NULL, zeros, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce_scatter_block(NULL, NULL, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Scan(NULL, NULL, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(NULL, NULL, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce(NULL, NULL, 0, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
  MPI_Bcast(NULL, 0, MPI_INT, root, MPI_COMM_WORLD);
  int after = rank, sum = -1;
  MPI_Allreduce(&after, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == size * (size - 1) / 2, "allreduce after the empty ones: %d", sum);
}

/* vec2: MPI_Type_vector(2, 1, 2, MPI_DOUBLE), doubles at 0 and 16 of an
 * element of extent 24: a user op that knows that layout. */
static void vec2_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int k = 0; k < *len; ++k) {
    ((double*)inout)[3 * k] += ((double*)in)[3 * k];
    ((double*)inout)[3 * k + 2] += ((double*)in)[3 * k + 2];
  }
}

/* Derived datatypes in collectives: a matrix column in bcast, mixed
 * send and receive types in gather and scatter, a predefined op on a
 * vector (its doubles combined; the gaps untouched), user ops on a
 * contiguous type (whole 2x2 matrices) and on a vector. */
static void test_derived(int rank, int size, int* failures) {
  MPI_Datatype column, three, vec2, mat;
  MPI_Type_vector(4, 1, 4, MPI_INT, &column);
  MPI_Type_contiguous(3, MPI_DOUBLE, &three);
  MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &vec2);
  MPI_Type_contiguous(4, MPI_UNSIGNED, &mat);
  MPI_Type_commit(&column);
  MPI_Type_commit(&three);
  MPI_Type_commit(&vec2);
  MPI_Type_commit(&mat);
  /* Column 1 of a 4x4 matrix from the last rank. */
  int m[16];
  for (int i = 0; i < 16; ++i) m[i] = rank == size - 1 ? 100 + i : -i;
  MPI_Bcast(m + 1, 1, column, size - 1, MPI_COMM_WORLD);
  for (int i = 0; i < 16; ++i)
    CHECK(m[i] == (i % 4 == 1 || rank == size - 1 ? 100 + i : -i), "bcast of a column [%d] = %d", i,
          m[i]);
  /* Gather one `three` from each into doubles at the root, scatter back. */
  double mine[3] = {rank, rank + 0.25, rank + 0.5}, back[3] = {-1, -1, -1};
  double* all = malloc(sizeof(double) * 3 * (size_t)size);
  MPI_Gather(mine, 1, three, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int i = 0; i < 3 * size; ++i)
      CHECK(all[i] == i / 3 + (i % 3) * 0.25, "gather of contiguous types [%d] = %g", i, all[i]);
  MPI_Scatter(all, 3, MPI_DOUBLE, back, 1, three, 0, MPI_COMM_WORLD);
  for (int i = 0; i < 3; ++i) CHECK(back[i] == mine[i], "scatter to a contiguous type [%d]", i);
  free(all);
  /* MPI_SUM on 2 vec2 elements: doubles 0, 2, 3, 5 combine; 1 and 4 stay. */
  double v[6], w[6];
  for (int i = 0; i < 6; ++i) v[i] = rank + i, w[i] = -1;
  MPI_Allreduce(v, w, 2, vec2, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < 6; ++i) {
    const double want = i == 1 || i == 4 ? -1 : (double)size * (size - 1) / 2 + (double)size * i;
    CHECK(w[i] == want, "allreduce SUM of a vector [%d] = %g, not %g", i, w[i], want);
  }
  MPI_Reduce(rank == 0 ? MPI_IN_PLACE : v, v, 2, vec2, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int i = 0; i < 6; ++i)
      CHECK(v[i] == (i == 1 || i == 4 ? i : size - 1 + i), "reduce MAX in place of a vector [%d]",
            i);
  /* A user op on vec2, and on whole matrices. */
  MPI_Op vsum, prod;
  MPI_Op_create(vec2_sum, 1, &vsum);
  MPI_Op_create(matmul_op, 0, &prod);
  for (int i = 0; i < 6; ++i) v[i] = rank + i, w[i] = -1;
  MPI_Allreduce(v, w, 2, vec2, vsum, MPI_COMM_WORLD);
  for (int i = 0; i < 6; ++i) {
    const double want = i == 1 || i == 4 ? -1 : (double)size * (size - 1) / 2 + (double)size * i;
    CHECK(w[i] == want, "allreduce of a vector by a user op [%d] = %g, not %g", i, w[i], want);
  }
  unsigned mm[8], got[8], want[4];
  rank_matrix(rank, 0, mm);
  rank_matrix(rank, 1, mm + 4);
  MPI_Scan(mm, got, 2, mat, prod, MPI_COMM_WORLD);
  for (int k = 0; k < 2; ++k) {
    product(0, rank + 1, k, want);
    CHECK(memcmp(got + 4 * k, want, sizeof want) == 0, "scan of matrices as a type, matrix %d", k);
  }
  /* Reduce_scatter_block of vec2: one element each. */
  double* rs = malloc(sizeof(double) * 3 * (size_t)size);
  for (int i = 0; i < 3 * size; ++i) rs[i] = 1;
  double one[3] = {-1, -1, -1};
  MPI_Reduce_scatter_block(rs, one, 1, vec2, MPI_SUM, MPI_COMM_WORLD);
  CHECK(one[0] == size && one[1] == -1 && one[2] == size, "reduce_scatter_block of a vector");
  free(rs);
  MPI_Op_free(&vsum);
  MPI_Op_free(&prod);
  MPI_Type_free(&column);
  MPI_Type_free(&three);
  MPI_Type_free(&vec2);
  MPI_Type_free(&mat);
}

static void test_self(int rank, int size, int* failures) {
  (void)size;
  double x = rank, y = -1;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
  CHECK(y == rank, "allreduce on MPI_COMM_SELF: %g", y);
  MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_SELF);
  MPI_Barrier(MPI_COMM_SELF);
  int g = -1;
  MPI_Gather(&rank, 1, MPI_INT, &g, 1, MPI_INT, 0, MPI_COMM_SELF);
  CHECK(g == rank, "gather on MPI_COMM_SELF: %d", g);
}

/* Collectives on communicators other than the predefined ones: the halves
 * of MPI_COMM_WORLD (even and odd ranks, in reverse order) and a dup, at
 * once; and MPI_ERRORS_RETURN giving a collective's error back. */
static void test_comms(int rank, int size, int* failures) {
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int hr, hs;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  /* World rank of half-rank i: the members of this parity, descending. */
  int world_of[16], n = 0;
  for (int q = size - 1; q >= 0; --q)
    if (q % 2 == rank % 2) world_of[n++] = q;
  CHECK(n == hs && world_of[hr] == rank, "split: rank %d of %d", hr, hs);
  MPI_Request q[2];
  long mine = rank, in_dup = -1, sum = -1;
  MPI_Iallreduce(&mine, &in_dup, 1, MPI_LONG, MPI_SUM, dup, &q[0]);
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, half);
  long want = 0;
  for (int i = 0; i < hs; ++i) want += world_of[i];
  CHECK(sum == want, "allreduce on a half: %ld, not %ld", sum, want);
  /* Bcast from the half's last rank, gather to its rank 0. */
  int b = hr == hs - 1 ? 1000 + rank : -1, g[16];
  MPI_Ibcast(&b, 1, MPI_INT, hs - 1, half, &q[1]);
  MPI_Wait(&q[1], MPI_STATUS_IGNORE);
  CHECK(b == 1000 + world_of[hs - 1], "bcast on a half: %d", b);
  MPI_Gather(&rank, 1, MPI_INT, g, 1, MPI_INT, 0, half);
  if (hr == 0)
    for (int i = 0; i < hs; ++i) CHECK(g[i] == world_of[i], "gather on a half [%d] = %d", i, g[i]);
  /* A non-commutative scan follows the half's rank order. */
  MPI_Op op;
  MPI_Op_create(matmul_op, 0, &op);
  unsigned m[4], got[4], want_m[4], t[4];
  rank_matrix(rank, 1, m);
  MPI_Scan(m, got, 4, MPI_UNSIGNED, op, half);
  want_m[0] = want_m[3] = 1;
  want_m[1] = want_m[2] = 0;
  for (int i = 0; i <= hr; ++i) {
    rank_matrix(world_of[i], 1, t);
    matmul(want_m, t, want_m);
  }
  CHECK(memcmp(got, want_m, sizeof got) == 0, "non-commutative scan on a half");
  MPI_Op_free(&op);
  MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(in_dup == (long)size * (size - 1) / 2, "iallreduce on a dup: %ld", in_dup);
  /* MPI_ERRORS_RETURN: a bad root comes back as MPI_ERR_ROOT. */
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int err = MPI_Bcast(&b, 1, MPI_INT, size, dup), cls = -1;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ROOT, "bcast from root %d under MPI_ERRORS_RETURN: class %d", size, cls);
  MPI_Barrier(dup); /* the failed call took no number: the next still matches */
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  /* A communicator freed while a collective on it is pending: the
   * collective completes (MPI 3.1, 6.4.3), even when a new communicator
   * takes the freed handle meanwhile. */
  MPI_Comm gone, next;
  long x[3] = {rank + 1, rank + 1, rank + 1}, total[3] = {-1, -1, -1}, other = -1;
  MPI_Comm_dup(MPI_COMM_WORLD, &gone);
  MPI_Iallreduce(x, total, 3, MPI_LONG, MPI_SUM, gone, &q[0]);
  MPI_Comm_free(&gone);
  MPI_Comm_dup(MPI_COMM_WORLD, &next);
  MPI_Allreduce(x, &other, 1, MPI_LONG, MPI_MAX, next);
  MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  for (int i = 0; i < 3; ++i)
    CHECK(total[i] == (long)size * (size + 1) / 2, "iallreduce on a freed communicator: %ld",
          total[i]);
  CHECK(other == size, "allreduce on the next communicator: %ld", other);
  MPI_Comm_free(&next);
}

int main(int argc, char** argv) {
  int rank, size, failures = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 16) { /* the tests' fixed arrays */
    if (rank == 0) printf("coll: FAIL: at most 16 ranks\n");
    MPI_Finalize();
    return 2;
  }
  for (int i = 0; i < 10; ++i) MPI_Barrier(MPI_COMM_WORLD);
  test_bcast_reduce(rank, size, &failures);
  test_allreduce(rank, size, &failures);
  test_user_ops(rank, size, &failures);
  test_gather_scatter(rank, size, &failures);
  test_alltoall(rank, size, &failures);
  test_reduce_scatter_scan(rank, size, &failures);
  test_nonblocking(rank, size, &failures);
  test_empty(rank, size, &failures);
  test_derived(rank, size, &failures);
  test_self(rank, size, &failures);
  test_comms(rank, size, &failures);
  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0 && total == 0) printf("coll: ok %d ranks\n", size);
  MPI_Finalize();
  return failures != 0;
}
