// Instances with known answers, shared by the lb tests.
#pragma once
#include <vector>
#include <weft/lb/evaluate.hpp>
#include <weft/lb/instance.hpp>
#include <weft/lb/strategy.hpp>

namespace lbtest {

// `loads` all on PE `on`, `pes` PEs of `per_node` to a node.
inline weft::lb::instance objects_on(const std::vector<double>& loads, int pes, int per_node = 1,
                                     int on = 0) {
  weft::lb::instance inst;
  for (int i = 0; i < pes; ++i) inst.pes.push_back({0.0, i / per_node});
  for (double l : loads) inst.objects.push_back({l, on, true, 100});
  return inst;
}

inline double max_load(const weft::lb::instance& inst, const weft::lb::plan& p) {
  return weft::lb::evaluate(inst, p).max_load;
}

// The strategies that balance (rotate and random only move).
inline const std::vector<const char*>& balancers() {
  static const std::vector<const char*> names = {"greedy",     "greedy-refine", "refine",
                                                 "node-aware", "hierarchical",  "comm"};
  return names;
}

inline const std::vector<const char*>& all_builtin() {
  static const std::vector<const char*> names = {"greedy",     "greedy-refine", "refine",
                                                 "node-aware", "hierarchical",  "rotate",
                                                 "random",     "comm"};
  return names;
}

}  // namespace lbtest
