/* Result checks shared by the OpenMP test programs (C and C++).
 *
 * Every failed check prints one line
 *   omp-test <name>: FAIL: <what>, got X expected Y
 * and test_end() prints "omp-test <name>: ok (...)" and returns 0, or returns 1
 * when anything failed; main returns that. Checks may run on any thread (the
 * failure count is an __atomic counter, printf is thread-safe per call); like
 * the probe they use nothing of the OpenMP runtime under test. After
 * CHECK_PRINT_LIMIT printed failures the rest are only counted.
 */
#ifndef WEFT_TESTS_OMP_CHECK_H
#define WEFT_TESTS_OMP_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

enum { CHECK_PRINT_LIMIT = 40 };

static const char* check_test_name = "?"; /* set once by test_begin() */
static int check_failures;                 /* __atomic, any thread */

static inline void test_begin(const char* name) {
  check_test_name = name;
  setvbuf(stdout, NULL, _IOLBF, 0);
}

__attribute__((format(printf, 3, 4))) static inline void check_fail(const char* got,
                                                                    const char* expected,
                                                                    const char* what_format,
                                                                    ...) {
  int n = __atomic_add_fetch(&check_failures, 1, __ATOMIC_RELAXED);
  if (n > CHECK_PRINT_LIMIT) return;
  char what[512];
  va_list args;
  va_start(args, what_format);
  vsnprintf(what, sizeof what, what_format, args);
  va_end(args);
  printf("omp-test %s: FAIL: %s, got %s expected %s\n", check_test_name, what, got, expected);
}

/* The checks return whether they passed, so that callers can stop early. */
#define CHECK_EQ(got_expr, expected_expr, ...)                                 \
  check_eq_ll((long long)(got_expr), (long long)(expected_expr), __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static inline int check_eq_ll(long long got,
                                                                    long long expected,
                                                                    const char* what_format,
                                                                    ...) {
  if (got == expected) return 1;
  char what[512];
  va_list args;
  va_start(args, what_format);
  vsnprintf(what, sizeof what, what_format, args);
  va_end(args);
  char g[32], e[32];
  snprintf(g, sizeof g, "%lld", got);
  snprintf(e, sizeof e, "%lld", expected);
  check_fail(g, e, "%s", what);
  return 0;
}

/* Exact comparison: the programs only sum values that doubles hold exactly. */
__attribute__((format(printf, 3, 4))) static inline int check_eq_double(double got,
                                                                        double expected,
                                                                        const char* what_format,
                                                                        ...) {
  if (got == expected) return 1;
  char what[512];
  va_list args;
  va_start(args, what_format);
  vsnprintf(what, sizeof what, what_format, args);
  va_end(args);
  char g[40], e[40];
  snprintf(g, sizeof g, "%.17g", got);
  snprintf(e, sizeof e, "%.17g", expected);
  check_fail(g, e, "%s", what);
  return 0;
}

/* got within [lo, hi]. */
__attribute__((format(printf, 4, 5))) static inline int check_range(long long got, long long lo,
                                                                    long long hi,
                                                                    const char* what_format,
                                                                    ...) {
  if (got >= lo && got <= hi) return 1;
  char what[512];
  va_list args;
  va_start(args, what_format);
  vsnprintf(what, sizeof what, what_format, args);
  va_end(args);
  char g[32], e[80];
  snprintf(g, sizeof g, "%lld", got);
  snprintf(e, sizeof e, "in [%lld, %lld]", lo, hi);
  check_fail(g, e, "%s", what);
  return 0;
}

__attribute__((format(printf, 2, 3))) static inline int check_true(int cond,
                                                                   const char* what_format,
                                                                   ...) {
  if (cond) return 1;
  char what[512];
  va_list args;
  va_start(args, what_format);
  vsnprintf(what, sizeof what, what_format, args);
  va_end(args);
  check_fail("false", "true", "%s", what);
  return 0;
}

/* counts[0..n) must all equal `expected` (e.g. "each iteration exactly once").
 * One line for the whole array: the first wrong index and how many are wrong. */
__attribute__((format(printf, 4, 5))) static inline int check_counts(const int* counts, long n,
                                                                     int expected,
                                                                     const char* what_format,
                                                                     ...) {
  long wrong = 0, first = -1;
  for (long i = 0; i < n; ++i) {
    if (counts[i] != expected) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  if (wrong == 0) return 1;
  char what[512];
  va_list args;
  va_start(args, what_format);
  vsnprintf(what, sizeof what, what_format, args);
  va_end(args);
  char g[32], e[32];
  snprintf(g, sizeof g, "%d", counts[first]);
  snprintf(e, sizeof e, "%d", expected);
  check_fail(g, e, "%s: executions of index %ld (%ld of %ld indices wrong)", what, first, wrong,
             n);
  return 0;
}

/* Atomic increment for the programs' own bookkeeping (not the runtime's). */
static inline void count_hit(int* counter) { __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED); }

static inline int test_end(void) {
  char summary[160];
  int probe_failed = probe_report(check_test_name, summary, sizeof summary);
  int failures = __atomic_load_n(&check_failures, __ATOMIC_RELAXED);
  if (failures > CHECK_PRINT_LIMIT) {
    printf("omp-test %s: %d more failures not printed\n", check_test_name,
           failures - CHECK_PRINT_LIMIT);
  }
  if (failures == 0 && !probe_failed) {
    printf("omp-test %s: ok (%s)\n", check_test_name, summary);
    return 0;
  }
  printf("omp-test %s: %d failed checks (%s)\n", check_test_name, failures + probe_failed,
         summary);
  return 1;
}

#endif /* WEFT_TESTS_OMP_CHECK_H */
