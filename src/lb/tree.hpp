// The levels of the hierarchical tree (PE -> node -> group -> root), as
// parts: the offline strategy (hierarchical.cpp) runs them one after the
// other in one process; at run time (tree_runtime.cpp, objects'
// sync_tree.cpp) each runs where the tree puts it, on summaries and the
// objects that move through it.
#pragma once
#include <vector>
#include "placement.hpp"

namespace weft::lb::detail {

// Above the nodes, a child sheds when it is a quarter of the tolerance over
// its share: the levels' slack compounds, and the node level spends the
// full tolerance.
inline double tree_upper_tolerance(double tolerance) {
  return 1 + (tolerance - 1) / 4;
}

// What each child of a level sheds: a child above the upper tolerance of
// its share sheds its load less its share, where the share counts the load
// arriving from above (`incoming`, the pool the level's parent gave it) as
// well as the children's. `load` and `cap` (PEs) per child; 0: nothing.
std::vector<double> shed_amounts(const std::vector<double>& load, const std::vector<double>& cap,
                                 double incoming, double tolerance);

// A group asked for `amount` splits it among its nodes (`load`, `cap` per
// node, in order): each is asked for how far it is above its share of
// what the group keeps, until the amount is spoken for. Every node is
// asked at once, so that at run time the group leader needs one round
// with its nodes, not one per node; a node that gives less than asked
// leaves the group short by that much (the levels below even it out).
std::vector<double> split_shed(const std::vector<double>& load, const std::vector<double>& cap,
                               double amount);

// The pool shed by some children goes to the children, heaviest first, each
// where the load per PE after it is least. `load` and `cap` (PEs) per child;
// `load` is updated, `pool` emptied. Returns what each child receives.
std::vector<std::vector<item>> share_pool(std::vector<double>& load, const std::vector<double>& cap,
                                          std::vector<item>& pool);

// About `amount` from `ids` (heaviest first), each not overshooting by more
// than half its load; load_of(id) < 0 skips one (gone already). Appends the
// items given to `out`; returns their total load.
template <class LoadOf>
double shed_heaviest(const std::vector<std::uint32_t>& ids, LoadOf load_of, double amount,
                     std::vector<item>& out) {
  double left = amount;
  for (std::uint32_t id : ids) {
    if (left <= 0) break;
    const double l = load_of(id);
    if (l < 0 || l > 2 * left) continue;
    out.push_back({l, id});
    left -= l;
  }
  return amount - left;
}

}  // namespace weft::lb::detail
