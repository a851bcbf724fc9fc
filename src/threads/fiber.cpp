// Fibers on Boost.Context's fcontext, with the sanitizers told about every
// switch (include/weft/threads/fiber.hpp has the contract).
//
// A switch is one jump_fcontext: it saves the callee-saved registers on the
// current stack, jumps to the other context and hands it the context it came
// from. resume() jumps into the fiber and gets back the fiber's context when
// it suspends or ends; suspend() jumps back to the resumer and gets, when
// resumed again, the new resumer's context.
//
// Sanitizers. AddressSanitizer must know which stack is current
// (__sanitizer_start_switch_fiber before a jump, __sanitizer_finish_switch_
// fiber after it); the resumer's stack bounds are learnt from the finish
// call on the fiber's side. ThreadSanitizer keeps a shadow state per fiber
// (__tsan_create_fiber, __tsan_switch_to_fiber before each jump).
//
// Stacks are mmap'd with a guard below (as large as the stack: guard_for)
// and cached per thread
// (capped), so starting a fiber in steady state costs no system call.
// (mmap, mprotect and munmap stay here, not in base/os: no other layer maps
// stacks.)
//
// An overflow is reported as one (report_overflow below), not as a bare
// SIGSEGV: every thread that runs fibers gets an alternate signal stack (a
// fault on the overflowed stack could not push the handler's frame), and
// the handler names the fault when the faulting thread's fiber has its
// stack pointer or the faulting address in or just below its guard. Other
// faults go to the handler that was there before (or the default action).
// Not in sanitizer builds: AddressSanitizer reports overflows itself, and
// both sanitizers own the SIGSEGV handler.
#include "weft/threads/fiber.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstring>
#include <vector>
#include "program_tls.hpp"
#include "weft/base/error.hpp"
#include "weft/core/pe.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define WEFT_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define WEFT_FIBER_TSAN 1
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(__x86_64__)
#define WEFT_FIBER_OVERFLOW_REPORT 1
#endif

namespace weft::threads {

namespace bctx = boost::context::detail;

namespace {

thread_local fiber* t_current WEFT_TLS_FAST = nullptr;

// Whose contents the program's thread-local block holds (program_tls.hpp):
// a fiber with a private copy, or null for the thread's own, which are
// kept in t_own meanwhile.
thread_local fiber* t_tls_owner WEFT_TLS_FAST = nullptr;
struct own_tls {
  detail::program_tls* copy = nullptr;
  ~own_tls() { detail::program_tls_destroy(copy); }
};
thread_local own_tls t_own;

std::size_t page_bytes() {
  static const std::size_t p = std::size_t(::sysconf(_SC_PAGESIZE));
  return p;
}

// The guard below a stack of `usable` bytes: as large as the stack (16
// pages at least, 64 MiB at most). A frame larger than the room left moves
// the stack pointer below the guard in one step, and its first access may
// then land in another mapping -- the PE thread's own stack and TLS lie
// close below, and a write there corrupts them silently -- instead of
// faulting: a guard of the stack's size catches frames of up to twice it
// (programs built with -fstack-clash-protection probe every page, and
// fault in the guard whatever the frame). Its pages are address space
// only.
std::size_t guard_for(std::size_t usable) {
  const std::size_t page = page_bytes();
  const std::size_t lo = 16 * page, hi = std::size_t(64) << 20;
  const std::size_t g = usable < lo ? lo : usable > hi ? hi : usable;
  return (g + page - 1) / page * page;
}

// Unmaps a stack of ours: a failure is a program error (a bad address).
void unmap(void* base, std::size_t bytes) noexcept {
  if (::munmap(base, bytes) != 0)
    base::fatal_sys(errno, "munmap", "for the fiber stack at %p (%zu bytes)", base, bytes);
}

// Stacks of one size class kept by a thread for its next fibers.
struct stack_cache {
  struct entry {
    void* base;
    std::size_t bytes;  // guard included
  };
  std::vector<entry> stacks;
  static constexpr std::size_t keep = 64;
  ~stack_cache() { release(); }
  void release() noexcept {
    for (const entry& e : stacks) unmap(e.base, e.bytes);
    stacks.clear();
  }
};
thread_local stack_cache t_stacks;

// A mapping of at least `usable` bytes of stack plus its guard (`guard`).
void* map_stack(std::size_t usable, std::size_t& bytes, std::size_t& guard) {
  const std::size_t page = page_bytes();
  usable = (usable + page - 1) / page * page;
  guard = guard_for(usable);
  bytes = usable + guard;
  for (auto it = t_stacks.stacks.begin(); it != t_stacks.stacks.end(); ++it)
    if (it->bytes == bytes) {
      void* base = it->base;
      *it = t_stacks.stacks.back();
      t_stacks.stacks.pop_back();
      return base;
    }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) base::fatal_sys(errno, "mmap", "for a fiber stack of %zu bytes", bytes);
  if (::mprotect(base, guard, PROT_NONE) != 0)
    base::fatal_sys(errno, "mprotect", "for the guard of the fiber stack at %p (%zu bytes)", base,
                    bytes);
  return base;
}

void unmap_stack(void* base, std::size_t bytes) noexcept {
  if (t_stacks.stacks.size() < stack_cache::keep)
    t_stacks.stacks.push_back({base, bytes});
  else
    unmap(base, bytes);
}

}  // namespace

// The switch code: the only place that touches a fiber's private state
// besides the class itself.
struct fiber_access {
  // Before a jump from the current stack to [bottom, bottom + size).
  static void start_switch(void** fake_stack, const void* bottom, std::size_t size) {
#if WEFT_FIBER_ASAN
    __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
    (void)fake_stack;
    (void)bottom;
    (void)size;
#endif
  }
  static void finish_switch(void* fake_stack, const void** old_bottom, std::size_t* old_size) {
#if WEFT_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, old_bottom, old_size);
#else
    (void)fake_stack;
    (void)old_bottom;
    (void)old_size;
#endif
  }
  static const void* stack_bottom(const fiber* f) {
    return static_cast<const char*>(f->stack_) + f->guard_bytes_;
  }
  static std::size_t stack_size(const fiber* f) {
    return f->stack_bytes_ - f->guard_bytes_;
  }
  static const char* label(const fiber* f) {
    return f->label_;
  }
  static long label_id(const fiber* f) {
    return f->label_id_;
  }

  // The block gets f's contents (f has a private copy).
  static void install_tls(fiber* f) {
    fiber* owner = t_tls_owner;
    if (owner == f) [[likely]]
      return;
    // Its contents are in its copy, unless another thread's block holds
    // them: a fiber that moved, which the copy cannot follow.
    if (f->tls_thread_ != nullptr)
      base::fatal(
          "weft::threads: a fiber with a private copy of the program's thread-locals "
          "was resumed on another OS thread than the one it last ran on");
    if (owner != nullptr) {
      detail::program_tls_save(owner->tls_);
      owner->tls_thread_ = nullptr;
    } else {
      if (t_own.copy == nullptr) t_own.copy = detail::program_tls_create();
      detail::program_tls_save(t_own.copy);
    }
    detail::program_tls_load(f->tls_);
    f->tls_thread_ = &t_own;
    t_tls_owner = f;
  }
  // f, which owned the block, ended: the thread's own contents come back.
  static void release_tls(fiber* f) noexcept {
    if (t_tls_owner != f) return;
    detail::program_tls_load(t_own.copy);
    f->tls_thread_ = nullptr;
    t_tls_owner = nullptr;
  }

  // First code run on the fiber's stack.
  static void trampoline(bctx::transfer_t t) noexcept {
    fiber* f = static_cast<fiber*>(t.data);
    f->back_ = t.fctx;
    finish_switch(nullptr, &f->back_stack_bottom_, &f->back_stack_size_);
    try {
      f->fn_(f->arg_);
    } catch (...) {
      f->error_ = std::current_exception();
    }
    // Its thread_local objects end with it, as a thread's do at its exit.
    if (f->tls_ != nullptr) {
      detail::program_tls_run_destructors(f->tls_);
      release_tls(f);
    }
    f->done_ = true;
    // This stack dies: no fake stack to keep (null save slot).
    start_switch(nullptr, f->back_stack_bottom_, f->back_stack_size_);
#if WEFT_FIBER_TSAN
    __tsan_switch_to_fiber(f->tsan_back_, 0);
#endif
    bctx::jump_fcontext(f->back_, nullptr);
    // Not reached: a finished fiber is never resumed.
    base::fatal("weft::threads: a finished fiber was resumed");
  }
};

namespace {

#if WEFT_FIBER_OVERFLOW_REPORT
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)  // Linux 4.7's, not in every C library's headers
#endif
struct sigaction g_previous_segv;

// Async-signal-safe output: write(2) of a few pieces and numbers.
void put(const char* s) noexcept {
  const ssize_t n = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)n;
}
void put(unsigned long v) noexcept {
  char digits[24];
  int i = sizeof digits;
  digits[--i] = 0;
  do {
    digits[--i] = char('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 0);
  put(digits + i);
}

void on_segv(int sig, siginfo_t* info, void* context) {
  const fiber* f = fiber::current();
  if (f != nullptr) {
    const char* bottom = static_cast<const char*>(fiber_access::stack_bottom(f));
    const auto* uc = static_cast<const ucontext_t*>(context);
    const char* sp = reinterpret_cast<const char*>(uc->uc_mcontext.gregs[REG_RSP]);
    const char* addr = static_cast<const char*>(info->si_addr);
    // A frame larger than the guard moves the stack pointer past it: the
    // first access then faults below the mapping.
    const std::size_t reach = std::size_t(1) << 30;
    const auto below = [&](const char* p) {
      return p < bottom && bottom - p <= std::ptrdiff_t(reach);
    };
    if (below(sp) || below(addr)) {
      const char* label = fiber_access::label(f);
      if (label != nullptr) {
        put("weft: stack overflow in ");
        put(label);
        put(" ");
        put(static_cast<unsigned long>(fiber_access::label_id(f)));
        put(" (a logical thread) on PE ");
      } else {
        put("weft: stack overflow in a logical thread (fiber) on PE ");
      }
      const int pe = weft::my_rank();
      if (pe >= 0)
        put(static_cast<unsigned long>(pe));
      else
        put("(none)");
      put(": its stack is ");
      put(static_cast<unsigned long>(fiber_access::stack_size(f) >> 10));
      put(label != nullptr
              ? " KiB. --weft:ult-stack=KiB sets it.\n"
              : " KiB. An OpenMP thread's stack is OMP_STACKSIZE (e.g. OMP_STACKSIZE=64M).\n");
    }
  }
  // The previous action takes the fault again as the instruction reruns
  // (the default one ends the process with SIGSEGV).
  ::sigaction(sig, &g_previous_segv, nullptr);
}

// Once per process: the handler; once per thread that runs fibers: its
// alternate stack (never freed: the thread may fault until it ends).
void arm_overflow_report() noexcept {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = &on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGSEGV, &sa, &g_previous_segv) == 0;
  }();
  if (!installed) return;
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0)
    return;  // the thread has one already (the program's): it serves
  const std::size_t bytes = std::size_t(64) << 10;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return;  // no report on this thread: a bare SIGSEGV, as before
  stack_t ss{};
  ss.ss_sp = mem;
  ss.ss_size = bytes;
  // Always from its top: a frame that overflowed a fiber's stack may have
  // moved the stack pointer into this mapping (the kernel would then take
  // it for the handler's stack in use and push below it).
  ss.ss_flags = int(SS_AUTODISARM);
  if (::sigaltstack(&ss, nullptr) != 0) ::munmap(mem, bytes);
}

thread_local bool t_armed = false;
#endif

}  // namespace

fiber* fiber::create(entry fn, void* arg, std::size_t stack_bytes) {
  if (fn == nullptr) base::fatal("weft::threads::fiber::create: no function");
  auto* f = new fiber;
  f->fn_ = fn;
  f->arg_ = arg;
  f->stack_ =
      map_stack(stack_bytes < 16384 ? 16384 : stack_bytes, f->stack_bytes_, f->guard_bytes_);
#if WEFT_FIBER_TSAN
  f->tsan_fiber_ = __tsan_create_fiber(0);
#endif
  return f;
}

void fiber::destroy(fiber* f) noexcept {
  if (f == nullptr) return;
  if (f->started_ && !f->done_)
    base::fatal("weft::threads::fiber::destroy: the fiber is suspended, not finished");
#if WEFT_FIBER_TSAN
  if (f->tsan_fiber_ != nullptr) __tsan_destroy_fiber(f->tsan_fiber_);
#endif
  detail::program_tls_destroy(f->tls_);
  unmap_stack(f->stack_, f->stack_bytes_);
  delete f;
}

bool fiber::resume() {
  if (done_) base::fatal("weft::threads::fiber::resume: the fiber has finished");
  if (t_current == this) base::fatal("weft::threads::fiber::resume: the fiber is running");
#if WEFT_FIBER_OVERFLOW_REPORT
  if (!t_armed) [[unlikely]] {
    t_armed = true;
    arm_overflow_report();
  }
#endif
  fiber* const prev = t_current;
  t_current = this;
  if (!started_) {
    started_ = true;
    char* top = static_cast<char*>(stack_) + stack_bytes_;
    ctx_ = bctx::make_fcontext(top, stack_bytes_ - guard_bytes_, &fiber_access::trampoline);
  }
  void* fake = nullptr;
  fiber_access::start_switch(&fake, fiber_access::stack_bottom(this),
                             fiber_access::stack_size(this));
#if WEFT_FIBER_TSAN
  tsan_back_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
  const int resumer_errno = errno;
  errno = errno_;
  if (tls_ != nullptr) fiber_access::install_tls(this);
  const bctx::transfer_t t = bctx::jump_fcontext(ctx_, this);
  // A fiber with a copy that resumed this one runs on with its own.
  if (prev != nullptr && prev->tls_ != nullptr) fiber_access::install_tls(prev);
  errno_ = errno;
  errno = resumer_errno;
  fiber_access::finish_switch(fake, nullptr, nullptr);
  ctx_ = t.fctx;
  t_current = prev;
  if (done_ && error_) {
    std::exception_ptr e = std::move(error_);
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  return done_;
}

void fiber::suspend() {
  fiber* f = t_current;
  if (f == nullptr) base::fatal("weft::threads::fiber::suspend called off a fiber");
  fiber_access::start_switch(&f->fake_stack_, f->back_stack_bottom_, f->back_stack_size_);
#if WEFT_FIBER_TSAN
  __tsan_switch_to_fiber(f->tsan_back_, 0);
#endif
  const bctx::transfer_t t = bctx::jump_fcontext(f->back_, nullptr);
  // Resumed (maybe by another resumer than before): remember where it is.
  f->back_ = t.fctx;
  fiber_access::finish_switch(f->fake_stack_, &f->back_stack_bottom_, &f->back_stack_size_);
}

void fiber::give_private_tls() {
  if (started_) base::fatal("weft::threads::fiber::give_private_tls: the fiber has started");
  // The runtime's own thread-locals must lie outside the block it copies:
  // true where weft is a shared library (libweft-mpi.so), not where it is
  // linked into the program.
  if (detail::program_tls_holds(&t_current))
    base::fatal(
        "not implemented: a private copy of the program's thread-locals per logical "
        "thread where weft is linked statically into the program (its own "
        "thread-locals would be copied with them); link libweft-mpi.so as weft-mpicc "
        "does, or run with --weft:rank-tls=shared");
  if (tls_ == nullptr) tls_ = detail::program_tls_create();
}

std::size_t fiber::program_tls_bytes() noexcept {
  return detail::program_tls_bytes();
}

void fiber::release_private_tls() noexcept {
  if (tls_ == nullptr || t_tls_owner != this) return;
  detail::program_tls_save(tls_);
  fiber_access::release_tls(this);
}

bool fiber::take_thread_local_destructor(void (*fn)(void*), void* object) {
  fiber* f = t_current;
  if (f == nullptr || f->tls_ == nullptr || !detail::program_tls_holds(object)) return false;
  f->tls_->destructors.emplace_back(fn, object);
  return true;
}

fiber* fiber::current() noexcept {
  return t_current;
}

void release_stack_cache() noexcept {
  t_stacks.release();
}

}  // namespace weft::threads
