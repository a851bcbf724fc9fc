// wakeup: the costs that choose the PE idle back-off (DESIGN.md, "The PE
// scheduler loop": spin, then yield, then sleep on a futex until woken by a
// send). Five measurements, each repeated and interleaved with the others:
//
//  (a) cacheline_oneway_ns — two threads on two CPUs ping-pong one atomic
//      word, spinning without pause: the floor for any hand-off, the price a
//      spinning consumer pays to see a message.
//  (b) futex_oneway_ns — the same ping-pong through two futex words, each
//      side sleeping in FUTEX_WAIT and woken by a store + FUTEX_WAKE:
//      round trip / 2 is the latency a sleeping consumer adds to a message
//      (median over round trips; `mean` beside it shows the tail).
//      slept_frac says how many of the waits really slept.
//  (c) futex_wake_call_ns — what the producer pays for the FUTEX_WAKE
//      syscall, with a sleeper present (sleeper=true: the kernel dequeues and
//      wakes it) and with nobody waiting (sleeper=false: the bare syscall);
//      wake_check_no_sleeper_ns — the producer's cost with the flag protocol
//      (store the message, full fence, load the consumer's "sleeping" flag,
//      call FUTEX_WAKE only if set) when nobody sleeps: no syscall at all.
//      The point: the producer pays for a wake-up only if the consumer sleeps.
//  (d) sched_yield_ns — one sched_yield() with nobody else runnable on the
//      CPU (the middle stage of the back-off).
//  (e) spin_policy_oneway_ns — one-way latency to a receiver that, once it
//      starts waiting, spins S µs, then yields once, then sleeps on the futex;
//      the sender's message arrives G µs after the receiver started waiting.
//      Shows which spin budget avoids the futex cost for which gaps
//      (slept_frac: fraction of messages that found the receiver past its
//      spin and yield, i.e. going to sleep or asleep).
//      Latency here is timestamped: the sender reads the monotonic clock just
//      before its store, the receiver just after it sees the message
//      (CLOCK_MONOTONIC is consistent across CPUs).
//  (f) handoff_oneway_ns — (a) carrying a message: each side hands the other
//      an 8-byte value and reads it, (carry=inline) in the flag's own line,
//      as a ring slot that holds a small message would; (carry=ptr64)
//      through a pointer in that line to a 64-byte message the sender
//      wrote; (carry=ptr128) the same to a 128-byte message whose value is
//      in its second line (weft's PE rings pass pointers to messages; an
//      8-byte MPI message is 88 bytes). The receiver answers in the block
//      it got, as a ping-pong's reply reuses the block just freed. What a
//      pointer costs over inline is what carrying small messages in the
//      slot would save.
//
// Loops of cheap calls are timed in batches and the median batch is taken, so
// a preemption (the machine may be shared) does not move the figure.
//
// Pairs of threads are pinned to the first two CPUs of the process's CPU set
// (pthread_setaffinity_np). With only one CPU, (a) and (e) are skipped (a
// spinning receiver would only steal the sender's CPU) and the futex pairs
// run time-shared on that CPU, which is said in the output.
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/timer.hpp"

namespace {

using weft::base::cpu_relax;
using weft::base::cycles;
using weft::base::cycles_to_ns;
using weft::base::wall_ns;
namespace wb = weft::bench;

constexpr const char* kAbout =
    "wakeup: the costs behind the PE idle back-off (spin, yield, futex sleep).\n"
    "  (a) cacheline_oneway_ns      two pinned threads ping-pong one atomic word\n"
    "                               (spinning, no pause); round trip / 2\n"
    "  (b) futex_oneway_ns          ping-pong where each side sleeps in FUTEX_WAIT\n"
    "                               and is woken by store + FUTEX_WAKE; round trip / 2\n"
    "  (c) futex_wake_call_ns       the waker's cost of FUTEX_WAKE with a sleeper\n"
    "                               (sleeper=true) and with nobody waiting (false);\n"
    "      wake_check_no_sleeper_ns store + fence + check of a 'sleeping' flag that\n"
    "                               finds nobody asleep: no syscall at all\n"
    "  (d) sched_yield_ns           sched_yield() with nobody else runnable\n"
    "  (e) spin_policy_oneway_ns    one-way latency to a receiver that spins S us,\n"
    "                               yields, then sleeps; the message arrives G us\n"
    "                               after it starts waiting; S in {0,10,50,200},\n"
    "                               G in {1,20,100,500}\n"
    "  (f) handoff_oneway_ns        (a) carrying an 8-byte value: in the flag's line\n"
    "                               (carry=inline), or through a pointer to a 64-\n"
    "                               or 128-byte message (carry=ptr64, ptr128)\n"
    "Threads are pinned to the first two CPUs of the process's CPU set; (a) and\n"
    "(e) need two CPUs and are skipped otherwise. Every measurement runs once per repeat,\n"
    "interleaved with the others; figures are the median over repeats with\n"
    "min/max. About 2 s per repeat.\n"
    "\n"
    "flags: none besides the common ones.";

constexpr int kSpins[] = {0, 10, 50, 200};  // µs
constexpr int kGaps[] = {1, 20, 100, 500};  // µs
constexpr int kNs = sizeof kSpins / sizeof kSpins[0];
constexpr int kNg = sizeof kGaps / sizeof kGaps[0];

// A word alone on its cache line.
struct alignas(weft::base::cache_line) word {
  std::atomic<std::uint32_t> v{0};
};
struct alignas(weft::base::cache_line) stamp {
  std::atomic<std::uint64_t> v{0};
};
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

std::uint32_t* raw(std::atomic<std::uint32_t>& a) {
  return reinterpret_cast<std::uint32_t*>(&a);
}

// FUTEX_WAIT: sleeps while *w == expected. 0 = woken, -1 with errno EAGAIN =
// the value had already changed, EINTR = signal.
long futex_wait(std::atomic<std::uint32_t>& w, std::uint32_t expected) {
  return syscall(SYS_futex, raw(w), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
// FUTEX_WAKE: wakes up to n waiters; returns how many it woke.
long futex_wake(std::atomic<std::uint32_t>& w, int n) {
  return syscall(SYS_futex, raw(w), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// Waits until w == target, sleeping in the kernel; returns true if it slept.
bool sleep_until(std::atomic<std::uint32_t>& w, std::uint32_t target) {
  bool slept = false;
  for (std::uint32_t v; (v = w.load(std::memory_order_acquire)) != target;)
    if (futex_wait(w, v) == 0) slept = true;
  return slept;
}

void busy_wait_ns(std::uint64_t ns) {
  std::uint64_t t0 = wall_ns();
  while (wall_ns() - t0 < ns) cpu_relax();
}

// Where the two threads of a pair run.
struct placement {
  int a = -1, b = -1;  // CPU ids, -1 = unpinned
  bool two_cpus = false;
};

placement choose_cpus() {
  placement p;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return p;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) return p;
  p.a = cpus[0];
  p.b = cpus.size() > 1 ? cpus[1] : cpus[0];
  p.two_cpus = cpus.size() > 1;
  return p;
}

void pin_self(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

// Runs fa on CPU a and fb on CPU b, started together; returns after both end.
template <class FA, class FB>
void run_pair(const placement& pl, FA fa, FB fb) {
  std::atomic<int> ready{0};
  auto start = [&](int cpu) {
    pin_self(cpu);
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
  };
  std::thread ta([&] {
    start(pl.a);
    fa();
  });
  std::thread tb([&] {
    start(pl.b);
    fb();
  });
  ta.join();
  tb.join();
}

// Runs f on CPU a in a fresh thread.
template <class F>
void run_one(const placement& pl, F f) {
  std::thread t([&] {
    pin_self(pl.a);
    f();
  });
  t.join();
}

double median_of(std::vector<double> xs) {
  return wb::summarize(std::move(xs)).median;
}

// Median over `batches` timed batches of `per_batch` calls of op(), in ns per
// call. Batches rather than one long loop: the median ignores the batches in
// which the thread was preempted (the machine may be shared), and timing a
// batch rather than each call keeps the clock's own cost out of the figure.
template <class Op>
double batched(int batches, int per_batch, Op op) {
  std::vector<double> xs;
  xs.reserve(std::size_t(batches));
  for (int b = 0; b < batches; ++b) {
    std::uint64_t t0 = wall_ns();
    for (int i = 0; i < per_batch; ++i) op();
    xs.push_back(double(wall_ns() - t0) / per_batch);
  }
  return median_of(std::move(xs));
}

// (a) Round trip / 2 of a spinning ping-pong on one word: median over
// batches of 100 round trips.
double cacheline_oneway(const placement& pl) {
  constexpr std::uint32_t warm = 2000, batch = 100, batches = 1000;
  word flag;
  std::vector<double> xs;
  xs.reserve(batches);
  run_pair(
      pl,
      [&] {
        std::uint64_t t0 = 0;
        for (std::uint32_t i = 0; i < warm + batch * batches; ++i) {
          if (i >= warm && (i - warm) % batch == 0) {
            std::uint64_t t = wall_ns();
            if (i > warm) xs.push_back(double(t - t0) / batch / 2);
            t0 = t;
          }
          flag.v.store(2 * i + 1, std::memory_order_release);
          while (flag.v.load(std::memory_order_acquire) != 2 * i + 2) {
          }
        }
        xs.push_back(double(wall_ns() - t0) / batch / 2);
      },
      [&] {
        for (std::uint32_t i = 0; i < warm + batch * batches; ++i) {
          while (flag.v.load(std::memory_order_acquire) != 2 * i + 1) {
          }
          flag.v.store(2 * i + 2, std::memory_order_release);
        }
      });
  return median_of(std::move(xs));
}

// (f) The flag's line carries the value (inline) or a pointer to a block
// holding it; `at` is where in the block (in its second line for ptr128).
enum class carry { inline_value, ptr64, ptr128 };
struct alignas(weft::base::cache_line) handoff_slot {
  std::atomic<std::uint32_t> seq{0};
  unsigned char* block = nullptr;
  std::uint64_t value = 0;
};
struct alignas(weft::base::cache_line) message_block {
  unsigned char bytes[2 * weft::base::cache_line];
};

double handoff_oneway(const placement& pl, carry how) {
  constexpr std::uint32_t warm = 2000, batch = 100, batches = 1000;
  const std::size_t at = how == carry::ptr128 ? 80 : 40;  // the value: as an MPI message's data
  handoff_slot slot;
  message_block blk;
  std::vector<double> xs;
  xs.reserve(batches);
  bool wrong = false;
  // Hands `v` over as message `seq` (the other side waits for it).
  auto hand = [&](unsigned char* b, std::uint64_t v, std::uint32_t seq) {
    if (how == carry::inline_value) {
      slot.value = v;
    } else {
      std::memset(b, 0, 32);  // a message header's worth of stores, as a send writes
      std::memcpy(b + at, &v, sizeof v);
      slot.block = b;
    }
    slot.seq.store(seq, std::memory_order_release);
  };
  // Waits for message `seq`; returns its value and the block that carried it.
  auto take = [&](std::uint32_t seq, unsigned char*& b) {
    while (slot.seq.load(std::memory_order_acquire) != seq) {
    }
    if (how == carry::inline_value) return slot.value;
    b = slot.block;
    std::uint64_t v;
    std::memcpy(&v, b + at, sizeof v);
    return v;
  };
  run_pair(
      pl,
      [&] {
        std::uint64_t t0 = 0;
        unsigned char* b = blk.bytes;
        for (std::uint32_t i = 0; i < warm + batch * batches; ++i) {
          if (i >= warm && (i - warm) % batch == 0) {
            std::uint64_t t = wall_ns();
            if (i > warm) xs.push_back(double(t - t0) / batch / 2);
            t0 = t;
          }
          hand(b, i, 2 * i + 1);
          if (take(2 * i + 2, b) != std::uint64_t(i) + 1) wrong = true;
        }
        xs.push_back(double(wall_ns() - t0) / batch / 2);
      },
      [&] {
        unsigned char* b = nullptr;
        for (std::uint32_t i = 0; i < warm + batch * batches; ++i) {
          const std::uint64_t v = take(2 * i + 1, b);
          hand(b, v + 1, 2 * i + 2);
        }
      });
  if (wrong) {
    std::fprintf(stderr, "wakeup: handoff ping-pong read a wrong value\n");
    std::exit(1);
  }
  return median_of(std::move(xs));
}
const char* carry_name(carry how) {
  return how == carry::inline_value ? "inline" : how == carry::ptr64 ? "ptr64" : "ptr128";
}
constexpr carry kCarries[] = {carry::inline_value, carry::ptr64, carry::ptr128};

struct futex_result {
  double oneway_ns, slept_frac;
  double mean_ns = 0;
};

// (b) Ping-pong through two futex words, always sleeping, always waking. Each
// round trip is timed; oneway_ns = median round trip / 2, mean_ns = mean
// round trip / 2 (the difference is the tail: preemption, idle exits).
futex_result futex_oneway(const placement& pl) {
  constexpr std::uint32_t warm = 50, rounds = 2000;
  word to_b, to_a;
  std::vector<double> rtt;
  rtt.reserve(rounds);
  std::atomic<long> slept{0};
  run_pair(
      pl,
      [&] {
        long s = 0;
        for (std::uint32_t i = 1; i <= warm + rounds; ++i) {
          if (i == warm + 1) s = 0;
          std::uint64_t t0 = wall_ns();
          to_b.v.store(i, std::memory_order_release);
          futex_wake(to_b.v, 1);
          s += sleep_until(to_a.v, i);
          if (i > warm) rtt.push_back(double(wall_ns() - t0));
        }
        slept += s;
      },
      [&] {
        long s = 0;
        for (std::uint32_t i = 1; i <= warm + rounds; ++i) {
          if (i == warm + 1) s = 0;
          s += sleep_until(to_b.v, i);
          to_a.v.store(i, std::memory_order_release);
          futex_wake(to_a.v, 1);
        }
        slept += s;
      });
  double sum = 0;
  for (double x : rtt) sum += x;
  return {median_of(rtt) / 2, double(slept.load()) / (2.0 * rounds), sum / double(rtt.size()) / 2};
}

// (c) FUTEX_WAKE with a sleeper queued: median ns of the call, timed only when
// it really woke someone (return value 1).
double wake_call_with_sleeper(const placement& pl) {
  constexpr std::uint32_t rounds = 300;
  word w, armed, ack;
  std::vector<double> samples;
  samples.reserve(rounds);
  run_pair(
      pl,
      [&] {
        for (std::uint32_t i = 1; i <= rounds; ++i) {
          while (armed.v.load(std::memory_order_acquire) != i) cpu_relax();
          busy_wait_ns(50'000);  // ample time for the sleeper to enter the kernel
          std::uint64_t c0 = cycles();
          w.v.store(i, std::memory_order_release);
          long woke = futex_wake(w.v, 1);
          std::uint64_t c1 = cycles();
          if (woke == 1) samples.push_back(cycles_to_ns(c1 - c0));
          while (ack.v.load(std::memory_order_acquire) != i) cpu_relax();
        }
      },
      [&] {
        for (std::uint32_t i = 1; i <= rounds; ++i) {
          armed.v.store(i, std::memory_order_release);
          sleep_until(w.v, i);
          ack.v.store(i, std::memory_order_release);
        }
      });
  return samples.empty() ? 0 : median_of(samples);
}

// (c) FUTEX_WAKE on a word nobody waits on: the bare syscall.
double wake_call_no_sleeper(const placement& pl) {
  constexpr int calls = 100000;
  word w;
  double ns = 0;
  run_one(pl, [&] { ns = batched(100, calls / 100, [&] { futex_wake(w.v, 1); }); });
  return ns;
}

// (c) The producer's side of the flag protocol when nobody sleeps: store,
// full fence (pairs with the consumer's "sleeping = 1; fence; re-check"),
// load the flag, and no syscall.
double wake_check_no_sleeper(const placement& pl) {
  constexpr std::uint32_t iters = 1'000'000;
  word msg, sleeping;
  double ns = 0;
  long wakes = 0;
  run_one(pl, [&] {
    std::uint32_t i = 0;
    ns = batched(100, iters / 100, [&] {
      msg.v.store(++i, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (sleeping.v.load(std::memory_order_relaxed)) wakes += futex_wake(msg.v, 1);
    });
  });
  if (wakes) std::fprintf(stderr, "warning: wake check found a sleeper\n");
  return ns;
}

// (d) sched_yield() with nobody else runnable on the CPU.
double yield_cost(const placement& pl) {
  constexpr int calls = 100000;
  double ns = 0;
  run_one(pl, [&] { ns = batched(100, calls / 100, [] { sched_yield(); }); });
  return ns;
}

// (e) Receiver: spin `spin_us`, yield once, then sleep; sender: message
// `gap_us` after it sees the receiver start waiting. Median one-way ns.
futex_result spin_policy(const placement& pl, int spin_us, int gap_us) {
  // ~40 ms per configuration, at least 60 samples.
  const std::uint32_t rounds = std::uint32_t(std::clamp(40'000 / (gap_us + 30), 60, 1500));
  const std::uint64_t spin_ns = std::uint64_t(spin_us) * 1000,
                      gap_ns = std::uint64_t(gap_us) * 1000;
  word msg, sleeping, ack;
  stamp sent_at;
  std::vector<double> lat;
  lat.reserve(rounds);
  long slept = 0;
  run_pair(
      pl,
      [&] {  // sender
        for (std::uint32_t i = 1; i <= rounds; ++i) {
          while (ack.v.load(std::memory_order_acquire) != i - 1) cpu_relax();
          busy_wait_ns(gap_ns);
          sent_at.v.store(wall_ns(), std::memory_order_relaxed);
          msg.v.store(i, std::memory_order_release);
          std::atomic_thread_fence(std::memory_order_seq_cst);
          if (sleeping.v.load(std::memory_order_relaxed)) futex_wake(msg.v, 1);
        }
      },
      [&] {  // receiver
        for (std::uint32_t i = 1; i <= rounds; ++i) {
          bool got = false;
          std::uint64_t t0 = wall_ns();
          for (;;) {
            if (msg.v.load(std::memory_order_acquire) == i) {
              got = true;
              break;
            }
            if (wall_ns() - t0 >= spin_ns) break;
            cpu_relax();
          }
          if (!got) {
            sched_yield();
            got = msg.v.load(std::memory_order_acquire) == i;
          }
          if (!got) {
            ++slept;
            sleeping.v.store(1, std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_seq_cst);
            sleep_until(msg.v, i);
            sleeping.v.store(0, std::memory_order_relaxed);
          }
          std::uint64_t now = wall_ns();
          lat.push_back(double(now - sent_at.v.load(std::memory_order_relaxed)));
          ack.v.store(i, std::memory_order_release);
        }
      });
  return {median_of(lat), double(slept) / rounds};
}

}  // namespace

int main(int argc, char** argv) {
  auto cli = wb::parse_cli(argc, argv, kAbout);
  weft::bench::check_weft_options(argc, argv);
  wb::reject_unknown(cli, {});
  weft::base::ns_per_cycle();  // calibrate once, off the timed paths

  placement pl = choose_cpus();
  if (!pl.two_cpus)
    std::fprintf(stderr,
                 "note: only one CPU available: cache-line ping-pong (a) and spin "
                 "policies (e) skipped; futex pairs time-share one CPU\n");

  std::vector<double> cl, fx, fx_mean, fx_slept, ratio, wake_s, wake_n, check, yield;
  std::vector<double> pol[kNs][kNg], pol_slept[kNs][kNg];
  std::vector<double> handoff[3], ptr_over_inline[2];
  for (int r = 0; r < cli.repeat; ++r) {
    double c = 0;
    if (pl.two_cpus) cl.push_back(c = cacheline_oneway(pl));
    for (int k = 0; k < 3 && pl.two_cpus; ++k) {
      handoff[k].push_back(handoff_oneway(pl, kCarries[k]));
      if (k > 0) ptr_over_inline[k - 1].push_back(handoff[k].back() / handoff[0].back());
    }
    auto f = futex_oneway(pl);
    fx.push_back(f.oneway_ns);
    fx_slept.push_back(f.slept_frac);
    fx_mean.push_back(f.mean_ns);
    if (c > 0) ratio.push_back(f.oneway_ns / c);
    wake_s.push_back(wake_call_with_sleeper(pl));
    wake_n.push_back(wake_call_no_sleeper(pl));
    check.push_back(wake_check_no_sleeper(pl));
    yield.push_back(yield_cost(pl));
    for (int s = 0; s < kNs && pl.two_cpus; ++s)
      for (int g = 0; g < kNg; ++g) {
        auto p = spin_policy(pl, kSpins[s], kGaps[g]);
        pol[s][g].push_back(p.oneway_ns);
        pol_slept[s][g].push_back(p.slept_frac);
      }
  }

  wb::reporter rep("wakeup", cli.json);
  auto stat = [](const char* metric, const std::vector<double>& xs) {
    auto s = wb::summarize(xs);
    return std::vector<wb::field>{
        {"metric", metric}, {"value", s.median}, {"min", s.min}, {"max", s.max}};
  };
  auto with = [](std::vector<wb::field> f, std::vector<wb::field> extra) {
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  };
  if (!cli.json) {
    if (pl.two_cpus)
      std::printf("threads pinned to CPUs %d and %d; median of %d interleaved repeats\n\n", pl.a,
                  pl.b, cli.repeat);
    else
      std::printf("one CPU (%d): (a) and (e) skipped; median of %d repeats\n\n", pl.a, cli.repeat);
  }
  if (pl.two_cpus) rep.row(stat("cacheline_oneway_ns", cl));
  rep.row(with(stat("futex_oneway_ns", fx),
               {{"mean", median_of(fx_mean)}, {"slept_frac", median_of(fx_slept)}}));
  if (!ratio.empty()) rep.row(stat("ratio_futex_over_cacheline", ratio));
  rep.row(with(stat("futex_wake_call_ns", wake_s), {{"sleeper", true}}));
  rep.row(with(stat("futex_wake_call_ns", wake_n), {{"sleeper", false}}));
  rep.row(stat("wake_check_no_sleeper_ns", check));
  rep.row(stat("sched_yield_ns", yield));
  for (int k = 0; k < 3 && pl.two_cpus; ++k)
    rep.row(with(stat("handoff_oneway_ns", handoff[k]), {{"carry", carry_name(kCarries[k])}}));
  for (int k = 1; k < 3 && pl.two_cpus; ++k)
    rep.row(with(stat("ratio_handoff_over_inline", ptr_over_inline[k - 1]),
                 {{"carry", carry_name(kCarries[k])}}));
  rep.flush();
  for (int s = 0; s < kNs && pl.two_cpus; ++s)
    for (int g = 0; g < kNg; ++g)
      rep.row(with(stat("spin_policy_oneway_ns", pol[s][g]),
                   {{"spin_us", kSpins[s]},
                    {"gap_us", kGaps[g]},
                    {"slept_frac", median_of(pol_slept[s][g])}}));
  rep.flush();

  if (!cli.json && pl.two_cpus) {
    // The same as a matrix, and the smallest budget that keeps each gap awake.
    std::printf(
        "one-way ns (slept %%) by receiver spin budget (columns) and message gap (rows)\n%8s",
        "gap\\spin");
    for (int s : kSpins) std::printf("  %16d", s);
    std::printf("   smallest budget that avoids sleeping\n");
    for (int g = 0; g < kNg; ++g) {
      std::printf("%6d us", kGaps[g]);
      int best = -1;
      for (int s = 0; s < kNs; ++s) {
        double sl = median_of(pol_slept[s][g]);
        std::printf("  %9.0f (%3.0f%%)", median_of(pol[s][g]), 100 * sl);
        if (best < 0 && sl < 0.5) best = kSpins[s];
      }
      if (best >= 0)
        std::printf("   %d us\n", best);
      else
        std::printf("   none of these\n");
    }
  }
  return 0;
}
