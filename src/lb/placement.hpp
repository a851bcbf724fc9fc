// What the strategies share (src/lb only): objects sorted by load, the
// greedy placement on a heap of bins, the keep-where-it-fits pass of
// greedy-refine, the refine pass, and balancing the PEs of one node (used
// by node-aware and hierarchical as their lowest level).
//
// A "bin" is a PE or a node, by index into a loads array that the caller
// owns and that each helper updates as it places.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "weft/lb/strategy.hpp"

namespace weft::lb::detail {

struct item {
  double load;
  std::uint32_t id;  // object index in the instance
};

// Background plus non-migratable objects, per PE.
std::vector<double> fixed_loads(const instance& inst);
// The migratable objects, heaviest first (ties by id: deterministic).
std::vector<item> migratable_by_load(const instance& inst);
void sort_by_load(std::vector<item>& items);

// Places `items` (heaviest first) one by one on the least-loaded bin:
// out[k] = bin of items[k]; loads updated. O(n log bins).
void greedy_place(std::vector<double>& loads, const std::vector<item>& items,
                  std::vector<int>& out);

// greedy-refine on bins: old[k] is the bin items[k] is on now, or -1 (it
// arrives from elsewhere). Greedy's max M is the bound; each item stays on
// its old bin when that bin stays within tolerance * M, the rest go
// greedily; if that ends above tolerance * M, greedy's placement is taken.
void greedy_refine_place(std::vector<double>& loads, const std::vector<item>& items,
                         const std::vector<int>& old, double tolerance, std::vector<int>& out);

// refine on bins: loads already include every item on its bin (bin[k]);
// items leave bins above `limit` (heaviest first that fit) for the
// least-loaded bin while that stays within `limit`. bin[] is updated.
void refine_place(std::vector<double>& loads, const std::vector<item>& items, std::vector<int>& bin,
                  double limit);

// refine_place at limit * tolerance; when a donor is still above it (the
// receivers ran out of room: donors go one after the other, so the last
// ones find the receivers full), again from the start with the limit one
// tolerance step higher, at most 8 tries; keeps the plan with the lowest
// max load (the fewest moves on a tie). loads and bin as refine_place.
void refine_with_retries(std::vector<double>& loads, const std::vector<item>& items,
                         std::vector<int>& bin, double limit, double tolerance);

// An edge between two items of a caller's list (indices into it), with
// the weight the partitioner sees: bytes, or messages where no bytes were
// counted.
struct weighted_edge {
  std::uint32_t a, b;
  double weight;
};
inline double edge_weight(const edge& e) {
  return e.bytes > 0 ? double(e.bytes) : double(e.messages);
}
// The instance's edges between two of `items`, by their index there.
std::vector<weighted_edge> item_edges(const instance& inst, const std::vector<item>& items);

// comm on bins (comm.cpp): METIS partitions `items` into one part per bin
// on `edges`, each bin's part sized for what it carries already (`loads`:
// fixed loads, updated as items are placed); parts go to the bins that
// hold most of their load now (old[k]: items[k]'s bin, -1: it arrives
// from elsewhere), then a refine pass at bound * tolerance. out[k]: bin.
void partition_place(std::vector<double>& loads, const std::vector<item>& items,
                     const std::vector<int>& old, const std::vector<weighted_edge>& edges,
                     double bound, const options& opts, std::vector<int>& out);

// Per object, the indices of the instance's edges that touch it: built
// once by a strategy whose node level is comm, so that each node reads its
// own objects' edges only.
std::vector<std::vector<std::uint32_t>> edges_by_object(const instance& inst);

// Balances the objects `ids` (migratable, now assigned to the node whose
// PEs are `pes`) across those PEs with strategy `inner` ("greedy",
// "greedy-refine", "refine" or "comm": the instance's edges between `ids`,
// others ignored; `by_object`, edges_by_object(inst), or null to scan
// every edge); an object already on one of `pes` counts as there. `fixed`
// is fixed_loads(inst). Writes p[id].
void balance_node(const instance& inst, const std::vector<int>& pes,
                  const std::vector<std::uint32_t>& ids, const std::vector<double>& fixed,
                  const options& opts, plan& p,
                  const std::vector<std::vector<std::uint32_t>>* by_object = nullptr);

// The instance seen by node: each node's PEs, its load (background and
// objects, summed over its PEs) and its PE count.
struct node_totals {
  std::vector<std::vector<int>> pes;
  std::vector<double> load, cap;
};
node_totals totals_by_node(const instance& inst);

// The current placement with items[k] moved to bin[k] (bins are PEs).
plan placed(const instance& inst, const std::vector<item>& items, const std::vector<int>& bin);

// Fatal unless `inner` is one balance_node accepts; names the caller.
void check_inner(const char* strategy, const std::string& inner);

}  // namespace weft::lb::detail
