// pe_private: the seed paper's Table 2 — the cost of updating a PE-private
// variable kept (a) in a thread_local, (b) in a plain global array indexed by
// thread id, (c) in an array of cache-line-padded slots. This is the
// measurement behind DESIGN.md lesson 4 ("PE-private state is thread-local or
// padded, never array[rank]"): in (b) neighbouring threads' counters share a
// cache line, so every increment steals the line from the other cores (false
// sharing), although no two threads ever touch the same counter.
//
// Each of T threads (pinned to distinct CPUs while there are enough) increments
// its own counter ITERS times. All three schemes run the same loop body,
//   ++counter; asm volatile("" ::: "memory");
// The empty asm with a memory clobber tells the compiler that memory may have
// been read and written, so each iteration must load, add and store the
// counter (one read-modify-write per iteration, no hoisting, no
// vectorisation), without adding any instruction of its own. The same barrier
// in all three keeps the comparison fair; only the address differs (%fs-based
// for thread_local, a shared line for the array, a private line for padded).
//
// Note: the thread_local here is in the executable (local-exec TLS, one
// %fs-relative access). A thread_local inside a shared library reached from
// another module goes through __tls_get_addr; the runtime keeps such
// variables behind inline accessors in the library itself.
//
// Each thread times its loop in 100 chunks and contributes its median chunk,
// so a chunk in which it was preempted (the machine may be shared) does not
// count.
//
// Repeats are interleaved (every scheme once per repeat, rotating the order)
// and the ratios array/tls and padded/tls are taken per repeat.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/timer.hpp"

namespace {

using weft::base::wall_ns;
namespace wb = weft::bench;

constexpr const char* kAbout =
    "pe_private: ns per update of a per-thread counter kept (a) in a\n"
    "thread_local, (b) in a plain global array indexed by thread id (adjacent\n"
    "counters share cache lines: false sharing), (c) in an array of\n"
    "cache-line-padded slots (the seed paper's Table 2). T threads, pinned to\n"
    "distinct CPUs while there are enough, each increment their own counter\n"
    "ITERS times with a compiler barrier per iteration, so every update is a\n"
    "real load-add-store, timed in 100 chunks (a thread's figure is its median\n"
    "chunk, so preemption does not count). Reports ns per update (median over\n"
    "interleaved repeats, min/max) and the ratios array/tls and padded/tls.\n"
    "\n"
    "flags:\n"
    "  --threads=K  threads (default hardware threads, at least 2)\n"
    "  --iters=N    updates per thread (default 10000000)";

constexpr int kMaxThreads = 1024;

// The three homes of a PE-private counter.
thread_local long tls_counter;
alignas(weft::base::cache_line) long array_counter[kMaxThreads];
weft::base::padded<long> padded_counter[kMaxThreads];

enum class scheme { thread_local_var, array, padded_array };
constexpr scheme kSchemes[] = {scheme::thread_local_var, scheme::array, scheme::padded_array};
const char* name_of(scheme s) {
  switch (s) {
    case scheme::thread_local_var:
      return "thread_local";
    case scheme::array:
      return "array";
    case scheme::padded_array:
      return "padded_array";
  }
  return "?";
}

// `iters` increments of slot(), timed in chunks of iters/100 (at least 1000);
// returns the median chunk's ns per update.
template <class Slot>
double count_up(Slot slot, long iters) {
  const long chunk = std::max(1000L, iters / 100);
  std::vector<double> chunks;
  chunks.reserve(std::size_t(iters / chunk + 1));
  for (long done = 0; done < iters;) {
    long n = std::min(chunk, iters - done);
    std::uint64_t t0 = wall_ns();
    for (long i = 0; i < n; ++i) {
      ++slot();
      asm volatile("" ::: "memory");
    }
    chunks.push_back(double(wall_ns() - t0) / double(n));
    done += n;
  }
  return wb::summarize(std::move(chunks)).median;
}

// CPUs this process may run on.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

// One run of one scheme on `threads` threads; ns per update (each thread's
// median chunk) averaged over the threads. Verifies every counter reached `iters`.
double measure(scheme s, int threads, long iters, const std::vector<int>& cpus) {
  std::atomic<int> ready{0};
  std::vector<double> ns(std::size_t(threads), 0);
  std::vector<long> final_count(std::size_t(threads), 0);
  bool pin = !cpus.empty() && std::size_t(threads) <= cpus.size();
  std::vector<std::thread> pool;
  pool.reserve(std::size_t(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      if (pin) pin_self(cpus[std::size_t(t)]);
      tls_counter = 0;
      array_counter[t] = 0;
      padded_counter[t].value = 0;
      // Start barrier among the workers themselves (the main thread only
      // joins), so all T loops overlap: pinned threads spin, oversubscribed
      // ones yield.
      ready.fetch_add(1);
      while (ready.load(std::memory_order_acquire) < threads)
        if (!pin) std::this_thread::yield();
      auto& out = ns[std::size_t(t)];
      switch (s) {
        case scheme::thread_local_var:
          out = count_up([]() -> long& { return tls_counter; }, iters);
          final_count[std::size_t(t)] = tls_counter;
          break;
        case scheme::array:
          out = count_up([t]() -> long& { return array_counter[t]; }, iters);
          final_count[std::size_t(t)] = array_counter[t];
          break;
        case scheme::padded_array:
          out = count_up([t]() -> long& { return padded_counter[t].value; }, iters);
          final_count[std::size_t(t)] = padded_counter[t].value;
          break;
      }
    });
  for (auto& th : pool) th.join();
  double sum = 0;
  for (int t = 0; t < threads; ++t) {
    if (final_count[std::size_t(t)] != iters) {
      std::fprintf(stderr, "error: %s counter of thread %d is %ld, expected %ld\n", name_of(s), t,
                   final_count[std::size_t(t)], iters);
      std::exit(1);
    }
    sum += ns[std::size_t(t)];
  }
  return sum / threads;
}

}  // namespace

int main(int argc, char** argv) {
  auto cli = wb::parse_cli(argc, argv, kAbout);
  weft::bench::check_weft_options(argc, argv);
  wb::reject_unknown(cli, {"threads", "iters"});

  long threads = std::max(2L, long(std::thread::hardware_concurrency()));
  long iters = 10'000'000;
  std::string v = wb::arg(cli, "threads", "");
  if (!v.empty() && (!wb::parse_positive(v, threads) || threads > kMaxThreads)) {
    std::fprintf(stderr, "error: --threads=%s: expected an integer in 1..%d\n", v.c_str(),
                 kMaxThreads);
    return 2;
  }
  v = wb::arg(cli, "iters", "");
  if (!v.empty() && !wb::parse_positive(v, iters)) {
    std::fprintf(stderr, "error: --iters=%s: expected a positive integer\n", v.c_str());
    return 2;
  }
  auto cpus = allowed_cpus();

  std::vector<double> per[3], array_ratio, padded_ratio;
  for (int r = 0; r < cli.repeat; ++r) {
    double x[3];
    for (int k = 0; k < 3; ++k) {
      int i = (k + r) % 3;  // rotate which scheme goes first
      x[i] = measure(kSchemes[i], int(threads), iters, cpus);
    }
    for (int i = 0; i < 3; ++i) per[i].push_back(x[i]);
    array_ratio.push_back(x[1] / x[0]);
    padded_ratio.push_back(x[2] / x[0]);
  }

  wb::reporter rep("pe_private", cli.json);
  for (int i = 0; i < 3; ++i) {
    auto s = wb::summarize(per[i]);
    rep.row({{"scheme", name_of(kSchemes[i])},
             {"threads", threads},
             {"metric", "ns_per_update"},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max}});
  }
  rep.flush();
  for (auto [metric, xs] : {std::pair{"ratio_array_over_tls", &array_ratio},
                            std::pair{"ratio_padded_over_tls", &padded_ratio}}) {
    auto s = wb::summarize(*xs);
    rep.row({{"threads", threads},
             {"metric", metric},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max}});
  }
  rep.flush();
  if (!cli.json)
    std::printf("median of %d interleaved repeats, %ld updates per thread, threads %s\n",
                cli.repeat, iters,
                std::size_t(threads) <= cpus.size() ? "pinned to distinct CPUs"
                                                    : "unpinned (more than CPUs)");
  return 0;
}
