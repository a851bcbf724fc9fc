// omp-test sync: synchronization constructs.
//
// critical (unnamed, two named ones, a named one nested in another, the
// unnamed one inside a named one) protecting read-pause-write updates that
// lose counts without mutual exclusion, plus an occupancy check; atomic
// update / read / write / capture / compare on int, long, double, and on long
// double and a 16-byte integer, which GCC 12 on x86-64 implements with
// GOMP_atomic_start/GOMP_atomic_end (captured values must be all distinct,
// reads never torn); barrier (no thread leaves phase p before every thread
// arrived, with a late arriver each phase); single with and without nowait
// (once per encounter, its writes visible after the implied barrier);
// single copyprivate of int, double and std::string; master; masked with the
// default filter and filter(1) and filter(last); sections, sections nowait,
// parallel sections, lastprivate on sections.
#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "check.h"

namespace {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

constexpr int kMaxTeam = 64;

// Short busy pause that the compiler cannot remove.
void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

// Read, pause, write: loses increments unless mutually excluded.
void slow_increment(long* p) {
  long v = __atomic_load_n(p, __ATOMIC_RELAXED);
  pause(20);
  __atomic_store_n(p, v + 1, __ATOMIC_RELAXED);
}

int team_size() {
  int n = 0;
#pragma omp parallel
  {
#pragma omp master
    n = omp_get_num_threads();
  }
  return n;
}

void test_critical() {
  constexpr int kPerThread = 3000;
  long unnamed = 0, alpha = 0, beta = 0, nested_beta = 0;
  int inside_unnamed = 0, inside_alpha = 0, inside_beta = 0, overlap = 0, team = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    for (int k = 0; k < kPerThread; ++k) {
#pragma omp critical
      {
        if (__atomic_add_fetch(&inside_unnamed, 1, __ATOMIC_RELAXED) != 1) {
          __atomic_store_n(&overlap, 1, __ATOMIC_RELAXED);
        }
        slow_increment(&unnamed);
        __atomic_sub_fetch(&inside_unnamed, 1, __ATOMIC_RELAXED);
      }
      if (k % 2 == 0) {
#pragma omp critical(alpha)
        {
          if (__atomic_add_fetch(&inside_alpha, 1, __ATOMIC_RELAXED) != 1) {
            __atomic_store_n(&overlap, 2, __ATOMIC_RELAXED);
          }
          slow_increment(&alpha);
          if (k % 10 == 0) {
            // A different name nested inside: must not wait for alpha.
#pragma omp critical(beta)
            slow_increment(&nested_beta);
            // The unnamed critical inside a named one.
#pragma omp critical
            slow_increment(&unnamed);
          }
          __atomic_sub_fetch(&inside_alpha, 1, __ATOMIC_RELAXED);
        }
      } else {
#pragma omp critical(beta)
        {
          if (__atomic_add_fetch(&inside_beta, 1, __ATOMIC_RELAXED) != 1) {
            __atomic_store_n(&overlap, 3, __ATOMIC_RELAXED);
          }
          slow_increment(&beta);
          __atomic_sub_fetch(&inside_beta, 1, __ATOMIC_RELAXED);
        }
      }
    }
  }
  long per_thread_nested = (kPerThread + 9) / 10;
  CHECK_EQ(unnamed, static_cast<long>(team) * (kPerThread + per_thread_nested),
           "critical (unnamed): counter (team %d)", team);
  CHECK_EQ(alpha, static_cast<long>(team) * (kPerThread / 2), "critical(alpha): counter (team %d)",
           team);
  CHECK_EQ(beta, static_cast<long>(team) * (kPerThread / 2), "critical(beta): counter (team %d)",
           team);
  CHECK_EQ(nested_beta, static_cast<long>(team) * per_thread_nested,
           "critical(beta) nested in critical(alpha): counter (team %d)", team);
  CHECK_EQ(overlap, 0, "critical: two threads inside at once (1 unnamed, 2 alpha, 3 beta)");
}

// Values of `total` captures must be exactly 0..total-1 (as long).
void check_captures(const char* what, std::vector<long>& values, long total) {
  std::sort(values.begin(), values.end());
  if (!CHECK_EQ(static_cast<long>(values.size()), total, "%s: number of captures", what)) return;
  for (long k = 0; k < total; ++k) {
    if (!CHECK_EQ(values[k], k, "%s: sorted captured values at %ld (each old value once)", what,
                  k)) {
      return;
    }
  }
}

void test_atomic() {
  constexpr int kPerThread = 2000;
  int i = 0;
  long l = 0;
  double d = 0.0;
  long double ld = 0.0L;
  int128 q = 0;
  int team = 0;
  std::vector<long> cap_i, cap_l, cap_d, cap_ld, cap_q, cap_pre;
  int pre = 0;
  long lmax = -1;
  double dmax = -1.0;
  int bad_read = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    std::vector<long> mine_i, mine_l, mine_d, mine_ld, mine_q, mine_pre;
    for (int k = 0; k < kPerThread; ++k) {
#pragma omp atomic
      i += 1;
#pragma omp atomic update
      l += 2;
#pragma omp atomic update
      d += 0.5;
#pragma omp atomic
      ld += 0.25L;
#pragma omp atomic update
      q += static_cast<int128>(1) << 70;

      int vi;
      long vl;
      double vd;
      long double vld;
      int128 vq;
#pragma omp atomic capture
      {
        vi = i;
        i += 1;
      }
#pragma omp atomic capture
      {
        vl = l;
        l += 2;
      }
#pragma omp atomic capture
      {
        vd = d;
        d += 0.5;
      }
#pragma omp atomic capture
      {
        vld = ld;
        ld += 0.25L;
      }
#pragma omp atomic capture
      {
        vq = q;
        q += static_cast<int128>(1) << 70;
      }
      int vpre;
#pragma omp atomic capture
      vpre = ++pre;
      // Scaled by the step, each captured value counts the updates before it.
      mine_i.push_back(vi);
      mine_l.push_back(vl / 2);
      mine_d.push_back(static_cast<long>(vd * 2));
      mine_ld.push_back(static_cast<long>(vld * 4));
      mine_q.push_back(static_cast<long>(vq >> 70));
      mine_pre.push_back(vpre - 1);

      long cand = (k * 7919L + omp_get_thread_num() * 104729L) % 1000003L;
#pragma omp atomic compare
      lmax = lmax < cand ? cand : lmax;
      double dcand = static_cast<double>(cand) * 0.5;
#pragma omp atomic compare
      dmax = dmax < dcand ? dcand : dmax;

      long rl;
      double rd;
#pragma omp atomic read
      rl = l;
#pragma omp atomic read
      rd = d;
      if (rl < 0 || rl % 2 != 0 || rd < 0.0) __atomic_store_n(&bad_read, 1, __ATOMIC_RELAXED);
    }
#pragma omp critical
    {
      cap_i.insert(cap_i.end(), mine_i.begin(), mine_i.end());
      cap_l.insert(cap_l.end(), mine_l.begin(), mine_l.end());
      cap_d.insert(cap_d.end(), mine_d.begin(), mine_d.end());
      cap_ld.insert(cap_ld.end(), mine_ld.begin(), mine_ld.end());
      cap_q.insert(cap_q.end(), mine_q.begin(), mine_q.end());
      cap_pre.insert(cap_pre.end(), mine_pre.begin(), mine_pre.end());
    }
  }
  long updates = static_cast<long>(team) * kPerThread;  // per variable, per kind
  CHECK_EQ(i, 2 * updates, "atomic update+capture int: final value (team %d)", team);
  CHECK_EQ(l, 4 * updates, "atomic update+capture long: final value (team %d)", team);
  check_eq_double(d, 1.0 * updates, "atomic update+capture double: final value (team %d)", team);
  check_eq_double(static_cast<double>(ld), 0.5 * updates,
                  "atomic update+capture long double: final value (team %d)", team);
  CHECK_EQ(static_cast<long>(q >> 70), 2 * updates,
           "atomic update+capture __int128: final value / 2^70 (team %d)", team);
  CHECK_EQ(static_cast<long>(q & ((static_cast<int128>(1) << 70) - 1)), 0,
           "atomic __int128: low 70 bits (team %d)", team);
  CHECK_EQ(pre, updates, "atomic capture v = ++x: final value (team %d)", team);
  // Captures interleave with plain updates of the same step, so the captured
  // counts are distinct numbers in [0, 2*updates).
  struct {
    const char* what;
    std::vector<long>* values;
  } captured[] = {{"atomic capture int", &cap_i},
                  {"atomic capture long", &cap_l},
                  {"atomic capture double", &cap_d},
                  {"atomic capture long double", &cap_ld},
                  {"atomic capture __int128", &cap_q}};
  for (auto& c : captured) {
    std::vector<long>& v = *c.values;
    std::sort(v.begin(), v.end());
    CHECK_EQ(static_cast<long>(v.size()), updates, "%s: number of captures", c.what);
    bool distinct = std::adjacent_find(v.begin(), v.end()) == v.end();
    check_true(distinct, "%s: captured old values all distinct", c.what);
    if (!v.empty()) {
      check_range(v.front(), 0, 2 * updates - 1, "%s: smallest captured value", c.what);
      check_range(v.back(), 0, 2 * updates - 1, "%s: largest captured value", c.what);
    }
  }
  check_captures("atomic capture v = ++x", cap_pre, updates);

  long lmax_ref = -1;
  for (int t = 0; t < team; ++t) {
    for (int k = 0; k < kPerThread; ++k) {
      lmax_ref = std::max(lmax_ref, (k * 7919L + t * 104729L) % 1000003L);
    }
  }
  CHECK_EQ(lmax, lmax_ref, "atomic compare (max) on long");
  check_eq_double(dmax, static_cast<double>(lmax_ref) * 0.5, "atomic compare (max) on double");
  CHECK_EQ(bad_read, 0, "atomic read saw an impossible value");
}

// Writers store one of two patterns whose halves agree; readers must never see
// a mix (the 16-byte and long double cases go through GOMP_atomic_start).
void test_atomic_read_write() {
  constexpr int kRounds = 4000;
  const uint128 pattern_a = (static_cast<uint128>(0x1111222233334444ull) << 64) | 0x1111222233334444ull;
  const uint128 pattern_b = (static_cast<uint128>(0xaaaabbbbccccddddull) << 64) | 0xaaaabbbbccccddddull;
  const long double ld_a = 1.0L / 3.0L, ld_b = -7.0L / 9.0L;
  uint128 q = pattern_a;
  long double ld = ld_a;
  long l = 1;
  int torn_q = 0, torn_ld = 0, torn_l = 0;
#pragma omp parallel
  {
    probe_here();
    bool writer = omp_get_thread_num() % 2 == 0;
    for (int k = 0; k < kRounds; ++k) {
      if (writer) {
        uint128 vq = k % 2 ? pattern_a : pattern_b;
        long double vld = k % 2 ? ld_a : ld_b;
        long vl = k % 2 ? 1 : -1;
#pragma omp atomic write
        q = vq;
#pragma omp atomic write
        ld = vld;
#pragma omp atomic write
        l = vl;
      } else {
        uint128 vq;
        long double vld;
        long vl;
#pragma omp atomic read
        vq = q;
#pragma omp atomic read
        vld = ld;
#pragma omp atomic read
        vl = l;
        if (vq != pattern_a && vq != pattern_b) __atomic_store_n(&torn_q, 1, __ATOMIC_RELAXED);
        if (vld != ld_a && vld != ld_b) __atomic_store_n(&torn_ld, 1, __ATOMIC_RELAXED);
        if (vl != 1 && vl != -1) __atomic_store_n(&torn_l, 1, __ATOMIC_RELAXED);
      }
    }
  }
  CHECK_EQ(torn_q, 0, "atomic read/write unsigned __int128: a read saw neither written value");
  CHECK_EQ(torn_ld, 0, "atomic read/write long double: a read saw neither written value");
  CHECK_EQ(torn_l, 0, "atomic read/write long: a read saw neither written value");
}

void test_barrier() {
  constexpr int kPhases = 200;
  std::vector<int> arrived(kPhases, 0);
  int team = 0, early = 0, first_bad = -1;
#pragma omp parallel
  {
    probe_here();
    int t = omp_get_thread_num();
    int n = omp_get_num_threads();
#pragma omp master
    team = n;
    for (int p = 0; p < kPhases; ++p) {
      if (p % n == t) pause(2000);  // a late arriver, a different one each phase
      __atomic_add_fetch(&arrived[p], 1, __ATOMIC_RELAXED);
#pragma omp barrier
      int seen = __atomic_load_n(&arrived[p], __ATOMIC_RELAXED);
      if (seen != n) {
        __atomic_store_n(&early, 1, __ATOMIC_RELAXED);
        int none = -1;
        __atomic_compare_exchange_n(&first_bad, &none, p, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
      }
    }
  }
  CHECK_EQ(early, 0, "barrier: a thread passed phase %d before all %d arrived", first_bad, team);
  for (int p = 0; p < kPhases; ++p) {
    if (!CHECK_EQ(arrived[p], team, "barrier: arrivals in phase %d", p)) break;
  }
}

void test_single_master_masked() {
  constexpr int kSingles = 100;
  std::vector<int> execs(kSingles, 0), execs_nowait(kSingles, 0);
  std::vector<long> values(kSingles, -1);
  int not_visible = 0, team = 0, copy_bad = 0, copied_runs = 0;
  int master_runs = 0, master_not_zero = 0;
  int masked_runs = 0, masked_not_zero = 0, masked1_runs = 0, masked1_wrong = 0;
  int masked_last_runs = 0, masked_last_wrong = 0;
#pragma omp parallel
  {
    probe_here();
    int t = omp_get_thread_num();
    int n = omp_get_num_threads();
#pragma omp master
    team = n;
    for (int k = 0; k < kSingles; ++k) {
#pragma omp single
      {
        count_hit(&execs[k]);
        values[k] = 3L * k + 1;
      }
      // The single's implied barrier makes its write visible to all.
      if (values[k] != 3L * k + 1) __atomic_store_n(&not_visible, 1, __ATOMIC_RELAXED);
#pragma omp single nowait
      count_hit(&execs_nowait[k]);
    }

    for (int k = 0; k < 20; ++k) {
      int x = -1;
      double y = -1.0;
      std::string s = "unset";
#pragma omp single copyprivate(x, y, s)
      {
        x = 1000 + k;
        y = 0.5 * k;
        s = "value " + std::to_string(k) + " from thread " + std::to_string(t);
        count_hit(&copied_runs);
      }
      if (x != 1000 + k || y != 0.5 * k || s.rfind("value " + std::to_string(k) + " ", 0) != 0) {
        __atomic_store_n(&copy_bad, 1, __ATOMIC_RELAXED);
      }
    }

#pragma omp master
    {
      count_hit(&master_runs);
      if (t != 0) __atomic_store_n(&master_not_zero, 1, __ATOMIC_RELAXED);
    }
#pragma omp masked
    {
      count_hit(&masked_runs);
      if (t != 0) __atomic_store_n(&masked_not_zero, 1, __ATOMIC_RELAXED);
    }
#pragma omp masked filter(1)
    {
      count_hit(&masked1_runs);
      if (t != 1) __atomic_store_n(&masked1_wrong, 1, __ATOMIC_RELAXED);
    }
    int last = n - 1;
#pragma omp masked filter(last)
    {
      count_hit(&masked_last_runs);
      if (t != n - 1) __atomic_store_n(&masked_last_wrong, 1, __ATOMIC_RELAXED);
    }
  }
  check_counts(execs.data(), kSingles, 1, "single: executions per encounter (team %d)", team);
  check_counts(execs_nowait.data(), kSingles, 1, "single nowait: executions per encounter");
  CHECK_EQ(not_visible, 0, "single: a thread did not see the single's write after it");
  CHECK_EQ(copied_runs, 20, "single copyprivate: executions of the single");
  CHECK_EQ(copy_bad, 0, "single copyprivate: a thread's copy of int/double/std::string differs");
  CHECK_EQ(master_runs, 1, "master: executions");
  CHECK_EQ(master_not_zero, 0, "master: executed by a thread other than 0");
  CHECK_EQ(masked_runs, 1, "masked: executions");
  CHECK_EQ(masked_not_zero, 0, "masked: executed by a thread other than 0");
  CHECK_EQ(masked1_runs, team > 1 ? 1 : 0, "masked filter(1): executions (team %d)", team);
  CHECK_EQ(masked1_wrong, 0, "masked filter(1): executed by a thread other than 1");
  CHECK_EQ(masked_last_runs, 1, "masked filter(last): executions (team %d)", team);
  CHECK_EQ(masked_last_wrong, 0, "masked filter(last): executed by another thread");
}

void test_sections() {
  constexpr int kSections = 7;
  int runs[kSections] = {}, runs_nowait[3] = {}, runs_combined[5] = {};
  int incomplete_after_barrier = 0, last_value = -1, team = 0;
  int section_threads[kMaxTeam] = {};
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
#pragma omp sections
    {
#pragma omp section
      count_hit(&runs[0]);
#pragma omp section
      count_hit(&runs[1]);
#pragma omp section
      count_hit(&runs[2]);
#pragma omp section
      count_hit(&runs[3]);
#pragma omp section
      count_hit(&runs[4]);
#pragma omp section
      count_hit(&runs[5]);
#pragma omp section
      {
        pause(5000);
        count_hit(&runs[6]);
      }
    }
    // The implied barrier: all sections are done.
    for (int k = 0; k < kSections; ++k) {
      if (__atomic_load_n(&runs[k], __ATOMIC_RELAXED) != 1) {
        __atomic_store_n(&incomplete_after_barrier, 1, __ATOMIC_RELAXED);
      }
    }
#pragma omp sections nowait
    {
#pragma omp section
      count_hit(&runs_nowait[0]);
#pragma omp section
      count_hit(&runs_nowait[1]);
#pragma omp section
      count_hit(&runs_nowait[2]);
    }
#pragma omp barrier
#pragma omp sections lastprivate(last_value)
    {
#pragma omp section
      last_value = 1;
#pragma omp section
      last_value = 2;
#pragma omp section
      last_value = 3;
    }
  }
#pragma omp parallel sections num_threads(2)
  {
#pragma omp section
    {
      count_hit(&runs_combined[0]);
      count_hit(&section_threads[omp_get_thread_num() % kMaxTeam]);
    }
#pragma omp section
    {
      count_hit(&runs_combined[1]);
      count_hit(&section_threads[omp_get_thread_num() % kMaxTeam]);
    }
#pragma omp section
    {
      count_hit(&runs_combined[2]);
      count_hit(&section_threads[omp_get_thread_num() % kMaxTeam]);
    }
#pragma omp section
    {
      count_hit(&runs_combined[3]);
      count_hit(&section_threads[omp_get_thread_num() % kMaxTeam]);
    }
#pragma omp section
    {
      count_hit(&runs_combined[4]);
      count_hit(&section_threads[omp_get_thread_num() % kMaxTeam]);
    }
  }
  check_counts(runs, kSections, 1, "sections: executions of each section (team %d)", team);
  check_counts(runs_nowait, 3, 1, "sections nowait: executions of each section");
  check_counts(runs_combined, 5, 1, "parallel sections num_threads(2): executions of each section");
  CHECK_EQ(incomplete_after_barrier, 0, "sections: a section not done after the implied barrier");
  CHECK_EQ(last_value, 3, "sections lastprivate: value of the lexically last section");
  int outside_team = 0;
  for (int k = 2; k < kMaxTeam; ++k) outside_team += section_threads[k];
  CHECK_EQ(outside_team, 0, "parallel sections num_threads(2): sections run by thread ids >= 2");
}

}  // namespace

int main() {
  test_begin("sync");
  check_true(team_size() >= 1, "team size >= 1");
  test_critical();
  test_atomic();
  test_atomic_read_write();
  test_barrier();
  test_single_master_masked();
  test_sections();
  return test_end();
}
