// omp-test task_reduction: OpenMP 5.0 task reductions.
//
// Every result is integer arithmetic checked against the serial value:
//  - taskgroup task_reduction(+) with tasks in_reduction(+): many tasks
//    from one `single` thread (the result is complete at the taskgroup's
//    end); from generator tasks that do not participate themselves (their
//    descendants do); a taskgroup of its own in every thread at once, on a
//    variable private to the thread;
//  - several variables and operators in one taskgroup: +, * (unsigned,
//    wrapping), max, min, &&, ||, &, |, ^;
//  - arrays: a whole array, an array section not starting at 0 (elements
//    outside it untouched), a pointer's section;
//  - a user-defined reduction (declare reduction with an initializer);
//  - taskloop reduction(...) with the default, num_tasks and grainsize
//    splits, over long and unsigned long long, from one thread and from
//    every thread at once (its implicit taskgroup; nogroup is not allowed
//    with reduction);
//  - taskloop in_reduction, and tasks, inside a taskgroup task_reduction;
//  - parallel reduction(task, +: x), for reduction(task, +: x) (dynamic
//    and static schedules, and the combined parallel for) and sections
//    reduction(task, +: x), with tasks in_reduction in them and updates by
//    the implicit tasks themselves;
//  - nested taskgroups reducing the same variable: an inner taskgroup in the
//    outer one's body, and a taskgroup task_reduction inside a task that
//    itself is in_reduction of the outer one.
#include <omp.h>

#include <climits>
#include <vector>

#include "check.h"

namespace {

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

// Opaque to the optimizer: the tasks read and write their copies each time.
__attribute__((noipa)) long term(long i) { return i * i % 97; }

long term_sum(long first, long count) {
  long sum = 0;
  for (long i = first; i < first + count; ++i) sum += term(i);
  return sum;
}

void test_taskgroup_single() {
  for (long n : {0L, 1L, 2000L}) {
    long sum = 11, seen_at_end = -1;
#pragma omp parallel
    {
      probe_here();
#pragma omp single
      {
#pragma omp taskgroup task_reduction(+ : sum)
        {
          for (long i = 0; i < n; ++i) {
#pragma omp task in_reduction(+ : sum)
            {
              if (i % 100 == 0) pause(1000);
              sum += term(i);
            }
          }
        }
        seen_at_end = sum;  // complete at the end of the taskgroup
      }
    }
    CHECK_EQ(seen_at_end, 11 + term_sum(0, n),
             "taskgroup task_reduction(+), %ld tasks from one thread: value at its end", n);
    CHECK_EQ(sum, 11 + term_sum(0, n), "taskgroup task_reduction(+), %ld tasks: final", n);
  }
}

void test_taskgroup_generators() {
  constexpr long kGenerators = 8, kPer = 150;
  long sum = 3;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(+ : sum)
    {
      for (long g = 0; g < kGenerators; ++g) {
        // Not participating itself: its tasks are in the taskgroup.
#pragma omp task shared(sum)
        for (long k = 0; k < kPer; ++k) {
#pragma omp task in_reduction(+ : sum)
          sum += term(g * kPer + k);
        }
      }
    }
  }
  CHECK_EQ(sum, 3 + term_sum(0, kGenerators * kPer),
           "taskgroup task_reduction(+), tasks created by %ld generator tasks", kGenerators);
}

void test_per_thread_taskgroups() {
  constexpr long kPer = 300;
  int bad_threads = 0, team = 0;
  long total = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    const long t = omp_get_thread_num();
    long mine = t;  // private to the thread; its tasks may run anywhere
#pragma omp taskgroup task_reduction(+ : mine)
    {
      for (long k = 0; k < kPer; ++k) {
#pragma omp task in_reduction(+ : mine)
        mine += term(t * kPer + k) + 1;
      }
    }
    if (mine != t + term_sum(t * kPer, kPer) + kPer) {
      __atomic_add_fetch(&bad_threads, 1, __ATOMIC_RELAXED);
    }
    __atomic_add_fetch(&total, mine, __ATOMIC_RELAXED);
  }
  CHECK_EQ(bad_threads, 0, "a taskgroup task_reduction in every thread: threads with a wrong sum");
  long expected = 0;
  for (long t = 0; t < team; ++t) expected += t + term_sum(t * kPer, kPer) + kPer;
  CHECK_EQ(total, expected, "a taskgroup task_reduction in every thread: total over %d threads",
           team);
}

void test_operators() {
  constexpr long kTasks = 500;
  long s = 7, mx = LONG_MIN, mn = LONG_MAX;
  unsigned long prod = 3;
  int land = 1, land_false = 1, lor = 0, lor_false = 0;
  unsigned band = ~0u, bor = 0, bxor = 0x5a5a5a5au;
  auto bit_cleared = [](long i) { return ~(1u << (term(i) % 31)); };
  auto bit_set = [](long i) { return 1u << (i % 29); };
  auto mixed = [](long i) { return static_cast<unsigned>(i) * 2654435761u; };
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(+ : s) task_reduction(* : prod) task_reduction(max : mx) \
    task_reduction(min : mn) task_reduction(&& : land, land_false)                            \
    task_reduction(|| : lor, lor_false) task_reduction(& : band) task_reduction(| : bor)      \
    task_reduction(^ : bxor)
    for (long i = 0; i < kTasks; ++i) {
#pragma omp task in_reduction(+ : s) in_reduction(* : prod) in_reduction(max : mx)           \
    in_reduction(min : mn) in_reduction(&& : land, land_false) in_reduction(|| : lor, lor_false) \
    in_reduction(& : band) in_reduction(| : bor) in_reduction(^ : bxor)
      {
        s += term(i);
        prod *= static_cast<unsigned long>(2 * term(i) + 1);
        mx = mx > 3 * term(i) - 50 ? mx : 3 * term(i) - 50;
        mn = mn < term(i) - 30 ? mn : term(i) - 30;
        land = land && term(i) < 97;
        land_false = land_false && i != 123;
        lor = lor || i == 321;
        lor_false = lor_false || i < 0;
        band &= bit_cleared(i);
        bor |= bit_set(i);
        bxor ^= mixed(i);
      }
    }
  }
  long ref_s = 7, ref_mx = LONG_MIN, ref_mn = LONG_MAX;
  unsigned long ref_prod = 3;
  unsigned ref_band = ~0u, ref_bor = 0, ref_bxor = 0x5a5a5a5au;
  for (long i = 0; i < kTasks; ++i) {
    ref_s += term(i);
    ref_prod *= static_cast<unsigned long>(2 * term(i) + 1);
    if (3 * term(i) - 50 > ref_mx) ref_mx = 3 * term(i) - 50;
    if (term(i) - 30 < ref_mn) ref_mn = term(i) - 30;
    ref_band &= bit_cleared(i);
    ref_bor |= bit_set(i);
    ref_bxor ^= mixed(i);
  }
  CHECK_EQ(s, ref_s, "task_reduction(+: long)");
  CHECK_EQ(prod, ref_prod, "task_reduction(*: unsigned long)");
  CHECK_EQ(mx, ref_mx, "task_reduction(max: long)");
  CHECK_EQ(mn, ref_mn, "task_reduction(min: long)");
  CHECK_EQ(land, 1, "task_reduction(&&), all true");
  CHECK_EQ(land_false, 0, "task_reduction(&&), one false");
  CHECK_EQ(lor, 1, "task_reduction(||), one true");
  CHECK_EQ(lor_false, 0, "task_reduction(||), all false");
  CHECK_EQ(band, ref_band, "task_reduction(&: unsigned)");
  CHECK_EQ(bor, ref_bor, "task_reduction(|: unsigned)");
  CHECK_EQ(bxor, ref_bxor, "task_reduction(^: unsigned)");
}

void test_arrays() {
  constexpr long kTasks = 600, kBins = 16, kSec = 20, kSecFirst = 4, kSecLen = 10, kVec = 37;
  long hist[kBins], sec[kSec];
  for (long k = 0; k < kBins; ++k) hist[k] = k;
  for (long k = 0; k < kSec; ++k) sec[k] = 100 * k;
  std::vector<long> storage(kVec, 5);
  long* pv = storage.data();
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(+ : hist) task_reduction(+ : sec[kSecFirst : kSecLen]) \
    task_reduction(+ : pv[0 : kVec])
    for (long i = 0; i < kTasks; ++i) {
#pragma omp task in_reduction(+ : hist) in_reduction(+ : sec[kSecFirst : kSecLen]) \
    in_reduction(+ : pv[0 : kVec])
      {
        hist[term(i) % kBins] += 1;
        sec[kSecFirst + i % kSecLen] += i;
        pv[i % kVec] += term(i);
      }
    }
  }
  long ref_hist[kBins], ref_sec[kSec];
  std::vector<long> ref_vec(kVec, 5);
  for (long k = 0; k < kBins; ++k) ref_hist[k] = k;
  for (long k = 0; k < kSec; ++k) ref_sec[k] = 100 * k;
  for (long i = 0; i < kTasks; ++i) {
    ref_hist[term(i) % kBins] += 1;
    ref_sec[kSecFirst + i % kSecLen] += i;
    ref_vec[i % kVec] += term(i);
  }
  for (long k = 0; k < kBins; ++k) CHECK_EQ(hist[k], ref_hist[k], "task_reduction(+: arr) [%ld]", k);
  for (long k = 0; k < kSec; ++k) {
    CHECK_EQ(sec[k], ref_sec[k], "task_reduction(+: arr[%ld:%ld]) element %ld", kSecFirst, kSecLen,
             k);
  }
  for (long k = 0; k < kVec; ++k) {
    CHECK_EQ(storage[k], ref_vec[k], "task_reduction(+: p[0:%ld]) element %ld", kVec, k);
  }
}

struct Stats {
  long count, sum, min, max;
};

void stats_add(Stats& s, long v) {
  s.count += 1;
  s.sum += v;
  if (v < s.min) s.min = v;
  if (v > s.max) s.max = v;
}

void stats_merge(Stats& out, const Stats& in) {
  out.count += in.count;
  out.sum += in.sum;
  if (in.min < out.min) out.min = in.min;
  if (in.max > out.max) out.max = in.max;
}

#pragma omp declare reduction(stats:Stats : stats_merge(omp_out, omp_in)) \
    initializer(omp_priv = Stats{0, 0, LONG_MAX, LONG_MIN})

void test_user_defined() {
  constexpr long kTasks = 400;
  Stats st{2, 20, 5, 6};
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(stats : st)
    for (long i = 0; i < kTasks; ++i) {
#pragma omp task in_reduction(stats : st)
      stats_add(st, term(i) - 40);
    }
  }
  Stats ref{2, 20, 5, 6};
  for (long i = 0; i < kTasks; ++i) stats_add(ref, term(i) - 40);
  CHECK_EQ(st.count, ref.count, "task_reduction(declare reduction stats): count");
  CHECK_EQ(st.sum, ref.sum, "task_reduction(declare reduction stats): sum");
  CHECK_EQ(st.min, ref.min, "task_reduction(declare reduction stats): min");
  CHECK_EQ(st.max, ref.max, "task_reduction(declare reduction stats): max");
}

void test_taskloop_reduction() {
  using ull = unsigned long long;
  for (long n : {0L, 1L, 5L, 1000L, 20000L}) {
    long ref = 1 + term_sum(0, n);
    long ref_max = -1;
    for (long i = 0; i < n; ++i) ref_max = term(i) > ref_max ? term(i) : ref_max;
    long s_default = 1, s_one = 1, s_seven = 1, s_many = 1, s_grain1 = 1, s_grain = 1, s_ull = 1;
    long mx = -1;
#pragma omp parallel
    {
      probe_here();
#pragma omp single
      {
#pragma omp taskloop reduction(+ : s_default) reduction(max : mx)
        for (long i = 0; i < n; ++i) {
          s_default += term(i);
          mx = term(i) > mx ? term(i) : mx;
        }
#pragma omp taskloop reduction(+ : s_one) num_tasks(1)
        for (long i = 0; i < n; ++i) s_one += term(i);
#pragma omp taskloop reduction(+ : s_seven) num_tasks(7)
        for (long i = 0; i < n; ++i) s_seven += term(i);
#pragma omp taskloop reduction(+ : s_many) num_tasks(64)
        for (long i = 0; i < n; ++i) s_many += term(i);
        if (n <= 1000) {
#pragma omp taskloop reduction(+ : s_grain1) grainsize(1)
          for (long i = 0; i < n; ++i) s_grain1 += term(i);
        } else {
          s_grain1 = ref;
        }
#pragma omp taskloop reduction(+ : s_grain) grainsize(333)
        for (long i = n - 1; i >= 0; --i) s_grain += term(i);
        const ull base = 1ULL << 63;
#pragma omp taskloop reduction(+ : s_ull) grainsize(50)
        for (ull i = base; i < base + n; ++i) s_ull += term(static_cast<long>(i - base));
      }
    }
    CHECK_EQ(s_default, ref, "taskloop reduction(+), default split, n=%ld", n);
    CHECK_EQ(mx, ref_max, "taskloop reduction(max), default split, n=%ld", n);
    CHECK_EQ(s_one, ref, "taskloop reduction(+) num_tasks(1), n=%ld", n);
    CHECK_EQ(s_seven, ref, "taskloop reduction(+) num_tasks(7), n=%ld", n);
    CHECK_EQ(s_many, ref, "taskloop reduction(+) num_tasks(64), n=%ld", n);
    CHECK_EQ(s_grain1, ref, "taskloop reduction(+) grainsize(1), n=%ld", n);
    CHECK_EQ(s_grain, ref, "taskloop reduction(+) grainsize(333), counting down, n=%ld", n);
    CHECK_EQ(s_ull, ref, "taskloop reduction(+) over unsigned long long, n=%ld", n);
  }

  // Every thread runs a taskloop reduction of its own at once.
  constexpr long kN = 3000;
  int bad_threads = 0;
#pragma omp parallel
  {
    probe_here();
    const long t = omp_get_thread_num();
    long mine = t;
#pragma omp taskloop reduction(+ : mine) num_tasks(10)
    for (long i = 0; i < kN; ++i) mine += term(i + t);
    if (mine != t + term_sum(t, kN)) __atomic_add_fetch(&bad_threads, 1, __ATOMIC_RELAXED);
  }
  CHECK_EQ(bad_threads, 0, "taskloop reduction(+) in every thread at once: threads with a wrong sum");
}

void test_taskloop_in_reduction() {
  constexpr long kN = 2500, kTasks = 40;
  long s = 9, mx = -1000;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(+ : s) task_reduction(max : mx)
    {
#pragma omp taskloop in_reduction(+ : s) grainsize(5)
      for (long i = 0; i < kN; ++i) s += term(i);
#pragma omp taskloop in_reduction(+ : s) in_reduction(max : mx) num_tasks(9)
      for (long i = 0; i < kN; ++i) {
        s += 2 * term(i);
        mx = term(i) + i > mx ? term(i) + i : mx;
      }
      for (long k = 0; k < kTasks; ++k) {
#pragma omp task in_reduction(+ : s)
        s += k;
      }
    }
  }
  long ref_max = -1000;
  for (long i = 0; i < kN; ++i) ref_max = term(i) + i > ref_max ? term(i) + i : ref_max;
  CHECK_EQ(s, 9 + 3 * term_sum(0, kN) + kTasks * (kTasks - 1) / 2,
           "taskloop in_reduction(+) and tasks in a taskgroup task_reduction(+)");
  CHECK_EQ(mx, ref_max, "taskloop in_reduction(max) in a taskgroup task_reduction(max)");
}

void test_parallel_task_modifier() {
  constexpr long kPer = 200;
  long x = 5;
  int team = 0;
#pragma omp parallel reduction(task, + : x)
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    const long t = omp_get_thread_num();
    x += t + 1;  // the implicit task's own copy
    for (long k = 0; k < kPer; ++k) {
#pragma omp task in_reduction(+ : x)
      x += term(t * kPer + k);
    }
  }
  long expected = 5 + term_sum(0, team * kPer);
  for (long t = 0; t < team; ++t) expected += t + 1;
  CHECK_EQ(x, expected, "parallel reduction(task, +) with tasks from every thread (%d)", team);

  // Tasks of a taskloop in_reduction from one thread.
  constexpr long kN = 4000;
  long y = 8;
  int team2 = 0;
#pragma omp parallel reduction(task, + : y)
  {
    probe_here();
#pragma omp single
    {
      team2 = omp_get_num_threads();
#pragma omp taskloop in_reduction(+ : y) grainsize(16)
      for (long i = 0; i < kN; ++i) y += term(i);
    }
    y += 1;
  }
  CHECK_EQ(y, 8 + term_sum(0, kN) + team2,
           "parallel reduction(task, +) with a taskloop in_reduction from single");
}

void test_for_task_modifier() {
  for (long n : {0L, 7L, 1000L}) {
    const long expected_add = n + term_sum(0, n);
    long x_dynamic = 4, x_static = 4, x_combined = 4;
#pragma omp parallel
    {
      probe_here();
#pragma omp for reduction(task, + : x_dynamic) schedule(dynamic, 3)
      for (long i = 0; i < n; ++i) {
        x_dynamic += 1;
#pragma omp task in_reduction(+ : x_dynamic)
        x_dynamic += term(i);
      }
#pragma omp for reduction(task, + : x_static) schedule(static)
      for (long i = 0; i < n; ++i) {
        x_static += 1;
#pragma omp task in_reduction(+ : x_static)
        {
          if (i % 50 == 0) pause(1000);
          x_static += term(i);
        }
      }
    }
#pragma omp parallel for reduction(task, + : x_combined) schedule(guided)
    for (long i = 0; i < n; ++i) {
      if (i == 0) probe_here();
      x_combined += 1;
#pragma omp task in_reduction(+ : x_combined)
      x_combined += term(i);
    }
    CHECK_EQ(x_dynamic, 4 + expected_add, "for reduction(task, +) schedule(dynamic,3), n=%ld", n);
    CHECK_EQ(x_static, 4 + expected_add, "for reduction(task, +) schedule(static), n=%ld", n);
    CHECK_EQ(x_combined, 4 + expected_add,
             "parallel for reduction(task, +) schedule(guided), n=%ld", n);
  }
}

void test_sections_task_modifier() {
  constexpr long kPer = 120;
  long x = 6;
#pragma omp parallel
  {
    probe_here();
#pragma omp sections reduction(task, + : x)
    {
#pragma omp section
      {
        x += 1;
        for (long k = 0; k < kPer; ++k) {
#pragma omp task in_reduction(+ : x)
          x += term(k);
        }
      }
#pragma omp section
      {
        x += 2;
        for (long k = kPer; k < 2 * kPer; ++k) {
#pragma omp task in_reduction(+ : x)
          x += term(k);
        }
      }
#pragma omp section
      {
        x += 3;
        for (long k = 2 * kPer; k < 3 * kPer; ++k) {
#pragma omp task in_reduction(+ : x)
          x += term(k);
        }
      }
    }
  }
  CHECK_EQ(x, 6 + 1 + 2 + 3 + term_sum(0, 3 * kPer),
           "sections reduction(task, +) with tasks in_reduction in each section");
}

void test_nested() {
  // An inner taskgroup in the outer one's body, same variable.
  constexpr long kOuter = 100, kInner = 150;
  long s = 2;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(+ : s)
    {
      for (long k = 0; k < kOuter; ++k) {
#pragma omp task in_reduction(+ : s)
        s += 1;
      }
#pragma omp taskgroup task_reduction(+ : s)
      {
        for (long k = 0; k < kInner; ++k) {
#pragma omp task in_reduction(+ : s)
          s += 1000 + term(k);
        }
      }
      for (long k = 0; k < kOuter; ++k) {
#pragma omp task in_reduction(+ : s)
        s += 1;
      }
    }
  }
  CHECK_EQ(s, 2 + 2 * kOuter + 1000 * kInner + term_sum(0, kInner),
           "nested taskgroups task_reduction(+) of the same variable");

  // A participating task opens a taskgroup reducing the same variable: its
  // children add to the task's own copy, which the outer taskgroup combines.
  constexpr long kParents = 12, kChildren = 30;
  long r = 1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
#pragma omp taskgroup task_reduction(+ : r)
    {
      for (long p = 0; p < kParents; ++p) {
#pragma omp task in_reduction(+ : r)
        {
          r += 1;
#pragma omp taskgroup task_reduction(+ : r)
          {
            for (long c = 0; c < kChildren; ++c) {
#pragma omp task in_reduction(+ : r)
              r += 10 + term(p * kChildren + c);
            }
          }
          r += 100;
        }
      }
    }
  }
  CHECK_EQ(r, 1 + kParents * (1 + 10 * kChildren + 100) + term_sum(0, kParents * kChildren),
           "taskgroup task_reduction(+: r) inside tasks in_reduction(+: r)");
}

}  // namespace

int main() {
  test_begin("task_reduction");
  test_taskgroup_single();
  test_taskgroup_generators();
  test_per_thread_taskgroups();
  test_operators();
  test_arrays();
  test_user_defined();
  test_taskloop_reduction();
  test_taskloop_in_reduction();
  test_parallel_task_modifier();
  test_for_task_modifier();
  test_sections_task_modifier();
  test_nested();
  return test_end();
}
