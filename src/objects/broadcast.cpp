// Broadcasts to a collection: the root PE numbers each one
// (op_bcast_request, then op_bcast to every PE), and every PE delivers them
// in that order to the elements it holds, each exactly once: an element
// remembers how many it had (last_bcast). Nodegroups take a broadcast once
// per node.
//
// An element that moves (a migration, an insertion numbered at the root)
// can arrive behind its new PE: that PE delivered broadcasts the element
// has not had, and may no longer hold them. Any number may be missing (the
// two PEs' counts drift apart by the broadcasts in flight, and an element
// can spend any time on its way), so a history of fixed length is not
// enough, and one kept for the job's life grows without bound. Instead the
// PE the element left keeps, from the moment it leaves, every broadcast
// after those the element had: it has them all, or will (every PE gets
// every broadcast, in order). On arrival the element takes what it can
// from its new PE's history (the last bcast_history_limit broadcasts);
// if that history starts too late, the gap (from its count to the
// history's first) is asked of the PE it left, which sends those it holds
// and the rest as they arrive (op_bcast_need, op_bcast_forward). The new PE
// keeps its own history from the gap's end until the element has the gap,
// then it catches up from there, in order: none twice, none missed. Every
// arrival answers its last PE (an empty gap releases what it kept).
//
// So a PE keeps the last bcast_history_limit broadcasts plus those after
// the lowest pin: an element in flight from it, or one here waiting for
// its gap. A pin lives for the element's trip and one round trip more (plus
// the time until the slower PE receives the gap), so memory is bounded by
// the broadcasts sent while migrations are under way, not by the job's
// length. While an element waits for its gap it stays (a migrate_to waits
// until it has caught up; a balancing step leaves it where it is).
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

namespace {

constexpr std::size_t bcast_history_limit = 256;

// An arrival's answer to the PE the element left.
struct bcast_need {
  std::uint32_t epoch;  // the element's, where it arrived
  std::uint64_t upto;   // that PE sends the broadcasts after the element's count up to this
  std::uint64_t acked;  // packed bytes of a balancing step that arrived (sync.cpp)
};

void deliver_broadcast(local_collection& lc, std::uint64_t seq, const message& m) {
  lc.bcast_count = seq;
  std::vector<index_key> keys;
  keys.reserve(lc.local.size());
  for (const auto& [k, rec] : lc.local) keys.push_back(k);
  for (const index_key& k : keys) {
    auto it = lc.local.find(k);
    if (it == lc.local.end()) continue;  // destroyed or moved by an earlier one
    element_record& rec = *it->second;
    // Had it already (it came from a PE ahead of this one), or waits for
    // earlier ones from the PE it left (it takes this one after them).
    if (rec.obj == nullptr || rec.last_bcast + 1 != seq) continue;
    rec.last_bcast = seq;
    message_ptr copy = copy_message(m);
    header_of(*copy).key = k;
    header_of(*copy).op = op_entry;
    header_of(*copy).hops = 0;
    deliver_to_element(rec, std::move(copy));
  }
}

const message* history_at(const local_collection& lc, std::uint64_t seq) {
  if (lc.bcast_history.empty()) return nullptr;
  const std::uint64_t first = lc.bcast_history.front().first;
  if (seq < first || seq > lc.bcast_history.back().first) return nullptr;
  return lc.bcast_history[std::size_t(seq - first)].second.get();
}

void catch_up_from_history(local_collection& lc, element_record& rec);

// Not while a delivery runs: the one it delivers is in the history.
void trim_history(local_collection& lc) {
  if (lc.bcast_depth > 0) return;
  const std::uint64_t pin = lc.bcast_pins.empty() ? UINT64_MAX : *lc.bcast_pins.begin();
  while (lc.bcast_history.size() > bcast_history_limit && lc.bcast_history.front().first <= pin)
    lc.bcast_history.pop_front();
}

// What it kept is freed now, not at the next broadcast.
void unpin(local_collection& lc, std::uint64_t at) {
  lc.bcast_pins.erase(lc.bcast_pins.find(at));
  trim_history(lc);
}

void forward_bcast(local_collection& lc, const index_key& key, int to, std::uint64_t seq,
                   const message& m) {
  message_ptr copy = copy_message(m);
  obj_header& h = header_of(*copy);
  h.collection = lc.ref.id;
  h.key = key;
  h.op = op_bcast_forward;
  h.hops = 0;
  h.origin_pe = my_pe();
  h.args.bcast_seq = seq;
  send_object_to_pe(to, std::move(copy));
}

// Broadcast `seq` reached this PE's history: the elements gone from here
// whose destinations wait for it.
void serve_departed(local_collection& lc, std::uint64_t seq, const message& m) {
  for (std::size_t i = 0; i < lc.bcast_serving.size();) {
    bcast_forwarding& s = lc.bcast_serving[i];
    if (s.next == seq) {
      forward_bcast(lc, s.key, s.to, seq, m);
      ++s.next;
    }
    if (s.next <= s.upto) {
      ++i;
      continue;
    }
    unpin(lc, s.from);
    s = std::move(lc.bcast_serving.back());
    lc.bcast_serving.pop_back();
  }
}

// From this PE's history, which is not trimmed meanwhile (an entry method
// may serve messages, broadcasts among them, while it runs).
void bcast_catch_up(local_collection& lc, element_record& rec) {
  ++lc.bcast_depth;
  catch_up_from_history(lc, rec);
  --lc.bcast_depth;
  trim_history(lc);
}

void catch_up_from_history(local_collection& lc, element_record& rec) {
  while (rec.obj != nullptr && rec.last_bcast < lc.bcast_count) {
    const std::uint64_t want = rec.last_bcast + 1;
    const message* m = history_at(lc, want);
    if (m == nullptr)
      base::fatal("objects: %s needs broadcast %llu, which PE %d no longer holds",
                  element_name(rec).c_str(), static_cast<unsigned long long>(want), my_pe());
    rec.last_bcast = want;
    const index_key key = rec.key;
    message_ptr copy = copy_message(*m);
    header_of(*copy).key = key;
    header_of(*copy).op = op_entry;
    header_of(*copy).hops = 0;
    deliver_to_element(rec, std::move(copy));
    if (lc.local.count(key) == 0) return;  // it moved on or was destroyed: rec is gone
  }
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
    const std::uint64_t n = node.key();
    // In the history first: an element arriving in a handler nested in
    // this delivery finds it there.
    lc.bcast_history.emplace_back(n, std::move(node.mapped()));
    const message& b = *lc.bcast_history.back().second;
    if (!lc.bcast_serving.empty()) serve_departed(lc, n, b);
    ++lc.bcast_depth;
    deliver_broadcast(lc, n, b);
    --lc.bcast_depth;
    trim_history(lc);
  }
}

void bcast_departed(local_collection& lc, const index_key& key, std::uint32_t epoch,
                    std::uint64_t had) {
  lc.bcast_departed[key].push_back({epoch, had});
  lc.bcast_pins.insert(had);
}

void bcast_arrived(local_collection& lc, element_record& rec, int source, std::uint64_t acked) {
  const std::uint64_t had = rec.last_bcast;
  std::uint64_t upto = had;  // the source sends (had, upto]
  if (had < lc.bcast_count) {
    const std::uint64_t first =
        lc.bcast_history.empty() ? lc.bcast_count + 1 : lc.bcast_history.front().first;
    if (first > had + 1) upto = first - 1;
  }
  bcast_need need{rec.epoch, upto, acked};
  message_ptr m = new_control_message(lc.ref, rec.key, op_bcast_need, sizeof need);
  std::memcpy(args_of(*m), &need, sizeof need);
  send_object_to_pe(source, std::move(m));
  if (upto > had) {
    // From `upto` on this PE's history serves it: kept until it did.
    lc.bcast_fetching[rec.key].upto = upto;
    lc.bcast_pins.insert(upto);
    return;
  }
  bcast_catch_up(lc, rec);
}

void bcast_forget(local_collection& lc, const index_key& key) {
  if (lc.bcast_fetching.empty()) return;
  auto f = lc.bcast_fetching.find(key);
  if (f == lc.bcast_fetching.end()) return;
  unpin(lc, f->second.upto);
  lc.bcast_fetching.erase(f);
}

// At the PE an element left: its destination's answer.
void receive_bcast_need(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  bcast_need need;
  std::memcpy(&need, args_of(*m), sizeof need);
  if (need.acked > 0) sync_acked(lc, need.acked);
  auto d = lc.bcast_departed.find(h.key);
  std::vector<bcast_departure>* deps = d == lc.bcast_departed.end() ? nullptr : &d->second;
  auto it = deps == nullptr ? std::vector<bcast_departure>::iterator{}
                            : std::find_if(deps->begin(), deps->end(),
                                           [&](const auto& x) { return x.epoch == need.epoch; });
  if (deps == nullptr || it == deps->end())
    base::fatal("objects: PE %d asked PE %d for broadcasts of %s, which did not leave it",
                h.origin_pe, my_pe(), key_string(lc.ref, h.key).c_str());
  const std::uint64_t from = it->from;
  deps->erase(it);
  if (deps->empty()) lc.bcast_departed.erase(d);
  std::uint64_t next = from + 1;
  for (; next <= need.upto; ++next) {
    const message* b = history_at(lc, next);
    if (b == nullptr) break;
    forward_bcast(lc, h.key, h.origin_pe, next, *b);
  }
  if (next > need.upto) {
    unpin(lc, from);
    return;
  }
  if (next <= lc.bcast_count)
    base::fatal("objects: PE %d no longer holds broadcast %llu, which %s missed", my_pe(),
                static_cast<unsigned long long>(next), key_string(lc.ref, h.key).c_str());
  lc.bcast_serving.push_back({h.key, h.origin_pe, from, next, need.upto});
}

// At the element's new PE: one of the broadcasts it missed.
void receive_bcast_forward(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  const index_key key = h.key;
  const std::uint64_t seq = h.args.bcast_seq;
  auto f = lc.bcast_fetching.find(key);
  auto it = lc.local.find(key);
  if (f == lc.bcast_fetching.end() || it == lc.local.end()) return;  // destroyed since
  element_record& rec = *it->second;
  if (seq <= rec.last_bcast) return;
  f->second.got.emplace(seq, std::move(m));
  for (;;) {
    f = lc.bcast_fetching.find(key);
    if (f == lc.bcast_fetching.end()) return;  // destroyed by the last one
    auto& got = f->second.got;
    if (got.empty() || got.begin()->first != rec.last_bcast + 1) break;
    message_ptr b = std::move(got.begin()->second);
    got.erase(got.begin());
    rec.last_bcast += 1;
    obj_header& bh = header_of(*b);
    bh.op = op_entry;
    bh.hops = 0;
    deliver_to_element(rec, std::move(b));
  }
  if (rec.last_bcast < f->second.upto) return;
  // The rest from here (kept for it until it has them); then what it asked
  // for meanwhile (migrate_to).
  const std::uint64_t pin = f->second.upto;
  lc.bcast_fetching.erase(f);
  bcast_catch_up(lc, rec);
  unpin(lc, pin);
  if (auto again = lc.local.find(key); again != lc.local.end()) after_entry(*again->second);
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
