// alloc_scaling: the seed paper's Table 1 ("memory allocation time" as the
// number of threads grows), glibc's allocator against mimalloc, side by side
// in one run.
//
// Each of T threads allocates and frees same-size blocks PAIRS times (default
// 100,000): allocate a batch of 16 blocks, write their first and last byte,
// free them, repeat. The figure is ns per alloc+free pair, averaged over the
// threads; a default allocator that serialises threads on one heap shows it as
// a time that grows with T (the paper saw 2.4x on kNeighbor from this alone),
// a per-thread-heap allocator stays flat up to the core count.
//
// Each thread times its work in chunks of 1024 pairs and contributes its
// median chunk: a chunk in which the thread was preempted (by another process
// on a shared machine, or by its siblings when T exceeds the cores) does not
// count, while waiting for a lock inside the allocator, which every chunk
// meets alike, does. So above the core count the figure stays the cost of
// one pair, not the time-shared elapsed time.
//
// Why not plain malloc: libmimalloc.so exports malloc/free (and even
// __libc_malloc/__libc_free), so in a program linked with -lmimalloc those
// names resolve to mimalloc and the "system" column would silently measure
// mimalloc twice. glibc's own malloc/free are looked up in libc.so.6 itself
// (dlsym on its handle searches only libc and its dependencies); a self-check
// at startup verifies that the two allocators really are different heaps
// (mi_is_in_heap_region). glibc's allocator runs beside the interposed one
// without conflict: it owns its brk heap and arenas, mimalloc uses mmap only.
//
// Repeats are interleaved: each repeat measures every (bytes, threads)
// configuration with both allocators back to back, alternating which goes
// first, and the ratio system/mimalloc is taken per repeat, so slow drifts of
// the machine cancel out of the ratio.
#include <dlfcn.h>
#include <mimalloc.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.hpp"
#include "weft/base/timer.hpp"

namespace {

using weft::base::wall_ns;
namespace wb = weft::bench;

constexpr const char* kAbout =
    "alloc_scaling: ns per malloc+free pair as the number of threads grows,\n"
    "glibc malloc (malloc/free looked up in libc.so.6) against mimalloc\n"
    "(mi_malloc/mi_free), measured side by side and interleaved per repeat\n"
    "(the seed paper's Table 1). Each thread allocates a batch of 16 blocks of\n"
    "the same size, writes to them, frees them, until it has done PAIRS\n"
    "alloc/free pairs, timed in chunks of 1024 pairs (a thread's figure is its\n"
    "median chunk, so preemption does not count). Reports the median over\n"
    "repeats with min/max, and the per-repeat ratio system/mimalloc.\n"
    "\n"
    "flags:\n"
    "  --max-threads=K  thread counts 1..K (default max(4, hardware threads))\n"
    "  --bytes=LIST     block sizes, comma-separated (default 64,1024,16384)\n"
    "  --pairs=N        alloc/free pairs per thread (default 100000)";

constexpr int kBatch = 16;
constexpr long kChunk = 1024;  // pairs per timed chunk (~5-50 µs)
constexpr long kWarmupPairs = 2000;

// glibc's malloc/free, bound once by bind_glibc() before any thread starts.
void* (*glibc_malloc)(std::size_t) = nullptr;
void (*glibc_free)(void*) = nullptr;

struct system_alloc {
  static constexpr const char* name = "system";
  static void* allocate(std::size_t n) { return glibc_malloc(n); }
  static void release(void* p) { glibc_free(p); }
};

struct mimalloc_alloc {
  static constexpr const char* name = "mimalloc";
  static void* allocate(std::size_t n) { return mi_malloc(n); }
  static void release(void* p) { mi_free(p); }
};

// `pairs` alloc/free pairs of `bytes`-byte blocks in batches of kBatch,
// timed in chunks of kChunk pairs; returns the median chunk's ns per pair.
template <class A>
double churn(std::size_t bytes, long pairs) {
  void* blocks[kBatch];
  std::vector<double> chunks;
  chunks.reserve(std::size_t(pairs / kChunk + 1));
  std::uint64_t t0 = wall_ns();
  long chunk_start = 0;
  for (long done = 0; done < pairs;) {
    int n = int(std::min<long>(kBatch, pairs - done));
    for (int i = 0; i < n; ++i) {
      auto* p = static_cast<unsigned char*>(A::allocate(bytes));
      if (!p) {
        std::fprintf(stderr, "error: %s allocation of %zu bytes failed\n", A::name, bytes);
        std::exit(1);
      }
      p[0] = static_cast<unsigned char>(i);
      p[bytes - 1] = static_cast<unsigned char>(i);
      blocks[i] = p;
    }
    // The blocks escape: the compiler may not fold an allocate/free pair away.
    asm volatile("" : : "r"(blocks) : "memory");
    for (int i = 0; i < n; ++i) A::release(blocks[i]);
    done += n;
    if (done - chunk_start >= kChunk || done == pairs) {
      std::uint64_t t1 = wall_ns();
      chunks.push_back(double(t1 - t0) / double(done - chunk_start));
      t0 = t1;
      chunk_start = done;
    }
  }
  return wb::summarize(std::move(chunks)).median;
}

// T threads churn at once (after a warm-up that creates their heaps/arenas);
// returns ns per pair (each thread's median chunk) averaged over the threads.
template <class A>
double measure(int threads, std::size_t bytes, long pairs) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> ns(std::size_t(threads), 0);
  std::vector<std::thread> pool;
  pool.reserve(std::size_t(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      churn<A>(bytes, kWarmupPairs);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      ns[std::size_t(t)] = churn<A>(bytes, pairs);
    });
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  double sum = 0;
  for (auto v : ns) sum += v;
  return sum / threads;
}

[[noreturn]] void bad(const char* flag, const std::string& v) {
  std::fprintf(stderr, "error: --%s=%s: expected a positive integer%s\n", flag, v.c_str(),
               std::string(flag) == "bytes" ? " list" : "");
  std::exit(2);
}

void bind_glibc() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (libc) {
    glibc_malloc = reinterpret_cast<void* (*)(std::size_t)>(dlsym(libc, "malloc"));
    glibc_free = reinterpret_cast<void (*)(void*)>(dlsym(libc, "free"));
  }
  if (!glibc_malloc || !glibc_free) {
    std::fprintf(stderr, "error: cannot find malloc/free in libc.so.6 (glibc required)\n");
    std::exit(1);
  }
}

// Fails loudly if "system" turns out to be mimalloc: the function must come
// from libc.so.6, and where mimalloc can tell its own memory (not under
// AddressSanitizer, say), the block must not be mimalloc's.
void check_distinct_heaps() {
  Dl_info where{};
  bool from_libc = dladdr(reinterpret_cast<void*>(glibc_malloc), &where) && where.dli_fname &&
                   std::strstr(where.dli_fname, "libc.so") &&
                   !std::strstr(where.dli_fname, "mimalloc");
  void* s = system_alloc::allocate(64);
  void* m = mimalloc_alloc::allocate(64);
  bool same_heap = mi_is_in_heap_region(m) && mi_is_in_heap_region(s);
  system_alloc::release(s);
  mimalloc_alloc::release(m);
  if (!from_libc || same_heap) {
    std::fprintf(
        stderr, "error: the system allocator resolved to %s (%s); the comparison would be void\n",
        where.dli_fname ? where.dli_fname : "?", same_heap ? "mimalloc memory" : "not libc");
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto cli = wb::parse_cli(argc, argv, kAbout);
  weft::bench::check_weft_options(argc, argv);
  wb::reject_unknown(cli, {"max-threads", "bytes", "pairs"});

  long max_threads = std::max(4L, long(std::thread::hardware_concurrency()));
  std::string v = wb::arg(cli, "max-threads", "");
  if (!v.empty() && !wb::parse_positive(v, max_threads)) bad("max-threads", v);
  long pairs = 100000;
  v = wb::arg(cli, "pairs", "");
  if (!v.empty() && !wb::parse_positive(v, pairs)) bad("pairs", v);
  std::vector<std::size_t> sizes;
  for (long b : wb::int_list_arg(cli, "bytes", "64,1024,16384", 1, 1l << 30))
    sizes.push_back(std::size_t(b));

  bind_glibc();
  check_distinct_heaps();

  // results[size][threads-1][alloc] = one value per repeat
  std::size_t nt = std::size_t(max_threads);
  std::vector<std::vector<std::vector<double>>> sys(sizes.size(),
                                                    std::vector<std::vector<double>>(nt));
  auto mim = sys, ratio = sys;
  for (int r = 0; r < cli.repeat; ++r)
    for (std::size_t s = 0; s < sizes.size(); ++s)
      for (std::size_t t = 0; t < nt; ++t) {
        int threads = int(t + 1);
        double a, b;
        if (r % 2 == 0) {
          a = measure<system_alloc>(threads, sizes[s], pairs);
          b = measure<mimalloc_alloc>(threads, sizes[s], pairs);
        } else {
          b = measure<mimalloc_alloc>(threads, sizes[s], pairs);
          a = measure<system_alloc>(threads, sizes[s], pairs);
        }
        sys[s][t].push_back(a);
        mim[s][t].push_back(b);
        ratio[s][t].push_back(a / b);
      }

  wb::reporter rep("alloc_scaling", cli.json);
  for (std::size_t s = 0; s < sizes.size(); ++s)
    for (std::size_t t = 0; t < nt; ++t) {
      auto a = wb::summarize(sys[s][t]), b = wb::summarize(mim[s][t]),
           q = wb::summarize(ratio[s][t]);
      long threads = long(t + 1), bytes = long(sizes[s]);
      if (cli.json) {
        for (auto [name, x] : {std::pair{"system", a}, std::pair{"mimalloc", b}})
          rep.row({{"alloc", name},
                   {"threads", threads},
                   {"bytes", bytes},
                   {"metric", "ns_per_pair"},
                   {"value", x.median},
                   {"min", x.min},
                   {"max", x.max}});
        rep.row({{"threads", threads},
                 {"bytes", bytes},
                 {"metric", "ratio_system_over_mimalloc"},
                 {"value", q.median},
                 {"min", q.min},
                 {"max", q.max}});
      } else {
        rep.row({{"bytes", bytes},
                 {"threads", threads},
                 {"system_ns", a.median},
                 {"sys_min", a.min},
                 {"sys_max", a.max},
                 {"mimalloc_ns", b.median},
                 {"mi_min", b.min},
                 {"mi_max", b.max},
                 {"system/mimalloc", q.median},
                 {"ratio_min", q.min},
                 {"ratio_max", q.max}});
      }
    }
  rep.flush();
  if (!cli.json)
    std::printf(
        "ns per alloc+free pair per thread; median of %d interleaved repeats, %ld pairs per "
        "thread\n",
        cli.repeat, pairs);
  return 0;
}
