// --weft:lb=hierarchical at run time, the group's level: a group's leader
// between its nodes' leaders and the root (the tree and its steps:
// sync_tree.cpp). It keeps, per node of its group, the node's load less
// what the node offered, and how many records the node offered; it never
// sees a record its nodes keep.
//
// Two rounds of quotas may reach a node in one step, and the group's
// leader runs them one after the other: the root's (what the group
// offers, split among its nodes as the offline strategy's shed_group
// does), then the group's own (its nodes above their share, counting
// what the root gave the group). The offline strategy's levels
// (src/lb/hierarchical.cpp) make the same decisions in the same order, so
// at run time and offline a step agrees up to ties between equal loads.
// With one group the root leads it and the root's round is skipped.
#include <algorithm>
#include <cstring>
#include <vector>
#include "objects/internal.hpp"
#include "weft/base/timer.hpp"

namespace weft::objects::detail {

namespace {

std::vector<double> group_pes(int group) {
  return std::vector<double>(std::size_t(tree_group_nodes(group)), double(node_size()));
}

// Asks the nodes of the group for `amount[k]` each (k: the node in the
// group); those asked for nothing are not asked. Returns how many were.
int ask_nodes(local_collection& lc, int group, const std::vector<double>& amount) {
  int asked = 0;
  for (std::size_t k = 0; k < amount.size(); ++k) {
    if (amount[k] <= 0) continue;
    message_ptr q = new_control_message(lc.ref, index_key{}, op_tree_quota, sizeof(double));
    std::memcpy(args_of(*q), &amount[k], sizeof(double));
    send_object_to_pe((tree_group_first(group) + int(k)) * node_size(), std::move(q));
    ++asked;
  }
  return asked;
}

// The root's round is over: the group's offers go to the root.
void offer_to_root(local_collection& lc, int group) {
  sync_tree_state::group_part& gp = tree_state(lc).group;
  message_ptr r = new_control_message(lc.ref, index_key{}, op_tree_group_offer,
                                      gp.pool.size() * sizeof(sync_record));
  header_of(*r).arg_pe = group;
  append_bytes(*r, 0, gp.pool);
  gp.pool.clear();
  send_object_to_pe(lc.ref.root_pe, std::move(r));
}

// The group's round is over: its pool -- the root's records and its
// nodes' -- goes to its nodes; each node gets the records arriving from
// other nodes, its own that stay, and how many of its own leave.
void share_in_group(local_collection& lc, int group) {
  sync_tree_state::group_part& gp = tree_state(lc).group;
  const int first = tree_group_first(group), nodes = tree_group_nodes(group);
  if (tree_groups() == 1) lc.sync.t_plan = base::wall_ns();
  std::vector<double> loads(gp.pool.size());
  for (std::size_t k = 0; k < gp.pool.size(); ++k) loads[k] = gp.pool[k].load;
  const std::vector<int> to = tree_decisions().share(gp.load, group_pes(group), loads);
  std::vector<std::vector<sync_record>> arriving(std::size_t(nodes), std::vector<sync_record>{});
  std::vector<std::vector<index_key>> staying(std::size_t(nodes), std::vector<index_key>{});
  for (std::size_t k = 0; k < gp.pool.size(); ++k) {
    const sync_record& r = gp.pool[k];
    const int from = node_of(r.pe);
    const bool ours = from >= first && from < first + nodes;
    // share places every record where there are PEs, and every child has.
    const int dest = to[k] >= 0 ? first + to[k] : ours ? from : first;
    if (dest == from)
      staying[std::size_t(dest - first)].push_back(r.key);
    else
      arriving[std::size_t(dest - first)].push_back(r);
  }
  for (int k = 0; k < nodes; ++k) {
    const auto& a = arriving[std::size_t(k)];
    const auto& st = staying[std::size_t(k)];
    const std::uint64_t na = a.size();
    const std::uint64_t leaves = std::uint64_t(gp.offers[std::size_t(k)]) - st.size();
    message_ptr r = new_control_message(
        lc.ref, index_key{}, op_tree_assign,
        2 * sizeof(std::uint64_t) + na * sizeof(sync_record) + st.size() * sizeof(index_key));
    std::byte* p = args_of(*r);
    std::memcpy(p, &leaves, sizeof leaves);
    std::memcpy(p + sizeof leaves, &na, sizeof na);
    append_bytes(*r, 2 * sizeof(std::uint64_t), a);
    append_bytes(*r, 2 * sizeof(std::uint64_t) + na * sizeof(sync_record), st);
    send_object_to_pe((first + k) * node_size(), std::move(r));
  }
  gp.pool.clear();
  gp.load.clear();
  gp.offers.clear();
  gp.own_round = false;
}

}  // namespace

// 3. A node's summary: once every node of the group is in, the group's
// to the root (with one group, the root's part takes it here).
void receive_tree_summary(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state& ts = tree_state(lc);
  sync_tree_state::group_part& gp = ts.group;
  const int group = tree_group_of(h.arg_pe), nodes = tree_group_nodes(group);
  tree_summary s;
  std::memcpy(&s, args_of(*m), sizeof s);
  if (gp.replies == 0) {
    gp.load.assign(std::size_t(nodes), 0.0);
    gp.offers.assign(std::size_t(nodes), 0);
    gp.max_pe = 0;
    gp.records = 0;
  }
  gp.load[std::size_t(h.arg_pe - tree_group_first(group))] = s.load;
  gp.max_pe = std::max(gp.max_pe, s.max_pe);
  gp.records += s.records;
  if (tree_groups() == 1) ++ts.summaries;  // the root leads the only group
  if (++gp.replies < nodes) return;
  gp.replies = 0;
  tree_summary g;
  for (double l : gp.load) g.load += l;
  g.max_pe = gp.max_pe;
  g.records = gp.records;
  if (tree_groups() == 1) {
    tree_root_summary(lc, 0, g);
    return;
  }
  message_ptr r = new_control_message(lc.ref, index_key{}, op_tree_group_summary, sizeof g);
  header_of(*r).arg_pe = group;
  std::memcpy(args_of(*r), &g, sizeof g);
  send_object_to_pe(lc.ref.root_pe, std::move(r));
}

// 4. The root's round: what the group offers, asked of its nodes.
void receive_tree_group_quota(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state::group_part& gp = tree_state(lc).group;
  const int group = tree_group_of(my_node());
  double amount = 0;
  std::memcpy(&amount, args_of(*m), sizeof amount);
  gp.own_round = false;
  gp.pool.clear();
  gp.asked = amount > 0
                 ? ask_nodes(lc, group, tree_decisions().split(gp.load, group_pes(group), amount))
                 : 0;
  if (gp.asked == 0) offer_to_root(lc, group);
}

// 4, 5. A node's offer, in the root's round or the group's.
void receive_tree_offer(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_tree_state::group_part& gp = tree_state(lc).group;
  const int group = tree_group_of(h.arg_pe);
  const std::size_t k = std::size_t(h.arg_pe - tree_group_first(group));
  const std::vector<sync_record> got = read_bytes<sync_record>(*m, 0);
  for (const sync_record& r : got) gp.load[k] -= r.load;
  gp.offers[k] += std::int64_t(got.size());
  gp.pool.insert(gp.pool.end(), got.begin(), got.end());
  if (++gp.replies < gp.asked) return;
  gp.replies = 0;
  if (gp.own_round)
    share_in_group(lc, group);
  else
    offer_to_root(lc, group);
}

// 5. What the root gave the group: the group's own round.
void receive_tree_group_assign(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  tree_group_level(lc, read_bytes<sync_record>(*m, 0));
}

void tree_group_level(local_collection& lc, std::vector<sync_record> incoming) {
  sync_tree_state::group_part& gp = tree_state(lc).group;
  const int group = tree_groups() == 1 ? 0 : tree_group_of(my_node());
  double in = 0;
  for (const sync_record& r : incoming) in += r.load;
  gp.pool = std::move(incoming);
  gp.own_round = true;
  gp.asked = ask_nodes(lc, group, tree_decisions().shed_amounts(gp.load, group_pes(group), in));
  if (gp.asked == 0) share_in_group(lc, group);
}

// 6, 7. A node's moves: with one group straight to the root's part, else
// one message per group to the root once all its nodes' are in.
void receive_tree_moves(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  tree_moves got = read_tree_moves(*m);
  if (tree_groups() == 1) {
    tree_root_moves(lc, got.predicted, got.crossing, got.moves);
    return;
  }
  sync_tree_state::group_part& gp = tree_state(lc).group;
  const int group = tree_group_of(h.arg_pe);
  gp.predicted_max = std::max(gp.predicted_max, got.predicted);
  gp.crossing += got.crossing;
  gp.moves.insert(gp.moves.end(), got.moves.begin(), got.moves.end());
  if (++gp.moved < tree_group_nodes(group)) return;
  send_object_to_pe(lc.ref.root_pe, make_tree_moves(lc, op_tree_group_moves, group,
                                                    gp.predicted_max, gp.crossing, gp.moves));
  gp.moves.clear();
  gp.predicted_max = 0;
  gp.crossing = 0;
  gp.moved = 0;
}

}  // namespace weft::objects::detail
