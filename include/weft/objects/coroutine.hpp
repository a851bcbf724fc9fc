// Coroutines: weft::task<T>, the return type of coroutine entry methods and
// of a coroutine main function. (The header is named after what the type is:
// "task" also names the tasks layer's work and OpenMP's tasks.)
//
// A task starts at once, on the caller's PE, and runs until its first
// suspension; it never moves to another PE or thread. What it awaits
// (another task, a future, the next messages of an entry method, a
// reduction) resumes it later on the same PE, from the scheduler. A task
// returned to the runtime (an entry method's result) is owned by its element:
// destroying the element destroys the suspended frame.
//
// An exception escaping a task that the runtime owns is a fatal error naming
// the entry method; in a task someone awaits, it is rethrown at the co_await.
#pragma once
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>
#include "weft/base/export.hpp"

namespace weft {

template <class T = void>
class task;

namespace objects::detail {
struct element_record;

// What every weft coroutine promise shares with the runtime.
struct promise_base {
  std::coroutine_handle<> continuation;  // the coroutine awaiting this one
  std::coroutine_handle<> self;          // set when the runtime adopts the task
  std::exception_ptr error;
  bool detached = false;             // owned by the runtime: the frame frees itself at the end
  element_record* owner = nullptr;   // the element owning a detached task
  promise_base* parent = nullptr;    // the coroutine awaiting this one (if a weft task)
  const char* what = "a coroutine";  // for error messages
  // The entry method whose call made this task, once the runtime adopted it
  // (no_entry: main, or not adopted): the trace names each part of the
  // coroutine that runs after a co_await after it, as it does the first.
  static constexpr std::uint32_t no_entry = 0xffffffffu;
  std::uint32_t entry = no_entry;

  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      promise_base& p = h.promise();
      if (p.detached) {
        finished_detached(p);
        h.destroy();
        return std::noop_coroutine();
      }
      return p.continuation ? p.continuation : std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  // The element whose coroutine this is, also for tasks a coroutine entry
  // method awaits (they run on the element's behalf).
  element_record* effective_owner() const noexcept {
    const promise_base* p = this;
    while (p->parent != nullptr) p = p->parent;
    return p->owner;
  }

  std::suspend_never initial_suspend() noexcept { return {}; }
  final_awaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept {
    if (detached) fail_detached(*this, std::current_exception());
    error = std::current_exception();
  }

  // Defined by the runtime (src/objects): a detached task ended (unregister
  // it from its element) or failed (a fatal error naming it).
  WEFT_API static void finished_detached(promise_base& p) noexcept;
  [[noreturn]] WEFT_API static void fail_detached(promise_base& p, std::exception_ptr e) noexcept;
};

template <class T>
struct promise final : promise_base {
  std::optional<T> value;
  task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
};
template <>
struct promise<void> final : promise_base {
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
};
}  // namespace objects::detail

template <class T>
class [[nodiscard]] task {
 public:
  using promise_type = objects::detail::promise<T>;
  using handle = std::coroutine_handle<promise_type>;

  task() = default;
  explicit task(handle h) noexcept : h_(h) {}
  task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  task& operator=(task&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  ~task() { reset(); }

  bool done() const noexcept { return !h_ || h_.done(); }

  // co_await a task: resumes the awaiting coroutine when this one ends,
  // giving its value (or rethrowing its exception).
  bool await_ready() const noexcept { return !h_ || h_.done(); }
  template <class P>
  void await_suspend(std::coroutine_handle<P> awaiting) noexcept {
    h_.promise().continuation = awaiting;
    if constexpr (std::is_base_of_v<objects::detail::promise_base, P>)
      h_.promise().parent = &awaiting.promise();
  }
  T await_resume() {
    if (h_.promise().error) std::rethrow_exception(h_.promise().error);
    if constexpr (!std::is_void_v<T>) return std::move(*h_.promise().value);
  }

  // Hands the frame to the runtime (entry methods, main): a suspended frame
  // then frees itself when it ends; a finished one is freed here.
  handle release_to_runtime() noexcept {
    if (!h_) return {};
    if (h_.done()) {
      if (h_.promise().error) {
        handle h = std::exchange(h_, {});
        h.promise().detached = true;
        objects::detail::promise_base::fail_detached(h.promise(), h.promise().error);
      }
      reset();
      return {};
    }
    h_.promise().detached = true;
    return std::exchange(h_, {});
  }

 private:
  void reset() noexcept {
    if (h_) std::exchange(h_, {}).destroy();
  }
  handle h_;
};

namespace objects::detail {
template <class T>
task<T> promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}
inline task<void> promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}
}  // namespace objects::detail

}  // namespace weft
