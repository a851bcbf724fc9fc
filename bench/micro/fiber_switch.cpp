// fiber_switch: what a switch between logical threads costs, and what giving
// each one thread-local storage of its own would add to it (issue 22,
// docs/omp.md "Why carriers"). Per one-way switch, median over batches:
//
//  handwritten        the floor: six callee-saved registers pushed, the
//                     stack pointer swapped, six popped (x86-64 only; no
//                     floating-point control words, no sanitizer hooks)
//  fcontext           Boost.Context's jump_fcontext alone (what weft's
//                     fibers are built on)
//  fiber              weft::threads::fiber resume/suspend: fcontext, plus
//                     errno kept per side and the sanitizer hooks (no-ops
//                     outside sanitized builds)
//  fiber+wrfsbase     fiber plus one wrfsbase per switch: the thread pointer
//                     moved to the incoming fiber's TLS block, as a
//                     per-fiber TLS design must (written here with its own
//                     value, which costs the same); only where the CPU and
//                     the kernel allow user-mode FSGSBASE
//  fiber+arch_prctl   the same through arch_prctl(ARCH_SET_FS): the
//                     fallback where wrfsbase is not allowed
//  carrier_same_cpu   what libweft-omp pays instead, when a logical thread
//  carrier_two_cpus   cannot share its PE's OS thread: a hand-off between
//                     two OS threads through std::atomic wait/notify (a
//                     futex), the two bound to one CPU, or to two
//
// The TLS-switch rows are the instruction's cost alone: a per-fiber TLS
// design also needs the blocks themselves (a copy of every module's TLS
// image per fiber), and its problems are not of speed (docs/omp.md).
#include <pthread.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.hpp"
#include "weft/base/timer.hpp"
#include "weft/base/topology.hpp"
#include "weft/threads/fiber.hpp"

#if defined(__x86_64__)
#include <asm/prctl.h>
#endif

namespace {

const char* about =
    "fiber_switch: ns per one-way switch between two contexts on one thread -- a\n"
    "hand-written register swap (the floor), Boost fcontext, weft's fiber, and the fiber with\n"
    "the thread pointer moved on each switch (wrfsbase; arch_prctl) as a per-fiber TLS\n"
    "design would -- and ns per hand-off between two OS threads (carriers) on one CPU and on\n"
    "two. Flags:\n"
    "  --switches=N   switches per batch (default 200000)";

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

namespace bctx = boost::context::detail;
using weft::base::wall_ns;

constexpr int batches = 11;

// Median of `batches` timings of fn(n) (each does n switches), in ns per switch.
template <class F>
double median_ns(long n, F&& fn) {
  std::vector<double> per;
  for (int b = 0; b < batches; ++b) {
    const std::uint64_t t0 = wall_ns();
    fn(n);
    per.push_back(double(wall_ns() - t0) / double(n));
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

// ---- the hand-written floor (x86-64 System V) ---------------------------------------

#if defined(__x86_64__)
extern "C" void weft_bench_swap(void** save_sp, void* to_sp);
asm(R"(
  .text
  .globl weft_bench_swap
  .type weft_bench_swap,@function
weft_bench_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size weft_bench_swap,.-weft_bench_swap
)");

void* g_main_sp = nullptr;
void* g_side_sp = nullptr;

[[noreturn]] void side_entry() {
  for (;;) weft_bench_swap(&g_side_sp, g_main_sp);
}

double handwritten_ns(long n) {
  constexpr std::size_t bytes = 64 << 10;
  std::vector<unsigned char> stack(bytes);
  auto top = (reinterpret_cast<std::uintptr_t>(stack.data()) + bytes) & ~std::uintptr_t(15);
  auto* sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                                     // side_entry's return address (never used)
  *--sp = reinterpret_cast<void*>(&side_entry);        // where the first swap "returns"
  for (int r = 0; r < 6; ++r) *--sp = nullptr;         // the six registers
  g_side_sp = sp;
  // Each round trip is two switches.
  return median_ns(n, [](long k) {
    for (long i = 0; i < k; i += 2) weft_bench_swap(&g_main_sp, g_side_sp);
  });
}
#endif

// ---- Boost fcontext alone -------------------------------------------------------------

void fcontext_side(bctx::transfer_t t) {
  for (;;) t = bctx::jump_fcontext(t.fctx, nullptr);
}

double fcontext_ns(long n) {
  constexpr std::size_t bytes = 64 << 10;
  std::vector<unsigned char> stack(bytes);
  bctx::fcontext_t ctx = bctx::make_fcontext(stack.data() + bytes, bytes, &fcontext_side);
  return median_ns(n, [&](long k) {
    for (long i = 0; i < k; i += 2) ctx = bctx::jump_fcontext(ctx, nullptr).fctx;
  });
}

// ---- weft's fiber, with and without moving the thread pointer --------------------------

enum class tls_switch { none, wrfsbase, arch_prctl };

std::uintptr_t g_fs = 0;
tls_switch g_mode = tls_switch::none;
std::atomic<bool> g_fiber_stop{false};

inline void move_thread_pointer() {
#if defined(__x86_64__)
  if (g_mode == tls_switch::wrfsbase) {
    asm volatile("wrfsbase %0" ::"r"(g_fs) : "memory");
  } else if (g_mode == tls_switch::arch_prctl) {
    syscall(SYS_arch_prctl, ARCH_SET_FS, g_fs);
  }
#endif
}

void fiber_side(void*) {
  while (!g_fiber_stop.load(std::memory_order_relaxed)) {
    move_thread_pointer();  // back to the resumer's block
    weft::threads::fiber::suspend();
  }
}

double fiber_ns(long n, tls_switch mode) {
  g_mode = mode;
  g_fiber_stop = false;
  weft::threads::fiber* f = weft::threads::fiber::create(&fiber_side, nullptr);
  const double ns = median_ns(n, [&](long k) {
    for (long i = 0; i < k; i += 2) {
      move_thread_pointer();  // to the fiber's block
      f->resume();
    }
  });
  g_fiber_stop = true;
  while (!f->resume()) {
  }
  weft::threads::fiber::destroy(f);
  g_mode = tls_switch::none;
  return ns;
}

bool fsgsbase_allowed() {
#if defined(__x86_64__)
  constexpr unsigned long hwcap2_fsgsbase = 1ul << 1;  // HWCAP2_FSGSBASE
  return (getauxval(AT_HWCAP2) & hwcap2_fsgsbase) != 0;
#else
  return false;
#endif
}

// ---- carriers: a hand-off between two OS threads ----------------------------------------

void bind_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Ping-pong of a turn word: each side waits (atomic wait: a futex after a
// short spin in libstdc++) for its turn and hands it over (store + notify),
// as a logical thread's carrier and the thread that resumes it do.
double carrier_ns(long n, int cpu_a, int cpu_b) {
  std::atomic<long> turn{0};
  std::atomic<bool> quit{false};
  std::thread other([&] {
    bind_to(cpu_b);
    long expect = 1;
    for (;;) {
      long t = turn.load(std::memory_order_acquire);
      while (t != expect) {
        if (quit.load(std::memory_order_acquire)) return;
        turn.wait(t, std::memory_order_acquire);
        t = turn.load(std::memory_order_acquire);
      }
      turn.store(expect + 1, std::memory_order_release);
      turn.notify_one();
      expect += 2;
    }
  });
  bind_to(cpu_a);
  long next = 0;
  const double ns = median_ns(n, [&](long k) {
    for (long i = 0; i < k; i += 2) {
      turn.store(next + 1, std::memory_order_release);
      turn.notify_one();
      long t = turn.load(std::memory_order_acquire);
      while (t != next + 2) {
        turn.wait(t, std::memory_order_acquire);
        t = turn.load(std::memory_order_acquire);
      }
      next += 2;
    }
  });
  quit = true;
  turn.store(-1, std::memory_order_release);
  turn.notify_all();
  other.join();
  // Back to the process's CPU set for what follows.
  cpu_set_t all;
  CPU_ZERO(&all);
  for (const auto& c : weft::base::topology::get().allowed()) CPU_SET(c.os_index, &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(argc, argv, about);
  weft::bench::check_weft_options(argc, argv);
  weft::bench::reject_unknown(c, {"switches"});
  const long n = weft::bench::positive_arg(c, "switches", 200000, 1L << 34);
#if defined(__x86_64__)
  asm volatile("rdfsbase %0" : "=r"(g_fs));
#endif
  const bool fsgsbase = fsgsbase_allowed();
  const auto& cpus = weft::base::topology::get().allowed();
  const int cpu0 = cpus.empty() ? -1 : int(cpus[0].os_index);
  const int cpu1 = cpus.size() < 2 ? -1 : int(cpus[1].os_index);

  weft::bench::reporter rep("fiber_switch", c.json);
  auto emit = [&](const char* what, int r, double ns) {
    rep.row({{"what", what}, {"repeat", r}, {"metric", "switch_ns"}, {"value", ns}});
  };
  if (sanitized)
    std::fprintf(stderr,
                 "fiber_switch: sanitized build: the hand-written and bare fcontext switches "
                 "(which the sanitizers are not told of) are skipped\n");
  if (!fsgsbase)
    std::fprintf(stderr,
                 "fiber_switch: wrfsbase is not allowed here (CPU or kernel): fiber+wrfsbase "
                 "skipped\n");
  for (int r = 0; r < c.repeat; ++r) {
#if defined(__x86_64__)
    if (!sanitized) emit("handwritten", r, handwritten_ns(n));
#endif
    if (!sanitized) emit("fcontext", r, fcontext_ns(n));
    emit("fiber", r, fiber_ns(n, tls_switch::none));
#if defined(__x86_64__)
    if (fsgsbase) emit("fiber+wrfsbase", r, fiber_ns(n, tls_switch::wrfsbase));
    emit("fiber+arch_prctl", r, fiber_ns(std::max(2L, n / 20), tls_switch::arch_prctl));
#endif
    emit("carrier_same_cpu", r, carrier_ns(std::max(2L, n / 50), cpu0, cpu0));
    if (cpu1 >= 0) emit("carrier_two_cpus", r, carrier_ns(std::max(2L, n / 50), cpu0, cpu1));
  }
  return 0;
}
