// weft::parallel_for: a loop shared with the other PEs of this node.
//
// The answer of the seeds to transient load imbalance (DESIGN.md, lesson 10):
// an object with a big loop exposes pieces of it as tasks; PEs of the same
// node that are idle steal and run them; when nobody is idle the adaptive
// schemes create (almost) no task and the loop runs locally at full speed.
// Tasks never leave the node: in a job of several processes each process
// shares its loops among its own PEs only.
//
//   double e = weft::parallel_for(0, n, weft::reduce::sum,
//                                 [&](std::size_t i) { return pair_energy(i); },
//                                 {.grain = 256});
//   weft::parallel_for(0, n, [&](int i) { a[i] *= 2; });
//   weft::parallel_for(0, n, [&](weft::index_range<int> r) {
//     for (int i : r) a[i] *= 2;                 // a chunk of at most `grain`
//   }, {.scheme = weft::tasks_scheme::split});
//   weft::parallel_for_async(0, n, body, [] { /* on this PE, later */ });
//
// Contexts. parallel_for is called on a PE (a handler, an entry method, a
// coroutine, the main function); off a PE it throws std::logic_error. It
// blocks the calling PE until every iteration ran, the caller running chunks
// itself; meanwhile the PE keeps handling the messages of its own queue
// between chunks (for_options::serve_messages), so other work on that PE is
// not starved -- which means handlers (also of the same object) may run
// nested inside the call. It never switches a user-level thread. A
// parallel_for called inside a body runs inline on the calling PE (no
// tasks); one called by a handler run between chunks is shared as usual (at
// most four such waits nest on a PE). parallel_for_async returns at
// once; `done` runs later on the calling PE, as a message.
//
// Bodies run concurrently on several PEs: they must not race with each other.
// An exception thrown by a body ends the loop early (remaining chunks are
// skipped, none is left running) and the first one is rethrown to the caller
// of parallel_for; in parallel_for_async it is a fatal error, since nobody
// could catch it. Reductions combine per-PE partial values with the
// operation, which must be associative and commutative (partials are
// combined in no fixed order).
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"

namespace weft {

// How a loop is shared (docs/tasks.md). --weft:tasks-scheme sets the default.
enum class tasks_scheme : std::uint8_t {
  from_option,       // --weft:tasks-scheme (default adaptive-idle)
  split,             // recursive halving over per-PE work-stealing deques
  broadcast,         // every PE grabs chunks from one descriptor
  static_blocks,     // one equal block per PE ("static")
  adaptive_idle,     // tasks only for the PEs that are idle now
  adaptive_history,  // as many tasks as this PE saw stolen lately
};
// The option's name of a scheme ("split", "static", "adaptive-idle", ...).
WEFT_API const char* to_string(tasks_scheme s) noexcept;

struct for_options {
  // Iterations per chunk: the unit a PE runs, and the least a task holds.
  // Unset: n / (8 * PEs of the node), at least 1. 0 is an error.
  std::optional<std::size_t> grain{};  // (the initialiser keeps -Wextra quiet on {.scheme = ...})
  tasks_scheme scheme = tasks_scheme::from_option;
  // The calling PE handles messages of its own queue between chunks while
  // the loop runs (false: only chunks; the PE's messages wait).
  bool serve_messages = true;
};

// A chunk of iterations [first, last) handed to a range body.
template <class I>
struct index_range {
  I first, last;
  struct iterator {
    I i;
    I operator*() const noexcept { return i; }
    iterator& operator++() noexcept {
      ++i;
      return *this;
    }
    bool operator==(const iterator&) const = default;
  };
  iterator begin() const noexcept { return {first}; }
  iterator end() const noexcept { return {last}; }
  std::size_t size() const noexcept { return std::size_t(last - first); }
};

namespace reduce {
struct sum_t {};
struct min_t {};
struct max_t {};
inline constexpr sum_t sum{};
inline constexpr min_t min{};
inline constexpr max_t max{};
// A user operation with its identity: op(identity, x) == x.
template <class T, class Op>
struct custom_t {
  T identity;
  Op op;
};
template <class T, class Op>
custom_t<T, Op> custom(T identity, Op op) {
  return {std::move(identity), std::move(op)};
}
}  // namespace reduce

namespace tasks::detail {

// The type-erased loop the engine (src/tasks) runs over [0, n).
struct loop_body {
  void (*run)(void* ctx, std::uint64_t lo, std::uint64_t hi);
  void* ctx;
};
// An asynchronous loop owns its body; `finish` runs on the calling PE after
// every chunk ran.
struct async_loop {
  virtual ~async_loop() = default;
  virtual void run(std::uint64_t lo, std::uint64_t hi) = 0;
  virtual void finish() = 0;
};
WEFT_API void run_sync(std::uint64_t n, const for_options& options, loop_body body);
WEFT_API void run_async(std::uint64_t n, const for_options& options,
                        std::unique_ptr<async_loop> loop);
[[noreturn]] WEFT_API void bad_range(const std::string& first, const std::string& last);

template <class R>
struct is_reduction : std::false_type {};
template <>
struct is_reduction<reduce::sum_t> : std::true_type {};
template <>
struct is_reduction<reduce::min_t> : std::true_type {};
template <>
struct is_reduction<reduce::max_t> : std::true_type {};
template <class T, class Op>
struct is_reduction<reduce::custom_t<T, Op>> : std::true_type {};
template <class R>
concept reduction = is_reduction<std::remove_cvref_t<R>>::value;

// The loop's index type and its offset arithmetic: iterations are numbered
// 0..n-1 inside the engine, first + k outside.
template <class A, class B>
using index_t = std::common_type_t<A, B>;

template <class I>
std::uint64_t checked_count(I first, I last) {
  static_assert(std::is_integral_v<I>, "parallel_for: first and last must be integers");
  if (first > last) bad_range(std::to_string(first), std::to_string(last));
  using U = std::make_unsigned_t<I>;
  return std::uint64_t(U(U(last) - U(first)));
}
template <class I>
I at(I first, std::uint64_t k) noexcept {
  using U = std::make_unsigned_t<I>;
  return I(U(U(first) + U(k)));
}

// Per-index bodies are preferred when the body takes an index; a body that
// takes index_range<I> gets chunks.
template <class Body, class I>
constexpr bool takes_range = !std::is_invocable_v<Body&, I> &&
                             std::is_invocable_v<Body&, index_range<I>>;

template <class I, class Body>
void run_plain(Body& body, I first, std::uint64_t lo, std::uint64_t hi) {
  if constexpr (takes_range<Body, I>) {
    body(index_range<I>{at(first, lo), at(first, hi)});
  } else {
    static_assert(std::is_invocable_v<Body&, I>,
                  "parallel_for: the body takes an index (I) or a weft::index_range<I>");
    for (std::uint64_t k = lo; k < hi; ++k) body(at(first, k));
  }
}

template <class Body, class I>
auto result_of() {
  if constexpr (takes_range<Body, I>)
    return std::type_identity<std::decay_t<std::invoke_result_t<Body&, index_range<I>>>>{};
  else
    return std::type_identity<std::decay_t<std::invoke_result_t<Body&, I>>>{};
}
template <class Body, class I>
using result_t = typename decltype(result_of<Body, I>())::type;

// Identity and combination of each reduction over values of type T.
template <class T>
T identity_of(reduce::sum_t) {
  return T{};
}
template <class T>
T identity_of(reduce::min_t) {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}
template <class T>
T identity_of(reduce::max_t) {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <class T, class U, class Op>
T identity_of(const reduce::custom_t<U, Op>& r) {
  return T(r.identity);
}
template <class T>
T combine(reduce::sum_t, const T& a, const T& b) {
  return a + b;
}
template <class T>
T combine(reduce::min_t, const T& a, const T& b) {
  return b < a ? b : a;
}
template <class T>
T combine(reduce::max_t, const T& a, const T& b) {
  return a < b ? b : a;
}
template <class T, class U, class Op>
T combine(const reduce::custom_t<U, Op>& r, const T& a, const T& b) {
  return T(std::invoke(r.op, a, b));
}

// One partial value per PE of the node, each on its own cache line; PE r
// writes only slot r (its chunks run one at a time), the caller reads them
// all once the loop is over.
template <class T>
struct alignas(64) partial {
  T value;
};

template <class I, class Red, class Body>
struct reducer {
  using T = result_t<Body, I>;
  Red red;
  Body body;
  I first;
  std::vector<partial<T>> partials;
  reducer(Red r, Body b, I f)
      : red(std::move(r)),
        body(std::forward<Body>(b)),
        first(f),
        partials(std::size_t(node_size() > 0 ? node_size() : 1), partial<T>{identity_of<T>(red)}) {}
  void run(std::uint64_t lo, std::uint64_t hi) {
    T acc = identity_of<T>(red);
    if constexpr (takes_range<Body, I>) {
      acc = body(index_range<I>{at(first, lo), at(first, hi)});
    } else {
      for (std::uint64_t k = lo; k < hi; ++k) acc = combine(red, acc, T(body(at(first, k))));
    }
    T& mine = partials[std::size_t(my_rank())].value;
    mine = combine(red, mine, acc);
  }
  T result() const {
    T acc = identity_of<T>(red);
    for (const auto& p : partials) acc = combine(red, acc, p.value);
    return acc;
  }
};

}  // namespace tasks::detail

// Runs body(i) for every i in [first, last) (or body(range) on chunks of it),
// shared with the idle PEs of this node; returns when all ran. PE; blocks
// the calling PE (serving its messages, see above); throws what a body threw
// first, std::invalid_argument for first > last, a grain of 0 or an unknown
// scheme, std::logic_error off a PE.
template <class A, class B, class Body>
  requires(!tasks::detail::reduction<Body>)
void parallel_for(A first, B last, Body&& body, const for_options& options = {}) {
  using I = tasks::detail::index_t<A, B>;
  const std::uint64_t n = tasks::detail::checked_count<I>(I(first), I(last));
  const I f = I(first);
  auto run = [&](std::uint64_t lo, std::uint64_t hi) {
    tasks::detail::run_plain<I>(body, f, lo, hi);
  };
  tasks::detail::run_sync(
      n, options,
      {[](void* ctx, std::uint64_t lo, std::uint64_t hi) { (*static_cast<decltype(run)*>(ctx))(lo, hi); },
       &run});
}

// The same with a reduction (weft::reduce::sum, min, max or
// reduce::custom(identity, op)): the body returns a value (a range body: the
// reduction of its chunk), and the call returns the combination of all.
template <class A, class B, tasks::detail::reduction Red, class Body>
auto parallel_for(A first, B last, Red red, Body&& body, const for_options& options = {}) {
  using I = tasks::detail::index_t<A, B>;
  const std::uint64_t n = tasks::detail::checked_count<I>(I(first), I(last));
  using R = tasks::detail::reducer<I, std::decay_t<Red>, std::remove_reference_t<Body>&>;
  R r(std::move(red), body, I(first));
  tasks::detail::run_sync(n, options,
                          {[](void* ctx, std::uint64_t lo, std::uint64_t hi) {
                             static_cast<R*>(ctx)->run(lo, hi);
                           },
                           &r});
  return r.result();
}

// Asynchronous: exposes the loop and returns at once; `done()` runs on this
// PE, as a message, once every iteration ran. The body is copied (moved)
// into the loop and lives until then. PE; never blocks. A body that throws
// is a fatal error naming the exception.
template <class A, class B, class Body>
  requires(!tasks::detail::reduction<Body>)
void parallel_for_async(A first, B last, Body body, std::function<void()> done,
                        const for_options& options = {}) {
  using I = tasks::detail::index_t<A, B>;
  const std::uint64_t n = tasks::detail::checked_count<I>(I(first), I(last));
  struct loop final : tasks::detail::async_loop {
    Body body;
    I first;
    std::function<void()> done;
    loop(Body b, I f, std::function<void()> d)
        : body(std::move(b)), first(f), done(std::move(d)) {}
    void run(std::uint64_t lo, std::uint64_t hi) override {
      tasks::detail::run_plain<I>(body, first, lo, hi);
    }
    void finish() override {
      if (done) done();
    }
  };
  tasks::detail::run_async(n, options,
                           std::make_unique<loop>(std::move(body), I(first), std::move(done)));
}

// Asynchronous with a reduction: `done(value)` runs on this PE.
template <class A, class B, tasks::detail::reduction Red, class Body, class Done>
void parallel_for_async(A first, B last, Red red, Body body, Done done,
                        const for_options& options = {}) {
  using I = tasks::detail::index_t<A, B>;
  const std::uint64_t n = tasks::detail::checked_count<I>(I(first), I(last));
  using R = tasks::detail::reducer<I, std::decay_t<Red>, Body>;
  static_assert(std::is_invocable_v<Done&, typename R::T>,
                "parallel_for_async: done takes the reduction's value");
  struct loop final : tasks::detail::async_loop {
    R r;
    Done done;
    loop(std::decay_t<Red> red, Body b, I f, Done d)
        : r(std::move(red), std::move(b), f), done(std::move(d)) {}
    void run(std::uint64_t lo, std::uint64_t hi) override { r.run(lo, hi); }
    void finish() override { done(r.result()); }
  };
  tasks::detail::run_async(
      n, options, std::make_unique<loop>(std::move(red), std::move(body), I(first), std::move(done)));
}

}  // namespace weft
