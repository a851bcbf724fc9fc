/* omp-test locks: the OpenMP lock API (plain C).
 *
 * omp_init_lock / omp_set_lock / omp_unset_lock / omp_test_lock /
 * omp_destroy_lock and the nest-lock family (not the *_with_hint
 * initializers: GCC 12's libgomp does not define them): counters updated by read-pause-write (which loses counts
 * without mutual exclusion) under a lock, under an array of locks, acquired by
 * spinning on omp_test_lock, and under a nest lock taken three deep; an
 * occupancy check inside every lock; omp_test_lock and omp_test_nest_lock fail
 * while another thread holds the lock; omp_test_nest_lock returns the nesting
 * depth to the owner; a lock held across a barrier.
 */
#include <omp.h>
#include <sched.h>

#include "check.h"

enum { PER_THREAD = 3000, BUCKETS = 8 };

static void pause_rounds(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

/* Read, pause, write: loses increments unless mutually excluded. */
static void slow_increment(long* p) {
  long v = __atomic_load_n(p, __ATOMIC_RELAXED);
  pause_rounds(20);
  __atomic_store_n(p, v + 1, __ATOMIC_RELAXED);
}

static void enter(int* inside, int* overlap) {
  if (__atomic_add_fetch(inside, 1, __ATOMIC_RELAXED) != 1) {
    __atomic_store_n(overlap, 1, __ATOMIC_RELAXED);
  }
}
static void leave(int* inside) { __atomic_sub_fetch(inside, 1, __ATOMIC_RELAXED); }

static void test_simple_lock(void) {
  omp_lock_t lock;
  omp_init_lock(&lock);
  long counter = 0;
  int inside = 0, overlap = 0, team = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    for (int k = 0; k < PER_THREAD; ++k) {
      omp_set_lock(&lock);
      enter(&inside, &overlap);
      slow_increment(&counter);
      leave(&inside);
      omp_unset_lock(&lock);
    }
  }
  omp_destroy_lock(&lock);
  CHECK_EQ(counter, (long)team * PER_THREAD, "omp_set_lock/omp_unset_lock: counter (team %d)",
           team);
  CHECK_EQ(overlap, 0, "omp_set_lock: two threads inside at once");
}

static void test_lock_array(void) {
  omp_lock_t locks[BUCKETS];
  long counters[BUCKETS] = {0};
  int inside[BUCKETS] = {0};
  int overlap = 0, team = 0;
  for (int b = 0; b < BUCKETS; ++b) omp_init_lock(&locks[b]);
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    int t = omp_get_thread_num();
    for (int k = 0; k < PER_THREAD; ++k) {
      int b = (k * 7 + t) % BUCKETS;
      omp_set_lock(&locks[b]);
      enter(&inside[b], &overlap);
      slow_increment(&counters[b]);
      leave(&inside[b]);
      omp_unset_lock(&locks[b]);
    }
  }
  long expected[BUCKETS] = {0};
  for (int t = 0; t < team; ++t) {
    for (int k = 0; k < PER_THREAD; ++k) ++expected[(k * 7 + t) % BUCKETS];
  }
  for (int b = 0; b < BUCKETS; ++b) {
    omp_destroy_lock(&locks[b]);
    CHECK_EQ(counters[b], expected[b], "array of %d locks: counter %d (team %d)", BUCKETS, b, team);
  }
  CHECK_EQ(overlap, 0, "array of locks: two threads inside one lock at once");
}

static void test_test_lock(void) {
  omp_lock_t lock;
  omp_init_lock(&lock);
  long counter = 0;
  int inside = 0, overlap = 0, team = 0, failed_attempts = 0;
  int got_while_held = 0, holder_failed = 0;
#pragma omp parallel
  {
    probe_here();
    int t = omp_get_thread_num();
#pragma omp master
    team = omp_get_num_threads();
    /* Thread 0 holds the lock across a barrier: nobody else may get it. */
    if (t == 0 && !omp_test_lock(&lock)) __atomic_store_n(&holder_failed, 1, __ATOMIC_RELAXED);
#pragma omp barrier
    if (t != 0 && omp_test_lock(&lock)) {
      __atomic_store_n(&got_while_held, 1, __ATOMIC_RELAXED);
      omp_unset_lock(&lock);
    }
#pragma omp barrier
    if (t == 0) omp_unset_lock(&lock);
#pragma omp barrier
    for (int k = 0; k < PER_THREAD / 4; ++k) {
      while (!omp_test_lock(&lock)) {
        count_hit(&failed_attempts);
        sched_yield();
      }
      enter(&inside, &overlap);
      slow_increment(&counter);
      leave(&inside);
      omp_unset_lock(&lock);
    }
  }
  omp_destroy_lock(&lock);
  CHECK_EQ(holder_failed, 0, "omp_test_lock on a free lock failed");
  CHECK_EQ(got_while_held, 0, "omp_test_lock succeeded while another thread held the lock");
  CHECK_EQ(counter, (long)team * (PER_THREAD / 4), "omp_test_lock spin: counter (team %d)", team);
  CHECK_EQ(overlap, 0, "omp_test_lock: two threads inside at once");
}

static void test_nest_lock(void) {
  omp_nest_lock_t lock;
  omp_init_nest_lock(&lock);
  omp_nest_lock_t second;
  omp_init_nest_lock(&second);
  long counter = 0, second_counter = 0;
  int inside = 0, overlap = 0, team = 0, seen_depth = 3, got_while_held = 0;
#pragma omp parallel
  {
    probe_here();
    int t = omp_get_thread_num();
#pragma omp master
    team = omp_get_num_threads();
    for (int k = 0; k < PER_THREAD / 2; ++k) {
      omp_set_nest_lock(&lock);
      enter(&inside, &overlap);
      omp_set_nest_lock(&lock); /* depth 2 */
      int depth = omp_test_nest_lock(&lock); /* depth 3 */
      if (depth != 3) __atomic_store_n(&seen_depth, depth, __ATOMIC_RELAXED);
      slow_increment(&counter);
      if (depth > 0) omp_unset_nest_lock(&lock);
      omp_unset_nest_lock(&lock);
      leave(&inside);
      omp_unset_nest_lock(&lock);
    }
    omp_set_nest_lock(&second);
    slow_increment(&second_counter);
    omp_unset_nest_lock(&second);
#pragma omp barrier
    /* Held (twice) by thread 0 across a barrier: others' test must fail. */
    if (t == 0) {
      omp_set_nest_lock(&lock);
      omp_set_nest_lock(&lock);
    }
#pragma omp barrier
    if (t != 0 && omp_test_nest_lock(&lock) != 0) {
      __atomic_store_n(&got_while_held, 1, __ATOMIC_RELAXED);
      omp_unset_nest_lock(&lock);
    }
#pragma omp barrier
    if (t == 0) {
      omp_unset_nest_lock(&lock);
      omp_unset_nest_lock(&lock);
    }
  }
  /* Free again: the first test from here returns depth 1. */
  CHECK_EQ(omp_test_nest_lock(&lock), 1, "omp_test_nest_lock on a free nest lock: depth");
  omp_unset_nest_lock(&lock);
  omp_destroy_nest_lock(&lock);
  omp_destroy_nest_lock(&second);
  CHECK_EQ(counter, (long)team * (PER_THREAD / 2), "nest lock: counter (team %d)", team);
  CHECK_EQ(second_counter, team, "second nest lock: counter (team %d)", team);
  CHECK_EQ(overlap, 0, "nest lock: two threads inside at once");
  CHECK_EQ(seen_depth, 3, "omp_test_nest_lock by the owner holding it twice: returned depth");
  CHECK_EQ(got_while_held, 0, "omp_test_nest_lock succeeded while another thread held it");
}

int main(void) {
  test_begin("locks");
  test_simple_lock();
  test_lock_array();
  test_test_lock();
  test_nest_lock();
  return test_end();
}
