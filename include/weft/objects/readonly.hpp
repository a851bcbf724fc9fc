// Readonly globals: values the main function sets once during its setup and
// every PE then reads without synchronisation.
//
//   weft::readonly<int> grid_size;          // a global
//   ... in main, before it returns (or first suspends):  grid_size = 512;
//   ... anywhere later, on any PE:                        int n = *grid_size;
//
// Setting one elsewhere (another PE, or after main's setup) is an error: the
// PEs read it without a lock, which is safe only because every message they
// get was sent after it was set. All PEs of a node share the process's copy;
// in a job of several processes PE 0 sends every readonly to the other
// nodes once main's setup ends, and their objects layer holds every message
// until the values arrived, so no element there runs before its readonlies
// are set. T must then be serializable (weft::pup); another T works in one
// process only.
#pragma once
#include <string>
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/objects/detail/runtime.hpp"
#include "weft/objects/detail/type_name.hpp"

namespace weft {

template <class T>
class readonly {
 public:
  readonly() { enrol(); }
  explicit readonly(T initial) : value_(std::move(initial)) { enrol(); }
  ~readonly() { objects::detail::unregister_readonly(this); }
  readonly(const readonly&) = delete;
  readonly& operator=(const readonly&) = delete;

  readonly& operator=(T v) {
    if (!weft::detail::in_main_setup())
      objects::detail::object_error(
          "weft::readonly<" + std::string(objects::detail::type_name_v<T>) + "> set " +
          (my_pe() == 0 ? std::string("after the main function's setup")
                        : "on PE " + std::to_string(my_pe())) +
          ": readonlies are set on PE 0 before the main function returns (or, "
          "as a coroutine, first suspends)");
    value_ = std::move(v);
    return *this;
  }
  const T& get() const noexcept { return value_; }
  const T& operator*() const noexcept { return value_; }
  const T* operator->() const noexcept { return &value_; }

 private:
  // Every readonly of the program, in construction order (the same in every
  // process of one build), so that PE 0 can send them to other nodes.
  void enrol() {
    objects::detail::readonly_pup_fn fn = nullptr;
    if constexpr (requires(pupper & p, T & t) { pup(p, t); })
      fn = [](void* self, pupper& p) { p | static_cast<readonly*>(self)->value_; };
    objects::detail::register_readonly(this, fn, objects::detail::type_name_v<T>);
  }

  T value_{};
};

}  // namespace weft
