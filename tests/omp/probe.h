/* Thread probe shared by the OpenMP test programs (C and C++).
 *
 * What it is: probe_here(), called once per thread inside a region body,
 * counts the threads of the process (entries of /proc/self/task) and keeps
 * the maximum seen, and records the OS thread id (gettid) of the caller in a
 * lock-free set. probe_report() at the end of a program fails if the maximum
 * exceeded OMPTEST_MAX_THREADS (when that variable is set) and returns
 * a one-line summary.
 *
 * The variable is not named WEFT_*: weft rejects WEFT_* variables it does not
 * know (exit 2), and these programs run on weft.
 *
 * Why: libweft-omp must run OpenMP regions on weft's own worker threads (no
 * second thread pool, no thread per nested region; DESIGN.md "Lessons",
 * item 11). The programs cannot see weft, so they watch the process from
 * outside: the number of OS threads alive and how many of them ran bodies.
 *
 * The probe deliberately uses no OpenMP construct, lock or atomic of the
 * runtime under test: only GCC __atomic builtins and system calls, so it stays
 * right when the runtime is wrong. Everything is static: each test program is
 * one translation unit. Any thread may call probe_here(); it does not block.
 */
#ifndef WEFT_TESTS_OMP_PROBE_H
#define WEFT_TESTS_OMP_PROBE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { PROBE_TID_SLOTS = 4096 };

/* Written by any thread with __atomic operations (relaxed: they are only read
 * by probe_report(), after the last region has ended). */
static int probe_max_threads;              /* largest /proc/self/task count */
static int probe_tids[PROBE_TID_SLOTS];    /* open-addressing set, 0 = free */
static int probe_distinct_tids;            /* number of filled slots */
static int probe_tid_overflow;             /* ids that found no free slot */
static long probe_calls;                   /* how often probe_here() ran */

/* Threads of this process now, or -1 if /proc is not readable. */
static inline int probe_process_threads(void) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return -1;
  int n = 0;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

static inline void probe_record_tid(int tid) {
  unsigned hash = (unsigned)tid * 2654435761u;
  for (unsigned k = 0; k < PROBE_TID_SLOTS; ++k) {
    unsigned slot = (hash + k) % PROBE_TID_SLOTS;
    int seen = __atomic_load_n(&probe_tids[slot], __ATOMIC_RELAXED);
    if (seen == tid) return;
    if (seen == 0) {
      if (__atomic_compare_exchange_n(&probe_tids[slot], &seen, tid, 0, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&probe_distinct_tids, 1, __ATOMIC_RELAXED);
        return;
      }
      if (seen == tid) return; /* another call of the same thread? never, but harmless */
    }
  }
  __atomic_add_fetch(&probe_tid_overflow, 1, __ATOMIC_RELAXED);
}

/* Call inside region bodies (once per thread per region is enough). */
static inline void probe_here(void) {
  __atomic_add_fetch(&probe_calls, 1, __ATOMIC_RELAXED);
  probe_record_tid((int)syscall(SYS_gettid));
  int now = probe_process_threads();
  int max = __atomic_load_n(&probe_max_threads, __ATOMIC_RELAXED);
  while (now > max && !__atomic_compare_exchange_n(&probe_max_threads, &max, now, 0,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* Call after the last region. Writes a summary ("max 4 threads in process, 4
 * distinct thread ids ran region bodies") into buf. Returns 0, or 1 after
 * printing a FAIL line for test `name` when OMPTEST_MAX_THREADS=N is set
 * and more than N threads were seen, or when the probe never ran. */
static inline int probe_report(const char* name, char* buf, size_t size) {
  int max = __atomic_load_n(&probe_max_threads, __ATOMIC_RELAXED);
  int distinct = __atomic_load_n(&probe_distinct_tids, __ATOMIC_RELAXED);
  int overflow = __atomic_load_n(&probe_tid_overflow, __ATOMIC_RELAXED);
  snprintf(buf, size, "max %d threads in process, %d%s distinct thread ids ran region bodies",
           max, distinct, overflow ? "+" : "");
  int failed = 0;
  if (__atomic_load_n(&probe_calls, __ATOMIC_RELAXED) == 0) {
    printf("omp-test %s: FAIL: thread probe never called, got 0 expected >0\n", name);
    failed = 1;
  }
  const char* limit_text = getenv("OMPTEST_MAX_THREADS");
  if (limit_text != NULL && limit_text[0] != '\0') {
    char* end = NULL;
    long limit = strtol(limit_text, &end, 10);
    if (*end != '\0' || limit < 1) {
      printf("omp-test %s: FAIL: OMPTEST_MAX_THREADS='%s' is not a positive integer\n",
             name, limit_text);
      failed = 1;
    } else if (max > limit) {
      printf("omp-test %s: FAIL: threads in process (max seen in /proc/self/task) above "
             "OMPTEST_MAX_THREADS, got %d expected <= %ld\n",
             name, max, limit);
      failed = 1;
    }
  }
  return failed;
}

#endif /* WEFT_TESTS_OMP_PROBE_H */
