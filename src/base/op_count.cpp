// Per-thread counts of shared touches (weft/base/op_counts.hpp).
#include "base/op_count.hpp"

namespace weft::base {

namespace detail {
constinit thread_local op_counts t_op_counts{};
}  // namespace detail

op_counts this_thread_op_counts() noexcept {
  return detail::t_op_counts;
}

const char* to_string(op k) noexcept {
  switch (k) {
    case op::peer_visit:
      return "peer_visit";
    case op::shared_rmw:
      return "shared_rmw";
    case op::poll:
      return "poll";
    case op::wait_round:
      return "wait_round";
    case op::wake_probe:
      return "wake_probe";
    case op::kinds:
      break;
  }
  return "?";
}

}  // namespace weft::base
