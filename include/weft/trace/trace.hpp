// Tracing, as a program sees it: marks and regions of its own on the time
// line of `--weft:trace=DIR` (docs/tracing.md). With tracing off every call
// here costs one predictable branch and records nothing.
//
//   static const weft::trace::event_name phase{"halo exchange"};
//   { weft::trace::region r{phase}; exchange(); }   // a slice on the PE's track
//   weft::trace::mark("converged");                  // an instant
//
// An event_name is interned once; the string_view forms intern on every call
// (a lock while tracing is on), so hot code should keep an event_name.
#pragma once
#include <cstdint>
#include <string_view>
#include "weft/trace/hooks.hpp"

namespace weft::trace {

// Whether this process records a trace (--weft:trace=DIR while a node runs).
inline bool enabled() noexcept {
  return on();
}

// A name for marks and regions, interned in the trace's "user" table.
class event_name {
 public:
  explicit event_name(std::string_view name) : id_(detail::intern_user_name(name)) {}
  std::uint32_t id() const noexcept { return id_; }

 private:
  std::uint32_t id_;
};

inline void mark(const event_name& name) noexcept {
  if (on()) [[unlikely]]
    detail::emit(kind::mark, name.id(), 0, 0, 0);
}
inline void mark(std::string_view name) {
  if (on()) [[unlikely]]
    detail::emit(kind::mark, detail::intern_user_name(name), 0, 0, 0);
}

// A slice from construction to destruction on the calling PE's track.
// Regions nest like scopes; on a thread that is not a PE they record nothing.
class region {
 public:
  explicit region(const event_name& name) noexcept : id_(name.id()) { begin(); }
  explicit region(std::string_view name) : id_(on() ? detail::intern_user_name(name) : 0) {
    begin();
  }
  ~region() {
    if (open_) detail::emit(kind::region_end, id_, 0, 0, 0);
  }
  region(const region&) = delete;
  region& operator=(const region&) = delete;

 private:
  void begin() noexcept {
    if (on()) [[unlikely]] {
      detail::emit(kind::region_begin, id_, 0, 0, 0);
      open_ = true;
    }
  }
  std::uint32_t id_;
  bool open_ = false;
};

}  // namespace weft::trace
