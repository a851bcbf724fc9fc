// Reductions over arrays and groups. Each element contributes to its
// rounds in order; a PE counts its elements by next round (hist) and holds
// the partial results of rounds not yet passed by all of them. What a PE
// passed goes to its node's combiner, which merges the node's PEs and its
// child nodes in a spanning tree of nodes; a round leaves the node once
// every slot passed it, so the root PE gets one message per node per round.
// The root counts contributions against the elements expected in each
// round (elements joining or leaving move that count from a round on) and
// delivers the result to its callback. all_reduce results come back to
// every PE (op_allreduce_done), for the coroutines waiting there.
#include <algorithm>
#include <string>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

namespace {

// The spanning tree of nodes that reductions climb: node `root` (the root
// PE's) at the top, each node with up to tree_arity children.
constexpr int tree_arity = 4;
int tree_parent(int node, int root, int nodes) {
  const int v = (node - root + nodes) % nodes;
  return v == 0 ? -1 : ((v - 1) / tree_arity + root) % nodes;
}
std::vector<int> tree_children(int node, int root, int nodes) {
  const int v = (node - root + nodes) % nodes;
  std::vector<int> out;
  for (int c = 1; c <= tree_arity; ++c)
    if (v * tree_arity + c < nodes) out.push_back((v * tree_arity + c + root) % nodes);
  return out;
}

std::int64_t rounds_passed_on_pe(const local_collection& lc) {
  return lc.hist.empty() ? passed_all : std::int64_t(lc.hist.begin()->first) - 1;
}

void merge_partial(partial& into, partial&& more, const collection_ref& ref, std::uint32_t round) {
  if (into.count == 0) {
    into = std::move(more);
    return;
  }
  if (into.reducer != more.reducer || !same_callback(into.cb, more.cb))
    object_error("round " + std::to_string(round) + " of the reductions of " +
                 collection_name(ref) + " gets contributions with different " +
                 (into.reducer != more.reducer
                      ? "ops or value types (" + reducer(into.reducer).name + " and " +
                            reducer(more.reducer).name + ")"
                      : std::string("callbacks")) +
                 ": every element contributes to a round with the same op, type and callback");
  reducer(into.reducer).combine(into.value, more.value);
  into.count += more.count;
}

void send_partial(const collection_ref& ref, std::uint32_t round, partial&& p) {
  pupper sizer = pupper::sizer();
  sizer | p.reducer | p.cb | p.count | p.value;
  message_ptr m = new_control_message(ref, index_key{}, op_red_partial, sizer.offset());
  header_of(*m).args.round = round;
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  packer | p.reducer | p.cb | p.count | p.value;
  send_object_to_pe(ref.root_pe, std::move(m));
}

using round_partials = std::vector<std::pair<std::uint32_t, partial>>;

// What leaves a node's combiner after an update.
struct leaving {
  round_partials up;    // rounds the node completed: to the parent node or the root PE
  round_partials late;  // rounds it completed before they came: to the root PE
  bool report = false;  // the parent must hear (up, or a new `passed`)
  std::int64_t passed = 0;
  std::uint64_t seq = 0;
};

// Slot `slot` of the node's combiner passed `passed`, with the partial
// results `ready` of rounds it passed. Under the combiner's lock.
void combine_locked(node_combiner& c, const collection_ref& ref, std::size_t slot,
                    std::int64_t passed, round_partials& ready, leaving& out) {
  c.passed[slot] = passed;
  for (auto& [r, p] : ready) {
    if (std::int64_t(r) <= c.completed)
      out.late.emplace_back(r, std::move(p));  // the node already sent this round
    else
      merge_partial(c.acc[r], std::move(p), ref, r);
  }
  const std::int64_t raw = *std::min_element(c.passed.begin(), c.passed.end());
  std::int64_t all = raw;
  if (all == passed_all) {
    // No element below this node now (a sparse array before its
    // insertions, or every element gone): what is here may leave, but the
    // node has not passed the rounds after it. An element inserted or
    // migrating here later contributes to them here, combined with its
    // neighbours, instead of straight to the root as a late partial.
    all = c.acc.empty() ? c.completed : std::max<std::int64_t>(c.completed, c.acc.rbegin()->first);
  }
  if (all > c.completed) {
    c.completed = all;
    while (!c.acc.empty() && std::int64_t(c.acc.begin()->first) <= all) {
      auto it = c.acc.begin();
      out.up.emplace_back(it->first, std::move(it->second));
      c.acc.erase(it);
    }
  }
  if (c.parent >= 0 && (raw != c.reported || !out.up.empty())) {
    c.reported = raw;
    out.report = true;
    out.passed = raw;
  }
}

// Numbers the report that leaves, once per message. Under the lock.
void number_report(node_combiner& c, leaving& out) {
  if (out.report) out.seq = ++c.report_seq;
}

void pup_partials(pupper& p, round_partials& v) {
  const std::uint64_t n = p.length(v.size(), 8, "reduction partials");
  if (p.unpacking()) v.resize(std::size_t(n));
  for (auto& [r, q] : v) p | r | q.reducer | q.cb | q.count | q.value;
}

// Sends what left a combiner: a late round goes straight to the root PE
// (the root counts contributions, whichever way they come), completed
// rounds to the parent node with what the node passed.
void send_leaving(const collection_ref& ref, const node_combiner& c, leaving& out) {
  if (trace::on()) [[unlikely]]
    for (auto& [r, p] : out.up) trace::detail::emit(trace::kind::reduction, ref.type, 1, r, 0);
  for (auto& [r, p] : out.late) send_partial(ref, r, std::move(p));
  if (c.parent < 0) {
    for (auto& [r, p] : out.up) send_partial(ref, r, std::move(p));
    return;
  }
  if (!out.report) return;
  auto pack = [&](pupper& p) {
    p | out.passed | out.seq;
    pup_partials(p, out.up);
  };
  pupper sizer = pupper::sizer();
  pack(sizer);
  message_ptr m = new_control_message(ref, index_key{}, op_red_up, sizer.offset());
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  pack(packer);
  send_to_node_of(c.parent, std::move(m));
}

// A child node's report: what its subtree passed and the rounds it
// completed. Reports may overtake one another (any PE of this node takes
// them), so they are applied in the order the child numbered them: one
// that comes early waits for those before it.
void on_red_up(local_collection& lc, message_ptr m) {
  const obj_header& h = header_of(*m);
  node_combiner& c = *lc.combiner;
  const int child = node_of(h.origin_pe);
  auto at = std::find(c.children.begin(), c.children.end(), child);
  if (at == c.children.end())
    base::fatal("objects: node %d got reduction results of %s from node %d, not its child",
                my_node(), collection_name(lc.ref).c_str(), child);
  const auto i = std::size_t(at - c.children.begin());
  std::int64_t passed = 0;
  std::uint64_t seq = 0;
  round_partials ready;
  pupper u = pupper::unpacker(args_of(*m), args_size(*m));
  u | passed | seq;
  pup_partials(u, ready);
  leaving out;
  {
    base::count(base::op::shared_rmw);  // the node's PEs all take it
    std::lock_guard<std::mutex> lock(c.mutex);
    node_combiner::child_report& from = c.child_reports[i];
    if (seq != from.applied + 1) {
      from.ahead.emplace(seq, std::make_pair(passed, std::move(ready)));
      return;
    }
    const std::size_t slot = std::size_t(node_size()) + i;
    combine_locked(c, lc.ref, slot, passed, ready, out);
    from.applied = seq;
    for (auto it = from.ahead.begin(); it != from.ahead.end() && it->first == from.applied + 1;
         it = from.ahead.erase(it)) {
      combine_locked(c, lc.ref, slot, it->second.first, it->second.second, out);
      from.applied = it->first;
    }
    number_report(c, out);
  }
  send_leaving(lc.ref, c, out);
}

// ---- reductions at the root -----------------------------------------------------

std::int64_t root_expected(const root_reduction& r, std::uint32_t round) {
  std::int64_t e = r.base_expected;
  for (auto it = r.deltas.begin(); it != r.deltas.end() && it->first <= round; ++it)
    e += it->second;
  return e;
}

void deliver_result(const collection_ref& ref, std::uint32_t round, partial&& p) {
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::reduction, ref.type, 2, round, 0);
  const callback_desc& cb = p.cb;
  switch (cb.kind) {
    case callback_kind::element:
    case callback_kind::broadcast: {
      message_ptr m = new_element_message(cb.ref, cb.key, cb.entry, p.value.size());
      std::memcpy(args_of(*m), p.value.data(), p.value.size());
      if (cb.kind == callback_kind::element)
        send_element(cb.ref, std::move(m));
      else
        broadcast_collection(cb.ref, std::move(m));
      break;
    }
    case callback_kind::future:
      future_set(cb.pe, cb.future_id, std::move(p.value));
      break;
    case callback_kind::exit:
      weft::exit(cb.code);
      break;
    case callback_kind::all_reduce: {
      message_ptr m = new_control_message(ref, index_key{}, op_allreduce_done, p.value.size());
      header_of(*m).args.round = round;
      std::memcpy(args_of(*m), p.value.data(), p.value.size());
      weft::broadcast(std::move(m));
      break;
    }
    case callback_kind::sync:
      sync_round_done(ref, std::move(p.value));
      break;
    case callback_kind::none:
      object_error("round " + std::to_string(round) + " of the reductions of " +
                   collection_name(ref) + " has no callback");
  }
}

void root_progress(local_collection& lc) {
  root_reduction& r = *lc.root;
  for (;;) {
    auto it = r.acc.find(r.next_deliver);
    const std::int64_t want = root_expected(r, r.next_deliver);
    if (it == r.acc.end()) {
      // A round nobody could contribute to (every element left) is skipped.
      if (want == 0 && std::int64_t(r.next_deliver) < r.max_seen) {
        ++r.next_deliver;
        continue;
      }
      return;
    }
    if (std::int64_t(it->second.count) < want) return;
    if (std::int64_t(it->second.count) > want)
      object_error("round " + std::to_string(r.next_deliver) + " of the reductions of " +
                   collection_name(lc.ref) + " got " + std::to_string(it->second.count) +
                   " contributions for " + std::to_string(want) + " elements");
    partial p = std::move(it->second);
    r.acc.erase(it);
    const std::uint32_t round = r.next_deliver++;
    deliver_result(lc.ref, round, std::move(p));
  }
}

}  // namespace

// ---- reductions on this PE --------------------------------------------------

node_combiner* node_combiner_for(const collection_ref& ref) {
  node_objects& n = *g_node_objects;
  auto lock = lock_node_objects();
  auto& c = n.combiners[ref.id];
  if (!c) {
    c = std::make_unique<node_combiner>();
    const int root = node_of(ref.root_pe);
    c->children = tree_children(my_node(), root, num_nodes());
    c->parent = tree_parent(my_node(), root, num_nodes());
    c->passed.assign(std::size_t(node_size()) + c->children.size(), -1);
    c->child_reports.resize(c->children.size());
  }
  return c.get();
}

void round_hist_add(local_collection& lc, std::uint32_t r) {
  ++lc.hist[r];
}
void round_hist_remove(local_collection& lc, std::uint32_t r) {
  auto it = lc.hist.find(r);
  if (it != lc.hist.end() && --it->second == 0) lc.hist.erase(it);
}

// Reports what this PE passed to the node's combiner, with the partial
// results of those rounds, and sends whatever leaves the node.
void reduction_flush(local_collection& lc) {
  if (lc.combiner == nullptr) return;
  const std::int64_t passed = rounds_passed_on_pe(lc);
  round_partials ready;
  while (!lc.pending.empty() && std::int64_t(lc.pending.begin()->first) <= passed) {
    auto it = lc.pending.begin();
    ready.emplace_back(it->first, std::move(it->second));
    lc.pending.erase(it);
  }
  if (ready.empty() && passed == lc.reported_passed) return;
  lc.reported_passed = passed;
  node_combiner& c = *lc.combiner;
  leaving out;
  {
    base::count(base::op::shared_rmw);  // the node's PEs all take it
    std::lock_guard<std::mutex> lock(c.mutex);
    combine_locked(c, lc.ref, std::size_t(my_rank()), passed, ready, out);
    number_report(c, out);
  }
  send_leaving(lc.ref, c, out);
}

void receive_reduction_up(message_ptr m) {
  const obj_header& h = header_of(*m);
  on_red_up(get_local_collection(h.collection), std::move(m));
}

std::uint32_t contribute(element_record& rec, std::uint32_t reducer_id, const callback_desc& cb,
                         std::vector<std::byte> value) {
  if (rec.ref.kind != collection_kind::array && rec.ref.kind != collection_kind::group)
    object_error("contribute from " + element_name(rec) +
                 ": reductions run over arrays and groups");
  if (rec.contributed_now)
    object_error(element_name(rec) + " contributed twice to reductions in one invocation of " +
                 (rec.running ? std::string(rec.running) : std::string("an entry method")) +
                 " (rounds " + std::to_string(rec.red_round - 1) + " and " +
                 std::to_string(rec.red_round) +
                 "): contribute once per round; to reduce two values, contribute a pair with a "
                 "user op");
  rec.contributed_now = true;
  local_collection& lc = *rec.coll;
  const std::uint32_t round = rec.red_round++;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::reduction, rec.ref.type, 0, round, 0);
  round_hist_remove(lc, round);
  round_hist_add(lc, round + 1);
  partial p;
  p.reducer = reducer_id;
  p.cb = cb;
  p.count = 1;
  p.value = std::move(value);
  merge_partial(lc.pending[round], std::move(p), lc.ref, round);
  reduction_flush(lc);
  return round;
}

void allreduce_register(allreduce_slot* s) {
  this_pe_objects().allreduce[{s->collection, s->round}].push_back(s);
}

void allreduce_unregister(allreduce_slot* s) noexcept {
  if (t_pe_objects == nullptr) return;
  auto it = t_pe_objects->allreduce.find({s->collection, s->round});
  if (it == t_pe_objects->allreduce.end()) return;
  auto& v = it->second;
  v.erase(std::remove(v.begin(), v.end(), s), v.end());
  if (v.empty()) t_pe_objects->allreduce.erase(it);
}

// ---- reductions at the root -----------------------------------------------------

root_reduction& root_reduction_of(local_collection& lc) {
  if (!lc.root)
    object_error("PE " + std::to_string(my_pe()) + " got a reduction message for " +
                 collection_name(lc.ref) + " but is not its root");
  return *lc.root;
}

void receive_reduction_partial(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  root_reduction& r = root_reduction_of(lc);
  ++r.partials_received;
  partial p;
  pupper u = pupper::unpacker(args_of(*m), args_size(*m));
  u | p.reducer | p.cb | p.count | p.value;
  const std::uint32_t round = h.args.round;
  r.max_seen = std::max<std::int64_t>(r.max_seen, round);
  if (round < r.next_deliver)
    object_error("a contribution to round " + std::to_string(round) + " of the reductions of " +
                 collection_name(lc.ref) + " arrived after that round completed");
  merge_partial(r.acc[round], std::move(p), lc.ref, round);
  root_progress(lc);
}

void receive_element_left(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  root_reduction& r = root_reduction_of(lc);
  r.deltas[h.args.round] -= 1;
  root_progress(lc);
}

// An all_reduce round's result, on every PE: to the coroutines here that
// wait for it.
void receive_allreduce_result(message_ptr m) {
  const obj_header& h = header_of(*m);
  pe_objects& s = this_pe_objects();
  auto it = s.allreduce.find({h.collection, h.args.round});
  if (it == s.allreduce.end()) return;  // nobody on this PE awaits it
  std::vector<allreduce_slot*> slots = it->second;
  std::vector<std::byte> value(args_of(*m), args_of(*m) + args_size(*m));
  for (allreduce_slot* slot : slots) {
    slot->ready = true;
    slot->value = value;
  }
  for (allreduce_slot* slot : slots) {
    auto again = s.allreduce.find({h.collection, h.args.round});
    if (again == s.allreduce.end()) break;
    if (std::find(again->second.begin(), again->second.end(), slot) == again->second.end())
      continue;
    if (slot->h) {
      std::coroutine_handle<> c = std::exchange(slot->h, {});
      resume(slot->owner, c, slot->promise);
    }
  }
}

bool same_callback(const callback_desc& a, const callback_desc& b) noexcept {
  return a.kind == b.kind && a.pe == b.pe && a.entry == b.entry && a.code == b.code &&
         a.future_id == b.future_id && a.ref.id == b.ref.id && a.key == b.key;
}

std::uint64_t reduction_partials_received(const collection_ref& ref) {
  local_collection* lc = find_local_collection(ref.id);
  if (lc == nullptr || !lc->root)
    object_error("reduction_partials_received: PE " + std::to_string(my_pe()) +
                 " is not the root of " + collection_name(ref));
  return lc->root->partials_received;
}

}  // namespace weft::objects::detail
