// What a benchmark's operations touched of other PEs, from the runtime's
// per-thread counts (weft/base/op_counts.hpp): the figures that show, on a
// machine too small to time 16 PEs, whether a path's cost grows with P
// (issue 25: "add to each benchmark how many cache lines or atomic
// operations per operation each path touches as P grows").
//
// node_op_counts() sums the counts of every PE of this node: one message to
// each other PE, whose handler adds its PE's counts, while the caller serves
// its own messages. Called on a PE of a running node, between measurements
// (its own messages are counted: a constant per call, not per operation).
#pragma once
#include <atomic>
#include <mutex>
#include "weft/base/op_counts.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/send.hpp"

namespace weft::bench {

namespace op_counts_detail {
inline std::mutex mutex;
inline base::op_counts total;
inline std::atomic<int> answered{0};
inline void on_report(message_ptr) {
  const base::op_counts mine = base::this_thread_op_counts();
  {
    std::lock_guard<std::mutex> lock(mutex);
    total += mine;
  }
  answered.fetch_add(1, std::memory_order_release);
}
inline const handler_id h_report = register_handler("bench.op_counts.report", &on_report);
}  // namespace op_counts_detail

inline base::op_counts node_op_counts() {
  using namespace op_counts_detail;
  {
    std::lock_guard<std::mutex> lock(mutex);
    total = base::this_thread_op_counts();
  }
  answered.store(0, std::memory_order_relaxed);
  const int pes = node_size(), first = my_node() * pes;
  for (int r = 0; r < pes; ++r)
    if (r != my_rank()) send(first + r, make_message(h_report, 0));
  while (answered.load(std::memory_order_acquire) != pes - 1) detail::serve_messages(16);
  std::lock_guard<std::mutex> lock(mutex);
  return total;
}

// peer_visit + shared_rmw: what a path touched that other PEs write.
inline double touches(const base::op_counts& d) {
  return double(d[base::op::peer_visit] + d[base::op::shared_rmw]);
}

}  // namespace weft::bench
