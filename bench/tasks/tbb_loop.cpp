// The oneTBB side of bench/tasks/overhead: an empty tbb::parallel_for over
// `threads` threads (tbb::global_control's max_allowed_parallelism: the
// calling thread plus threads - 1 workers). Its own translation unit, like
// omp_loop.cpp, so that TBB's headers reach nothing else; built only when
// CMake finds TBB (then WEFT_BENCH_HAVE_TBB is defined for overhead.cpp).
//
// Two partitioners, as a TBB user would write the loop: the default
// (auto_partitioner: splits on demand, by stealing, what TBB programs get
// without asking) and static_partitioner (one range per thread, the
// counterpart of OpenMP's schedule(static)). The blocked_range's grainsize
// is 1, like weft's {.grain = 1}.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <atomic>
#include <chrono>
#include <thread>

namespace {

template <class Partitioner>
double timed_loops(long iterations, long loops) {
  auto run = [&] {
    for (long k = 0; k < loops; ++k) {
      Partitioner part;
      tbb::parallel_for(
          tbb::blocked_range<long>(0, iterations, 1),
          [](const tbb::blocked_range<long>& r) {
            for (long i = r.begin(); i < r.end(); ++i)
              asm volatile("" ::: "memory");  // the body must not be removed
          },
          part);
    }
  };
  run();  // warm-up: starts TBB's workers and the arena
  const auto t0 = std::chrono::steady_clock::now();
  run();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(loops);
}

}  // namespace

// Microseconds per empty loop of `iterations` over at most `threads`
// threads; `static_partition` picks tbb::static_partitioner instead of the
// default one.
double tbb_empty_loop_us(int threads, long iterations, long loops, bool static_partition) {
  // Alive for the whole measurement: the limit lifts when it is destroyed.
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, std::size_t(threads));
  return static_partition ? timed_loops<tbb::static_partitioner>(iterations, loops)
                          : timed_loops<tbb::auto_partitioner>(iterations, loops);
}

// Share of the iterations of `loops` empty loops that ran on a thread other
// than the caller (untimed: the count is not part of the empty loop).
double tbb_remote_fraction(int threads, long iterations, long loops, bool static_partition) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, std::size_t(threads));
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<long> remote{0};
  auto body = [&](const tbb::blocked_range<long>& r) {
    if (std::this_thread::get_id() != caller)
      remote.fetch_add(long(r.size()), std::memory_order_relaxed);
  };
  for (long k = 0; k < loops; ++k) {
    if (static_partition)
      tbb::parallel_for(tbb::blocked_range<long>(0, iterations, 1), body,
                        tbb::static_partitioner());
    else
      tbb::parallel_for(tbb::blocked_range<long>(0, iterations, 1), body,
                        tbb::auto_partitioner());
  }
  return double(remote.load()) / double(iterations * loops);
}
