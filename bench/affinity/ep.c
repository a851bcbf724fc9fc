/* EP, the NAS Parallel Benchmarks' "embarrassingly parallel" kernel, written
 * for the affinity study (issue 29, docs/affinity.md) from the NPB 3
 * specification: 2^M pairs of uniform deviates (x, y) in (-1, 1) from the
 * NPB generator (npb.h) seeded with 271828183; each pair inside the unit
 * disc (t = x^2 + y^2 <= 1) gives two Gaussian deviates
 * X = x sqrt(-2 ln t / t), Y = y sqrt(-2 ln t / t) (Marsaglia's polar
 * method), counted by the annulus l <= max(|X|, |Y|) < l + 1, and summed
 * into sx and sy, which are checked against the specification's values to
 * a relative 1e-8.
 *
 * Pair j takes the generator's numbers 2j+1 and 2j+2 after the seed, so the
 * pairs split into blocks of 2^16 whose start is a jump of the generator:
 * threads take blocks statically and never share a number. CPU-bound, with
 * a few hundred bytes of data per thread: the study's counterpart to MG,
 * where placement should not matter (paper 002, section 4). */
#define _GNU_SOURCE 1 /* syscall(2), for perf_event_open (npb.h) */
#include <math.h>

#include "npb.h"

#define BLOCK_LOG 16
#define ANNULI 10

static int class_log_pairs(char c) {
  switch (c) {
    case 'S':
      return 24;
    case 'W':
      return 25;
    case 'A':
      return 28;
    case 'B':
      return 30;
    default:
      return 32; /* C */
  }
}

/* The specification's sums (NPB 3, EP verification values). */
static void class_reference(char c, double* sx, double* sy) {
  switch (c) {
    case 'S':
      *sx = -3.247834652034740e+3, *sy = -6.958407078382297e+3;
      break;
    case 'W':
      *sx = -2.863319731645753e+3, *sy = -6.320053679109499e+3;
      break;
    case 'A':
      *sx = -4.295875165629892e+3, *sy = -1.580732573678431e+4;
      break;
    case 'B':
      *sx = 4.033815542441498e+4, *sy = -2.660669192809235e+4;
      break;
    default:
      *sx = 4.764367927995374e+4, *sy = -8.084072988043731e+4;
      break;
  }
}

int main(int argc, char** argv) {
  const struct npb_args args = npb_parse(argc, argv, "ep", "SWABC");
  const int log_pairs = class_log_pairs(args.cls);
  const int threads = npb_start_team();
  struct npb_counters counters;
  npb_counters_open(&counters, threads);
  const long long migrations_before = npb_migrations();

  const uint64_t seed = 271828183ull;
  const long long blocks = 1ll << (log_pairs - BLOCK_LOG);
  const int block_pairs = 1 << BLOCK_LOG;
  const uint64_t block_jump = npb_pow(NPB_A, 2ull * (uint64_t)block_pairs);
  double sx = 0.0, sy = 0.0;
  double counts[ANNULI] = {0};

  npb_counters_switch(&counters, 1);
  const double t0 = omp_get_wtime();
#pragma omp parallel
  {
    double my_counts[ANNULI] = {0};
    double my_sx = 0.0, my_sy = 0.0;
#pragma omp for schedule(static)
    for (long long b = 0; b < blocks; ++b) {
      uint64_t x = npb_mul(seed, npb_pow(block_jump, (uint64_t)b));
      for (int j = 0; j < block_pairs; ++j) {
        x = npb_mul(x, NPB_A);
        const double u = 2.0 * npb_unit(x) - 1.0;
        x = npb_mul(x, NPB_A);
        const double v = 2.0 * npb_unit(x) - 1.0;
        const double t = u * u + v * v;
        if (t <= 1.0 && t > 0.0) {
          const double f = sqrt(-2.0 * log(t) / t);
          const double gx = u * f, gy = v * f;
          int l = (int)fmax(fabs(gx), fabs(gy));
          if (l >= ANNULI) l = ANNULI - 1; /* beyond 10 sigma: never at these sizes */
          my_counts[l] += 1.0;
          my_sx += gx;
          my_sy += gy;
        }
      }
    }
#pragma omp critical
    {
      for (int l = 0; l < ANNULI; ++l) counts[l] += my_counts[l];
      sx += my_sx;
      sy += my_sy;
    }
  }
  const double seconds = omp_get_wtime() - t0;
  npb_counters_switch(&counters, 0);
  npb_counters_close(&counters);
  const long long migrations_after = npb_migrations();

  double ref_sx, ref_sy;
  class_reference(args.cls, &ref_sx, &ref_sy);
  const double err_x = fabs((sx - ref_sx) / ref_sx), err_y = fabs((sy - ref_sy) / ref_sy);
  const int verified = err_x <= 1e-8 && err_y <= 1e-8;
  double pairs = 0.0;
  for (int l = 0; l < ANNULI; ++l) pairs += counts[l];

  char detail[256];
  snprintf(detail, sizeof detail, "sx=%.15e sy=%.15e (errors %.1e %.1e), %.0f Gaussian pairs", sx,
           sy, err_x, err_y, pairs);
  npb_report(
      &args, "ep", threads, seconds, verified,
      migrations_before >= 0 && migrations_after >= 0 ? migrations_after - migrations_before : -1,
      &counters, detail);
  return verified ? 0 : 1;
}
