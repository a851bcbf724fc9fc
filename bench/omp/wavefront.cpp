// Wavefront sweeps whose threads wait on each other by spinning (issue 22's
// benchmark): the lower and upper triangular sweeps of an SSOR iteration, as
// NPB's LU pipelines them. Rows are split among the threads; thread t
// updates column block j once thread t-1 finished it (the lower sweep; the
// upper one runs backwards), waiting in a loop that reads a flag and
// flushes -- no runtime call. A plain OpenMP program, built twice like the
// other bench/omp programs (omp_wavefront_weft links libweft-omp,
// omp_wavefront_gomp libgomp).
//
// Teams of T threads come from num_threads(T) (--teams), not from
// OMP_NUM_THREADS: weft's node then has one PE per core, and a team larger
// than the cores is the case that needs each thread to progress on its own
// (libweft-omp runs the threads beyond the PEs on carrier threads), the
// same count of threads as libgomp's. Milliseconds per pair of sweeps,
// median over repeats; the result is checked against a serial sweep.
#include <omp.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "common/harness.hpp"

#ifndef WEFT_OMP_RUNTIME
#error "build with -DWEFT_OMP_RUNTIME=\"weft\" or \"gomp\""
#endif

namespace {

long g_rows = 256, g_cols = 1024, g_block = 32;

// done[t]: column blocks thread t finished in the current sweep (one cache
// line each: the flags are what the threads spin on).
struct alignas(64) progress_flag {
  volatile long blocks;
};

inline double& at(std::vector<double>& u, long i, long j) {
  return u[std::size_t(i * g_cols + j)];
}

// One lower (forward) and one upper (backward) sweep over u by `team`
// threads, pipelined by column blocks.
void sweep_pair(std::vector<double>& u, int team, std::vector<progress_flag>& done) {
  const long nblocks = (g_cols + g_block - 1) / g_block;
#pragma omp parallel num_threads(team)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const long r0 = g_rows * t / n, r1 = g_rows * (t + 1) / n;
    for (int dir = 0; dir < 2; ++dir) {
#pragma omp single
      for (int k = 0; k < n; ++k) done[std::size_t(k)].blocks = 0;
      // (single ends with a barrier: every flag is 0 before anyone waits.)
      const int pred = dir == 0 ? t - 1 : t + 1;
      for (long b = 0; b < nblocks; ++b) {
        if (pred >= 0 && pred < n) {
          while (done[std::size_t(pred)].blocks <= b) {
#pragma omp flush
          }
        }
#pragma omp flush
        const long jb = dir == 0 ? b : nblocks - 1 - b;
        const long j0 = jb * g_block, j1 = std::min(g_cols, j0 + g_block);
        if (dir == 0) {
          for (long i = std::max(1L, r0); i < r1; ++i)
            for (long j = std::max(1L, j0); j < j1; ++j)
              at(u, i, j) = 0.5 * at(u, i, j) + 0.25 * (at(u, i - 1, j) + at(u, i, j - 1));
        } else {
          for (long i = std::min(g_rows - 2, r1 - 1); i >= r0; --i)
            for (long j = std::min(g_cols - 2, j1 - 1); j >= j0; --j)
              at(u, i, j) = 0.5 * at(u, i, j) + 0.25 * (at(u, i + 1, j) + at(u, i, j + 1));
        }
#pragma omp flush
        done[std::size_t(t)].blocks = b + 1;
#pragma omp flush
      }
#pragma omp barrier
    }
  }
}

void initial(std::vector<double>& u) {
  for (long i = 0; i < g_rows; ++i)
    for (long j = 0; j < g_cols; ++j) at(u, i, j) = double((i * 7 + j * 13) % 101) * 0.01;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "omp_wavefront: milliseconds per pair of pipelined triangular sweeps (lower and\n"
      "upper, as NPB LU's SSOR) whose threads wait for each other in busy loops.\n"
      "  --teams=LIST  team sizes, num_threads() (default 2,4,8)\n"
      "  --rows=N      grid rows (default 256)\n"
      "  --cols=N      grid columns (default 1024)\n"
      "  --block=N     columns per pipeline step (default 32)\n"
      "  --sweeps=N    sweep pairs per measurement (default 10)");
  weft::bench::reject_unknown(c, {"teams", "rows", "cols", "block", "sweeps"});
  const std::vector<long> teams = weft::bench::int_list_arg(c, "teams", "2,4,8", 1, 256);
  g_rows = weft::bench::positive_arg(c, "rows", 256, 1 << 16);
  g_cols = weft::bench::positive_arg(c, "cols", 1024, 1 << 20);
  g_block = weft::bench::positive_arg(c, "block", 32, 1 << 20);
  const long sweeps = weft::bench::positive_arg(c, "sweeps", 10, 1 << 20);
  if (g_rows < 3 || g_cols < 3) {
    std::fprintf(stderr, "error: --rows and --cols must be at least 3\n");
    return 2;
  }

  // The serial answer after one warm-up pair and `sweeps` pairs per repeat.
  std::vector<double> serial(std::size_t(g_rows * g_cols)), u(serial.size());
  std::vector<progress_flag> flags(256);
  initial(serial);
  weft::bench::reporter rep("omp_wavefront", c.json);
  for (long team : teams) {
    initial(u);
    sweep_pair(u, int(team), flags);  // warm-up: starts the runtime's threads
    std::vector<double> ms;
    for (int r = 0; r < c.repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (long s = 0; s < sweeps; ++s) sweep_pair(u, int(team), flags);
      const auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / double(sweeps));
    }
    // Check: the same pairs, one thread.
    std::vector<double> ref(serial);
    for (long s = 0; s < 1 + long(c.repeat) * sweeps; ++s) sweep_pair(ref, 1, flags);
    double worst = 0;
    for (std::size_t k = 0; k < ref.size(); ++k) worst = std::max(worst, std::fabs(ref[k] - u[k]));
    if (worst > 1e-9) {
      std::fprintf(stderr, "omp_wavefront: team of %ld: result differs from the serial sweep by %g\n",
                   team, worst);
      return 1;
    }
    const weft::bench::summary s = weft::bench::summarize(ms);
    rep.row({{"runtime", std::string(WEFT_OMP_RUNTIME) == "weft" ? "libweft-omp" : "libgomp"},
             {"team", team},
             {"cores", omp_get_num_procs()},
             {"metric", "sweep_ms"},
             {"value", s.median},
             {"spread", s.spread()}});
  }
  return 0;
}
