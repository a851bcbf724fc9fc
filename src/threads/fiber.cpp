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
// Stacks are mmap'd with a guard page below and cached per thread (capped),
// so starting a fiber in steady state costs no system call. (mmap, mprotect
// and munmap stay here, not in base/os: no other layer maps stacks.)
#include "weft/threads/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>
#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <vector>
#include "weft/base/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define WEFT_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define WEFT_FIBER_TSAN 1
#endif

namespace weft::threads {

namespace bctx = boost::context::detail;

namespace {

thread_local fiber* t_current = nullptr;

std::size_t page_bytes() {
  static const std::size_t p = std::size_t(::sysconf(_SC_PAGESIZE));
  return p;
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
    std::size_t bytes;
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

// A mapping of at least `usable` bytes of stack plus a guard page.
void* map_stack(std::size_t usable, std::size_t& bytes) {
  const std::size_t page = page_bytes();
  bytes = (usable + page - 1) / page * page + page;
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
  if (::mprotect(base, page, PROT_NONE) != 0)
    base::fatal_sys(errno, "mprotect", "for the guard page of the fiber stack at %p (%zu bytes)",
                    base, bytes);
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
    return static_cast<const char*>(f->stack_) + page_bytes();
  }
  static std::size_t stack_size(const fiber* f) { return f->stack_bytes_ - page_bytes(); }

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

fiber* fiber::create(entry fn, void* arg, std::size_t stack_bytes) {
  if (fn == nullptr) base::fatal("weft::threads::fiber::create: no function");
  auto* f = new fiber;
  f->fn_ = fn;
  f->arg_ = arg;
  f->stack_ = map_stack(stack_bytes < 16384 ? 16384 : stack_bytes, f->stack_bytes_);
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
  unmap_stack(f->stack_, f->stack_bytes_);
  delete f;
}

bool fiber::resume() {
  if (done_) base::fatal("weft::threads::fiber::resume: the fiber has finished");
  if (t_current == this) base::fatal("weft::threads::fiber::resume: the fiber is running");
  fiber* const prev = t_current;
  t_current = this;
  if (!started_) {
    started_ = true;
    char* top = static_cast<char*>(stack_) + stack_bytes_;
    ctx_ = bctx::make_fcontext(top, stack_bytes_ - page_bytes(), &fiber_access::trampoline);
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
  const bctx::transfer_t t = bctx::jump_fcontext(ctx_, this);
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

fiber* fiber::current() noexcept {
  return t_current;
}

void release_stack_cache() noexcept {
  t_stacks.release();
}

}  // namespace weft::threads
