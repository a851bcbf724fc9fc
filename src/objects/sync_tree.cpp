// --weft:lb=hierarchical at run time: a balancing step as a tree PE ->
// node -> group of nodes -> root (paper 001, §V; Charm++'s TreeLB), so
// that no PE holds the whole load database and the root hears from
// O(groups) children, not from every node. The lb layer decides at each
// level (src/lb/tree_runtime.cpp, the offline strategy's levels:
// src/lb/hierarchical.cpp); this file carries the messages of the nodes
// and the root, sync_tree_group.cpp those of the groups' leaders.
//
// A group is --weft:lb-tree-group consecutive nodes (16 by default); its
// leader is its first node's first PE. With one group (nodes <= the group
// size) the root leads it and the root's own level is skipped (one child
// has nothing to even out): the step is the two-level tree it was before
// groups, hop for hop.
//
//  1. The elements' records stay on their PEs: the at_sync round counts
//     them only (so an element migrating meanwhile is still counted once),
//     and a step without at_sync takes them when the plan starts.
//  2. op_tree_go (root -> every PE): each PE sends its records to its
//     node's first PE, the node's leader, with what its elements sent
//     (--weft:lb-comm=element: the node level may place by it,
//     --weft:lb-tree-inner=comm).
//  3. op_tree_summary (leader -> group leader): the node's load
//     (background and elements), its max PE load, its number of records;
//     op_tree_group_summary (group leader -> root): the same of the group.
//  4. The root's level (more than one group): op_tree_group_quota (root ->
//     group leaders: what each group offers; shed_amounts), which each
//     group splits among its nodes (split: op_tree_quota); the nodes offer
//     records (pick: op_tree_offer to the group leader), which the group
//     leader sends on (op_tree_group_offer); the root gives the offered
//     records to the groups where the load per PE after them is least
//     (share: op_tree_group_assign).
//  5. The group's level: the leader asks its nodes above their share
//     (counting what the root gave the group) for more records
//     (op_tree_quota, op_tree_offer), then shares its pool -- the root's
//     records and its nodes' -- among its nodes (share); each node gets
//     the records arriving from other nodes and its own that stay
//     (op_tree_assign).
//  6. Each leader places its records -- its own, less those leaving, plus
//     those arriving -- on its PEs (within), tells the old leader of each
//     arriving record its new PE (op_tree_placed), and once it knows where
//     its own leaving records went, sends each PE of its node its plan
//     (op_sync_plan, as a flat step does) and its group leader its moves
//     (op_tree_moves), which go on to the root as one message per group
//     (op_tree_group_moves).
//  7. As in a flat step, each PE reports when its moves are done; when
//     every PE and every group reported, the root broadcasts the resume
//     with every move (end_step in sync.cpp).
//
// A step that --weft:lb-dump writes needs the whole snapshot: op_tree_go
// then says so, every PE sends its records and communication records to
// the root instead, and the balancer places them there as in a flat step
// (the offline strategy's levels in one place), dumping them.
//
// Messages per step: O(P) inside nodes (records, plans, reports), O(nodes
// in the group) at a group's leader, O(groups) summaries, offers and
// moves at the root, plus the records that change node (three times:
// offered, passed on, assigned, when they change group); no level sees a
// record that stays on its node. The resume still carries every move to
// every PE, and every PE still reports its moves done to the root (as in
// a flat step): that is what keeps per-pair order after the step.
#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include "objects/internal.hpp"
#include "objects/sync_trace.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/core/run.hpp"

namespace weft::objects::detail {

namespace {

tree_balancer g_tree_balancer;

// op_tree_go's (and op_tree_records') round: a step without at_sync (the
// records are taken now), and a dumped step (they go to the root).
constexpr std::uint32_t go_unassisted = 1, go_whole = 2;

int leader_of(int pe) {
  return node_of(pe) * node_size();
}

void check_balancer() {
  if (g_tree_balancer.within == nullptr)
    base::fatal("lb: --weft:lb=hierarchical needs the lb layer's tree, which is not installed");
}

// Messages of moves the root waits for: one per group, or with one group
// (which the root leads) one per node.
int root_moves_expected() {
  return tree_groups() == 1 ? num_nodes() : tree_groups();
}

// The root's children: each group's PEs.
std::vector<double> group_pes() {
  std::vector<double> pes(static_cast<std::size_t>(tree_groups()));
  for (int g = 0; g < tree_groups(); ++g)
    pes[std::size_t(g)] = double(tree_group_nodes(g) * node_size());
  return pes;
}

// The leader's node is fully placed once it knows where every record it
// let go went: each PE of the node gets its plan, the group's leader the
// moves.
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
  message_ptr m =
      make_tree_moves(lc, op_tree_moves, my_node(), ts.predicted_max, ts.arriving.size(), all);
  send_object_to_pe(tree_group_leader(lc, tree_group_of(my_node())), std::move(m));
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

const tree_balancer& tree_decisions() {
  return g_tree_balancer;
}

int tree_groups() {
  const int gs = weft::config().lb_tree_group;
  return (num_nodes() + gs - 1) / gs;
}

int tree_group_of(int node) {
  return node / weft::config().lb_tree_group;
}

int tree_group_first(int group) {
  return group * weft::config().lb_tree_group;
}

int tree_group_nodes(int group) {
  return std::min(weft::config().lb_tree_group, num_nodes() - tree_group_first(group));
}

int tree_group_leader(const local_collection& lc, int group) {
  return tree_groups() == 1 ? lc.ref.root_pe : tree_group_first(group) * node_size();
}

sync_tree_state& tree_state(local_collection& lc) {
  if (!lc.sync_tree) lc.sync_tree = std::make_unique<sync_tree_state>();
  return *lc.sync_tree;
}

void start_tree_step(local_collection& lc, std::uint64_t step) {
  check_balancer();
  sync_root& root = lc.sync;
  sync_tree_state& ts = tree_state(lc);
  if (g_tree_balancer.whole != nullptr && g_tree_balancer.whole(step)) {
    // A dumped step: every PE sends its records here, and the balancer
    // places them as in a flat step (receive_tree_records).
    root.records.clear();
    root.comm.clear();
    root.record_replies = 0;
    message_ptr m = new_control_message(lc.ref, index_key{}, op_tree_go, 0);
    header_of(*m).args.round = (root.unassisted ? go_unassisted : 0) | go_whole;
    weft::broadcast(std::move(m));
    return;
  }
  root.moves.clear();
  root.kept.clear();
  // Every PE reports its moves done, every group (or node) its moves.
  root.pending = num_pes() + root_moves_expected();
  ts.load.assign(std::size_t(tree_groups()), 0.0);
  ts.max_before.assign(std::size_t(tree_groups()), 0.0);
  ts.elements = 0;
  ts.replies = 0;
  ts.summaries = 0;
  ts.pool.clear();
  ts.pool_from.clear();
  ts.predicted_max_all = 0;
  ts.crossing = 0;
  message_ptr m = new_control_message(lc.ref, index_key{}, op_tree_go, 0);
  header_of(*m).args.round = root.unassisted ? go_unassisted : 0;
  weft::broadcast(std::move(m));
}

// 2. Every PE: its records, and what its elements sent since they were
// last taken (--weft:lb-comm; empty otherwise), to its node's leader, or
// to the root in a dumped step: [record count][records][comm records],
// the packing of the flat step's op_lb_records.
void receive_tree_go(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  std::vector<sync_record> out;
  if ((h.args.round & go_unassisted) != 0)
    out = records_between_entries(lc);
  else
    out.swap(tree_state(lc).here);
  const std::vector<comm_record> comm = take_comm(lc);
  const std::uint64_t n = out.size();
  message_ptr r =
      new_control_message(lc.ref, index_key{}, op_tree_records,
                          sizeof n + n * sizeof(sync_record) + comm.size() * sizeof(comm_record));
  header_of(*r).args.round = h.args.round;
  std::memcpy(args_of(*r), &n, sizeof n);
  append_bytes(*r, sizeof n, out);
  append_bytes(*r, sizeof n + n * sizeof(sync_record), comm);
  const bool whole = (h.args.round & go_whole) != 0;
  send_object_to_pe(whole ? lc.ref.root_pe : leader_of(my_pe()), std::move(r));
}

// 3. The leader: once every PE of the node answered, its summary to the
// group's leader. In a dumped step, the root: once every PE answered, the
// balancer places the whole snapshot (and dumps it), and the plan is
// carried out as a flat step's.
void receive_tree_records(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  std::uint64_t n = 0;
  std::memcpy(&n, args_of(*m), sizeof n);
  std::vector<sync_record> got(n);
  if (n != 0) std::memcpy(got.data(), args_of(*m) + sizeof n, n * sizeof(sync_record));
  const std::vector<comm_record> comm =
      read_bytes<comm_record>(*m, sizeof n + n * sizeof(sync_record));
  if ((h.args.round & go_whole) != 0) {
    sync_root& root = lc.sync;
    root.records.insert(root.records.end(), got.begin(), got.end());
    root.comm.insert(root.comm.end(), comm.begin(), comm.end());
    if (++root.record_replies < num_pes()) return;
    root.record_replies = 0;
    const std::uint64_t step = root.steps - 1;
    balance_plan plan = balancer()(collection_name(lc.ref), step,
                                   {{lc.ref.id, root.records.size()}}, root.records, root.comm);
    carry_out_plan(lc, step, std::move(plan));
    return;
  }
  ts.node.insert(ts.node.end(), got.begin(), got.end());
  ts.node_comm.insert(ts.node_comm.end(), comm.begin(), comm.end());
  ts.unassisted = (h.args.round & go_unassisted) != 0;
  if (++ts.node_replies < node_size()) return;
  const int first = leader_of(my_pe());
  std::vector<double> pe_load(std::size_t(node_size()), 0.0);
  for (const sync_record& r : ts.node) {
    double& l = pe_load[std::size_t(r.pe - first)];
    l += r.load + (r.background > 0 ? r.background : 0);
  }
  tree_summary s;
  for (double l : pe_load) {
    s.load += l;
    s.max_pe = std::max(s.max_pe, l);
  }
  s.records = ts.node.size();
  message_ptr r = new_control_message(lc.ref, index_key{}, op_tree_summary, sizeof s);
  header_of(*r).arg_pe = my_node();
  std::memcpy(args_of(*r), &s, sizeof s);
  send_object_to_pe(tree_group_leader(lc, tree_group_of(my_node())), std::move(r));
}

// 4, 5. The leader, asked by its group's leader (for the root's level or
// the group's): the records it offers, none it offered before this step.
void receive_tree_quota(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  double amount = 0;
  std::memcpy(&amount, args_of(*m), sizeof amount);
  std::vector<std::uint32_t> picked;
  if (amount > 0) picked = g_tree_balancer.pick(ts.node, amount, ts.offered);
  std::vector<sync_record> out;
  out.reserve(picked.size());
  for (std::uint32_t i : picked) out.push_back(ts.node[i]);
  ts.offered.insert(ts.offered.end(), picked.begin(), picked.end());
  message_ptr r =
      new_control_message(lc.ref, index_key{}, op_tree_offer, out.size() * sizeof(sync_record));
  header_of(*r).arg_pe = my_node();
  append_bytes(*r, 0, out);
  send_object_to_pe(tree_group_leader(lc, tree_group_of(my_node())), std::move(r));
}

// 6. The leader: places its node's records on its PEs.
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
  const balance_plan plan = g_tree_balancer.within(place, ts.node_comm, lc.ref.id, first, n);
  ts.node_comm.clear();
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

// 6. The old leader: where its leaving records went (may come before its
// own assignment).
void receive_tree_placed(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  const std::vector<sync_move> got = read_bytes<sync_move>(*m, 0);
  ts.placed.insert(ts.placed.end(), got.begin(), got.end());
  finish_node_if_ready(lc);
}

// ---- the root -----------------------------------------------------------------------

// 3, 4. A group's summary (sent, or with one group handed over by the
// root's own part as the group's leader): once every group's is in, what
// each group offers; one group has nothing to even out, and its leader
// goes on to its own level at once.
void tree_root_summary(local_collection& lc, int group, const tree_summary& s) {
  sync_tree_state& ts = tree_state(lc);
  ts.load[std::size_t(group)] = s.load;
  ts.max_before[std::size_t(group)] = s.max_pe;
  ts.elements += s.records;
  if (++ts.replies < tree_groups()) return;
  ts.replies = 0;
  if (tree_groups() == 1) {
    tree_group_level(lc, {});
    return;
  }
  const std::vector<double> pes = group_pes();
  const std::vector<double> amount = g_tree_balancer.shed_amounts(ts.load, pes, 0.0);
  for (int g = 0; g < tree_groups(); ++g) {
    message_ptr q = new_control_message(lc.ref, index_key{}, op_tree_group_quota, sizeof(double));
    std::memcpy(args_of(*q), &amount[std::size_t(g)], sizeof(double));
    send_object_to_pe(tree_group_leader(lc, g), std::move(q));
  }
}

void receive_tree_group_summary(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  tree_summary s;
  std::memcpy(&s, args_of(*m), sizeof s);
  ++tree_state(lc).summaries;
  tree_root_summary(lc, h.arg_pe, s);
}

// 4. Once every group offered: where the offered records go, each group
// told those it gets (its own among them when they stay in it).
void receive_tree_group_offer(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  const std::vector<sync_record> got = read_bytes<sync_record>(*m, 0);
  ts.pool.insert(ts.pool.end(), got.begin(), got.end());
  ts.pool_from.insert(ts.pool_from.end(), got.size(), h.arg_pe);
  if (++ts.replies < tree_groups()) return;
  ts.replies = 0;
  lc.sync.t_plan = base::wall_ns();
  std::vector<double> keep = ts.load;
  std::vector<double> loads(ts.pool.size());
  for (std::size_t k = 0; k < ts.pool.size(); ++k) {
    loads[k] = ts.pool[k].load;
    keep[std::size_t(ts.pool_from[k])] -= loads[k];
  }
  const std::vector<double> pes = group_pes();
  const std::vector<int> to = g_tree_balancer.share(keep, pes, loads);
  std::vector<std::vector<sync_record>> given(static_cast<std::size_t>(tree_groups()));
  for (std::size_t k = 0; k < ts.pool.size(); ++k)
    given[std::size_t(to[k] < 0 ? ts.pool_from[k] : to[k])].push_back(ts.pool[k]);
  for (int g = 0; g < tree_groups(); ++g) {
    const auto& v = given[std::size_t(g)];
    message_ptr r = new_control_message(lc.ref, index_key{}, op_tree_group_assign,
                                        v.size() * sizeof(sync_record));
    append_bytes(*r, 0, v);
    send_object_to_pe(tree_group_leader(lc, g), std::move(r));
  }
  ts.pool.clear();
  ts.pool_from.clear();
}

// 7. A group's moves (or with one group a node's, from the root's own
// part as the group's leader); the step ends when every PE and group
// reported (end_step, sync.cpp).
void tree_root_moves(local_collection& lc, double predicted, std::uint64_t crossing,
                     const std::vector<sync_move>& moves) {
  sync_root& root = lc.sync;
  sync_tree_state& ts = tree_state(lc);
  ts.predicted_max_all = std::max(ts.predicted_max_all, predicted);
  ts.crossing += crossing;
  root.moves.insert(root.moves.end(), moves.begin(), moves.end());
  if (++ts.replies == root_moves_expected()) {
    ts.replies = 0;
    double total = 0, before = 0;
    for (std::size_t g = 0; g < ts.load.size(); ++g) {
      total += ts.load[g];
      before = std::max(before, ts.max_before[g]);
    }
    const double avg = total / double(num_pes());
    char buf[320];
    std::snprintf(
        buf, sizeof buf,
        "weft lb: %s step %llu: %llu elements, hierarchical (a tree over %d node(s) in %d "
        "group(s), %d summaries at the root): max/avg %.3f (max %.3g s) -> predicted %.3f (max "
        "%.3g s), %zu migrations (%llu across nodes), %d count waves",
        collection_name(lc.ref).c_str(), static_cast<unsigned long long>(root.steps - 1),
        static_cast<unsigned long long>(ts.elements), num_nodes(), tree_groups(), ts.summaries,
        avg > 0 ? before / avg : 1.0, before, avg > 0 ? ts.predicted_max_all / avg : 1.0,
        ts.predicted_max_all, root.moves.size(), static_cast<unsigned long long>(ts.crossing),
        root.waves);
    root.line = buf;
    // Every level decided: the rest of the step is the moves.
    lb_trace_strategy_done(lc, avg > 0 ? before / avg : 1.0,
                           avg > 0 ? ts.predicted_max_all / avg : 1.0);
    lb_trace_phase(lc, lb_phase::migration, true);
  }
  if (--root.pending > 0) return;
  end_step(lc);
}

void receive_tree_group_moves(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  const tree_moves got = read_tree_moves(*m);
  tree_root_moves(lc, got.predicted, got.crossing, got.moves);
}

namespace {
constexpr std::size_t tree_moves_head = sizeof(double) + sizeof(std::uint64_t);
}  // namespace

message_ptr make_tree_moves(local_collection& lc, op_kind op, int arg_pe, double predicted,
                            std::uint64_t crossing, const std::vector<sync_move>& moves) {
  message_ptr m = new_control_message(lc.ref, index_key{}, op,
                                      tree_moves_head + moves.size() * sizeof(sync_move));
  header_of(*m).arg_pe = arg_pe;
  std::memcpy(args_of(*m), &predicted, sizeof predicted);
  std::memcpy(args_of(*m) + sizeof predicted, &crossing, sizeof crossing);
  append_bytes(*m, tree_moves_head, moves);
  return m;
}

tree_moves read_tree_moves(message& m) {
  tree_moves t;
  std::memcpy(&t.predicted, args_of(m), sizeof t.predicted);
  std::memcpy(&t.crossing, args_of(m) + sizeof t.predicted, sizeof t.crossing);
  t.moves = read_bytes<sync_move>(m, tree_moves_head);
  return t;
}

}  // namespace weft::objects::detail
