// Broadcasts to a collection: the root PE numbers each one
// (op_bcast_request, then op_bcast to every PE), and every PE delivers them
// in that order to the elements it holds, each exactly once: an element
// remembers how many it had (last_bcast), and one that arrives behind (a
// migration, an insertion) catches up from a short history of the last
// bcast_history_limit broadcasts. Nodegroups take a broadcast once per node.
#include <string>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

namespace {

constexpr std::size_t bcast_history_limit = 256;

void deliver_broadcast(local_collection& lc, std::uint64_t seq, const message& m) {
  lc.bcast_count = seq;
  const obj_header& h = header_of(const_cast<message&>(m));
  std::vector<index_key> keys;
  keys.reserve(lc.local.size());
  for (const auto& [k, rec] : lc.local) keys.push_back(k);
  for (const index_key& k : keys) {
    auto it = lc.local.find(k);
    if (it == lc.local.end()) continue;  // destroyed or moved by an earlier one
    element_record& rec = *it->second;
    if (rec.obj == nullptr || rec.last_bcast >= seq) continue;
    rec.last_bcast = seq;
    message_ptr copy = copy_message(m);
    header_of(*copy).key = k;
    header_of(*copy).op = op_entry;
    header_of(*copy).hops = 0;
    deliver_to_element(rec, std::move(copy));
  }
  (void)h;
}

}  // namespace

void handle_bcast(local_collection& lc, message_ptr m) {
  if (!lc.created) {
    lc.early.push_back(m.release());
    return;
  }
  const std::uint64_t seq = header_of(*m).args.bcast_seq;
  lc.bcast_ahead.emplace(seq, std::move(m));
  while (!lc.bcast_ahead.empty() && lc.bcast_ahead.begin()->first == lc.bcast_count + 1) {
    auto node = lc.bcast_ahead.extract(lc.bcast_ahead.begin());
    deliver_broadcast(lc, node.key(), *node.mapped());
    lc.bcast_history.emplace_back(node.key(), std::move(node.mapped()));
    if (lc.bcast_history.size() > bcast_history_limit) lc.bcast_history.pop_front();
  }
}

// An element arrived with fewer broadcasts than this PE delivered.
void bcast_catch_up(local_collection& lc, element_record& rec) {
  while (rec.obj != nullptr && rec.last_bcast < lc.bcast_count) {
    const std::uint64_t want = rec.last_bcast + 1;
    if (lc.bcast_history.empty() || lc.bcast_history.front().first > want)
      object_error("not implemented: " + element_name(rec) + " migrated while more than " +
                   std::to_string(bcast_history_limit) + " broadcasts to its collection were in " +
                   "flight");
    const message& m = *lc.bcast_history[std::size_t(want - lc.bcast_history.front().first)].second;
    rec.last_bcast = want;
    const index_key key = rec.key;
    message_ptr copy = copy_message(m);
    header_of(*copy).key = key;
    header_of(*copy).op = op_entry;
    deliver_to_element(rec, std::move(copy));
    if (lc.local.count(key) == 0) return;  // it moved on or was destroyed: rec is gone
  }
}

void receive_bcast_request(message_ptr m) {
  obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  h.op = op_bcast;
  h.args.bcast_seq = ++lc.root_bcast_next;
  if (lc.ref.kind == collection_kind::nodegroup) {
    h.op = op_entry;
    m->handler = nodegroup_handler_id;
    for (int node = 0; node < num_nodes(); ++node)
      if (node != my_node()) send_to_node_of(node, copy_message(*m));
    send_node(std::move(m));
    return;
  }
  weft::broadcast(std::move(m));
}

void receive_bcast(message_ptr m) {
  const obj_header& h = header_of(*m);
  handle_bcast(get_local_collection(h.collection), std::move(m));
}

void broadcast_collection(const collection_ref& ref, message_ptr m) {
  require_pe("broadcast to a collection");
  obj_header& h = header_of(*m);
  h.op = op_bcast_request;
  m->handler = control_handler_id;
  send_object_to_pe(ref.root_pe, std::move(m));
}

}  // namespace weft::objects::detail
