// greedy: the heaviest object to the least-loaded PE, until none is left.
// O(n log n) for the sort and O(n log p) for the heap of PEs; background
// load and non-migratable objects are in each PE's starting load. It
// ignores where objects are (most move), and is within 4/3 of the optimal
// max load (Graham's LPT bound), usually far closer.
#include "builtin.hpp"
#include "placement.hpp"

namespace weft::lb::detail {
namespace {

plan greedy(const instance& inst, const options&) {
  std::vector<double> loads = fixed_loads(inst);
  const std::vector<item> items = migratable_by_load(inst);
  std::vector<int> out;
  greedy_place(loads, items, out);
  return placed(inst, items, out);
}

}  // namespace

std::unique_ptr<strategy> make_greedy() {
  return strategy_from(&greedy);
}

}  // namespace weft::lb::detail
