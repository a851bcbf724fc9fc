/* Stress of the two-level collectives (docs/mpi.md "Collectives"): many
 * rounds of barrier, bcast, reduce and allreduce, each round's data unique
 * to it, on MPI_COMM_WORLD, a split and a dup, small and large (the
 * combining split in parts), interleaved with non-blocking collectives
 * (which run over point-to-point) and with ranks arriving in a different
 * order each round. A stale slot, a lost or doubled contribution, or two
 * rounds mixed shows as a wrong value. Prints "coll_shm: ok N ranks". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "FAIL rank %d: ", rank);           \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, "\n");                             \
      if (++*failures > 5) MPI_Abort(MPI_COMM_WORLD, 1); \
    }                                                    \
  } while (0)

enum { big = 5000 }; /* int64 elements: 40 KB, above the split size */

static int64_t value(int round, int rank, int i) {
  return (int64_t)round * 1000003 + (int64_t)rank * 7919 + i;
}

/* Some ranks do a little work first, a different set each round, so that
 * the last to arrive (the one that combines) changes. */
static void stagger(int round, int rank) {
  if ((round + rank) % 3 == 0) {
    volatile double x = 0;
    for (int i = 0; i < 2000 * ((round + rank) % 5); ++i) x += i;
  }
}

static void rounds(MPI_Comm comm, int world_rank, int* failures, int count_rounds) {
  const int rank_w = world_rank;
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int64_t* in = malloc(sizeof(int64_t) * big);
  int64_t* out = malloc(sizeof(int64_t) * big);
  for (int r = 0; r < count_rounds; ++r) {
    const int n = r % 4 == 3 ? big : 1 + r % 9;
    const int root = r % size;
    stagger(r, rank);
    for (int i = 0; i < n; ++i) in[i] = value(r, rank, i);
    MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_SUM, comm);
    for (int i = 0; i < n; ++i) {
      int64_t want = 0;
      for (int q = 0; q < size; ++q) want += value(r, q, i);
      if (out[i] != want) {
        CHECK(0, "round %d allreduce n %d [%d] = %lld, not %lld (world rank %d)", r, n, i,
              (long long)out[i], (long long)want, rank_w);
        break;
      }
    }
    stagger(r + 1, rank);
    for (int i = 0; i < n; ++i) in[i] = rank == root ? value(r, root, i) : -1;
    MPI_Bcast(in, n, MPI_INT64_T, root, comm);
    for (int i = 0; i < n; ++i)
      if (in[i] != value(r, root, i)) {
        CHECK(0, "round %d bcast root %d n %d [%d] = %lld", r, root, n, i, (long long)in[i]);
        break;
      }
    /* A non-blocking allreduce between two blocking collectives. */
    int64_t mine = value(r, rank, 0), sum = 0;
    MPI_Request req;
    MPI_Iallreduce(&mine, &sum, 1, MPI_INT64_T, MPI_SUM, comm, &req);
    for (int i = 0; i < n; ++i) in[i] = value(r, rank, i);
    MPI_Reduce(rank == root ? MPI_IN_PLACE : in, in, n, MPI_INT64_T, MPI_MAX, root, comm);
    if (rank == root)
      for (int i = 0; i < n; ++i)
        if (in[i] != value(r, size - 1, i)) {
          CHECK(0, "round %d reduce root %d n %d [%d] = %lld", r, root, n, i, (long long)in[i]);
          break;
        }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    int64_t want = 0;
    for (int q = 0; q < size; ++q) want += value(r, q, 0);
    CHECK(sum == want, "round %d iallreduce %lld, not %lld", r, (long long)sum, (long long)want);
    if (r % 7 == 0) MPI_Barrier(comm);
  }
  free(in);
  free(out);
}

/* Sums of doubles whose value depends on the order of adding: the same at
 * every rank (one result, copied out) and the same every time, whoever
 * arrives last (the order is fixed by the placement). Small (the tree)
 * and large (the parts). */
static void determinism(int rank, int* failures) {
  enum { n_small = 3, n_large = 3000 };
  const int sizes[2] = {n_small, n_large};
  double* in = malloc(sizeof(double) * n_large);
  double* first = malloc(sizeof(double) * n_large);
  double* out = malloc(sizeof(double) * n_large);
  for (int k = 0; k < 2; ++k) {
    const int n = sizes[k];
    for (int i = 0; i < n; ++i)
      in[i] = (rank % 2 ? 1e16 : 1.0) * (1 + (rank * 31 + i) % 7) * (rank % 3 == 1 ? -1 : 1) +
              0.1 * rank;
    for (int t = 0; t < 30; ++t) {
      stagger(t, rank);
      MPI_Allreduce(in, t == 0 ? first : out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      if (t > 0 && memcmp(first, out, sizeof(double) * (size_t)n) != 0) {
        CHECK(0, "allreduce of %d doubles differs between calls (call %d)", n, t);
        break;
      }
    }
    int64_t bits, lo, hi;
    memcpy(&bits, &first[n - 1], sizeof bits);
    MPI_Allreduce(&bits, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&bits, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "allreduce of %d doubles differs between ranks", n);
  }
  free(in);
  free(first);
  free(out);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, failures_ = 0;
  int* failures = &failures_;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int count_rounds = argc > 1 ? atoi(argv[1]) : 200;
  rounds(MPI_COMM_WORLD, rank, failures, count_rounds);
  /* Halves by parity: with a round-robin map each lies across PEs and
   * processes in another pattern than the world. */
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
  rounds(half, rank, failures, count_rounds / 2);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  /* Collectives of two communicators interleaved: each keeps its slots. */
  for (int r = 0; r < count_rounds / 4; ++r) {
    int64_t a = rank + r, b = 2 * rank + r, sa = 0, sb = 0;
    MPI_Allreduce(&a, &sa, 1, MPI_INT64_T, MPI_SUM, dup);
    MPI_Allreduce(&b, &sb, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    const int64_t base = (int64_t)size * (size - 1) / 2;
    CHECK(sa == base + (int64_t)size * r && sb == 2 * base + (int64_t)size * r,
          "round %d interleaved %lld %lld", r, (long long)sa, (long long)sb);
  }
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  determinism(rank, failures);
  int all = 0;
  MPI_Allreduce(&failures_, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all == 0) printf("coll_shm: ok %d ranks\n", size);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
