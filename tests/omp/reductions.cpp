// omp-test reductions: the reduction clause, checked against the same loop run
// serially.
//
// + * min max on int, long and double (values a double holds exactly, so the
// order of combination does not matter); && || on int; & | ^ on int; one
// variable alone (GCC combines it with an atomic operation) and several at
// once (GCC combines them under GOMP_atomic_start); non-neutral initial values
// and empty loops (the original value must survive); reduction on `parallel`,
// on `for` inside `parallel` (the result visible to all threads after the
// loop's barrier, and with nowait after an explicit barrier), on `sections`;
// C++ `declare reduction` on a struct and on std::vector; array and
// array-section reductions (fixed and runtime length).
#include <omp.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "check.h"

#define OMP_TEST_STR(x) #x
#define OMP_PRAGMA(x) _Pragma(OMP_TEST_STR(x))

namespace {

constexpr long kSizes[] = {0, 1, 3, 1000, 10007};

// Deterministic pseudo-random values.
inline unsigned mix(long i) {
  unsigned x = static_cast<unsigned>(i) * 2654435761u + 12345u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  return x ^ (x >> 15);
}
inline int ival(long i) { return static_cast<int>(mix(i) % 2001) - 1000; }
inline long lval(long i) { return static_cast<long>(mix(i)) * 4099L - (1L << 40); }
inline double dval(long i) { return 0.25 * static_cast<double>(static_cast<int>(mix(i) % 801) - 400); }

// Factors for products: mostly 1, a few 2 or -1 (int) / 3 (long) / 2, 0.5 (double).
inline int ifactor(long i) { return i % 2003 == 5 ? 2 : i % 317 == 7 ? -1 : 1; }
inline long lfactor(long i) { return i % 997 == 3 ? 3 : 1; }
inline double dfactor(long i) { return i % 101 == 1 ? 2.0 : i % 103 == 2 ? 0.5 : 1.0; }

void test_single_variables() {
  for (long n : kSizes) {
    // + on each type, alone.
    int isum = 7, isum_ref = 7;
    OMP_PRAGMA(omp parallel for reduction(+ : isum))
    for (long i = 0; i < n; ++i) isum += ival(i);
    for (long i = 0; i < n; ++i) isum_ref += ival(i);
    CHECK_EQ(isum, isum_ref, "reduction(+) int alone, n=%ld", n);

    long lsum = -3, lsum_ref = -3;
    OMP_PRAGMA(omp parallel for reduction(+ : lsum))
    for (long i = 0; i < n; ++i) lsum += lval(i);
    for (long i = 0; i < n; ++i) lsum_ref += lval(i);
    CHECK_EQ(lsum, lsum_ref, "reduction(+) long alone, n=%ld", n);

    double dsum = 1.5, dsum_ref = 1.5;
    OMP_PRAGMA(omp parallel for reduction(+ : dsum))
    for (long i = 0; i < n; ++i) dsum += dval(i);
    for (long i = 0; i < n; ++i) dsum_ref += dval(i);
    check_eq_double(dsum, dsum_ref, "reduction(+) double alone, n=%ld", n);

    // - is + with the same identity.
    long ldiff = 100, ldiff_ref = 100;
    OMP_PRAGMA(omp parallel for reduction(- : ldiff))
    for (long i = 0; i < n; ++i) ldiff -= lval(i);
    for (long i = 0; i < n; ++i) ldiff_ref -= lval(i);
    CHECK_EQ(ldiff, ldiff_ref, "reduction(-) long alone, n=%ld", n);

    double dmax = -1e9, dmax_ref = -1e9;
    OMP_PRAGMA(omp parallel for reduction(max : dmax))
    for (long i = 0; i < n; ++i) dmax = dval(i) > dmax ? dval(i) : dmax;
    for (long i = 0; i < n; ++i) dmax_ref = dval(i) > dmax_ref ? dval(i) : dmax_ref;
    check_eq_double(dmax, dmax_ref, "reduction(max) double alone, n=%ld", n);

    int imin = 5000, imin_ref = 5000;
    OMP_PRAGMA(omp parallel for reduction(min : imin))
    for (long i = 0; i < n; ++i) imin = ival(i) < imin ? ival(i) : imin;
    for (long i = 0; i < n; ++i) imin_ref = ival(i) < imin_ref ? ival(i) : imin_ref;
    CHECK_EQ(imin, imin_ref, "reduction(min) int alone, n=%ld", n);

    double dprod = 3.0, dprod_ref = 3.0;
    OMP_PRAGMA(omp parallel for reduction(* : dprod))
    for (long i = 0; i < n; ++i) dprod *= dfactor(i);
    for (long i = 0; i < n; ++i) dprod_ref *= dfactor(i);
    check_eq_double(dprod, dprod_ref, "reduction(*) double alone, n=%ld", n);

    int ixor = 0x5a5a, ixor_ref = 0x5a5a;
    OMP_PRAGMA(omp parallel for reduction(^ : ixor) schedule(dynamic, 3))
    for (long i = 0; i < n; ++i) ixor ^= static_cast<int>(mix(i));
    for (long i = 0; i < n; ++i) ixor_ref ^= static_cast<int>(mix(i));
    CHECK_EQ(ixor, ixor_ref, "reduction(^) int alone with schedule(dynamic,3), n=%ld", n);
  }
}

void test_many_variables() {
  for (long n : kSizes) {
    int isum = 1, iprod = 1, imin = INT_MAX, imax = INT_MIN;
    long lsum = 2, lprod = 1, lmin = LONG_MAX, lmax = LONG_MIN;
    double dsum = 0.5, dprod = 1.0, dmin = 1e300, dmax = -1e300;
    int land = 1, lor = 0, band = ~0, bor = 0, bxor = 0;
    // A second `&&` that must come out false and a second `||` that must come out true.
    int land_false = 1, lor_true = 0;
    auto body = [&](long i, int& is, int& ip, int& imn, int& imx, long& ls, long& lp, long& lmn,
                    long& lmx, double& ds, double& dp, double& dmn, double& dmx, int& la, int& lo,
                    int& ba, int& bo, int& bx, int& laf, int& lot) {
      is += ival(i);
      ip *= ifactor(i);
      imn = ival(i) < imn ? ival(i) : imn;
      imx = ival(i) > imx ? ival(i) : imx;
      ls += lval(i);
      lp *= lfactor(i);
      lmn = lval(i) < lmn ? lval(i) : lmn;
      lmx = lval(i) > lmx ? lval(i) : lmx;
      ds += dval(i);
      dp *= dfactor(i);
      dmn = dval(i) < dmn ? dval(i) : dmn;
      dmx = dval(i) > dmx ? dval(i) : dmx;
      la = la && (ival(i) >= -1000);
      lo = lo || (ival(i) > 2000);
      ba &= i % 1009 == 3 ? ~(1 << (mix(i) % 31)) : ~0;
      bo |= i % 701 == 0 ? 1 << (mix(i) % 29) : 0;
      bx ^= static_cast<int>(mix(i) >> 1);
      laf = laf && (i != n / 2);
      lot = lot || (i == n - 1);
    };
    OMP_PRAGMA(omp parallel for reduction(+ : isum, lsum, dsum) reduction(* : iprod, lprod, dprod)
                   reduction(min : imin, lmin, dmin) reduction(max : imax, lmax, dmax)
                       reduction(&& : land, land_false) reduction(|| : lor, lor_true)
                           reduction(& : band) reduction(| : bor) reduction(^ : bxor))
    for (long i = 0; i < n; ++i) {
      body(i, isum, iprod, imin, imax, lsum, lprod, lmin, lmax, dsum, dprod, dmin, dmax, land, lor,
           band, bor, bxor, land_false, lor_true);
    }
    int r_isum = 1, r_iprod = 1, r_imin = INT_MAX, r_imax = INT_MIN;
    long r_lsum = 2, r_lprod = 1, r_lmin = LONG_MAX, r_lmax = LONG_MIN;
    double r_dsum = 0.5, r_dprod = 1.0, r_dmin = 1e300, r_dmax = -1e300;
    int r_land = 1, r_lor = 0, r_band = ~0, r_bor = 0, r_bxor = 0, r_land_false = 1, r_lor_true = 0;
    for (long i = 0; i < n; ++i) {
      body(i, r_isum, r_iprod, r_imin, r_imax, r_lsum, r_lprod, r_lmin, r_lmax, r_dsum, r_dprod,
           r_dmin, r_dmax, r_land, r_lor, r_band, r_bor, r_bxor, r_land_false, r_lor_true);
    }
    CHECK_EQ(isum, r_isum, "several: reduction(+) int, n=%ld", n);
    CHECK_EQ(lsum, r_lsum, "several: reduction(+) long, n=%ld", n);
    check_eq_double(dsum, r_dsum, "several: reduction(+) double, n=%ld", n);
    CHECK_EQ(iprod, r_iprod, "several: reduction(*) int, n=%ld", n);
    CHECK_EQ(lprod, r_lprod, "several: reduction(*) long, n=%ld", n);
    check_eq_double(dprod, r_dprod, "several: reduction(*) double, n=%ld", n);
    CHECK_EQ(imin, r_imin, "several: reduction(min) int, n=%ld", n);
    CHECK_EQ(lmin, r_lmin, "several: reduction(min) long, n=%ld", n);
    check_eq_double(dmin, r_dmin, "several: reduction(min) double, n=%ld", n);
    CHECK_EQ(imax, r_imax, "several: reduction(max) int, n=%ld", n);
    CHECK_EQ(lmax, r_lmax, "several: reduction(max) long, n=%ld", n);
    check_eq_double(dmax, r_dmax, "several: reduction(max) double, n=%ld", n);
    CHECK_EQ(land, r_land, "several: reduction(&&) int (true), n=%ld", n);
    CHECK_EQ(land_false, r_land_false, "several: reduction(&&) int (false), n=%ld", n);
    CHECK_EQ(lor, r_lor, "several: reduction(||) int (false), n=%ld", n);
    CHECK_EQ(lor_true, r_lor_true, "several: reduction(||) int (true), n=%ld", n);
    CHECK_EQ(band, r_band, "several: reduction(&) int, n=%ld", n);
    CHECK_EQ(bor, r_bor, "several: reduction(|) int, n=%ld", n);
    CHECK_EQ(bxor, r_bxor, "several: reduction(^) int, n=%ld", n);
  }
}

// reduction on `parallel`, on `for` inside `parallel`, on `sections`.
void test_constructs() {
  int team = 0;
  long tid_sum = 0;
  int tid_max = -1;
  double half_sum = 0.0;
  OMP_PRAGMA(omp parallel reduction(+ : tid_sum, half_sum) reduction(max : tid_max))
  {
    probe_here();
    tid_sum += omp_get_thread_num() + 1;
    half_sum += 0.5;
    tid_max = omp_get_thread_num() > tid_max ? omp_get_thread_num() : tid_max;
    OMP_PRAGMA(omp master)
    team = omp_get_num_threads();
  }
  CHECK_EQ(tid_sum, static_cast<long>(team) * (team + 1) / 2,
           "reduction(+) on parallel: sum of thread ids + 1 (team %d)", team);
  check_eq_double(half_sum, 0.5 * team, "reduction(+) double on parallel (team %d)", team);
  CHECK_EQ(tid_max, team - 1, "reduction(max) on parallel (team %d)", team);

  long one = 0;
  OMP_PRAGMA(omp parallel num_threads(1) reduction(+ : one))
  one += 1;
  CHECK_EQ(one, 1, "reduction(+) on parallel num_threads(1)");

  for (long n : kSizes) {
    long ref = 0;
    for (long i = 0; i < n; ++i) ref += lval(i);
    long shared_sum = 0, nowait_sum = 0;
    int saw_wrong = 0, saw_wrong_nowait = 0;
    OMP_PRAGMA(omp parallel) {
      probe_here();
      OMP_PRAGMA(omp for reduction(+ : shared_sum) schedule(guided))
      for (long i = 0; i < n; ++i) shared_sum += lval(i);
      // The loop's barrier comes after the combination: every thread sees the result.
      if (shared_sum != ref) __atomic_store_n(&saw_wrong, 1, __ATOMIC_RELAXED);
      OMP_PRAGMA(omp for reduction(+ : nowait_sum) nowait)
      for (long i = 0; i < n; ++i) nowait_sum += lval(i);
      OMP_PRAGMA(omp barrier)
      if (nowait_sum != ref) __atomic_store_n(&saw_wrong_nowait, 1, __ATOMIC_RELAXED);
    }
    CHECK_EQ(shared_sum, ref, "reduction(+) on for in parallel, n=%ld", n);
    CHECK_EQ(saw_wrong, 0, "reduction(+) on for: a thread saw another value after the loop, n=%ld",
             n);
    CHECK_EQ(nowait_sum, ref, "reduction(+) on for nowait, n=%ld", n);
    CHECK_EQ(saw_wrong_nowait, 0,
             "reduction(+) on for nowait: a thread saw another value after a barrier, n=%ld", n);
  }

  long sections_sum = 10;
  OMP_PRAGMA(omp parallel sections reduction(+ : sections_sum))
  {
    OMP_PRAGMA(omp section)
    sections_sum += 1;
    OMP_PRAGMA(omp section)
    sections_sum += 20;
    OMP_PRAGMA(omp section)
    sections_sum += 300;
    OMP_PRAGMA(omp section)
    sections_sum += 4000;
  }
  CHECK_EQ(sections_sum, 4331, "reduction(+) on parallel sections");
}

// User-defined reductions (C++).
struct Stats {
  long sum = 0;
  long min = LONG_MAX;
  long count = 0;
};
inline void merge(Stats& into, const Stats& from) {
  into.sum += from.sum;
  into.min = from.min < into.min ? from.min : into.min;
  into.count += from.count;
}
inline void merge(std::vector<long>& into, const std::vector<long>& from) {
  for (size_t k = 0; k < into.size() && k < from.size(); ++k) into[k] += from[k];
}

OMP_PRAGMA(omp declare reduction(stats : Stats : merge(omp_out, omp_in)) initializer(omp_priv = Stats()))
OMP_PRAGMA(omp declare reduction(vadd : std::vector<long> : merge(omp_out, omp_in))
               initializer(omp_priv = std::vector<long>(omp_orig.size(), 0)))

void test_user_defined() {
  for (long n : kSizes) {
    Stats stats, ref;
    stats.sum = ref.sum = 1000;  // the original takes part like any other value
    stats.count = ref.count = 1;
    OMP_PRAGMA(omp parallel for reduction(stats : stats) schedule(dynamic, 4))
    for (long i = 0; i < n; ++i) {
      stats.sum += ival(i);
      stats.min = ival(i) < stats.min ? ival(i) : stats.min;
      stats.count += 1;
    }
    for (long i = 0; i < n; ++i) {
      ref.sum += ival(i);
      ref.min = ival(i) < ref.min ? ival(i) : ref.min;
      ref.count += 1;
    }
    CHECK_EQ(stats.sum, ref.sum, "declare reduction on a struct: sum, n=%ld", n);
    CHECK_EQ(stats.min, ref.min, "declare reduction on a struct: min, n=%ld", n);
    CHECK_EQ(stats.count, ref.count, "declare reduction on a struct: count, n=%ld", n);

    std::vector<long> hist(17, 1), hist_ref(17, 1);
    OMP_PRAGMA(omp parallel for reduction(vadd : hist))
    for (long i = 0; i < n; ++i) hist[mix(i) % 17] += 1;
    for (long i = 0; i < n; ++i) hist_ref[mix(i) % 17] += 1;
    for (int k = 0; k < 17; ++k) {
      CHECK_EQ(hist[k], hist_ref[k], "declare reduction on std::vector: bin %d, n=%ld", k, n);
    }
  }
}

// Arrays: a whole array, a section of a fixed array, a section of runtime length.
void test_arrays() {
  for (long n : kSizes) {
    long whole[8] = {1, 2, 3, 4, 5, 6, 7, 8}, whole_ref[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    OMP_PRAGMA(omp parallel for reduction(+ : whole))
    for (long i = 0; i < n; ++i) whole[mix(i) % 8] += i;
    for (long i = 0; i < n; ++i) whole_ref[mix(i) % 8] += i;
    for (int k = 0; k < 8; ++k) {
      CHECK_EQ(whole[k], whole_ref[k], "reduction(+) on a whole array: element %d, n=%ld", k, n);
    }

    // Only [4:16] takes part; the elements around it must stay untouched.
    int hist[24], hist_ref[24];
    for (int k = 0; k < 24; ++k) hist[k] = hist_ref[k] = k;
    OMP_PRAGMA(omp parallel for reduction(+ : hist[4 : 16]))
    for (long i = 0; i < n; ++i) hist[4 + mix(i) % 16] += 1;
    for (long i = 0; i < n; ++i) hist_ref[4 + mix(i) % 16] += 1;
    for (int k = 0; k < 24; ++k) {
      CHECK_EQ(hist[k], hist_ref[k], "reduction(+) on section hist[4:16]: element %d, n=%ld", k,
               n);
    }

    const long len = 5 + n % 7;
    std::vector<double> maxes(len, -1.0), maxes_ref(len, -1.0);
    double* m = maxes.data();
    OMP_PRAGMA(omp parallel for reduction(max : m[0 : len]))
    for (long i = 0; i < n; ++i) {
      long k = static_cast<long>(mix(i) % static_cast<unsigned>(len));
      m[k] = dval(i) > m[k] ? dval(i) : m[k];
    }
    for (long i = 0; i < n; ++i) {
      long k = static_cast<long>(mix(i) % static_cast<unsigned>(len));
      maxes_ref[k] = dval(i) > maxes_ref[k] ? dval(i) : maxes_ref[k];
    }
    for (long k = 0; k < len; ++k) {
      check_eq_double(maxes[k], maxes_ref[k],
                      "reduction(max) on section m[0:%ld] (runtime length): element %ld, n=%ld",
                      len, k, n);
    }
  }
}

}  // namespace

int main() {
  test_begin("reductions");
  test_single_variables();
  test_many_variables();
  test_constructs();
  test_user_defined();
  test_arrays();
  return test_end();
}
