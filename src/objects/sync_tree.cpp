// --weft:lb=hierarchical at run time: a balancing step as a tree PE ->
// node -> root (paper 001, §V; Charm++'s TreeLB), so that no PE holds the
// whole load database. The lb layer decides at each level
// (src/lb/tree_runtime.cpp, the offline strategy's levels); this file
// carries the messages.
//
//  1. The elements' records stay on their PEs: the at_sync round counts
//     them only (so an element migrating meanwhile is still counted once),
//     and a step without at_sync takes them when the plan starts.
//  2. op_tree_go (root -> every PE): each PE sends its records to its
//     node's first PE, the node's leader.
//  3. op_tree_summary (leader -> root): the node's load (background and
//     elements), its max PE load, its number of records.
//  4. op_tree_quota (root -> leaders): how much load each node offers
//     (shed_amounts: a node above its share by the upper tolerance).
//  5. op_tree_offer (leader -> root): the records it offers (pick).
//  6. op_tree_assign (root -> leaders): the offered records go where the
//     load per PE after them is least (share); each leader gets those
//     arriving from other nodes and its own that stay.
//  7. Each leader places its records -- its own, less those leaving, plus
//     those arriving -- on its PEs (within), tells the old leader of each
//     arriving record its new PE (op_tree_placed), and once it knows where
//     its own leaving records went, sends each PE of its node its plan
//     (op_sync_plan, as a flat step does) and the root its moves
//     (op_tree_moves).
//  8. As in a flat step, each PE reports when its moves are done; when
//     every PE and every node reported, the root broadcasts the resume with
//     every move (end_step in sync.cpp).
//
// Messages per step: O(P) inside nodes (records, plans, reports), O(nodes)
// summaries at the root, plus the records that change node (twice: offered
// and assigned); the root never sees a record that stays on its node. The
// resume still carries every move to every PE (as in a flat step): that is
// what keeps per-pair order after the step.
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include "objects/internal.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::objects::detail {

namespace {

tree_balancer g_tree_balancer;

int leader_of(int pe) {
  return node_of(pe) * node_size();
}

struct node_summary {
  double load = 0;
  double max_pe = 0;
  std::uint64_t records = 0;
};

void check_balancer() {
  if (g_tree_balancer.within == nullptr)
    base::fatal("lb: --weft:lb=hierarchical needs the lb layer's tree, which is not installed");
}

// The leader's node is fully placed once it knows where every record it
// let go went: each PE of the node gets its plan, the root the moves.
void finish_node_if_ready(local_collection& lc) {
  sync_tree_state& ts = tree_state(lc);
  if (ts.placed_expected < 0 || std::int64_t(ts.placed.size()) < ts.placed_expected) return;
  const int first = leader_of(my_pe()), n = node_size();
  // Each move leaves from its record's PE: one of this node's.
  std::vector<std::vector<sync_move>> out(static_cast<std::size_t>(n));
  std::unordered_map<index_key, int, index_key_hash> pe_of;
  for (const sync_record& r : ts.node) pe_of[r.key] = r.pe;
  std::vector<sync_move> all = ts.moves;
  all.insert(all.end(), ts.placed.begin(), ts.placed.end());
  for (const sync_move& mv : all) out[std::size_t(pe_of.at(mv.key) - first)].push_back(mv);
  for (int p = 0; p < n; ++p)
    send_plan(lc, first + p, ts.incoming[std::size_t(p)], out[std::size_t(p)], ts.unassisted);
  message_ptr m = new_control_message(lc.ref, index_key{}, op_tree_moves,
                                      sizeof(double) + all.size() * sizeof(sync_move));
  std::memcpy(args_of(*m), &ts.predicted_max, sizeof(double));
  append_bytes(*m, sizeof(double), all);
  send_object_to_pe(lc.ref.root_pe, std::move(m));
  ts.node.clear();
  ts.offered.clear();
  ts.arriving.clear();
  ts.staying.clear();
  ts.placed.clear();
  ts.moves.clear();
  ts.incoming.clear();
  ts.node_replies = 0;
  ts.placed_expected = -1;
}

}  // namespace

void set_tree_balancer(const tree_balancer& t) {
  g_tree_balancer = t;
}

sync_tree_state& tree_state(local_collection& lc) {
  if (!lc.sync_tree) lc.sync_tree = std::make_unique<sync_tree_state>();
  return *lc.sync_tree;
}

void start_tree_step(local_collection& lc, std::uint64_t) {
  check_balancer();
  sync_root& root = lc.sync;
  sync_tree_state& ts = tree_state(lc);
  root.moves.clear();
  root.kept.clear();
  root.comm.clear();  // the tree places by load only
  // Every PE reports its moves done, every node its moves.
  root.pending = num_pes() + num_nodes();
  ts.load.assign(std::size_t(num_nodes()), 0.0);
  ts.max_before.assign(std::size_t(num_nodes()), 0.0);
  ts.elements = 0;
  ts.replies = 0;
  ts.pool.clear();
  ts.pool_from.clear();
  ts.predicted_max_all = 0;
  ts.crossing = 0;
  message_ptr m = new_control_message(lc.ref, index_key{}, op_tree_go, 0);
  header_of(*m).args.round = root.unassisted ? 1 : 0;
  weft::broadcast(std::move(m));
}

// 2. Every PE: its records to its node's leader.
void receive_tree_go(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  const bool unassisted = h.args.round != 0;
  std::vector<sync_record> out;
  if (unassisted)
    out = records_between_entries(lc);
  else
    out.swap(tree_state(lc).here);
  message_ptr r =
      new_control_message(lc.ref, index_key{}, op_tree_records, out.size() * sizeof(sync_record));
  header_of(*r).args.round = h.args.round;
  append_bytes(*r, 0, out);
  send_object_to_pe(leader_of(my_pe()), std::move(r));
}

// 3. The leader: once every PE of the node answered, its summary.
void receive_tree_records(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  const std::vector<sync_record> got = read_bytes<sync_record>(*m, 0);
  ts.node.insert(ts.node.end(), got.begin(), got.end());
  ts.unassisted = h.args.round != 0;
  if (++ts.node_replies < node_size()) return;
  const int first = leader_of(my_pe());
  std::vector<double> pe_load(std::size_t(node_size()), 0.0);
  for (const sync_record& r : ts.node) {
    double& l = pe_load[std::size_t(r.pe - first)];
    l += r.load + (r.background > 0 ? r.background : 0);
  }
  node_summary s;
  for (double l : pe_load) {
    s.load += l;
    s.max_pe = std::max(s.max_pe, l);
  }
  s.records = ts.node.size();
  message_ptr r = new_control_message(lc.ref, index_key{}, op_tree_summary, sizeof s);
  header_of(*r).arg_pe = my_node();
  std::memcpy(args_of(*r), &s, sizeof s);
  send_object_to_pe(lc.ref.root_pe, std::move(r));
}

// 4. The root: once every node's summary is in, what each offers.
void receive_tree_summary(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  node_summary s;
  std::memcpy(&s, args_of(*m), sizeof s);
  ts.load[std::size_t(h.arg_pe)] = s.load;
  ts.max_before[std::size_t(h.arg_pe)] = s.max_pe;
  ts.elements += s.records;
  if (++ts.replies < num_nodes()) return;
  ts.replies = 0;
  const std::vector<double> pes(static_cast<std::size_t>(num_nodes()),
                                static_cast<double>(node_size()));
  const std::vector<double> amount = g_tree_balancer.shed_amounts(ts.load, pes);
  for (int n = 0; n < num_nodes(); ++n) {
    message_ptr q = new_control_message(lc.ref, index_key{}, op_tree_quota, sizeof(double));
    std::memcpy(args_of(*q), &amount[std::size_t(n)], sizeof(double));
    send_object_to_pe(n * node_size(), std::move(q));
  }
}

// 5. The leader: the records it offers.
void receive_tree_quota(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  double amount = 0;
  std::memcpy(&amount, args_of(*m), sizeof amount);
  ts.offered.clear();
  if (amount > 0) ts.offered = g_tree_balancer.pick(ts.node, amount);
  std::vector<sync_record> out;
  out.reserve(ts.offered.size());
  for (std::uint32_t i : ts.offered) out.push_back(ts.node[i]);
  message_ptr r =
      new_control_message(lc.ref, index_key{}, op_tree_offer, out.size() * sizeof(sync_record));
  header_of(*r).arg_pe = my_node();
  append_bytes(*r, 0, out);
  send_object_to_pe(lc.ref.root_pe, std::move(r));
}

// 6. The root: once every node offered, where the offered records go.
void receive_tree_offer(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  const std::vector<sync_record> got = read_bytes<sync_record>(*m, 0);
  ts.pool.insert(ts.pool.end(), got.begin(), got.end());
  ts.pool_from.insert(ts.pool_from.end(), got.size(), h.arg_pe);
  if (++ts.replies < num_nodes()) return;
  ts.replies = 0;
  lc.sync.t_plan = base::wall_ns();
  std::vector<double> keep = ts.load;
  std::vector<double> loads(ts.pool.size());
  for (std::size_t k = 0; k < ts.pool.size(); ++k) {
    loads[k] = ts.pool[k].load;
    keep[std::size_t(ts.pool_from[k])] -= loads[k];
  }
  const std::vector<double> pes(static_cast<std::size_t>(num_nodes()),
                                static_cast<double>(node_size()));
  const std::vector<int> to = g_tree_balancer.share(keep, pes, loads);
  // Per node: records arriving, its own that stay, and how many of its own
  // leave (it waits for their new PEs).
  std::vector<std::vector<sync_record>> arriving(static_cast<std::size_t>(num_nodes()));
  std::vector<std::vector<index_key>> staying(static_cast<std::size_t>(num_nodes()));
  std::vector<std::int64_t> leaving(static_cast<std::size_t>(num_nodes()), 0);
  for (std::size_t k = 0; k < ts.pool.size(); ++k) {
    const int from = ts.pool_from[k], dest = to[k] < 0 ? from : to[k];
    if (dest == from) {
      staying[std::size_t(from)].push_back(ts.pool[k].key);
    } else {
      arriving[std::size_t(dest)].push_back(ts.pool[k]);
      ++leaving[std::size_t(from)];
      ++ts.crossing;
    }
  }
  for (int n = 0; n < num_nodes(); ++n) {
    const auto& a = arriving[std::size_t(n)];
    const auto& st = staying[std::size_t(n)];
    const std::uint64_t na = a.size();
    message_ptr r = new_control_message(
        lc.ref, index_key{}, op_tree_assign,
        2 * sizeof(std::uint64_t) + na * sizeof(sync_record) + st.size() * sizeof(index_key));
    std::byte* p = args_of(*r);
    const std::uint64_t leaves = std::uint64_t(leaving[std::size_t(n)]);
    std::memcpy(p, &leaves, sizeof leaves);
    std::memcpy(p + sizeof leaves, &na, sizeof na);
    append_bytes(*r, 2 * sizeof(std::uint64_t), a);
    append_bytes(*r, 2 * sizeof(std::uint64_t) + na * sizeof(sync_record), st);
    send_object_to_pe(n * node_size(), std::move(r));
  }
  ts.pool.clear();
  ts.pool_from.clear();
}

// 7. The leader: places its node's records on its PEs.
void receive_tree_assign(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  const std::byte* p = args_of(*m);
  std::uint64_t leaves = 0, na = 0;
  std::memcpy(&leaves, p, sizeof leaves);
  std::memcpy(&na, p + sizeof leaves, sizeof na);
  ts.arriving.resize(na);
  if (na != 0)
    std::memcpy(ts.arriving.data(), p + 2 * sizeof(std::uint64_t), na * sizeof(sync_record));
  ts.staying = read_bytes<index_key>(*m, 2 * sizeof(std::uint64_t) + na * sizeof(sync_record));
  // What the node places: its records less those that leave, plus those
  // that arrive.
  const std::unordered_set<index_key, index_key_hash> stay(ts.staying.begin(), ts.staying.end());
  std::vector<bool> leaving(ts.node.size(), false);
  for (std::uint32_t i : ts.offered) leaving[i] = !stay.contains(ts.node[i].key);
  std::vector<sync_record> place;
  place.reserve(ts.node.size() + ts.arriving.size());
  for (std::size_t i = 0; i < ts.node.size(); ++i)
    if (!leaving[i]) place.push_back(ts.node[i]);
  const std::size_t own = place.size();
  place.insert(place.end(), ts.arriving.begin(), ts.arriving.end());
  const int first = leader_of(my_pe()), n = node_size();
  const balance_plan plan = g_tree_balancer.within(place, first, n);
  if (plan.pe.size() != place.size())
    base::fatal("lb: hierarchical placed %zu elements of %s on node %d, not the %zu it holds",
                plan.pe.size(), collection_name(lc.ref).c_str(), my_node(), place.size());
  ts.predicted_max = plan.predicted_max;
  ts.incoming.assign(std::size_t(n), 0);
  ts.moves.clear();
  std::map<int, std::vector<sync_move>> placed_for;  // old leader -> its records' new PEs
  for (std::size_t i = 0; i < place.size(); ++i) {
    const sync_record& r = place[i];
    const int to = plan.pe[i];
    if (to < first || to >= first + n)
      base::fatal("lb: hierarchical placed %s on PE %d, outside its node (PEs %d..%d)",
                  key_string(lc.ref, r.key).c_str(), to, first, first + n - 1);
    if (i < own && to == r.pe) continue;
    if (!r.migratable)
      base::fatal("lb: hierarchical moved %s, which cannot move",
                  key_string(lc.ref, r.key).c_str());
    ++ts.incoming[std::size_t(to - first)];
    const sync_move mv{r.key, to, r.epoch + 1};
    if (i < own)
      ts.moves.push_back(mv);
    else
      placed_for[leader_of(r.pe)].push_back(mv);
  }
  for (auto& [leader, moves] : placed_for) {
    message_ptr r =
        new_control_message(lc.ref, index_key{}, op_tree_placed, moves.size() * sizeof(sync_move));
    append_bytes(*r, 0, moves);
    send_object_to_pe(leader, std::move(r));
  }
  ts.placed_expected = std::int64_t(leaves);
  finish_node_if_ready(lc);
}

// 7. The old leader: where its leaving records went (may come before its
// own assignment).
void receive_tree_placed(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  const std::vector<sync_move> got = read_bytes<sync_move>(*m, 0);
  ts.placed.insert(ts.placed.end(), got.begin(), got.end());
  finish_node_if_ready(lc);
}

// 8. The root: a node's moves; the step ends when every PE and node
// reported (end_step, sync.cpp).
void receive_tree_moves(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_root& root = lc.sync;
  sync_tree_state& ts = tree_state(lc);
  double predicted = 0;
  std::memcpy(&predicted, args_of(*m), sizeof predicted);
  ts.predicted_max_all = std::max(ts.predicted_max_all, predicted);
  const std::vector<sync_move> got = read_bytes<sync_move>(*m, sizeof(double));
  root.moves.insert(root.moves.end(), got.begin(), got.end());
  if (++ts.replies == num_nodes()) {
    ts.replies = 0;
    double total = 0, before = 0;
    for (std::size_t n = 0; n < ts.load.size(); ++n) {
      total += ts.load[n];
      before = std::max(before, ts.max_before[n]);
    }
    const double avg = total / double(num_pes());
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "weft lb: %s step %llu: %llu elements, hierarchical (a tree over %d node(s)): max/avg "
        "%.3f (max %.3g s) -> predicted %.3f (max %.3g s), %zu migrations (%llu across "
        "nodes), %d count waves",
        collection_name(lc.ref).c_str(), static_cast<unsigned long long>(root.steps - 1),
        static_cast<unsigned long long>(ts.elements), num_nodes(), avg > 0 ? before / avg : 1.0,
        before, avg > 0 ? ts.predicted_max_all / avg : 1.0, ts.predicted_max_all, root.moves.size(),
        static_cast<unsigned long long>(ts.crossing), root.waves);
    root.line = buf;
  }
  if (--root.pending > 0) return;
  end_step(lc);
}

}  // namespace weft::objects::detail
