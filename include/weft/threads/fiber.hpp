// User-level threads (fibers): a function running on a stack of its own,
// which can suspend in the middle and be resumed later by the thread that
// runs it. Layer `threads` (DESIGN.md): the OpenMP runtime runs the members
// of a team as fibers, so that a member waiting at a barrier gives its PE
// back to the scheduler instead of blocking it (lesson 11), and MPI ranks
// will be fibers too.
//
//   weft::threads::fiber* f = weft::threads::fiber::create(&body, arg);
//   if (!f->resume()) { ... it suspended: resume it later ... }
//   weft::threads::fiber::destroy(f);           // once it finished
//
//   void body(void* arg) { ...; weft::threads::fiber::suspend(); ... }
//
// Contexts. A fiber is resumed by any thread, but it must always be resumed
// by the same one: code compiled for threads may keep the address of a
// thread_local across a call that suspends, so a fiber moved to another
// thread would read the first thread's variables (the OpenMP runtime pins
// each fiber to the PE that started it). resume() runs the fiber on the
// calling thread's stack of control until the fiber suspends or returns; a
// fiber may resume another (nested), and suspend() always returns to the
// one that resumed it. Neither blocks the thread beyond running the fiber.
//
// errno is the fiber's own: each side of a switch finds the value it left
// (a fiber suspended at an OpenMP barrier gets its errno back, whatever its
// PE's scheduler did meanwhile).
//
// The switch is Boost.Context's fcontext (make_fcontext / jump_fcontext, a
// few nanoseconds), with the sanitizers told about every switch
// (AddressSanitizer's and ThreadSanitizer's fiber interfaces), so sanitized
// builds check fiber code like any other. Rejected: ucontext (a system call
// per switch for the signal mask), boost::context::fiber (its fcontext
// variant tells the sanitizers nothing in Boost 1.74).
#pragma once
#include <cstddef>
#include <exception>
#include "weft/base/export.hpp"

namespace weft::threads {

namespace detail {
struct program_tls;
}

class WEFT_API fiber {
 public:
  using entry = void (*)(void* arg);

  // A fiber that will run entry(arg) when first resumed, on a stack of at
  // least `stack_bytes` (rounded up to pages; a guard below it, as large as
  // the stack, turns an overflow into a fault, reported as a stack overflow,
  // not a corruption). Stacks are reused through a
  // per-thread cache. Any thread.
  static fiber* create(entry fn, void* arg, std::size_t stack_bytes = default_stack_bytes);
  // Frees a fiber that returned or was never resumed; its stack goes to the
  // calling thread's cache. Any thread.
  static void destroy(fiber* f) noexcept;

  // Runs the fiber on the calling thread until it suspends (false) or its
  // function returns (true). An exception that left the function is
  // rethrown here. Must not be called on a finished fiber, nor on one that
  // is running (resumed and not suspended).
  bool resume();
  // Inside a fiber: back to the code that resumed it; returns when it is
  // resumed again. Called off a fiber it is a fatal error.
  static void suspend();
  // The fiber the calling thread runs now, or null on a thread's own stack.
  static fiber* current() noexcept;

  // Gives the fiber its own copy of the program's thread-local variables
  // (the executable's `thread_local` and `__thread` ones; shared libraries'
  // stay the OS thread's): it starts as a new thread's would, and is
  // switched in and out with the fiber (src/threads/program_tls.hpp).
  // Before the first resume. Nothing to do for a program without any.
  void give_private_tls();
  // The size of the program's thread-local block (the executable's; 0:
  // it has none).
  static std::size_t program_tls_bytes() noexcept;
  // A C++ thread_local object of the program built on a fiber with its own
  // copy is destroyed when that fiber ends, not when its OS thread does:
  // true when the running fiber takes the destructor (the C library's
  // __cxa_thread_atexit_impl is routed here first: libweft-mpi does).
  static bool take_thread_local_destructor(void (*fn)(void*), void* object);
  // On the thread that ran it, once it suspended: its copy of the program's
  // thread-locals leaves the thread's block (the thread's own come back),
  // so that another thread may resume it (threads::move_to).
  void release_private_tls() noexcept;

  bool finished() const noexcept { return done_; }
  // What the fiber runs, for the report of an overflow of its stack: e.g.
  // ("MPI rank", 3) reads "in MPI rank 3". Static text; null: unnamed.
  void set_label(const char* what, long id) noexcept {
    label_ = what;
    label_id_ = id;
  }

  static constexpr std::size_t default_stack_bytes = std::size_t(256) << 10;

 private:
  fiber() = default;
  friend struct fiber_access;  // the switch code in fiber.cpp

  void* ctx_ = nullptr;   // where the fiber continues (saved by its last switch out)
  void* back_ = nullptr;  // where its resumer continues
  entry fn_ = nullptr;
  void* arg_ = nullptr;
  void* stack_ = nullptr;        // lowest address of the mapping (guard page included)
  std::size_t stack_bytes_ = 0;  // the mapping's size
  std::size_t guard_bytes_ = 0;  // the inaccessible part at its bottom
  const char* label_ = nullptr;
  long label_id_ = -1;
  bool started_ = false;
  bool done_ = false;
  // errno is per OS thread, and the code between a fiber's switches (its
  // resumer's scheduler: futex waits that time out) sets it: each side
  // keeps its own across a switch. The fiber's, while it is switched out.
  int errno_ = 0;
  detail::program_tls* tls_ = nullptr;  // give_private_tls: its copy while switched out
  const void* tls_thread_ = nullptr;    // the thread whose block holds its contents, if one does
  std::exception_ptr error_;
  // Sanitizer state: the resumer's stack bounds (AddressSanitizer), the
  // fiber's and its resumer's TSan fibers; null outside sanitized builds.
  const void* back_stack_bottom_ = nullptr;
  std::size_t back_stack_size_ = 0;
  void* fake_stack_ = nullptr;
  void* tsan_fiber_ = nullptr;
  void* tsan_back_ = nullptr;
};

// Releases the calling thread's cached stacks (a thread that ran fibers
// calls it as it ends; it also runs at thread exit).
WEFT_API void release_stack_cache() noexcept;

}  // namespace weft::threads
