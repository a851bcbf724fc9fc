// The libgomp side of bench/tasks/overhead: an empty `#pragma omp parallel
// for` over `threads` threads. The only translation unit compiled with
// -fopenmp, so weft's own code is untouched by it.
#include <omp.h>
#include <chrono>

// Microseconds per empty loop of `iterations` over `threads` threads, after a
// warm-up that starts libgomp's thread pool.
double omp_empty_loop_us(int threads, long iterations, long loops) {
  omp_set_num_threads(threads);
  auto run = [&] {
    for (long k = 0; k < loops; ++k) {
#pragma omp parallel for schedule(static)
      for (long i = 0; i < iterations; ++i) {
        asm volatile("" ::: "memory");  // the body must not be removed
      }
    }
  };
  run();
  const auto t0 = std::chrono::steady_clock::now();
  run();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(loops);
}

// Share of the iterations of `loops` empty loops that ran on a thread other
// than the caller's (untimed: the count is not part of the empty loop).
double omp_remote_fraction(int threads, long iterations, long loops) {
  omp_set_num_threads(threads);
  long remote = 0;
  for (long k = 0; k < loops; ++k) {
#pragma omp parallel for schedule(static) reduction(+ : remote)
    for (long i = 0; i < iterations; ++i) {
      if (omp_get_thread_num() != 0) ++remote;
    }
  }
  return double(remote) / double(iterations * loops);
}
