/* omp-test old_abi: what GCC before 4.9 emitted for combined constructs
 * (plain C, the calls written out as that GCC wrote them): the region
 * begins with GOMP_parallel_loop_{static,dynamic,guided,runtime}_start or
 * GOMP_parallel_sections_start, the work share already set up, the caller
 * runs thread 0's body itself and ends with GOMP_parallel_end. Every
 * iteration and every section runs exactly once, on the team's threads.
 */
#include <omp.h>
#include <stdbool.h>

#include "check.h"

void GOMP_parallel_loop_static_start(void (*)(void*), void*, unsigned, long, long, long, long);
void GOMP_parallel_loop_dynamic_start(void (*)(void*), void*, unsigned, long, long, long, long);
void GOMP_parallel_loop_guided_start(void (*)(void*), void*, unsigned, long, long, long, long);
void GOMP_parallel_loop_runtime_start(void (*)(void*), void*, unsigned, long, long, long);
void GOMP_parallel_sections_start(void (*)(void*), void*, unsigned, unsigned);
void GOMP_parallel_end(void);
bool GOMP_loop_static_next(long*, long*);
bool GOMP_loop_dynamic_next(long*, long*);
bool GOMP_loop_guided_next(long*, long*);
bool GOMP_loop_runtime_next(long*, long*);
void GOMP_loop_end_nowait(void);
unsigned GOMP_sections_next(void);
void GOMP_sections_end_nowait(void);

enum { N = 997, SECTIONS = 7 };

struct loop_body {
  bool (*next)(long*, long*);
  int counts[N];
  int team;
};

static void run_loop(void* p) {
  struct loop_body* b = p;
  probe_here();
  if (omp_get_thread_num() == 0) b->team = omp_get_num_threads();
  long start, end;
  while (b->next(&start, &end))
    for (long i = start; i < end; ++i) __atomic_add_fetch(&b->counts[i], 1, __ATOMIC_RELAXED);
  GOMP_loop_end_nowait();
}

static void check_loop(const char* kind, struct loop_body* b) {
  check_counts(b->counts, N, 1, "%s: iterations", kind);
  check_range(b->team, 1, omp_get_max_threads(), "%s: team size", kind);
}

struct sections_body {
  int counts[SECTIONS + 1];
};

static void run_sections(void* p) {
  struct sections_body* b = p;
  for (unsigned k = GOMP_sections_next(); k != 0; k = GOMP_sections_next())
    __atomic_add_fetch(&b->counts[k], 1, __ATOMIC_RELAXED);
  GOMP_sections_end_nowait();
}

int main(void) {
  test_begin("old_abi");
  static struct loop_body b;
  b = (struct loop_body){.next = GOMP_loop_static_next};
  GOMP_parallel_loop_static_start(run_loop, &b, 0, 0, N, 1, 5);
  run_loop(&b);
  GOMP_parallel_end();
  check_loop("static", &b);

  b = (struct loop_body){.next = GOMP_loop_dynamic_next};
  GOMP_parallel_loop_dynamic_start(run_loop, &b, 0, 0, N, 1, 3);
  run_loop(&b);
  GOMP_parallel_end();
  check_loop("dynamic", &b);

  b = (struct loop_body){.next = GOMP_loop_guided_next};
  GOMP_parallel_loop_guided_start(run_loop, &b, 0, 0, N, 1, 2);
  run_loop(&b);
  GOMP_parallel_end();
  check_loop("guided", &b);

  b = (struct loop_body){.next = GOMP_loop_runtime_next};
  GOMP_parallel_loop_runtime_start(run_loop, &b, 0, 0, N, 1);
  run_loop(&b);
  GOMP_parallel_end();
  check_loop("runtime", &b);

  struct sections_body s = {{0}};
  GOMP_parallel_sections_start(run_sections, &s, 0, SECTIONS);
  run_sections(&s);
  GOMP_parallel_end();
  check_counts(s.counts + 1, SECTIONS, 1, "sections");
  return test_end();
}
