// The built-in strategies' factories, one per file, which the registry
// (registry.cpp) adds under their --weft:lb names at first use.
#pragma once
#include <cstdint>
#include <memory>
#include "weft/lb/strategy.hpp"

namespace weft::lb::detail {

// The built-in strategies are plain functions; the adapter makes one a
// strategy (a strategy that keeps state between its steps, such as
// hierarchical's levels, is a class of its own).
using balance_fn = plan (*)(const instance&, const options&);
std::unique_ptr<strategy> strategy_from(balance_fn balance);

std::unique_ptr<strategy> make_comm();
std::unique_ptr<strategy> make_greedy();
std::unique_ptr<strategy> make_greedy_refine();
std::unique_ptr<strategy> make_refine();
std::unique_ptr<strategy> make_node_aware();
std::unique_ptr<strategy> make_hierarchical();
std::unique_ptr<strategy> make_rotate();
std::unique_ptr<strategy> make_random();

// The hierarchical tree's decisions at run time (tree_runtime.cpp), given
// to the objects layer's balancing steps.
void install_tree_runtime();
// Whether --weft:lb-dump writes step `step` (runtime.cpp): the tree then
// gathers that step's whole snapshot at the root.
bool dumps_step(std::uint64_t step);

}  // namespace weft::lb::detail
