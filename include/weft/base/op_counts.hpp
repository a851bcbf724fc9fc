// What one thread's runtime paths touched that other threads also touch,
// counted per thread: how a test checks, on a machine too small to time
// it, that the cost of one operation does not grow with the number of PEs
// (DESIGN.md, lesson 13: a path that visits every PE per operation costs
// nothing at 2 PEs and everything at 64).
//
// The runtime counts at the places where such costs arise (the internal
// header base/op_count.hpp); a test takes this thread's counts before and
// after a number of operations -- on each PE, or on each member of an
// OpenMP team -- divides by the operations, and compares the figures at 2,
// 4, 8 and 16 PEs (tests/op_growth.hpp). Counting is always on: a count is
// one increment of a thread-local word, put only beside what costs far
// more (a loop over PEs, an atomic read-modify-write on a shared line, a
// message).
#pragma once
#include <cstddef>
#include <cstdint>
#include "weft/base/export.hpp"

namespace weft::base {

enum class op : std::uint8_t {
  // Another PE's (or team member's) state looked at by a loop over PEs or
  // members: a deque probed, a sleep word read, a block claimed, a member
  // started. What makes a path O(P).
  peer_visit,
  // An atomic read-modify-write, or a lock, on a line that every PE of the
  // node (or every member of a team) may write: what serialises as P grows.
  shared_rmw,
  // A look for work at another PE's state by a thread with nothing to do
  // (a deque probed by a steal attempt): idle time's cost, apart from the
  // operations' own.
  poll,
  // A round of looking for work (a steal attempt): the unit polls are
  // counted per.
  wait_round,
  // A word read to find a sleeping PE to wake (core's sleeper mask, a
  // sleep word): apart from peer_visit, since how many a wake-up reads
  // depends on how soon the PEs woken before run -- on an oversubscribed
  // machine long after their wake-up -- not on the operation.
  wake_probe,
  kinds
};

struct op_counts {
  std::uint64_t n[std::size_t(op::kinds)] = {};
  std::uint64_t operator[](op k) const noexcept { return n[std::size_t(k)]; }
  op_counts operator-(const op_counts& o) const noexcept {
    op_counts d;
    for (std::size_t i = 0; i < std::size_t(op::kinds); ++i) d.n[i] = n[i] - o.n[i];
    return d;
  }
  op_counts& operator+=(const op_counts& o) noexcept {
    for (std::size_t i = 0; i < std::size_t(op::kinds); ++i) n[i] += o.n[i];
    return *this;
  }
};

// The counts of the calling thread since it started.
WEFT_API op_counts this_thread_op_counts() noexcept;
// The name of a kind ("peer_visit", ...).
WEFT_API const char* to_string(op k) noexcept;

}  // namespace weft::base
