/* mpi-test coll_nb_hold: a non-blocking collective, and a persistent
 * request, keep what they were called with (docs/mpi.md "Collectives").
 *
 * Without an argument, at any number of ranks:
 *  - every non-blocking collective on a derived type (3 doubles at the even
 *    places of 6: gaps the operation must leave alone), the type freed by
 *    MPI_Type_free right after the call, before the helper that runs it
 *    has started; every value and every gap checked after MPI_Wait;
 *  - MPI_Ibcast whose freed type's handle is given to another type (of
 *    another layout) before the operation runs;
 *  - reductions on it with MPI_SUM (its doubles combined packed) and with a
 *    user op (on the type's own layout), scans, reduce_scatter(_block);
 *  - persistent sends and receives in a ring, their type and communicator
 *    freed after the init, started three times.
 *  Rank 0 prints "coll_nb_hold: ok N ranks".
 *
 * "returns": errors a non-blocking collective's helper raises (its own
 * block, or a block from another rank, longer than the receive) complete
 * its request with the error, reported under MPI_ERRORS_RETURN by
 * MPI_Wait, MPI_Test, MPI_Waitany (the class), MPI_Waitall, MPI_Testall,
 * MPI_Waitsome, MPI_Testsome (MPI_ERR_IN_STATUS, the class in the status),
 * MPI_Request_get_status (the status), and by a handler of the program's;
 * collectives work on afterwards. Rank 0 prints
 * "coll_nb_hold: ok returns N ranks".
 *
 * "fatal_wait", "fatal_waitall", "fatal_test": the same error under
 * MPI_ERRORS_ARE_FATAL ends the job in the completing call, naming it, the
 * rank, the collective and the problem (exit 3). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ranks share the program's globals (docs/mpi.md): each test takes the
 * rank, the size and the rank's failure count as arguments. */
#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      if (++*failures < 20) {                            \
        printf("coll_nb_hold: FAIL on rank %d: ", rank); \
        printf(__VA_ARGS__);                             \
        printf("\n");                                    \
      }                                                  \
    }                                                    \
  } while (0)

#define GAP (-7.0)
/* Doubles of one element of the type below (its extent) and values in it. */
#define EXT 6
#define PER 3

/* 3 doubles at places 0, 2, 4 of 6, committed. */
static MPI_Datatype evens(void) {
  MPI_Datatype v, t;
  MPI_Type_vector(PER, 1, 2, MPI_DOUBLE, &v);
  MPI_Type_create_resized(v, 0, EXT * (MPI_Aint)sizeof(double), &t);
  MPI_Type_free(&v);
  MPI_Type_commit(&t);
  return t;
}

static double val(int r, int j) {
  return r * 1000.0 + j;
}

/* n elements of the type: values val(r, first + j) at the data places, GAP
 * in the gaps. */
static void put(double* buf, int n, int r, int first) {
  for (int k = 0; k < n * EXT; ++k) buf[k] = k % 2 == 0 ? val(r, first + k / 2) : GAP;
}
static void blank(double* buf, int n) {
  for (int k = 0; k < n * EXT; ++k) buf[k] = GAP;
}
/* Value j of the n elements at buf (the packed order). */
static double at(const double* buf, int j) {
  return buf[2 * j];
}
/* Whether every gap of n elements at buf is untouched. */
static int gaps_ok(const double* buf, int n) {
  for (int k = 1; k < n * EXT; k += 2)
    if (buf[k] != GAP) return 0;
  return 1;
}

static void bigger(void* in, void* inout, int* len, MPI_Datatype* type) {
  /* The type's own layout: values at the even places of each element. */
  MPI_Aint lb, extent;
  MPI_Type_get_extent(*type, &lb, &extent);
  const int stride = (int)(extent / (MPI_Aint)sizeof(double));
  for (int e = 0; e < *len; ++e)
    for (int k = 0; k < stride; k += 2) {
      const double a = ((double*)in)[e * stride + k];
      double* b = (double*)inout + e * stride + k;
      if (a > *b) *b = a;
    }
}

static void wait_one(MPI_Request* q, int rank, int* failures, const char* what) {
  const int rc = MPI_Wait(q, MPI_STATUS_IGNORE);
  CHECK(rc == MPI_SUCCESS && *q == MPI_REQUEST_NULL, "%s: MPI_Wait gave %d", what, rc);
}

static void test_bcast(int rank, int size, int* failures) {
  const int n = 4, root = size - 1;
  double buf[4 * EXT];
  if (rank == root)
    put(buf, n, root, 0);
  else
    blank(buf, n);
  MPI_Datatype t = evens();
  MPI_Request q;
  MPI_Ibcast(buf, n, t, root, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  CHECK(t == MPI_DATATYPE_NULL, "MPI_Type_free left the handle");
  wait_one(&q, rank, failures, "ibcast");
  for (int j = 0; j < n * PER; ++j)
    CHECK(at(buf, j) == val(root, j), "ibcast value %d is %g", j, at(buf, j));
  CHECK(gaps_ok(buf, n), "ibcast wrote a gap");
}

/* The freed handle is given out again (once 1024 other freed ones wait:
 * datatype.hpp) to a type of another layout while the operation is
 * pending: types are made and freed, a window of them alive, so that the
 * freed handles go round (the ranks of the process share them) until the
 * old one names one of this rank's types again. The ranks take turns, and
 * a rank looks at its own handles only: a rank that read a freed handle of
 * its own (MPI_Type_get_envelope) while another rank churned could read
 * that rank's type as it freed it (ThreadSanitizer saw it). */
static void test_reused_handle(int rank, int size, int* failures) {
  enum { window = 1100, most = 100000 };
  const int n = 2, root = 0;
  double buf[2 * EXT];
  if (rank == root)
    put(buf, n, root, 100);
  else
    blank(buf, n);
  MPI_Datatype t = evens();
  const MPI_Datatype old = t;
  MPI_Request q;
  MPI_Ibcast(buf, n, t, root, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  /* 6 contiguous doubles: the size of 2 elements of evens, laid out
   * otherwise: the old handle read as one of them would put the data in
   * the gaps. */
  MPI_Datatype* alive = malloc(sizeof(MPI_Datatype) * window);
  int made = 0, reused = 0;
  for (int turn = 0; turn < size; ++turn) {
    if (turn == rank) {
      while (made < most && !reused) {
        MPI_Datatype* slot = &alive[made % window];
        if (made >= window) MPI_Type_free(slot);
        MPI_Type_contiguous(PER, MPI_DOUBLE, slot);
        MPI_Type_commit(slot);
        ++made;
        reused = *slot == old;
      }
      /* Freed in the turn: the next rank's old handle may be among them. */
      for (int i = 0; i < made && i < window; ++i) MPI_Type_free(&alive[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  CHECK(reused, "handle %d not given out again after %d types", old, made);
  wait_one(&q, rank, failures, "ibcast (reused handle)");
  for (int j = 0; j < n * PER; ++j)
    CHECK(at(buf, j) == val(root, 100 + j), "ibcast (reused handle) value %d is %g", j, at(buf, j));
  CHECK(gaps_ok(buf, n), "ibcast (reused handle) wrote a gap");
  free(alive);
}

static void test_gather_scatter(int rank, int size, int* failures) {
  const int n = 2, root = size / 2;
  double* all = malloc(sizeof(double) * (size_t)(size * n * EXT));
  double mine[2 * EXT];
  MPI_Datatype st = evens(), rt = evens();
  MPI_Request q;

  put(mine, n, rank, 0);
  blank(all, size * n);
  MPI_Igather(mine, n, st, all, n, rt, root, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "igather");
  if (rank == root) {
    for (int r = 0; r < size; ++r)
      for (int j = 0; j < n * PER; ++j)
        CHECK(at(all + r * n * EXT, j) == val(r, j), "igather block %d value %d", r, j);
    CHECK(gaps_ok(all, size * n), "igather wrote a gap");
  }

  /* Gatherv: block r of 1 + r % 2 elements, one element apart. */
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = 1 + r % 2;
    displs[r] = total;
    total += counts[r] + 1;
  }
  double* spread = malloc(sizeof(double) * (size_t)(total * EXT));
  blank(spread, total);
  put(mine, counts[rank], rank, 0);
  st = evens();
  rt = evens();
  MPI_Igatherv(mine, counts[rank], st, spread, counts, displs, rt, root, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "igatherv");
  if (rank == root) {
    for (int r = 0; r < size; ++r)
      for (int j = 0; j < counts[r] * PER; ++j)
        CHECK(at(spread + displs[r] * EXT, j) == val(r, j), "igatherv block %d value %d", r, j);
    CHECK(gaps_ok(spread, total), "igatherv wrote a gap");
    for (int r = 0; r < size; ++r) {
      const double* skipped = spread + (displs[r] + counts[r]) * EXT;
      CHECK(skipped[0] == GAP && skipped[2] == GAP, "igatherv wrote between blocks");
    }
  }

  /* Scatter and scatterv: the root's blocks out again. */
  for (int r = 0; r < size; ++r) put(all + r * n * EXT, n, r, 50);
  blank(mine, n);
  st = evens();
  rt = evens();
  MPI_Iscatter(all, n, st, mine, n, rt, root, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "iscatter");
  for (int j = 0; j < n * PER; ++j)
    CHECK(at(mine, j) == val(rank, 50 + j), "iscatter value %d is %g", j, at(mine, j));
  CHECK(gaps_ok(mine, n), "iscatter wrote a gap");

  for (int r = 0; r < size; ++r) put(spread + displs[r] * EXT, counts[r], r, 70);
  blank(mine, n);
  st = evens();
  rt = evens();
  MPI_Iscatterv(spread, counts, displs, st, mine, counts[rank], rt, root, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "iscatterv");
  for (int j = 0; j < counts[rank] * PER; ++j)
    CHECK(at(mine, j) == val(rank, 70 + j), "iscatterv value %d is %g", j, at(mine, j));
  CHECK(gaps_ok(mine, n), "iscatterv wrote a gap");

  /* Allgather and allgatherv: every rank gets every block. */
  put(mine, n, rank, 0);
  blank(all, size * n);
  st = evens();
  rt = evens();
  MPI_Iallgather(mine, n, st, all, n, rt, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "iallgather");
  for (int r = 0; r < size; ++r)
    for (int j = 0; j < n * PER; ++j)
      CHECK(at(all + r * n * EXT, j) == val(r, j), "iallgather block %d value %d", r, j);
  CHECK(gaps_ok(all, size * n), "iallgather wrote a gap");

  put(mine, counts[rank], rank, 0);
  blank(spread, total);
  st = evens();
  rt = evens();
  MPI_Iallgatherv(mine, counts[rank], st, spread, counts, displs, rt, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "iallgatherv");
  for (int r = 0; r < size; ++r)
    for (int j = 0; j < counts[r] * PER; ++j)
      CHECK(at(spread + displs[r] * EXT, j) == val(r, j), "iallgatherv block %d value %d", r, j);
  CHECK(gaps_ok(spread, total), "iallgatherv wrote a gap");
  free(spread);
  free(displs);
  free(counts);
  free(all);
}

static void test_alltoall(int rank, int size, int* failures) {
  const int n = 1;
  double* out = malloc(sizeof(double) * (size_t)(size * n * EXT));
  double* in = malloc(sizeof(double) * (size_t)(size * n * EXT));
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int* bytes = malloc(sizeof(int) * (size_t)size);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * (size_t)size);
  MPI_Datatype* rtypes = malloc(sizeof(MPI_Datatype) * (size_t)size);
  MPI_Request q;
  /* Block r of `out` goes to rank r: values val(rank, 10 r + j). */
  for (int r = 0; r < size; ++r) put(out + r * n * EXT, n, rank, 10 * r);

  MPI_Datatype st = evens(), rt = evens();
  blank(in, size * n);
  MPI_Ialltoall(out, n, st, in, n, rt, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "ialltoall");
  for (int r = 0; r < size; ++r)
    for (int j = 0; j < n * PER; ++j)
      CHECK(at(in + r * n * EXT, j) == val(r, 10 * rank + j), "ialltoall block %d value %d", r, j);
  CHECK(gaps_ok(in, size * n), "ialltoall wrote a gap");

  for (int r = 0; r < size; ++r) {
    counts[r] = n;
    displs[r] = r * n;
    bytes[r] = r * n * EXT * (int)sizeof(double);
  }
  st = evens();
  rt = evens();
  blank(in, size * n);
  MPI_Ialltoallv(out, counts, displs, st, in, counts, displs, rt, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  wait_one(&q, rank, failures, "ialltoallv");
  for (int r = 0; r < size; ++r)
    for (int j = 0; j < n * PER; ++j)
      CHECK(at(in + r * n * EXT, j) == val(r, 10 * rank + j), "ialltoallv block %d value %d", r, j);
  CHECK(gaps_ok(in, size * n), "ialltoallv wrote a gap");

  /* Alltoallw: one type for every peer, freed; the arrays overwritten
   * after the call too (the standard fixes them at the call). */
  st = evens();
  rt = evens();
  for (int r = 0; r < size; ++r) {
    types[r] = st;
    rtypes[r] = rt;
  }
  blank(in, size * n);
  MPI_Ialltoallw(out, counts, bytes, types, in, counts, bytes, rtypes, MPI_COMM_WORLD, &q);
  MPI_Type_free(&st);
  MPI_Type_free(&rt);
  for (int r = 0; r < size; ++r) {
    types[r] = rtypes[r] = MPI_DATATYPE_NULL;
    counts[r] = -1;
    bytes[r] = -1;
  }
  wait_one(&q, rank, failures, "ialltoallw");
  for (int r = 0; r < size; ++r)
    for (int j = 0; j < n * PER; ++j)
      CHECK(at(in + r * n * EXT, j) == val(r, 10 * rank + j), "ialltoallw block %d value %d", r, j);
  CHECK(gaps_ok(in, size * n), "ialltoallw wrote a gap");
  free(rtypes);
  free(types);
  free(bytes);
  free(displs);
  free(counts);
  free(in);
  free(out);
}

/* Sum over ranks lo..hi-1 of val(r, j). */
static double sum_of(int lo, int hi, int j) {
  double s = 0;
  for (int r = lo; r < hi; ++r) s += val(r, j);
  return s;
}

static void test_reductions(int rank, int size, int* failures) {
  enum { n = 2 };
  double in[n * EXT], res[n * EXT];
  MPI_Request q;
  MPI_Op max;
  MPI_Op_create(bigger, 1, &max);

  for (int root = 0; root<size; root += size> 2 ? size - 1 : 1) {
    put(in, n, rank, 0);
    blank(res, n);
    MPI_Datatype t = evens();
    MPI_Ireduce(in, res, n, t, MPI_SUM, root, MPI_COMM_WORLD, &q);
    MPI_Type_free(&t);
    wait_one(&q, rank, failures, "ireduce");
    if (rank == root) {
      for (int j = 0; j < n * PER; ++j)
        CHECK(at(res, j) == sum_of(0, size, j), "ireduce (root %d) value %d is %g", root, j,
              at(res, j));
      CHECK(gaps_ok(res, n), "ireduce wrote a gap");
    }
  }

  put(in, n, rank, 0);
  blank(res, n);
  MPI_Datatype t = evens();
  MPI_Iallreduce(in, res, n, t, MPI_SUM, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  wait_one(&q, rank, failures, "iallreduce");
  for (int j = 0; j < n * PER; ++j)
    CHECK(at(res, j) == sum_of(0, size, j), "iallreduce value %d is %g", j, at(res, j));
  CHECK(gaps_ok(res, n), "iallreduce wrote a gap");

  /* A user op: it gets the data laid out as the type lays it out, and the
   * type to read its extent from, after the program's handle is freed. */
  blank(res, n);
  t = evens();
  MPI_Iallreduce(in, res, n, t, max, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  MPI_Op_free(&max);
  wait_one(&q, rank, failures, "iallreduce (user op)");
  for (int j = 0; j < n * PER; ++j)
    CHECK(at(res, j) == val(size - 1, j), "iallreduce (user op) value %d is %g", j, at(res, j));

  /* Scan and exscan. */
  blank(res, n);
  t = evens();
  MPI_Iscan(in, res, n, t, MPI_SUM, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  wait_one(&q, rank, failures, "iscan");
  for (int j = 0; j < n * PER; ++j)
    CHECK(at(res, j) == sum_of(0, rank + 1, j), "iscan value %d is %g", j, at(res, j));
  CHECK(gaps_ok(res, n), "iscan wrote a gap");

  blank(res, n);
  t = evens();
  MPI_Iexscan(in, res, n, t, MPI_SUM, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  wait_one(&q, rank, failures, "iexscan");
  for (int j = 0; rank > 0 && j < n * PER; ++j)
    CHECK(at(res, j) == sum_of(0, rank, j), "iexscan value %d is %g", j, at(res, j));
  if (rank == 0)
    for (int k = 0; k < n * EXT; ++k) CHECK(res[k] == GAP, "iexscan wrote rank 0's recvbuf");
  CHECK(gaps_ok(res, n), "iexscan wrote a gap");

  /* Reduce_scatter_block (one element each) and reduce_scatter (rank r
   * gets 1 + r % 2). */
  double* all = malloc(sizeof(double) * (size_t)(2 * size * EXT));
  int* counts = malloc(sizeof(int) * (size_t)size);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = 1 + r % 2;
    total += counts[r];
  }
  put(all, size, rank, 0);
  blank(res, n);
  t = evens();
  MPI_Ireduce_scatter_block(all, res, 1, t, MPI_SUM, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  wait_one(&q, rank, failures, "ireduce_scatter_block");
  for (int j = 0; j < PER; ++j)
    CHECK(at(res, j) == sum_of(0, size, PER * rank + j), "ireduce_scatter_block value %d is %g", j,
          at(res, j));
  CHECK(gaps_ok(res, n), "ireduce_scatter_block wrote a gap");

  put(all, total, rank, 0);
  blank(res, n);
  int first = 0;
  for (int r = 0; r < rank; ++r) first += counts[r];
  t = evens();
  MPI_Ireduce_scatter(all, res, counts, t, MPI_SUM, MPI_COMM_WORLD, &q);
  MPI_Type_free(&t);
  wait_one(&q, rank, failures, "ireduce_scatter");
  for (int j = 0; j < counts[rank] * PER; ++j)
    CHECK(at(res, j) == sum_of(0, size, PER * first + j), "ireduce_scatter value %d is %g", j,
          at(res, j));
  CHECK(gaps_ok(res, n), "ireduce_scatter wrote a gap");
  free(counts);
  free(all);
}

/* A ring of persistent requests whose type and communicator the program
 * frees after the init, started three times (standard, synchronous,
 * standard), then freed. */
static void test_persistent(int rank, int size, int* failures) {
  enum { n = 2 };
  double out[n * EXT], in[n * EXT];
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Datatype t = evens();
  MPI_Request q[4];
  MPI_Recv_init(in, n, t, prev, 5, comm, &q[0]);
  MPI_Send_init(out, n, t, next, 5, comm, &q[1]);
  MPI_Recv_init(in, n, t, prev, 6, comm, &q[2]);
  MPI_Ssend_init(out, n, t, next, 6, comm, &q[3]);
  MPI_Type_free(&t);
  MPI_Comm_free(&comm);
  /* Another communicator and other types take the freed handles. */
  MPI_Comm other;
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  MPI_Datatype u;
  MPI_Type_contiguous(2 * PER, MPI_DOUBLE, &u);
  MPI_Type_commit(&u);
  for (int round = 0; round < 3; ++round) {
    MPI_Request* pair = round == 1 ? &q[2] : &q[0];
    put(out, n, rank, 10 * round);
    blank(in, n);
    MPI_Startall(2, pair);
    const int rc = MPI_Waitall(2, pair, MPI_STATUSES_IGNORE);
    CHECK(rc == MPI_SUCCESS && pair[0] != MPI_REQUEST_NULL, "persistent round %d: %d", round, rc);
    for (int j = 0; j < n * PER; ++j)
      CHECK(at(in, j) == val(prev, 10 * round + j), "persistent round %d value %d is %g", round, j,
            at(in, j));
    CHECK(gaps_ok(in, n), "persistent round %d wrote a gap", round);
  }
  for (int i = 0; i < 4; ++i) MPI_Request_free(&q[i]);
  MPI_Type_free(&u);
  MPI_Comm_free(&other);
}

/* An Igatherv to rank 0 whose blocks (2 ints) are longer than the root's
 * receives (1 int) from every other rank; on one rank, its own block. */
static void bad_gather(int rank, int size, MPI_Request* q, int* send, int* recv, int* counts,
                       int* displs) {
  for (int r = 0; r < size; ++r) {
    counts[r] = r == 0 && size > 1 ? 2 : 1;
    displs[r] = 2 * r;
  }
  send[0] = send[1] = rank;
  MPI_Igatherv(send, 2, MPI_INT, recv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, q);
}

static void to_other(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  if (*code == MPI_ERR_TRUNCATE) *code = MPI_ERR_OTHER;
}

/* Under MPI_ERRORS_RETURN: what each completion call gives for it. */
static void test_returns(int rank, int size, int* failures) {
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int* recv = malloc(sizeof(int) * (size_t)(2 * size));
  int send[2];
  const int failing = rank == 0;
  const int want = failing ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  const int want_in = failing ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
  MPI_Request q[2];
  MPI_Status st[2];
  int rc, flag, index, outcount, indices[2];
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  rc = MPI_Wait(&q[0], &st[0]);
  CHECK(rc == want && q[0] == MPI_REQUEST_NULL, "MPI_Wait gave %d", rc);
  CHECK(!failing || st[0].MPI_ERROR == MPI_ERR_TRUNCATE, "MPI_Wait's status has %d",
        st[0].MPI_ERROR);

  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  do rc = MPI_Test(&q[0], &flag, &st[0]);
  while (rc == MPI_SUCCESS && !flag);
  CHECK(rc == want && q[0] == MPI_REQUEST_NULL, "MPI_Test gave %d", rc);

  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  q[1] = MPI_REQUEST_NULL;
  rc = MPI_Waitany(2, q, &index, &st[0]);
  CHECK(rc == want && index == 0 && q[0] == MPI_REQUEST_NULL, "MPI_Waitany gave %d, index %d", rc,
        index);

  MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
  bad_gather(rank, size, &q[1], send, recv, counts, displs);
  rc = MPI_Waitall(2, q, st);
  CHECK(rc == want_in, "MPI_Waitall gave %d", rc);
  CHECK(st[0].MPI_ERROR == MPI_SUCCESS && st[1].MPI_ERROR == want,
        "MPI_Waitall's statuses have %d and %d", st[0].MPI_ERROR, st[1].MPI_ERROR);

  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  do rc = MPI_Testall(1, q, &flag, st);
  while (rc == MPI_SUCCESS && !flag);
  CHECK(rc == want_in && st[0].MPI_ERROR == want, "MPI_Testall gave %d, status %d", rc,
        st[0].MPI_ERROR);

  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  rc = MPI_Waitsome(1, q, &outcount, indices, st);
  CHECK(rc == want_in && outcount == 1 && indices[0] == 0 && st[0].MPI_ERROR == want,
        "MPI_Waitsome gave %d, %d done, status %d", rc, outcount, st[0].MPI_ERROR);

  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  do rc = MPI_Testsome(1, q, &outcount, indices, st);
  while (rc == MPI_SUCCESS && outcount == 0);
  CHECK(rc == want_in && outcount == 1 && st[0].MPI_ERROR == want,
        "MPI_Testsome gave %d, %d done, status %d", rc, outcount, st[0].MPI_ERROR);

  /* MPI_Request_get_status leaves the request; the wait reports it. */
  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  do rc = MPI_Request_get_status(q[0], &flag, &st[0]);
  while (rc == MPI_SUCCESS && !flag);
  CHECK(rc == MPI_SUCCESS && st[0].MPI_ERROR == want, "MPI_Request_get_status gave %d, status %d",
        rc, st[0].MPI_ERROR);
  rc = MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(rc == want, "MPI_Wait after MPI_Request_get_status gave %d", rc);

  /* A handler of the program's: called with the class, the wait returns
   * what it leaves. */
  MPI_Errhandler mine;
  MPI_Comm_create_errhandler(to_other, &mine);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine);
  bad_gather(rank, size, &q[0], send, recv, counts, displs);
  rc = MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(rc == (failing ? MPI_ERR_OTHER : MPI_SUCCESS), "MPI_Wait under a handler gave %d", rc);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&mine);

  /* Blocks of 80 KiB, which senders of this process lend (docs/mpi.md,
   * "Messages"): the failed gather must still take the blocks that come
   * after it failed, or their senders would wait for ever. Ranks from 2
   * call it once rank 0's has failed on rank 1's block. */
  enum { big = 20000 };
  int* bsend = malloc(sizeof(int) * big);
  int* brecv = malloc(sizeof(int) * (size_t)(big * size));
  for (int i = 0; i < big; ++i) bsend[i] = rank;
  for (int r = 0; r < size; ++r) {
    counts[r] = r == 0 && size > 1 ? big : big / 2;
    displs[r] = big * r;
  }
  int token = 0;
  if (rank >= 2) MPI_Recv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Igatherv(bsend, big, MPI_INT, brecv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &q[0]);
  rc = MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(rc == want, "MPI_Wait of a gather of large blocks gave %d", rc);
  if (rank == 0)
    for (int r = 2; r < size; ++r) MPI_Send(&token, 1, MPI_INT, r, 99, MPI_COMM_WORLD);
  free(brecv);
  free(bsend);

  /* Collectives go on: blocking and non-blocking, on the same communicator. */
  int sum = 0, isum = 0, one = 1;
  MPI_Iallreduce(&one, &isum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
  rc = MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  CHECK(rc == MPI_SUCCESS && isum == size, "MPI_Iallreduce after the errors: %d, %d", rc, isum);
  rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(rc == MPI_SUCCESS && sum == size, "MPI_Allreduce after the errors: %d, %d", rc, sum);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  free(recv);
  free(displs);
  free(counts);
}

/* The same error under MPI_ERRORS_ARE_FATAL, in the call `how` names. */
static void fatal(int rank, int size, const char* how) {
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int* recv = malloc(sizeof(int) * (size_t)(2 * size));
  int send[2], flag = 0;
  MPI_Request q[2];
  if (strcmp(how, "fatal_waitall") == 0) {
    MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
    bad_gather(rank, size, &q[1], send, recv, counts, displs);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  } else {
    bad_gather(rank, size, &q[0], send, recv, counts, displs);
    if (strcmp(how, "fatal_test") == 0)
      while (!flag) MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
    else
      MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  }
  free(recv);
  free(displs);
  free(counts);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* what = argc > 1 ? argv[1] : "";
  if (what[0] == 0) {
    test_bcast(rank, size, &failures);
    test_reused_handle(rank, size, &failures);
    test_gather_scatter(rank, size, &failures);
    test_alltoall(rank, size, &failures);
    test_reductions(rank, size, &failures);
    test_persistent(rank, size, &failures);
  } else if (strcmp(what, "returns") == 0) {
    test_returns(rank, size, &failures);
  } else {
    fatal(rank, size, what);
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all == 0)
    printf("coll_nb_hold: ok %s%s%d ranks\n", what, what[0] ? " " : "", size);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
