// greedy-refine: Greedy's max load M is the bound; every object stays on
// its old PE when that PE stays within tolerance * M, heaviest first, and
// the others go to the least-loaded PE. Same quality as greedy (within the
// tolerance; it falls back to greedy's plan otherwise) with few migrations
// when the load changed little since the last step.
#include "builtin.hpp"
#include "placement.hpp"

namespace weft::lb::detail {
namespace {

plan greedy_refine(const instance& inst, const options& opts) {
  std::vector<double> loads = fixed_loads(inst);
  const std::vector<item> items = migratable_by_load(inst);
  std::vector<int> old(items.size()), out;
  for (std::size_t k = 0; k < items.size(); ++k) old[k] = inst.objects[items[k].id].pe;
  greedy_refine_place(loads, items, old, opts.tolerance, out);
  return placed(inst, items, out);
}

}  // namespace

std::unique_ptr<strategy> make_greedy_refine() {
  return strategy_from(&greedy_refine);
}

}  // namespace weft::lb::detail
