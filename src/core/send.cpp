// The send family of the public API (weft::send, send_node, send_to_node,
// broadcast) and the intra-node delivery they end in. Intra-node sends push
// the message pointer on the destination PE's queue and wake that PE only if
// it sleeps (scheduler.cpp explains the protocol); the transport is never
// called for them.
#include "core/node.hpp"
#include "core/node_ref.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/trace/hooks.hpp"

namespace weft {
namespace core {

void deliver_local(node_state& node, int pe, message* m, bool from_network) {
  pe_state& dst = *node.pes[std::size_t(pe)];
  pe_state* self = t_pe;
  // To itself: the PE's own FIFO; it is awake (it is sending). Not for
  // messages from the network: others of the same source node may be
  // delivered by another thread into the MPSC queue, and the two queues
  // are not ordered against each other.
  if (self == &dst && !from_network) {
    append_own(dst.local_head, dst.local_tail, m);
    dst.local_count.store(dst.local_count.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    return;
  }
  // (A message from the network for the PE that delivers it went to its
  // net FIFO in deliver_from_network when it could.)
  if (dst.pairs && self != nullptr && !from_network) {
    dst.pairs->push(self->rank, m);
    if (!dst.pairs->flush(self->rank)) self->pairs_backlog = true;
    // The ring's release store is not enough to order it before the read of
    // the sleep flag (wake-up protocol, scheduler.cpp). The light side of an
    // asymmetric pair: the PE going to sleep pays (base/fence.hpp).
    base::light_fence();
  } else {
    dst.queue.push(&m->link);  // seq_cst exchange
  }
  // A producer pays for a wake-up only when the consumer really sleeps.
  wake_pe(node, dst);
}

}  // namespace core

namespace {

// What every send does before the message leaves the caller: the handler
// checked, the sender stamped, the node and broadcast flags set to `flags`,
// the send traced (to `trace_to`, with `trace_flags`) and counted.
[[gnu::always_inline]] inline void stamp(core::node_state& node, message& m, const char* what,
                                         std::uint16_t flags, int trace_to,
                                         std::uint32_t trace_flags) {
  core::check_message(node, m, what);
  m.src_pe = my_pe();
  m.flags = std::uint16_t((m.flags & ~(message_flags::broadcast | message_flags::node)) | flags);
  if (trace::on()) [[unlikely]]
    core::trace_send(m, trace_to, trace_flags);
  core::count_send(node);
}

// weft::send's body, in both entry points (no extra call for either).
[[gnu::always_inline]] inline void send_one(int pe, message* m) {
  core::node_ref ref("weft::send");
  core::node_state& node = *ref;
  const int local = pe - node.first_pe;
  if (local >= 0 && local < int(node.pes.size())) {
    stamp(node, *m, "weft::send", 0, pe, 0);
    core::deliver_local(node, local, m);
    return;
  }
  int dst_node = 0, dst_local = 0;
  if (!node.node_of_pe(pe, dst_node, dst_local))
    base::fatal("weft::send to PE %d, but the job has PEs 0..%d", pe, node.total_pes - 1);
  m->bcast_root = pe;
  stamp(node, *m, "weft::send", 0, pe, trace::send_flags::to_remote);
  core::send_remote(node, dst_node, m);
}

}  // namespace

void send(int pe, message_ptr m) {
  send_one(pe, m.release());
}

void detail::send_released(int pe, message* m) {
  send_one(pe, m);
}

void send_to_node(int node_id, message_ptr m) {
  core::node_ref ref("weft::send_to_node");
  core::node_state& node = *ref;
  if (node_id < 0 || node_id >= node.num_nodes)
    base::fatal("weft::send_to_node to node %d, but the job has nodes 0..%d", node_id,
                node.num_nodes - 1);
  if (node_id == node.node_id) {
    send_node(std::move(m));
    return;
  }
  stamp(node, *m, "weft::send_to_node", message_flags::node, node_id,
        trace::send_flags::node_queue | trace::send_flags::to_remote);
  core::send_remote(node, node_id, m.release());
}

void send_node(message_ptr m) {
  core::node_ref ref("weft::send_node");
  core::node_state& node = *ref;
  stamp(node, *m, "weft::send_node", message_flags::node, node.node_id,
        trace::send_flags::node_queue);
  core::enqueue_node(node, m.release());
}

void broadcast(message_ptr m) {
  core::node_ref ref("weft::broadcast");
  core::node_state& node = *ref;
  const int root = my_pe() >= 0 ? my_pe() : node.first_pe;
  m->bcast_root = root;
  // Priorities order sends only: a broadcast is never reordered
  // (docs/design/scheduler.md), so its copies wait as priority 0.
  m->priority = 0;
  stamp(node, *m, "weft::broadcast", message_flags::broadcast, root, 0);
  core::deliver_local(node, root - node.first_pe, m.release());
}

}  // namespace weft
