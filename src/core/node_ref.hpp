// What every call of the public API into a node goes through (node.cpp's
// lifecycle calls and send.cpp's send family): the node, held for the call,
// and the checks and counting of a send.
#pragma once
#include <atomic>
#include <cstdint>
#include "core/node.hpp"
#include "weft/base/error.hpp"
#include "weft/trace/hooks.hpp"

namespace weft::core {

// Calls into the node from threads that are not PEs, still in progress. run()
// joins its PEs, but it cannot join the program's own threads: a thread may
// be inside weft::exit or weft::send (touching the node) when the run ends.
// run() clears g_node and then waits for this count to drop to zero before
// freeing the node.
extern std::atomic<int> g_external_calls;
// A node has run in this process (a late weft::exit after its end is benign).
extern std::atomic<bool> g_ever_ran;
// The last run (node_state::run_seq) the calling thread, not a PE, has
// called into: it tells the node once per run.
extern constinit thread_local std::uint64_t t_caller_of_run WEFT_TLS_FAST;

// The running node for the duration of one API call. On a PE the node
// outlives the call by construction; on any other thread the call is
// counted, so that run() does not free the node under it.
class node_ref {
 public:
  explicit node_ref(const char* what, bool tolerate_ended = false) {
    if (t_pe != nullptr) {
      node_ = g_node.load(std::memory_order_relaxed);
    } else {
      external_ = true;
      g_external_calls.fetch_add(1, std::memory_order_seq_cst);
      node_ = g_node.load(std::memory_order_seq_cst);
    }
    if (node_ == nullptr && !(tolerate_ended && g_ever_ran.load())) {
      release();
      base::fatal("%s called while no node runs (call it inside weft::run)", what);
    }
    // A thread of the program that calls into the node may call again: the
    // end-of-job check must know it (quiescent_exit.cpp).
    if (external_ && node_ != nullptr && t_caller_of_run != node_->run_seq) {
      t_caller_of_run = node_->run_seq;
      note_caller(*node_);
    }
  }
  ~node_ref() { release(); }
  node_ref(const node_ref&) = delete;
  node_ref& operator=(const node_ref&) = delete;
  explicit operator bool() const { return node_ != nullptr; }
  node_state& operator*() const { return *node_; }

 private:
  void release() {
    if (external_) g_external_calls.fetch_sub(1, std::memory_order_release);
    external_ = false;
  }
  node_state* node_ = nullptr;
  bool external_ = false;
};

inline void check_message(const node_state& node, const message& m, const char* what) {
  const std::size_t n = node.num_handlers;
  if (m.handler >= n)
    base::fatal(
        "%s: message for handler id %u, which was never registered (%zu handlers "
        "registered: ids 0..%zu)",
        what, m.handler, n, n == 0 ? 0 : n - 1);
}

// The send of `m` in the trace (to `to`, with the send record's `flags`), or,
// left out by --weft:trace-sample, the mark that tells its receiver so (a
// copy of a message takes its flags: each send decides anew). Tracing on.
[[gnu::always_inline]] inline void trace_send(message& m, int to, std::uint32_t flags) {
  // Summary mode keeps no sends (nor samples them): the receiver counts the
  // message as any other.
  if (trace::detail::t_fast.summary) {
    m.flags &= std::uint16_t(~message_flags::untraced);
  } else if (trace::detail::sample_send()) {
    m.flags &= std::uint16_t(~message_flags::untraced);
    m.reserved_ = trace::detail::record_send(to, m.size, m.handler, flags);
  } else {
    m.flags |= message_flags::untraced;
  }
}

// The handler of `m` begins, right after another of the batch if
// `follows` (trace::detail::begin_handler). Tracing on, `m` traced. Summary
// mode is tested first: it keeps the handler's name only, and the fields of
// the record (the sender's flags, whether it came from another process)
// would otherwise be built before the test, on every message.
[[gnu::always_inline]] inline void trace_handler_begin(const node_state& node, const message& m,
                                                       bool follows) {
  if (trace::detail::fast_path& f = trace::detail::t_fast; f.summary) {
    trace::detail::summary_slice(f, trace::kind::handler_begin, m.handler,
                                 follows ? trace::kind::handler_end : trace::kind{});
    return;
  }
  std::uint32_t flags = m.reserved_;
  if (m.flags & message_flags::node) flags |= trace::send_flags::node_queue;
  if (m.src_pe >= 0 &&
      (m.src_pe < node.first_pe || m.src_pe >= node.first_pe + int(node.pes.size())))
    flags |= trace::send_flags::remote;
  trace::detail::begin_handler(follows, m.handler, std::uint32_t(m.src_pe), m.size, flags);
}

// Counts a message sent from this thread (for quiescence detection).
inline void count_send(node_state& node) {
  if (pe_state* self = t_pe) {
    self->sent.store(self->sent.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  } else {
    node.external_sent.fetch_add(1, std::memory_order_acq_rel);
  }
}

}  // namespace weft::core
