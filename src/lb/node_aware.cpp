// node-aware: two-level balancing (paper 001, §V). First between nodes, on
// node totals: objects leave nodes whose load per PE is above a quarter of
// the tolerance over the average, heaviest first that fit, for the node with the least load
// per PE while it stays within its limit (a refine on nodes, so objects
// cross the network only to fix node imbalance). Then inside each node,
// across its PEs, with options::inner (refine by default; comm: by the
// edges between the node's objects): moves
// inside a node are cheap, moves between nodes are not.
#include <algorithm>
#include <set>
#include "builtin.hpp"
#include "placement.hpp"

namespace weft::lb::detail {
namespace {

plan node_aware(const instance& inst, const options& opts) {
  check_inner("node-aware", opts.inner);
  plan p = current_placement(inst);
  const int nn = inst.num_nodes();
  node_totals nodes = totals_by_node(inst);
  const std::vector<std::vector<int>>& node_pes = nodes.pes;
  std::vector<double>& load = nodes.load;
  const std::vector<double>& cap = nodes.cap;
  double total = 0;
  for (double l : load) total += l;
  const std::vector<item> items = migratable_by_load(inst);
  const double per_pe = total / static_cast<double>(inst.num_pes());
  const double heaviest = items.empty() ? 0 : items.front().load;
  // Between nodes, a quarter of the tolerance: the node level's slack
  // adds to the one inside the node, which spends the whole tolerance.
  const double node_tolerance = 1 + (opts.tolerance - 1) / 4;
  auto limit = [&](std::size_t n) { return std::max(cap[n] * per_pe, heaviest) * node_tolerance; };

  // Level 1: refine between nodes, on load per PE.
  std::vector<int> node_of(items.size());
  std::vector<std::vector<std::size_t>> on_node(static_cast<std::size_t>(nn));
  for (std::size_t k = 0; k < items.size(); ++k) {
    node_of[k] = inst.pes[static_cast<std::size_t>(inst.objects[items[k].id].pe)].node;
    on_node[static_cast<std::size_t>(node_of[k])].push_back(k);  // heaviest first
  }
  std::set<std::pair<double, int>> receivers;  // (load per PE, node)
  for (std::size_t n = 0; n < load.size(); ++n)
    if (cap[n] > 0) receivers.insert({load[n] / cap[n], static_cast<int>(n)});
  for (std::size_t d = 0; d < load.size(); ++d) {
    if (cap[d] == 0 || load[d] <= limit(d)) continue;
    for (std::size_t k : on_node[d]) {
      if (load[d] <= limit(d)) break;
      auto it = receivers.begin();
      if (it == receivers.end()) break;
      const auto r = static_cast<std::size_t>(it->second);
      if (r == d || load[r] + items[k].load > limit(r)) continue;
      receivers.erase(it);
      receivers.erase({load[d] / cap[d], static_cast<int>(d)});
      load[r] += items[k].load;
      load[d] -= items[k].load;
      node_of[k] = static_cast<int>(r);
      receivers.insert({load[r] / cap[r], static_cast<int>(r)});
      receivers.insert({load[d] / cap[d], static_cast<int>(d)});
    }
  }

  // Level 2: inside each node.
  std::vector<std::vector<std::uint32_t>> ids(static_cast<std::size_t>(nn));
  for (std::size_t k = 0; k < items.size(); ++k)
    ids[static_cast<std::size_t>(node_of[k])].push_back(items[k].id);
  const std::vector<double> fixed = fixed_loads(inst);
  std::vector<std::vector<std::uint32_t>> by_object;
  if (opts.inner == "comm") by_object = edges_by_object(inst);
  for (std::size_t n = 0; n < ids.size(); ++n)
    balance_node(inst, node_pes[n], ids[n], fixed, opts, p,
                 opts.inner == "comm" ? &by_object : nullptr);
  return p;
}

}  // namespace

std::unique_ptr<strategy> make_node_aware() {
  return strategy_from(&node_aware);
}

}  // namespace weft::lb::detail
