// Queue throughput: the PE message queue candidates side by side (DESIGN.md
// lesson 3) -- the intrusive MPSC queue, per-producer SPSC rings
// (spsc_pairs), and a std::mutex + std::deque baseline -- with 1..N producers
// and one consumer; and the Chase-Lev task deque, owner alone and with one
// thief. Every figure is the median over --repeat runs with min and max, and
// the PE-queue rows carry their ratio to the mutex baseline at the same
// producer count, measured in the same run.
//
// All three PE queues move pointers to messages (lesson 1) from a per-producer
// pool of `window` messages; a producer reuses a message only after the
// consumer has credited it back (published every 64 messages), so in-flight
// work is bounded the same way for every queue and nothing measures malloc.
// spsc_pairs rings hold a whole window, so its overflow path stays cold here
// (tests/base/test_spsc_pairs.cpp exercises it).
//
// With more threads than free cores (producers + 1 > cores, or a busy
// machine) threads take turns: a producer fills its window while the consumer
// is descheduled, which then drains it uncontended, so figures mix contended
// and batch throughput and swing between runs. Read the min/max, and compare
// queue kinds only within one run.
//
// Does not start the runtime; --weft: options are checked (a bad one is an error) but do not apply.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/chase_lev.hpp"
#include "weft/base/mpsc_queue.hpp"
#include "weft/base/spsc_pairs.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
namespace base = weft::base;

constexpr std::uint64_t window = 4096;  // messages in flight per producer
constexpr std::uint64_t credit_every = 64;

struct message {
  base::queue_link link;  // first: a popped link is the message
  std::uint32_t producer = 0;
  std::uint64_t seq = 0;
};

// The three PE queues behind one shape: push(producer, m), pop() -> m or null.
struct mpsc_kind {
  explicit mpsc_kind(int) {}
  void push(int, message* m) { q_.push(&m->link); }
  message* pop() { return reinterpret_cast<message*>(q_.pop()); }
  base::mpsc_queue q_;
};

struct spsc_pairs_kind {
  explicit spsc_pairs_kind(int producers) : q_(producers, window) {}
  void push(int p, message* m) { q_.push(p, m); }
  message* pop() {
    message* m = nullptr;
    return q_.try_pop(m) ? m : nullptr;
  }
  base::spsc_pairs<message*> q_;
};

struct mutex_kind {
  explicit mutex_kind(int) {}
  void push(int, message* m) {
    std::lock_guard<std::mutex> g(mu_);
    q_.push_back(m);
  }
  message* pop() {
    std::lock_guard<std::mutex> g(mu_);
    if (q_.empty()) return nullptr;
    message* m = q_.front();
    q_.pop_front();
    return m;
  }
  std::mutex mu_;
  std::deque<message*> q_;
};

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Spins briefly, then yields, so oversubscribed runs still progress.
struct backoff {
  unsigned n = 0;
  void wait() {
    if (++n < 128)
      base::cpu_relax();
    else
      std::this_thread::yield();
  }
  void reset() { n = 0; }
};

// One run: `producers` threads push for `duration` seconds; the calling
// thread consumes. Returns million messages consumed per second.
template <class Kind>
double run_pe_queue(int producers, double duration) {
  Kind q(producers);
  // Owned here so they outlive the queue's last use; each allocated (first
  // touched) by its producer. Left queued at the end: nothing to drain.
  std::vector<std::unique_ptr<message[]>> pools(static_cast<std::size_t>(producers));
  std::vector<base::padded<std::atomic<std::uint64_t>>> credited(
      static_cast<std::size_t>(producers));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      message* pool = (pools[std::size_t(p)] = std::make_unique<message[]>(window)).get();
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      std::uint64_t sent = 0, seen = 0;
      backoff b;
      while (!stop.load(std::memory_order_relaxed)) {
        if (sent - seen >= window) {
          seen = credited[std::size_t(p)]->load(std::memory_order_acquire);
          if (sent - seen >= window) {
            b.wait();
            continue;
          }
          b.reset();
        }
        message* m = &pool[sent % window];
        m->producer = std::uint32_t(p);
        m->seq = sent;
        q.push(p, m);
        ++sent;
      }
    });
  }
  while (ready.load() < producers) std::this_thread::yield();
  std::vector<std::uint64_t> consumed(std::size_t(producers), 0);
  std::uint64_t total = 0;
  backoff b;
  go.store(true, std::memory_order_release);
  const auto t0 = clock_type::now();
  double elapsed = 0;
  for (std::uint64_t polls = 1;; ++polls) {
    if (message* m = q.pop()) {
      const std::size_t p = m->producer;
      if (++consumed[p] % credit_every == 0)
        credited[p]->store(consumed[p], std::memory_order_release);
      ++total;
      b.reset();
    } else {
      b.wait();
    }
    if (polls % 256 == 0 && (elapsed = seconds_since(t0)) >= duration) break;
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : threads) t.join();
  return double(total) / elapsed / 1e6;
}

// Chase-Lev: the owner pushes a batch and pops half of it back, leaving the
// rest for thieves (a PE spawning more tasks than it runs), and trims the
// deque to `keep` elements when no one steals enough; `thieves` threads steal
// meanwhile. Returns million elements taken per second (pops plus steals);
// `stolen_share` gets the thieves' fraction.
double run_chase_lev(int thieves, double duration, double& stolen_share) {
  constexpr std::uint64_t batch = 64;
  constexpr std::size_t keep = 1024;
  base::chase_lev<std::uint64_t> d(256);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<base::padded<std::uint64_t>> stolen(static_cast<std::size_t>(thieves));
  std::vector<std::thread> threads;
  for (int k = 0; k < thieves; ++k) {
    threads.emplace_back([&, k] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      std::uint64_t n = 0;
      backoff b;
      while (!stop.load(std::memory_order_relaxed)) {
        std::uint64_t v;
        if (d.steal(v) == base::steal_status::success) {
          ++n;
          b.reset();
        } else {
          b.wait();
        }
      }
      stolen[std::size_t(k)].value = n;
    });
  }
  while (ready.load() < thieves) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  std::uint64_t next = 0, popped = 0;
  const auto t0 = clock_type::now();
  double elapsed = 0;
  for (std::uint64_t rounds = 1;; ++rounds) {
    for (std::uint64_t i = 0; i < batch; ++i) d.push(next++);
    for (std::uint64_t i = 0; i < batch / 2 && d.pop(); ++i) ++popped;
    while (d.size_approx() > keep && d.pop()) ++popped;
    if (rounds % 16 == 0 && (elapsed = seconds_since(t0)) >= duration) break;
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : threads) t.join();
  std::uint64_t taken_by_thieves = 0;
  for (auto& s : stolen) taken_by_thieves += s.value;
  const double total = double(popped + taken_by_thieves);
  stolen_share = total > 0 ? double(taken_by_thieves) / total : 0;
  return total / elapsed / 1e6;
}

const char* about =
    "queues: throughput of the PE message queue candidates and of the task deque.\n"
    "\n"
    "  mpsc        intrusive Vyukov MPSC queue (weft::base::mpsc_queue)\n"
    "  spsc_pairs  one SPSC ring per producer, consumer polls them (weft::base::spsc_pairs)\n"
    "  mutex       std::mutex + std::deque baseline\n"
    "    1..K producer threads push message pointers, one consumer pops; metric\n"
    "    mitems_per_s = million messages consumed per second (median of repeats,\n"
    "    min, max), vs_mutex = ratio to the mutex baseline at the same producer count.\n"
    "  chase_lev   work-stealing deque (weft::base::chase_lev): the owner pushes 64,\n"
    "    pops 32 back and trims the deque to 1024, alone (thieves=0) and with one\n"
    "    stealing thread (thieves=1); mitems_per_s = million elements taken (pops +\n"
    "    steals) per second, stolen_share = the thief's fraction of them.\n"
    "\n"
    "flags:\n"
    "  --max-producers=K  largest producer count (default: hardware threads, at least 2)\n"
    "  --duration-ms=D    length of each run (default 200)";

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(argc, argv, about);
  weft::bench::check_weft_options(argc, argv);
  weft::bench::reject_unknown(c, {"max-producers", "duration-ms"});
  const int hw = int(std::thread::hardware_concurrency());
  const long max_producers = weft::bench::positive_arg(c, "max-producers", std::max(2, hw), 1024);
  const double duration = double(weft::bench::positive_arg(c, "duration-ms", 200, 60'000)) / 1000.0;

  weft::bench::reporter out("queues", c.json);
  auto repeat = [&](auto&& once) {
    std::vector<double> xs;
    for (int r = 0; r < c.repeat; ++r) xs.push_back(once());
    return weft::bench::summarize(xs);
  };
  for (int p = 1; p <= int(max_producers); ++p) {
    const auto mutex = repeat([&] { return run_pe_queue<mutex_kind>(p, duration); });
    const auto mpsc = repeat([&] { return run_pe_queue<mpsc_kind>(p, duration); });
    const auto pairs = repeat([&] { return run_pe_queue<spsc_pairs_kind>(p, duration); });
    auto row = [&](const char* queue, const weft::bench::summary& s) {
      out.row({{"queue", queue},
               {"producers", p},
               {"metric", "mitems_per_s"},
               {"value", s.median},
               {"min", s.min},
               {"max", s.max},
               {"vs_mutex", mutex.median > 0 ? s.median / mutex.median : 0.0}});
    };
    row("mpsc", mpsc);
    row("spsc_pairs", pairs);
    row("mutex", mutex);
  }
  for (int thieves = 0; thieves <= 1; ++thieves) {
    std::vector<double> shares;
    const auto s = repeat([&] {
      double share = 0;
      const double v = run_chase_lev(thieves, duration, share);
      shares.push_back(share);
      return v;
    });
    out.row({{"queue", "chase_lev"},
             {"producers", 1},
             {"thieves", thieves},
             {"metric", "mitems_per_s"},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max},
             {"stolen_share", weft::bench::summarize(shares).median}});
  }
  return 0;
}
