/* omp-test doacross: ordered(n) loops with `ordered depend(sink: ...)` and
 * `ordered depend(source)` (plain C).
 *
 * Every iteration marks itself done with an atomic store just before its
 * depend(source), after some work; after its depend(sink) waits, it reads the
 * marks of the iterations its sinks name. A wait that returned too early (or
 * did nothing) leaves a mark unread: "ran before its sink had posted". Each
 * iteration also computes a recurrence from its sinks' results, compared
 * with a serial run, and counts its executions.
 *
 * Covered: 1-D ordered(1) with sink i-1 under schedule(static), (static, 1),
 * (static, 7), (dynamic, 3), (guided), runtime (dynamic, guided, static,
 * static chunk, auto through omp_set_schedule), a team of 8 (more threads
 * than PEs in the omp.weft runs), a team of 1, a loop repeated more times
 * than a team keeps work shares; 2-D ordered(2) with a decreasing, strided
 * inner loop and sinks some of which fall outside the space; 3-D ordered(3);
 * an unsigned long long loop; collapse(2) ordered(3); a doacross loop in
 * nested teams; and the entry points called directly with a space whose
 * counts need more than 64 bits to pack (static and dynamic). Sinks outside
 * the space are left to GCC, which skips their waits (libgomp's waits do not
 * check).
 */
#include <limits.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

static void work(long i) {
  for (long k = 0; k < 30 + (i % 7) * 30; ++k) __asm__ __volatile__("" ::: "memory");
}

static int sink_done(const int* mark) {
  return __atomic_load_n(mark, __ATOMIC_ACQUIRE);
}
static void mark_done(int* mark) {
  __atomic_store_n(mark, 1, __ATOMIC_RELEASE);
}

/* ---- 1-D: a[i] from a[i - 1] ------------------------------------------------ */

enum { N1 = 500 };
static long a1[N1];
static int done1[N1], runs1[N1];

static long next1(long prev, long i) {
  return (prev * 3 + i) % 1000003;
}

static void step1(const char* label, long i) {
  count_hit(&runs1[i]);
  if (i > 0) {
    check_true(sink_done(&done1[i - 1]), "%s: iteration %ld ran before its sink i-1 had posted",
               label, i);
    a1[i] = next1(a1[i - 1], i);
  } else {
    a1[0] = 1;
  }
  work(i);
  mark_done(&done1[i]);
}

static void begin1(void) {
  memset(a1, 0, sizeof a1);
  memset(done1, 0, sizeof done1);
  memset(runs1, 0, sizeof runs1);
}

static void end1(const char* label) {
  check_counts(runs1, N1, 1, "%s", label);
  long want = 1;
  for (long i = 1; i < N1; ++i) want = next1(want, i);
  CHECK_EQ(a1[N1 - 1], want, "%s: the recurrence's last value", label);
}

/* The schedule clause is part of the pragma, so each schedule is a loop of
 * its own: `par` the parallel directive, the rest the loop's. The threads
 * meet at a barrier first, so that none has run its share before another
 * starts (a wait that does nothing would then go unseen). */
#define LOOP_1D(label, par, ...)                                                   \
  do {                                                                             \
    begin1();                                                                      \
    _Pragma(par) {                                                                 \
      probe_here();                                                                \
      _Pragma("omp barrier") _Pragma(#__VA_ARGS__) for (long i = 0; i < N1; ++i) { \
        _Pragma("omp ordered depend(sink : i - 1)") step1(label, i);               \
        _Pragma("omp ordered depend(source)")                                      \
      }                                                                            \
    }                                                                              \
    end1(label);                                                                   \
  } while (0)

static void test_one_dimension(void) {
  LOOP_1D("static", "omp parallel", omp for ordered(1) schedule(static));
  LOOP_1D("static,1", "omp parallel", omp for ordered(1) schedule(static, 1));
  LOOP_1D("static,7", "omp parallel", omp for ordered(1) schedule(static, 7));
  LOOP_1D("dynamic,3", "omp parallel", omp for ordered(1) schedule(dynamic, 3));
  LOOP_1D("guided", "omp parallel", omp for ordered(1) schedule(guided));
  LOOP_1D("8 threads, dynamic", "omp parallel num_threads(8)", omp for ordered(1) schedule(dynamic));
  LOOP_1D("8 threads, static", "omp parallel num_threads(8)", omp for ordered(1) schedule(static));
  LOOP_1D("1 thread", "omp parallel num_threads(1)", omp for ordered(1) schedule(dynamic));

  static const struct {
    omp_sched_t kind;
    int chunk;
    const char* label;
  } runtime[] = {{omp_sched_dynamic, 2, "runtime dynamic,2"},
                 {omp_sched_guided, 3, "runtime guided,3"},
                 {omp_sched_static, 0, "runtime static"},
                 {omp_sched_static, 5, "runtime static,5"},
                 {omp_sched_auto, 0, "runtime auto"}};
  omp_sched_t saved_kind;
  int saved_chunk;
  omp_get_schedule(&saved_kind, &saved_chunk);
  for (unsigned r = 0; r < sizeof runtime / sizeof runtime[0]; ++r) {
    omp_set_schedule(runtime[r].kind, runtime[r].chunk);
    LOOP_1D(runtime[r].label, "omp parallel", omp for ordered(1) schedule(runtime));
  }
  omp_set_schedule(saved_kind, saved_chunk);

  /* More loops than a team keeps work shares at once, each a doacross one,
   * in one region (nowait: a fast thread runs ahead into the next ones). */
  enum { REPEATS = 20, M = 32 };
  static long rep[REPEATS][M];
  static int rep_done[REPEATS][M];
  memset(rep, 0, sizeof rep);
  memset(rep_done, 0, sizeof rep_done);
#pragma omp parallel
  {
    probe_here();
    for (int r = 0; r < REPEATS; ++r) {
#pragma omp for ordered(1) schedule(dynamic) nowait
      for (int i = 0; i < M; ++i) {
#pragma omp ordered depend(sink : i - 1)
        if (i > 0) {
          check_true(sink_done(&rep_done[r][i - 1]),
                     "repeated loop %d: iteration %d ran before i-1 had posted", r, i);
          rep[r][i] = rep[r][i - 1] + i;
        }
        mark_done(&rep_done[r][i]);
#pragma omp ordered depend(source)
      }
    }
  }
  for (int r = 0; r < REPEATS; ++r) CHECK_EQ(rep[r][M - 1], (long)M * (M - 1) / 2, "repeat %d", r);
}

/* ---- 2-D: rows i = 1, 3, 5, ...; columns j = C-1 down to 0 ------------------ */

enum { R2 = 40, C2 = 50 };
static long a2[2 * R2][C2];
static int done2[2 * R2][C2], runs2[2 * R2 * C2];

/* An element from the ones its sinks name, 0 outside the space. Row i - 2
 * comes before row i; in a row, column j + 1 comes before column j. */
static long at2(int i, int j) {
  return i >= 1 && i < 2 * R2 && j >= 0 && j < C2 ? a2[i][j] : 0;
}
static long next2(int i, int j) {
  return (at2(i - 2, j) * 7 + at2(i, j + 1) * 3 + at2(i - 2, j - 1) + at2(i - 4, j + 3) + i + j) %
         1000003;
}

static void check_sink2(int i, int j) {
  if (i >= 1 && j >= 0 && j < C2)
    check_true(sink_done(&done2[i][j]), "2-D: sink (%d, %d) had not posted", i, j);
}

static void test_two_dimensions(void) {
  memset(a2, 0, sizeof a2);
  memset(done2, 0, sizeof done2);
  memset(runs2, 0, sizeof runs2);
#pragma omp parallel for ordered(2) schedule(dynamic)
  for (int i = 1; i < 2 * R2; i += 2)
    for (int j = C2 - 1; j >= 0; --j) {
      /* (i - 2, j - 1) is outside at j = 0, (i - 4, j + 3) at the first rows
       * and last columns, (i, j + 1) at j = C2 - 1. */
#pragma omp ordered depend(sink                                                  \
                           : i - 2, j) depend(sink                               \
                                              : i, j + 1) depend(sink            \
                                                                 : i - 2, j - 1) \
    depend(sink                                                                  \
           : i - 4, j + 3)
      count_hit(&runs2[(i / 2) * C2 + j]);
      check_sink2(i - 2, j);
      check_sink2(i, j + 1);
      check_sink2(i - 2, j - 1);
      check_sink2(i - 4, j + 3);
      a2[i][j] = next2(i, j);
      work(i + j);
      mark_done(&done2[i][j]);
#pragma omp ordered depend(source)
    }
  check_counts(runs2, R2 * C2, 1, "2-D");
  static long want[2 * R2][C2];
  memcpy(want, a2, sizeof a2);
  memset(a2, 0, sizeof a2);
  for (int i = 1; i < 2 * R2; i += 2)
    for (int j = C2 - 1; j >= 0; --j) a2[i][j] = next2(i, j);
  CHECK_EQ(memcmp(want, a2, sizeof a2), 0, "2-D: the recurrence against a serial run");
}

/* ---- 3-D ------------------------------------------------------------------- */

enum { X3 = 8, Y3 = 7, Z3 = 9 };
static long a3[X3][Y3][Z3];
static int done3[X3][Y3][Z3], runs3[X3 * Y3 * Z3];

static long at3(int i, int j, int k) {
  return i >= 0 && i < X3 && j >= 0 && j < Y3 && k >= 0 && k < Z3 ? a3[i][j][k] : 0;
}
static long next3(int i, int j, int k) {
  return (at3(i - 1, j, k) + 2 * at3(i, j - 1, k) + 5 * at3(i, j, k - 1) +
          at3(i - 1, j + 1, k - 1) + 1) %
         1000003;
}
static void check_sink3(int i, int j, int k) {
  if (i >= 0 && i < X3 && j >= 0 && j < Y3 && k >= 0 && k < Z3)
    check_true(sink_done(&done3[i][j][k]), "3-D: sink (%d, %d, %d) had not posted", i, j, k);
}

/* The body of the 3-D loops, between their sink waits and their post:
 * every sink must have posted, and this cell's value follows from them. */
static void cell3(int i, int j, int k, int with_work) {
  count_hit(&runs3[(i * Y3 + j) * Z3 + k]);
  check_sink3(i - 1, j, k);
  check_sink3(i, j - 1, k);
  check_sink3(i, j, k - 1);
  check_sink3(i - 1, j + 1, k - 1);
  a3[i][j][k] = next3(i, j, k);
  if (with_work) work(k);
  mark_done(&done3[i][j][k]);
}

static void begin3(void) {
  memset(a3, 0, sizeof a3);
  memset(done3, 0, sizeof done3);
  memset(runs3, 0, sizeof runs3);
}

/* Every cell ran once, and the last one's value is a serial run's. */
static void end3(const char* what) {
  check_counts(runs3, X3 * Y3 * Z3, 1, "%s", what);
  long last = a3[X3 - 1][Y3 - 1][Z3 - 1];
  memset(a3, 0, sizeof a3);
  for (int i = 0; i < X3; ++i)
    for (int j = 0; j < Y3; ++j)
      for (int k = 0; k < Z3; ++k) a3[i][j][k] = next3(i, j, k);
  CHECK_EQ(last, a3[X3 - 1][Y3 - 1][Z3 - 1], "%s: the recurrence's last value", what);
}

static void test_three_dimensions(void) {
  begin3();
#pragma omp parallel for ordered(3) schedule(static, 1)
  for (int i = 0; i < X3; ++i)
    for (int j = 0; j < Y3; ++j)
      for (int k = 0; k < Z3; ++k) {
#pragma omp ordered depend(sink                                                       \
                           : i - 1, j, k) depend(sink                                 \
                                                 : i, j - 1, k) depend(sink           \
                                                                       : i, j, k - 1) \
    depend(sink                                                                       \
           : i - 1, j + 1, k - 1)
        cell3(i, j, k, 0);
#pragma omp ordered depend(source)
      }
  end3("3-D");
}

/* ---- collapse(2) ordered(3): the first two dimensions shared as one ---------- */

static void test_collapse(void) {
  begin3();
#pragma omp parallel for collapse(2) ordered(3) schedule(guided)
  for (int i = 0; i < X3; ++i)
    for (int j = 0; j < Y3; ++j)
      for (int k = 0; k < Z3; ++k) {
#pragma omp ordered depend(sink                                                       \
                           : i - 1, j, k) depend(sink                                 \
                                                 : i, j - 1, k) depend(sink           \
                                                                       : i, j, k - 1) \
    depend(sink                                                                       \
           : i - 1, j + 1, k - 1)
        cell3(i, j, k, 1);
#pragma omp ordered depend(source)
      }
  end3("collapse(2) ordered(3)");
}

/* ---- unsigned long long: iterations beyond LONG_MAX ------------------------- */

static void test_ull(void) {
  begin1();
  /* Not a constant: GCC then cannot tell that the trips fit a long. */
  volatile unsigned long long top = ULLONG_MAX;
  const unsigned long long base = top - 3ull * N1;
#pragma omp parallel
  {
#pragma omp barrier
#pragma omp for ordered(1) schedule(static, 3)
    for (unsigned long long u = base; u < base + 3ull * N1; u += 3) {
#pragma omp ordered depend(sink : u - 3)
      step1("unsigned long long", (long)((u - base) / 3));
#pragma omp ordered depend(source)
    }
  }
  end1("unsigned long long");
}

/* ---- nested teams: each outer thread runs its own doacross loop ------------- */

enum { NEST = 2, NN = 200 };
static long an[NEST][NN];
static int donen[NEST][NN];

static void test_nested(void) {
  memset(an, 0, sizeof an);
  memset(donen, 0, sizeof donen);
  int saved = omp_get_max_active_levels();
  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(NEST)
  {
    int o = omp_get_thread_num();
#pragma omp parallel for ordered(1) schedule(dynamic, 2) num_threads(3)
    for (int i = 0; i < NN; ++i) {
#pragma omp ordered depend(sink : i - 1)
      probe_here();
      if (i > 0) {
        check_true(sink_done(&donen[o][i - 1]), "nested %d: iteration %d ran before i-1 had posted",
                   o, i);
        an[o][i] = an[o][i - 1] + i + o;
      }
      work(i);
      mark_done(&donen[o][i]);
#pragma omp ordered depend(source)
    }
  }
  omp_set_max_active_levels(saved);
  for (int o = 0; o < NEST; ++o)
    CHECK_EQ(an[o][NN - 1], (long)NN * (NN - 1) / 2 + (long)o * (NN - 1), "nested team %d", o);
}

/* ---- the entry points directly: a space too large to pack into a word ------ */

/* GCC 12's ABI, declared here as GCC's own lowering calls it. */
bool GOMP_loop_doacross_static_start(unsigned, long*, long, long*, long*);
bool GOMP_loop_doacross_dynamic_start(unsigned, long*, long, long*, long*);
bool GOMP_loop_static_next(long*, long*);
bool GOMP_loop_dynamic_next(long*, long*);
void GOMP_loop_end(void);
void GOMP_doacross_post(long*);
void GOMP_doacross_wait(long, ...);

/* counts {W, 2^40, 2^40}: 3 + 40 + 40 bits. Each outer iteration posts three
 * inner vectors, in order, each after waiting for the same one of the
 * previous outer iteration. */
enum { W = 24, STEPS = 3 };
static const long big = 1L << 40;
static int donew[W][STEPS];

static void wide_loop(bool dynamic) {
  long counts[3] = {W, big, big};
  const long inner[STEPS][2] = {{0, 5}, {big / 2, 0}, {big - 1, big - 1}};
  long lo, hi;
  bool more = dynamic ? GOMP_loop_doacross_dynamic_start(3, counts, 1, &lo, &hi)
                      : GOMP_loop_doacross_static_start(3, counts, 0, &lo, &hi);
  while (more) {
    for (long i = lo; i < hi; ++i)
      for (int s = 0; s < STEPS; ++s) {
        /* As GCC lowers a sink: no wait for a vector outside the space. */
        if (i > 0) GOMP_doacross_wait(i - 1, inner[s][0], inner[s][1]);
        if (i > 0)
          check_true(sink_done(&donew[i - 1][s]),
                     "wide %s: (%ld, step %d) ran before its sink had posted",
                     dynamic ? "dynamic" : "static", i, s);
        work(i);
        mark_done(&donew[i][s]);
        long v[3] = {i, inner[s][0], inner[s][1]};
        GOMP_doacross_post(v);
      }
    more = dynamic ? GOMP_loop_dynamic_next(&lo, &hi) : GOMP_loop_static_next(&lo, &hi);
  }
  GOMP_loop_end();
}

static void test_wide(void) {
  for (int dynamic = 0; dynamic < 2; ++dynamic) {
    memset(donew, 0, sizeof donew);
#pragma omp parallel
    wide_loop(dynamic);
    for (int i = 0; i < W; ++i)
      for (int s = 0; s < STEPS; ++s)
        CHECK_EQ(donew[i][s], 1, "wide %s: (%d, step %d) ran", dynamic ? "dynamic" : "static", i,
                 s);
  }
}

int main(void) {
  test_begin("doacross");
  test_one_dimension();
  test_two_dimensions();
  test_three_dimensions();
  test_collapse();
  test_ull();
  test_nested();
  test_wide();
  return test_end();
}
