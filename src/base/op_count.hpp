// Counting what a runtime path touches that other threads also touch (the
// public half, what tests read, is weft/base/op_counts.hpp). Private to the
// runtime: the counters are a hidden thread-local of whichever library (or
// program) holds the runtime, read directly, with no call.
#pragma once
#include "weft/base/op_counts.hpp"

namespace weft::base {

namespace detail {
[[gnu::visibility("hidden")]] extern constinit thread_local op_counts t_op_counts;
}  // namespace detail

inline void count(op k, std::uint64_t n = 1) noexcept {
  detail::t_op_counts.n[std::size_t(k)] += n;
}

}  // namespace weft::base
