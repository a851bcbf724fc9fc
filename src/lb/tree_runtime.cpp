// The lb layer's decisions in the hierarchical tree at run time
// (objects' src/objects/sync_tree.cpp carries the tree out): what the
// root asks each group to shed and a group each of its nodes, where the
// shed records go, which records a node sheds, and how a node places its
// records on its PEs -- the levels of the offline strategy
// (hierarchical.cpp, tree.hpp), each run where the tree puts it.
#include <algorithm>
#include <numeric>
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
  shed_heaviest(ids, [&](std::uint32_t id) { return records[id].load; }, amount, out);
  std::vector<std::uint32_t> picked;
  picked.reserve(out.size());
  for (const item& it : out) picked.push_back(it.id);
  return picked;
}

// The node's PEs are 0..pes-1 of a small instance; one more PE stands for
// "another node", where the records that arrive are now.
od::balance_plan within(const std::vector<od::sync_record>& records, int first_pe, int pes) {
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
  od::set_tree_balancer(t);
}

}  // namespace weft::lb::detail
