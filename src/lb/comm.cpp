// comm: communication-aware placement. METIS partitions the graph of the
// migratable objects (vertices weighted by load, edges by bytes, or by
// messages where no bytes were counted) into one part per PE, so that
// heavily communicating objects share a PE (and so a node); the parts are
// sized for what each PE already carries (background, objects that cannot
// move). Parts are then matched to the PEs that already hold most of their
// load, to move little, and a refine pass takes the max load back within
// the tolerance of the lower bound where the partitioner left it above.
#include <metis.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include "builtin.hpp"
#include "placement.hpp"
#include "weft/base/error.hpp"
#include "weft/lb/evaluate.hpp"

namespace weft::lb::detail {
namespace {

// METIS takes integer weights, and their sums must fit its 32-bit
// integers: loads and bytes scaled to 1..scale with scale * count < 2^30.
double weight_scale(std::size_t count) {
  return std::max(1.0, std::min(1e6, double(1 << 30) / double(std::max<std::size_t>(count, 1))));
}

idx_t scaled(double v, double max, double scale) {
  if (max <= 0) return 1;
  return std::max<idx_t>(1, idx_t(std::llround(v / max * scale)));
}

const char* metis_status(int s) {
  switch (s) {
    case METIS_ERROR_INPUT:
      return "an input error";
    case METIS_ERROR_MEMORY:
      return "out of memory";
    default:
      return "an error";
  }
}

}  // namespace

void partition_place(std::vector<double>& loads, const std::vector<item>& items,
                     const std::vector<int>& old, const std::vector<weighted_edge>& edges,
                     double bound, const options& opts, std::vector<int>& out) {
  const int np = int(loads.size());
  const std::size_t nv = items.size();
  out.assign(nv, 0);
  if (nv == 0) return;
  if (np <= 1) {
    for (std::size_t v = 0; v < nv; ++v) loads[0] += items[v].load;
    return;
  }
  // Edges between two items, both ways, summed per pair.
  std::vector<std::map<std::uint32_t, double>> adj(nv);
  double max_edge = 0;
  for (const weighted_edge& e : edges) {
    if (e.a == e.b || e.weight <= 0) continue;
    const double ab = adj[e.a][e.b] += e.weight;
    adj[e.b][e.a] += e.weight;
    max_edge = std::max(max_edge, ab);
  }
  std::vector<idx_t> xadj(nv + 1, 0), adjncy, adjwgt, vwgt(nv);
  double max_load = 0;
  for (const item& it : items) max_load = std::max(max_load, it.load);
  std::size_t arcs = 0;
  for (const auto& a : adj) arcs += a.size();
  const double vscale = weight_scale(nv), escale = weight_scale(arcs);
  for (std::size_t v = 0; v < nv; ++v) {
    vwgt[v] = scaled(items[v].load, max_load, vscale);
    for (const auto& [u, w] : adj[v]) {
      adjncy.push_back(idx_t(u));
      adjwgt.push_back(scaled(w, max_edge, escale));
    }
    xadj[v + 1] = idx_t(adjncy.size());
  }

  // Each bin's share: what would bring it to the average, given what it
  // carries already.
  double total = 0;
  for (double l : loads) total += l;
  for (const item& it : items) total += it.load;
  const double goal = total / np;
  std::vector<real_t> tpwgts(static_cast<std::size_t>(np));
  double free_sum = 0;
  for (int q = 0; q < np; ++q) free_sum += std::max(0.0, goal - loads[std::size_t(q)]);
  bool uneven = false;
  for (int q = 0; q < np; ++q) {
    const double f =
        free_sum > 0 ? std::max(0.0, goal - loads[std::size_t(q)]) / free_sum : 1.0 / np;
    tpwgts[std::size_t(q)] = real_t(f);
    uneven |= std::fabs(f - 1.0 / np) > 1e-9;
  }
  // METIS refuses a part of share 0 (a bin already full): each gets a
  // little, and the shares add up to 1.
  constexpr real_t least_share = 1e-4f;
  real_t sum = 0;
  for (real_t& t : tpwgts) sum += (t = std::max(t, least_share));
  for (real_t& t : tpwgts) t /= sum;

  idx_t nvtxs = idx_t(nv), ncon = 1, nparts = np, objval = 0;
  real_t ubvec = real_t(std::max(1.001, opts.tolerance));
  idx_t metis_opts[METIS_NOPTIONS];
  METIS_SetDefaultOptions(metis_opts);
  metis_opts[METIS_OPTION_SEED] = idx_t(opts.seed % 1000003);
  metis_opts[METIS_OPTION_NUMBERING] = 0;
  std::vector<idx_t> part(nv, 0);
  if (nv >= std::size_t(np)) {
    const int status =
        METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.empty() ? nullptr : adjncy.data(),
                            vwgt.data(), nullptr, adjwgt.empty() ? nullptr : adjwgt.data(), &nparts,
                            tpwgts.data(), &ubvec, metis_opts, &objval, part.data());
    if (status != METIS_OK)
      base::fatal(
          "lb: strategy 'comm': METIS_PartGraphKway failed with %s (%d) on %zu objects, "
          "%d PEs",
          metis_status(status), status, nv, np);
  } else {
    // Fewer objects than bins: nothing to partition; each its own part.
    for (std::size_t v = 0; v < nv; ++v) part[v] = idx_t(v);
  }

  // Parts to bins: the largest overlaps first (load already on the bin), so
  // that few objects move. Only when the shares are equal: a part sized for
  // one bin's room goes to that bin otherwise.
  std::vector<int> bin_of_part(static_cast<std::size_t>(np));
  for (int q = 0; q < np; ++q) bin_of_part[std::size_t(q)] = q;
  if (!uneven) {
    std::map<std::pair<int, int>, double> overlap;
    for (std::size_t v = 0; v < nv; ++v)
      if (old[v] >= 0) overlap[{int(part[v]), old[v]}] += items[v].load;
    std::vector<std::tuple<double, int, int>> order;
    for (const auto& [k, w] : overlap) order.emplace_back(w, k.first, k.second);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
      return std::make_pair(std::get<1>(a), std::get<2>(a)) <
             std::make_pair(std::get<1>(b), std::get<2>(b));
    });
    std::vector<int> assigned(static_cast<std::size_t>(np), -1);
    std::vector<bool> taken(static_cast<std::size_t>(np), false);
    for (const auto& [w, q, b] : order) {
      if (assigned[std::size_t(q)] >= 0 || taken[std::size_t(b)]) continue;
      assigned[std::size_t(q)] = b;
      taken[std::size_t(b)] = true;
    }
    int next_free = 0;
    for (int q = 0; q < np; ++q) {
      if (assigned[std::size_t(q)] >= 0) continue;
      while (taken[std::size_t(next_free)]) ++next_free;
      assigned[std::size_t(q)] = next_free;
      taken[std::size_t(next_free)] = true;
    }
    bin_of_part = assigned;
  }

  for (std::size_t v = 0; v < nv; ++v) {
    out[v] = bin_of_part[std::size_t(part[v])];
    loads[std::size_t(out[v])] += items[v].load;
  }
  // Where the partitioner left a bin above the tolerance, move the fewest
  // objects off it.
  refine_with_retries(loads, items, out, bound, opts.tolerance);
}

std::vector<weighted_edge> item_edges(const instance& inst, const std::vector<item>& items) {
  std::vector<std::int64_t> vertex_of(inst.objects.size(), -1);
  for (std::size_t k = 0; k < items.size(); ++k) vertex_of[items[k].id] = std::int64_t(k);
  std::vector<weighted_edge> out;
  for (const edge& e : inst.edges) {
    const std::int64_t a = vertex_of.at(e.a), b = vertex_of.at(e.b);
    if (a >= 0 && b >= 0) out.push_back({std::uint32_t(a), std::uint32_t(b), edge_weight(e)});
  }
  return out;
}

namespace {

plan comm(const instance& inst, const options& opts) {
  const int np = inst.num_pes();
  std::vector<double> loads = fixed_loads(inst);
  const std::vector<item> items = migratable_by_load(inst);
  if (np <= 1 || items.empty()) return current_placement(inst);
  // Vertices: the migratable objects, by their index in `items`.
  std::vector<int> old(items.size()), bin;
  for (std::size_t k = 0; k < items.size(); ++k) old[k] = inst.objects[items[k].id].pe;
  partition_place(loads, items, old, item_edges(inst, items), lower_bound(inst), opts, bin);
  return placed(inst, items, bin);
}

}  // namespace

std::unique_ptr<strategy> make_comm() {
  return strategy_from(&comm);
}

}  // namespace weft::lb::detail
