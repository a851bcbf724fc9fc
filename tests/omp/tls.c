/* omp-test tls: every OpenMP thread has thread-local storage of its own
 * (plain C).
 *
 * GCC keeps `#pragma omp threadprivate` variables in thread-local storage
 * (__thread), and so do libraries and the C library (errno): an OpenMP
 * runtime must give each thread of a team its own copies, whatever the team
 * size and however many cores or workers it has. Checked, for teams of
 * 1, 2, 4, 8 and 16 threads, many times each:
 *  - isolation: each thread fills a threadprivate array (a bucket-pointer
 *    array as an integer sort keeps), a plain __thread variable, errno and
 *    the per-thread state of a shared library (tls_lib.c: the dynamic TLS
 *    model) with values of its own, then meets barriers, a critical
 *    section and taskyields (where a runtime may switch threads), and
 *    checks that nothing changed;
 *  - distinct addresses: within a team, no two threads see the same
 *    address for any of these variables;
 *  - persistence: between two regions of the same size (not nested,
 *    dyn-var false), each thread finds the threadprivate value it left
 *    (OpenMP 5.0, 2.21.2);
 *  - copyin and copyprivate of threadprivate variables;
 *  - nested teams (max-active-levels 2): outer 2 and 4, inner 2 and 4.
 * --rounds=N sets the regions per team size (default 40). OMPTEST_LOAD=k
 * adds k spinning processes for the whole run (load.h).
 */
#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "load.h"
#include "tls_lib.h"

enum { TP_WORDS = 256, MAX_TEAM = 16, MAX_NESTED = 16 };

static long tp_buckets[TP_WORDS];
#pragma omp threadprivate(tp_buckets)
static long tp_owner;
#pragma omp threadprivate(tp_owner)
static int tp_copied;
#pragma omp threadprivate(tp_copied)
static __thread long plain_tls;

static const int team_sizes[] = {1, 2, 4, 8, 16};
enum { NUM_SIZES = sizeof team_sizes / sizeof team_sizes[0] };

static long pattern(long salt, int id, int i) { return salt * 1000003L + id * 7919L + i; }

/* Fills every per-thread variable of the calling thread with `salt`'s
 * values for thread `id`. */
static void fill(long salt, int id) {
  for (int i = 0; i < TP_WORDS; ++i) tp_buckets[i] = pattern(salt, id, i);
  plain_tls = pattern(salt, id, -1);
  tls_lib_set(pattern(salt, id, -2));
  errno = 1000 + id;
}

/* Counts the per-thread variables that lost the values fill() gave them. */
static int damaged(long salt, int id) {
  int bad = 0;
  for (int i = 0; i < TP_WORDS; ++i)
    if (tp_buckets[i] != pattern(salt, id, i)) {
      ++bad;
      break;
    }
  if (plain_tls != pattern(salt, id, -1)) ++bad;
  if (tls_lib_get() != pattern(salt, id, -2)) ++bad;
  if (errno != 1000 + id) ++bad;
  return bad;
}

/* Where the calling thread's copies live. */
struct where {
  uintptr_t buckets, plain, lib, err;
};

static void test_isolation(int n, int rounds) {
  int bad_threads = 0, bad_addresses = 0, bad_team = 0;
  for (int r = 0; r < rounds; ++r) {
    struct where seen[MAX_TEAM];
    memset(seen, 0, sizeof seen);
    const long salt = (long)n * 100000 + r;
#pragma omp parallel num_threads(n)
    {
      probe_here();
      const int id = omp_get_thread_num();
      if (omp_get_num_threads() != n) __atomic_store_n(&bad_team, 1, __ATOMIC_RELAXED);
      fill(salt, id);
      seen[id].buckets = (uintptr_t)&tp_buckets[0];
      seen[id].plain = (uintptr_t)&plain_tls;
      seen[id].lib = (uintptr_t)tls_lib_address();
      seen[id].err = (uintptr_t)&errno;
      int bad = 0;
#pragma omp barrier
      bad += damaged(salt, id);
#pragma omp critical
      bad += damaged(salt, id);
#pragma omp taskyield
#pragma omp barrier
      bad += damaged(salt, id);
#pragma omp master
      {
        for (int a = 0; a < n; ++a)
          for (int b = 0; b < a; ++b)
            if (seen[a].buckets == seen[b].buckets || seen[a].plain == seen[b].plain ||
                seen[a].lib == seen[b].lib || seen[a].err == seen[b].err)
              __atomic_add_fetch(&bad_addresses, 1, __ATOMIC_RELAXED);
      }
#pragma omp barrier
      bad += damaged(salt, id);
      if (bad) __atomic_add_fetch(&bad_threads, 1, __ATOMIC_RELAXED);
    }
  }
  CHECK_EQ(bad_team, 0, "isolation, teams of %d: regions with another team size", n);
  CHECK_EQ(bad_threads, 0,
           "isolation, teams of %d: threads whose threadprivate array, __thread variable, "
           "errno or library state changed under them (%d regions)",
           n, rounds);
  CHECK_EQ(bad_addresses, 0,
           "isolation, teams of %d: pairs of threads sharing a thread-local variable's "
           "address",
           n);
}

/* Two regions of the same size in a row: each thread finds its value. */
static void test_persistence(int n, int rounds) {
  int bad = 0, checked = 0;
  for (int r = 0; r < rounds; ++r) {
    const long salt = (long)n * 1000 + r;
    int team_a = 0, team_b = 0;
#pragma omp parallel num_threads(n)
    {
      tp_owner = salt * 64 + omp_get_thread_num();
#pragma omp master
      team_a = omp_get_num_threads();
    }
#pragma omp parallel num_threads(n)
    {
#pragma omp master
      team_b = omp_get_num_threads();
#pragma omp barrier
      if (team_a == team_b) {
        __atomic_add_fetch(&checked, 1, __ATOMIC_RELAXED);
        if (tp_owner != salt * 64 + omp_get_thread_num())
          __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
      }
    }
  }
  if (!omp_get_dynamic()) CHECK_EQ(checked, rounds * n, "persistence, teams of %d: threads checked", n);
  CHECK_EQ(bad, 0,
           "persistence, teams of %d: threads not finding the threadprivate value they left "
           "in the previous region of the same size",
           n);
}

static void test_copyin_copyprivate(int n, int rounds) {
  int bad_copyin = 0, bad_copyprivate = 0, bad_own = 0;
  for (int r = 0; r < rounds; ++r) {
    tp_copied = 4242 + r;
#pragma omp parallel num_threads(n) copyin(tp_copied)
    {
      const int id = omp_get_thread_num();
      if (tp_copied != 4242 + r) __atomic_add_fetch(&bad_copyin, 1, __ATOMIC_RELAXED);
#pragma omp barrier
      tp_copied = -id;
#pragma omp barrier
      if (tp_copied != -id) __atomic_add_fetch(&bad_own, 1, __ATOMIC_RELAXED);
#pragma omp barrier
#pragma omp single copyprivate(tp_copied)
      tp_copied = 777 + r;
      if (tp_copied != 777 + r) __atomic_add_fetch(&bad_copyprivate, 1, __ATOMIC_RELAXED);
#pragma omp barrier
      tp_copied = 10 * id + 1;
#pragma omp barrier
      if (tp_copied != 10 * id + 1) __atomic_add_fetch(&bad_own, 1, __ATOMIC_RELAXED);
    }
  }
  CHECK_EQ(bad_copyin, 0, "copyin, teams of %d: threads without the initial thread's value", n);
  CHECK_EQ(bad_copyprivate, 0, "copyprivate, teams of %d: threads without the single's value",
           n);
  CHECK_EQ(bad_own, 0,
           "copyin/copyprivate, teams of %d: threads whose own threadprivate copy another "
           "thread changed",
           n);
}

/* Outer teams of 2 and 4, inner teams of 2 and 4: every inner thread keeps
 * its copies across the inner team's barriers while the other inner teams
 * run too. */
static void test_nested(int rounds) {
  const int saved = omp_get_max_active_levels();
  omp_set_max_active_levels(2);
  static const int sizes[] = {2, 4};
  int bad_threads = 0, bad_addresses = 0, runs = 0, expected_runs = 0;
  for (int r = 0; r < rounds; ++r)
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 2; ++i) {
        const int outer = sizes[o], inner = sizes[i];
        expected_runs += outer * inner;
#pragma omp parallel num_threads(outer)
        {
          const int oid = omp_get_thread_num();
          struct where seen[MAX_TEAM];
#pragma omp parallel num_threads(inner)
          {
            probe_here();
            __atomic_add_fetch(&runs, 1, __ATOMIC_RELAXED);
            const int iid = omp_get_thread_num();
            const long salt = ((long)r * 16 + oid) * 16 + 3;
            fill(salt, iid);
            seen[iid].buckets = (uintptr_t)&tp_buckets[0];
            seen[iid].plain = (uintptr_t)&plain_tls;
            seen[iid].lib = (uintptr_t)tls_lib_address();
            seen[iid].err = (uintptr_t)&errno;
            int bad = 0;
#pragma omp barrier
            bad += damaged(salt, iid);
#pragma omp taskyield
#pragma omp barrier
            bad += damaged(salt, iid);
#pragma omp master
            {
              const int n = omp_get_num_threads();
              for (int a = 0; a < n; ++a)
                for (int b = 0; b < a; ++b)
                  if (seen[a].buckets == seen[b].buckets || seen[a].lib == seen[b].lib ||
                      seen[a].err == seen[b].err || seen[a].plain == seen[b].plain)
                    __atomic_add_fetch(&bad_addresses, 1, __ATOMIC_RELAXED);
            }
#pragma omp barrier
            bad += damaged(salt, iid);
            if (bad) __atomic_add_fetch(&bad_threads, 1, __ATOMIC_RELAXED);
          }
        }
      }
  omp_set_max_active_levels(saved);
  if (!omp_get_dynamic()) CHECK_EQ(runs, expected_runs, "nested: inner bodies run");
  CHECK_EQ(bad_threads, 0,
           "nested: inner threads whose thread-local copies changed under them");
  CHECK_EQ(bad_addresses, 0, "nested: pairs of inner threads sharing a thread-local address");
}

int main(int argc, char** argv) {
  test_begin("tls");
  int rounds = 40;
  for (int a = 1; a < argc; ++a) {
    if (strncmp(argv[a], "--rounds=", 9) == 0 && atoi(argv[a] + 9) > 0) {
      rounds = atoi(argv[a] + 9);
    } else {
      printf("omp-test tls: unknown argument '%s' (accepted: --rounds=N, N > 0)\n", argv[a]);
      return 2;
    }
  }
  load_begin();
  for (int s = 0; s < NUM_SIZES; ++s) {
    test_isolation(team_sizes[s], rounds);
    test_persistence(team_sizes[s], rounds);
    test_copyin_copyprivate(team_sizes[s], rounds / 2 + 1);
  }
  test_nested(rounds / 4 + 1);
  load_end();
  return test_end();
}
