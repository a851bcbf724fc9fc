/* omp-test allocators: the OpenMP 5.0 memory allocators and
 * omp_pause_resource (plain C).
 *
 * omp_init_allocator's traits (what a host without special memory refuses:
 * pinned memory, the high-bandwidth space, malformed values), alignment
 * from the argument and from the trait, a pool filled up under each
 * fallback (null_fb, default_mem_fb, allocator_fb chained to a second
 * pool, abort_fb in a child process that must exit with EXIT_FAILURE),
 * a pool shared by the whole team (all of it back once every block is
 * freed), calloc's zeroes, realloc within and across allocators (the
 * contents kept, the old pool refunded), omp_free(NULL), the default
 * allocator per thread (inherited at a region's start, set by each thread
 * for itself), the `allocate` clause on private variables (GOMP_alloc /
 * GOMP_free), OMP_ALLOCATOR (ARGS --expect-default=N), and parallel
 * regions after omp_pause_resource (soft and hard; after either, the
 * threads but the initial one start with fresh threadprivate copies, as
 * libgomp joins its threads).
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

enum { MAX_THREADS = 64 };

static int aligned_to(const void* p, size_t a) {
  return ((uintptr_t)p & (a - 1)) == 0;
}

static omp_allocator_handle_t make(omp_uintptr_t pool, omp_uintptr_t fallback,
                                   omp_allocator_handle_t fb) {
  omp_alloctrait_t t[3] = {{omp_atk_pool_size, pool},
                           {omp_atk_fallback, fallback},
                           {omp_atk_fb_data, (omp_uintptr_t)fb}};
  return omp_init_allocator(omp_default_mem_space, fallback == omp_atv_allocator_fb ? 3 : 2, t);
}

static void test_traits(void) {
  omp_alloctrait_t pinned = {omp_atk_pinned, omp_atv_true};
  CHECK_EQ(omp_init_allocator(omp_default_mem_space, 1, &pinned), omp_null_allocator,
           "pinned memory refused");
  CHECK_EQ(omp_init_allocator(omp_high_bw_mem_space, 0, NULL), omp_null_allocator,
           "high-bandwidth space refused");
  omp_alloctrait_t bad_align = {omp_atk_alignment, 48};
  CHECK_EQ(omp_init_allocator(omp_default_mem_space, 1, &bad_align), omp_null_allocator,
           "alignment 48 refused");
  omp_alloctrait_t bad_fb = {omp_atk_fallback, omp_atv_blocked};
  CHECK_EQ(omp_init_allocator(omp_default_mem_space, 1, &bad_fb), omp_null_allocator,
           "fallback blocked refused");
  /* Accepted with no effect on this host. */
  omp_alloctrait_t ok[4] = {{omp_atk_partition, omp_atv_interleaved},
                            {omp_atk_access, omp_atv_pteam},
                            {omp_atk_sync_hint, omp_atv_private},
                            {omp_atk_pinned, omp_atv_false}};
  omp_allocator_handle_t a = omp_init_allocator(omp_large_cap_mem_space, 4, ok);
  if (check_true(a != omp_null_allocator, "partition/access/sync_hint/pinned false accepted")) {
    int* p = omp_alloc(100 * sizeof(int), a);
    check_true(p != NULL, "allocation from it");
    for (int i = 0; i < 100; ++i) p[i] = i;
    omp_free(p, a);
    omp_destroy_allocator(a);
  }
  CHECK_EQ(omp_alloc(0, omp_default_mem_alloc) == NULL, 1, "omp_alloc of 0 bytes is null");
}

static void test_alignment(void) {
  for (size_t a = 1; a <= 4096; a *= 2) {
    char* p = omp_aligned_alloc(a, 1000, omp_default_mem_alloc);
    if (!check_true(p != NULL, "omp_aligned_alloc(%zu)", a)) continue;
    check_true(aligned_to(p, a < sizeof(void*) ? sizeof(void*) : a), "omp_aligned_alloc(%zu)", a);
    memset(p, 0x5a, 1000);
    omp_free(p, omp_default_mem_alloc);
  }
  omp_alloctrait_t t = {omp_atk_alignment, 256};
  omp_allocator_handle_t al = omp_init_allocator(omp_default_mem_space, 1, &t);
  if (!check_true(al != omp_null_allocator, "alignment trait 256")) return;
  for (int i = 0; i < 16; ++i) {
    void* p = omp_alloc(8 + 24 * i, al);
    check_true(p != NULL && aligned_to(p, 256), "omp_alloc under alignment trait 256");
    /* The larger of the argument and the trait. */
    void* q = omp_aligned_alloc(1024, 8, al);
    check_true(q != NULL && aligned_to(q, 1024), "omp_aligned_alloc(1024) under trait 256");
    void* r = omp_aligned_calloc(64, 3, 5, al);
    check_true(r != NULL && aligned_to(r, 256), "omp_aligned_calloc(64) under trait 256");
    omp_free(p, al);
    omp_free(q, omp_null_allocator); /* any allocator argument: the block knows its own */
    omp_free(r, al);
  }
  omp_destroy_allocator(al);
}

/* Two blocks of 3000 bytes never fit in a 4096-byte pool; one always does. */
static void test_pools(void) {
  omp_allocator_handle_t a = make(4096, omp_atv_null_fb, omp_null_allocator);
  void* p = omp_alloc(3000, a);
  check_true(p != NULL, "null_fb: first block");
  CHECK_EQ(omp_alloc(3000, a) == NULL, 1, "null_fb: second block when the pool is full");
  CHECK_EQ(omp_calloc(1000, 3, a) == NULL, 1, "null_fb: omp_calloc when the pool is full");
  CHECK_EQ(omp_alloc(5000, a) == NULL, 1, "null_fb: a block larger than the pool");
  omp_free(p, a);
  p = omp_alloc(3000, a);
  check_true(p != NULL, "null_fb: the pool is back after omp_free");
  omp_free(p, a);
  omp_destroy_allocator(a);

  a = make(4096, omp_atv_default_mem_fb, omp_null_allocator);
  p = omp_alloc(3000, a);
  void* q = omp_alloc(3000, a);
  check_true(p != NULL && q != NULL, "default_mem_fb: the second block from the default memory");
  void* big = omp_alloc(1 << 20, a);
  check_true(big != NULL, "default_mem_fb: a block larger than the pool");
  omp_free(big, a);
  omp_free(q, a); /* not charged to the pool: freeing it refunds nothing */
  q = omp_alloc(3000, a);
  check_true(q != NULL, "default_mem_fb: allocation after frees");
  omp_free(q, a);
  omp_free(p, a);
  omp_destroy_allocator(a);

  /* allocator_fb: a full pool falls over to the next, whose null_fb ends
   * the chain; the blocks go back to the pool they came from. */
  omp_allocator_handle_t last = make(4096, omp_atv_null_fb, omp_null_allocator);
  omp_allocator_handle_t first = make(4096, omp_atv_allocator_fb, last);
  p = omp_alloc(3000, first);
  q = omp_alloc(3000, first);
  check_true(p != NULL && q != NULL, "allocator_fb: the second block from the fallback");
  CHECK_EQ(omp_alloc(3000, last) == NULL, 1, "allocator_fb: the fallback's pool took it");
  CHECK_EQ(omp_alloc(3000, first) == NULL, 1, "allocator_fb: both pools full, then null_fb");
  omp_free(q, first);
  q = omp_alloc(3000, last);
  check_true(q != NULL, "allocator_fb: a block freed through the first went back to the last");
  omp_free(q, last);
  omp_free(p, first);
  /* allocator_fb to omp_null_allocator: the thread's default allocator. */
  omp_allocator_handle_t to_default = make(4096, omp_atv_allocator_fb, omp_null_allocator);
  p = omp_alloc(3000, to_default);
  q = omp_alloc(3000, to_default);
  check_true(p != NULL && q != NULL, "allocator_fb to omp_null_allocator");
  omp_free(p, to_default);
  omp_free(q, to_default);
  omp_destroy_allocator(to_default);
  omp_destroy_allocator(first);
  omp_destroy_allocator(last);
}

/* abort_fb ends the program with EXIT_FAILURE, as libgomp does: in a
 * child, before any parallel region (one thread to fork). */
static void test_abort_fallback(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    omp_allocator_handle_t a = make(4096, omp_atv_abort_fb, omp_null_allocator);
    void* p = omp_alloc(3000, a);
    if (p == NULL) _exit(10);
    (void)omp_alloc(3000, a);
    _exit(11); /* not reached */
  }
  int status = 0;
  if (!check_true(pid > 0 && waitpid(pid, &status, 0) == pid, "abort_fb: fork/waitpid")) return;
  check_true(WIFEXITED(status), "abort_fb: the child exited (status %#x)", status);
  CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, EXIT_FAILURE, "abort_fb: exit code");
}

static void test_calloc_realloc(void) {
  omp_alloctrait_t t[2] = {{omp_atk_pool_size, 1 << 16}, {omp_atk_fallback, omp_atv_null_fb}};
  omp_allocator_handle_t pool = omp_init_allocator(omp_default_mem_space, 2, t);
  omp_alloctrait_t at = {omp_atk_alignment, 128};
  omp_allocator_handle_t al = omp_init_allocator(omp_default_mem_space, 1, &at);
  omp_allocator_handle_t each[3] = {omp_default_mem_alloc, pool, al};
  for (int k = 0; k < 3; ++k) {
    /* Dirty memory first, so that zeroes are calloc's. */
    unsigned char* d = omp_alloc(8000, each[k]);
    if (d) memset(d, 0xff, 8000);
    omp_free(d, each[k]);
    long* z = omp_calloc(1000, sizeof(long), each[k]);
    if (!check_true(z != NULL, "omp_calloc from allocator %d", k)) continue;
    long nonzero = 0;
    for (int i = 0; i < 1000; ++i) nonzero += z[i] != 0;
    CHECK_EQ(nonzero, 0, "omp_calloc from allocator %d: non-zero words", k);
    omp_free(z, each[k]);
  }
  CHECK_EQ(omp_calloc(0, 8, pool) == NULL, 1, "omp_calloc of 0 elements");
  volatile size_t huge = (size_t)1 << 62; /* not a constant: gcc would warn */
  CHECK_EQ(omp_calloc(huge, 16, pool) == NULL, 1, "omp_calloc overflowing size_t");

  /* realloc across every pair of allocators: the contents kept. */
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 4; ++to) {
      omp_allocator_handle_t target = to == 3 ? omp_null_allocator : each[to];
      int* p = omp_alloc(100 * sizeof(int), each[from]);
      for (int i = 0; i < 100; ++i) p[i] = i * 7 + from;
      int* q = omp_realloc(p, 300 * sizeof(int), target, omp_null_allocator);
      if (!check_true(q != NULL, "omp_realloc %d -> %d grows", from, to)) continue;
      long wrong = 0;
      for (int i = 0; i < 100; ++i) wrong += q[i] != i * 7 + from;
      CHECK_EQ(wrong, 0, "omp_realloc %d -> %d: words changed", from, to);
      for (int i = 100; i < 300; ++i) q[i] = -i;
      /* omp_null_allocator keeps the block's allocator: the 128 of `al`. */
      if (to == 2 || (to == 3 && from == 2)) check_true(aligned_to(q, 128), "realloc into al");
      int* r = omp_realloc(q, 50 * sizeof(int), omp_null_allocator, omp_null_allocator);
      if (!check_true(r != NULL, "omp_realloc %d -> %d shrinks", from, to)) continue;
      wrong = 0;
      for (int i = 0; i < 50; ++i) wrong += r[i] != i * 7 + from;
      CHECK_EQ(wrong, 0, "omp_realloc %d -> %d shrunk: words changed", from, to);
      omp_free(r, omp_null_allocator);
    }
  }
  /* Every block of the pool was freed or moved out: all of it is free. */
  void* all = omp_alloc((1 << 16) - 4096, pool);
  check_true(all != NULL, "the pool is whole again after reallocs");
  /* Moving a block out of a full pool refunds it. */
  int* big = omp_realloc(all, 100, omp_default_mem_alloc, pool);
  void* again = omp_alloc((1 << 16) - 4096, pool);
  check_true(big != NULL && again != NULL, "realloc out of the pool refunds it");
  omp_free(again, pool);
  omp_free(big, omp_default_mem_alloc);
  /* realloc(NULL) allocates, realloc(p, 0) frees. */
  int* n = omp_realloc(NULL, 64, pool, omp_null_allocator);
  check_true(n != NULL, "omp_realloc(NULL, 64)");
  CHECK_EQ(omp_realloc(n, 0, omp_null_allocator, pool) == NULL, 1, "omp_realloc(p, 0) is null");
  omp_free(NULL, pool);
  omp_free(NULL, omp_null_allocator);
  omp_destroy_allocator(pool);
  omp_destroy_allocator(al);
}

/* A pool the team shares: blocks come and go from every thread at once, a
 * block fails only while the others hold the pool, and once all are freed
 * the whole pool is there again (its count neither lost nor doubled). */
static void test_shared_pool(void) {
  enum { BLOCK = 512, ROUNDS = 2000 };
  omp_allocator_handle_t pool = make(4 * (BLOCK + 64), omp_atv_null_fb, omp_null_allocator);
  int failed = 0, served = 0;
#pragma omp parallel
  {
    probe_here();
    int mine = 0;
    for (int k = 0; k < ROUNDS; ++k) {
      char* p = omp_alloc(BLOCK, pool);
      if (p == NULL) continue;
      memset(p, omp_get_thread_num(), BLOCK);
      if (p[BLOCK - 1] != (char)omp_get_thread_num()) count_hit(&failed);
      ++mine;
      omp_free(p, pool);
    }
    __atomic_add_fetch(&served, mine, __ATOMIC_RELAXED);
  }
  CHECK_EQ(failed, 0, "shared pool: a block overwritten by another thread");
  check_true(served > 0, "shared pool: some blocks served");
  void* p[4];
  int got = 0;
  for (int i = 0; i < 4; ++i) got += (p[i] = omp_alloc(BLOCK, pool)) != NULL;
  CHECK_EQ(got, 4, "shared pool: blocks that fit after the team freed everything");
  for (int i = 0; i < 4; ++i) omp_free(p[i], pool);
  omp_destroy_allocator(pool);
}

/* def-allocator-var: a region's threads start with the encountering
 * thread's, each sets its own, and the encountering thread's is its own
 * again after the region. */
static void test_default_allocator(long expect_initial) {
  CHECK_EQ(omp_get_default_allocator(), expect_initial, "initial default allocator");
  omp_allocator_handle_t own[MAX_THREADS];
  for (int i = 0; i < MAX_THREADS; ++i) {
    omp_alloctrait_t t = {omp_atk_alignment, (omp_uintptr_t)64 << (i % 6)};
    own[i] = omp_init_allocator(omp_default_mem_space, 1, &t);
  }
  omp_set_default_allocator(omp_cgroup_mem_alloc);
  int inherited = 0, kept = 0, aligned = 0, team = 0;
#pragma omp parallel
  {
    probe_here();
    int id = omp_get_thread_num();
#pragma omp master
    team = omp_get_num_threads();
    if (omp_get_default_allocator() == omp_cgroup_mem_alloc) count_hit(&inherited);
#pragma omp barrier
    if (id < MAX_THREADS) omp_set_default_allocator(own[id]);
#pragma omp barrier
    if (id < MAX_THREADS && omp_get_default_allocator() == own[id]) count_hit(&kept);
    void* p = omp_alloc(24, omp_null_allocator);
    if (id < MAX_THREADS && aligned_to(p, (size_t)64 << (id % 6))) count_hit(&aligned);
    omp_free(p, omp_null_allocator);
  }
  CHECK_EQ(inherited, team, "threads that inherited the default allocator");
  CHECK_EQ(kept, team, "threads whose own default allocator stayed theirs");
  CHECK_EQ(aligned, team, "omp_alloc(omp_null_allocator) under each thread's default");
  CHECK_EQ(omp_get_default_allocator(), omp_cgroup_mem_alloc,
           "the initial thread's default after the region");
  omp_set_default_allocator(omp_null_allocator);
  CHECK_EQ(omp_get_default_allocator(), omp_default_mem_alloc,
           "omp_set_default_allocator(omp_null_allocator)");
  for (int i = 0; i < MAX_THREADS; ++i) omp_destroy_allocator(own[i]);
}

/* The allocate clause: GCC allocates the private copies with GOMP_alloc
 * from the named allocator and frees them with GOMP_free. */
static void test_allocate_clause(void) {
  omp_alloctrait_t t = {omp_atk_alignment, 512};
  omp_allocator_handle_t al = omp_init_allocator(omp_default_mem_space, 1, &t);
  int x = 0, arr[64], wrong = 0, aligned = 0, team = 0, sum = 0;
  for (int i = 0; i < 64; ++i) arr[i] = 0;
#pragma omp parallel private(x, arr) allocate(al : x, arr) reduction(+ : sum)
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    if (aligned_to(&x, 512) && aligned_to(arr, 512)) count_hit(&aligned);
    x = omp_get_thread_num();
    for (int i = 0; i < 64; ++i) arr[i] = x + i;
#pragma omp barrier
    for (int i = 0; i < 64; ++i)
      if (arr[i] != x + i) count_hit(&wrong);
    sum += x;
  }
  CHECK_EQ(aligned, team, "allocate(al: ...) copies aligned to the allocator's 512");
  CHECK_EQ(wrong, 0, "allocate clause: a private array changed by another thread");
  CHECK_EQ(sum, team * (team - 1) / 2, "allocate clause: sum of thread numbers");
  int y = 5;
#pragma omp parallel firstprivate(y) allocate(omp_low_lat_mem_alloc : y)
  {
    if (y != 5) count_hit(&wrong);
    y += omp_get_thread_num();
  }
  CHECK_EQ(wrong, 0, "firstprivate with a predefined allocator: the copied value");
  omp_destroy_allocator(al);
}

static int team_works(void) {
  int n = 0, team = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    count_hit(&n);
  }
  return n == team && team == omp_get_max_threads();
}

static int tp = 7;
#pragma omp threadprivate(tp)

/* Threads but the initial one whose threadprivate copy is not fresh. */
static int stale_copies(void) {
  int stale = 0;
#pragma omp parallel
  {
    if (omp_get_thread_num() != 0 && tp != 7) count_hit(&stale);
    tp = 100 + omp_get_thread_num();
  }
  return stale;
}

static void test_pause(void) {
  check_true(team_works(), "a region before any pause");
  stale_copies();
  CHECK_EQ(omp_pause_resource(omp_pause_soft, omp_get_initial_device()), 0, "soft pause");
  CHECK_EQ(stale_copies(), 0, "threadprivate copies kept over a soft pause");
  check_true(team_works(), "a region after a soft pause");
  CHECK_EQ(omp_pause_resource_all(omp_pause_hard), 0, "hard pause of everything");
  CHECK_EQ(stale_copies(), 0, "threadprivate copies kept over a hard pause");
  check_true(team_works(), "a region after a hard pause");
  CHECK_EQ(omp_pause_resource(omp_pause_hard, omp_get_initial_device()), 0, "hard pause");
  CHECK_EQ(omp_pause_resource(omp_pause_hard, omp_get_initial_device()), 0, "paused again");
  check_true(team_works(), "a region after two hard pauses");
  CHECK_EQ(omp_pause_resource(omp_pause_soft, omp_get_num_devices() + 1), -1,
           "pause of a device that does not exist");
  int inside = 0;
#pragma omp parallel
  {
    if (omp_pause_resource(omp_pause_soft, omp_get_initial_device()) != 0) count_hit(&inside);
  }
  check_true(inside > 0, "a pause from inside a region fails");
  /* Allocators made before a pause still serve after it. */
  omp_allocator_handle_t a = make(4096, omp_atv_null_fb, omp_null_allocator);
  void* p = omp_alloc(3000, a);
  CHECK_EQ(omp_pause_resource_all(omp_pause_hard), 0, "hard pause with a block out");
  check_true(team_works(), "a region after it");
  CHECK_EQ(omp_alloc(3000, a) == NULL, 1, "the pool still holds the block");
  omp_free(p, a);
  p = omp_alloc(3000, a);
  check_true(p != NULL, "and gets it back");
  omp_free(p, a);
  omp_destroy_allocator(a);
}

int main(int argc, char** argv) {
  test_begin("allocators");
  long expect_default = omp_default_mem_alloc;
  for (int i = 1; i < argc; ++i)
    if (strncmp(argv[i], "--expect-default=", 17) == 0) expect_default = atol(argv[i] + 17);
  test_abort_fallback(); /* first: no thread but this one to fork */
  test_default_allocator(expect_default);
  test_traits();
  test_alignment();
  test_pools();
  test_calloc_realloc();
  test_shared_pool();
  test_allocate_clause();
  test_pause();
  return test_end();
}
