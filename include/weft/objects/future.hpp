// weft::future<T>: a value some PE will provide, awaited by a coroutine on
// the PE that made the future.
//
//   auto f = weft::make_future<double>();      // owned by this PE
//   workers.broadcast<&Worker::start>(f);      // a future is a small value: send it
//   ...                                        // any PE, later: f.set(3.5)
//   double x = co_await f;                     // on the owner PE
//
// A future is set once and awaited once; its value travels packed (pup), so
// T is any serializable type. Setting it twice or awaiting it on another PE
// is an error naming the future.
#pragma once
#include <cstdint>
#include <vector>
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/objects/coroutine.hpp"
#include "weft/objects/detail/runtime.hpp"
#include "weft/objects/pup.hpp"

namespace weft {

template <class T>
class callback;

template <class T>
class future {
 public:
  future() = default;

  // Sets the value (any PE): it travels to the owner PE.
  void set(const T& value) const {
    objects::detail::require_pe("weft::future::set");
    objects::detail::future_set(pe_, id_, to_bytes(value));
  }
  int owner_pe() const noexcept { return pe_; }
  std::uint64_t id() const noexcept { return id_; }
  bool valid() const noexcept { return pe_ >= 0; }

  struct awaiter;
  awaiter operator co_await() const;

  void pup(pupper& p) { p | pe_ | id_; }

 private:
  template <class U>
  friend future<U> make_future();
  friend class callback<T>;
  future(int pe, std::uint64_t id) : pe_(pe), id_(id) {}
  std::int32_t pe_ = -1;
  std::uint64_t id_ = 0;
};

template <class T>
struct future<T>::awaiter {
  future f;
  bool waiting = false;
  std::vector<std::byte> bytes{};
  bool await_ready() {
    if (f.pe_ != my_pe())
      objects::detail::object_error("a weft::future owned by PE " + std::to_string(f.pe_) +
                                    " is awaited on PE " + std::to_string(my_pe()) +
                                    ": await a future on the PE that made it");
    return objects::detail::future_take(f.id_, bytes);
  }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) {
    waiting = true;
    objects::detail::promise_base* p = nullptr;
    if constexpr (std::is_base_of_v<objects::detail::promise_base, P>) p = &h.promise();
    objects::detail::future_wait(f.id_, h, p);
  }
  T await_resume() {
    if (waiting) {
      waiting = false;
      if (!objects::detail::future_take(f.id_, bytes))
        objects::detail::object_error("a weft::future resumed without a value");
    }
    T v{};
    from_bytes(bytes, v);
    return v;
  }
  ~awaiter() {
    if (waiting) objects::detail::future_cancel(f.id_);
  }
};

template <class T>
typename future<T>::awaiter future<T>::operator co_await() const {
  return awaiter{*this, false, {}};
}

// A new future owned by this PE. PE.
template <class T>
future<T> make_future() {
  objects::detail::require_pe("weft::make_future");
  return future<T>(my_pe(), objects::detail::future_new());
}

}  // namespace weft
