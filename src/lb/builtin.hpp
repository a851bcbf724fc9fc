// The built-in strategies' factories, one per file, which the registry
// (registry.cpp) adds under their --weft:lb names at first use.
#pragma once
#include <memory>
#include "weft/lb/strategy.hpp"

namespace weft::lb::detail {

std::unique_ptr<strategy> make_greedy();
std::unique_ptr<strategy> make_greedy_refine();
std::unique_ptr<strategy> make_refine();
std::unique_ptr<strategy> make_node_aware();
std::unique_ptr<strategy> make_hierarchical();
std::unique_ptr<strategy> make_rotate();
std::unique_ptr<strategy> make_random();

}  // namespace weft::lb::detail
