// The lb layer's decisions in the hierarchical tree at run time
// (objects' src/objects/sync_tree.cpp carries the tree out): what the
// root asks each group to shed and a group each of its nodes, where the
// shed records go, which records a node sheds, and how a node places its
// records on its PEs (--weft:lb-tree-inner) -- the levels of the offline
// strategy (hierarchical.cpp, tree.hpp), each run where the tree puts it
// -- and which steps are dumped, for which the tree gathers the whole
// snapshot at the root instead (runtime.cpp places it).
#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>
#include "lb/builtin.hpp"
#include "lb/placement.hpp"
#include "lb/tree.hpp"
#include "weft/base/error.hpp"
#include "weft/core/config.hpp"
#include "weft/core/run.hpp"
#include "weft/objects/detail/runtime.hpp"

namespace weft::lb::detail {

namespace od = weft::objects::detail;

namespace {

double tolerance() {
  return weft::config().lb_tolerance;
}

std::vector<double> amounts(const std::vector<double>& load, const std::vector<double>& pes,
                            double incoming) {
  return shed_amounts(load, pes, incoming, tolerance());
}

std::vector<int> share(std::vector<double> load, const std::vector<double>& pes,
                       const std::vector<double>& shed) {
  std::vector<item> pool(shed.size());
  for (std::size_t k = 0; k < shed.size(); ++k) pool[k] = {shed[k], std::uint32_t(k)};
  const std::vector<std::vector<item>> got = share_pool(load, pes, pool);
  std::vector<int> to(shed.size(), -1);
  for (std::size_t c = 0; c < got.size(); ++c)
    for (const item& it : got[c]) to[it.id] = int(c);
  return to;
}

std::vector<std::uint32_t> pick(const std::vector<od::sync_record>& records, double amount,
                                const std::vector<std::uint32_t>& offered) {
  std::vector<bool> gone(records.size(), false);
  for (std::uint32_t i : offered) gone[i] = true;
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < records.size(); ++i)
    if (records[i].migratable && !gone[i]) ids.push_back(i);
  std::sort(ids.begin(), ids.end(), [&](std::uint32_t a, std::uint32_t b) {
    return records[a].load > records[b].load || (records[a].load == records[b].load && a < b);
  });
  std::vector<item> out;
  shed_heaviest(
      ids, [&](std::uint32_t id) { return records[id].load; }, amount, out);
  std::vector<std::uint32_t> picked;
  picked.reserve(out.size());
  for (const item& it : out) picked.push_back(it.id);
  return picked;
}

// The node's communication records as edges between the records it
// places (--weft:lb-tree-inner=comm): those between two elements of the
// step's array, summed per unordered pair. What an arriving element sent
// was counted on its old node and is not here: only what this node's
// elements sent to it joins it to them.
std::vector<edge> node_edges(const std::vector<od::sync_record>& records,
                             const std::vector<od::comm_record>& comm, std::uint64_t collection) {
  std::unordered_map<index_key, std::uint32_t, index_key_hash> at;
  at.reserve(records.size());
  for (std::uint32_t i = 0; i < records.size(); ++i) at.emplace(records[i].key, i);
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> edge_of;
  std::vector<edge> edges;
  for (const od::comm_record& c : comm) {
    if (c.from_collection != collection || c.to_collection != collection) continue;
    auto from = at.find(c.from), to = at.find(c.to);
    if (from == at.end() || to == at.end() || from->second == to->second) continue;
    const std::pair<std::uint32_t, std::uint32_t> ab = std::minmax(from->second, to->second);
    auto [it, fresh] = edge_of.try_emplace(ab, edges.size());
    if (fresh) edges.push_back({ab.first, ab.second, 0, 0});
    edges[it->second].messages += c.messages;
    edges[it->second].bytes += c.bytes;
  }
  return edges;
}

// The node's PEs are 0..pes-1 of a small instance; one more PE stands for
// "another node", where the records that arrive are now.
od::balance_plan within(const std::vector<od::sync_record>& records,
                        const std::vector<od::comm_record>& comm, std::uint64_t collection,
                        int first_pe, int pes) {
  const runtime_config& cfg = weft::config();
  instance inst;
  inst.pes.resize(std::size_t(pes) + 1);
  inst.objects.reserve(records.size());
  for (const od::sync_record& r : records) {
    const bool here = r.pe >= first_pe && r.pe < first_pe + pes;
    const int pe = here ? r.pe - first_pe : pes;
    if (here && r.background >= 0) {
      double& b = inst.pes[std::size_t(pe)].background;
      b = std::max(b, r.background);
    }
    inst.objects.push_back({r.load, pe, r.migratable != 0, r.bytes});
  }
  std::vector<int> local(static_cast<std::size_t>(pes));
  std::iota(local.begin(), local.end(), 0);
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < inst.objects.size(); ++i)
    if (inst.objects[i].migratable) ids.push_back(i);
  options opts;
  opts.tolerance = tolerance();
  opts.inner = cfg.lb_tree_inner;
  opts.seed = std::uint64_t(first_pe) + 1;
  if (opts.inner == "comm") inst.edges = node_edges(records, comm, collection);
  plan p = current_placement(inst);
  balance_node(inst, local, ids, fixed_loads(inst), opts, p);
  od::balance_plan out;
  out.pe.resize(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == pes)
      base::fatal("lb: hierarchical: a record arriving at the node of PEs %d..%d was not placed",
                  first_pe, first_pe + pes - 1);
    out.pe[i] = p[i] + first_pe;
  }
  const std::vector<double> loads = pe_loads(inst, p);
  out.predicted_max = *std::max_element(loads.begin(), loads.begin() + pes);
  return out;
}

}  // namespace

void install_tree_runtime() {
  od::tree_balancer t;
  t.shed_amounts = &amounts;
  t.split = &split_shed;
  t.share = &share;
  t.pick = &pick;
  t.within = &within;
  t.whole = &dumps_step;
  od::set_tree_balancer(t);
}

}  // namespace weft::lb::detail
