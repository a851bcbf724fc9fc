// refine: moves objects only off PEs above tolerance * the lower bound
// (max(avg, heaviest object)), heaviest first that fit, onto the
// least-loaded PE while it stays within that limit. Nothing moves when
// every PE is within the limit: the fewest migrations, for imbalance that
// is small or local; it cannot fix an imbalance that needs swaps. When
// the receivers run out of room below the limit, it tries again with a
// limit one tolerance step higher (at most 8 tries) and keeps the best.
#include <algorithm>
#include "builtin.hpp"
#include "placement.hpp"

namespace weft::lb::detail {
namespace {

plan refine(const instance& inst, const options& opts) {
  std::vector<double> loads = inst.pe_loads();
  const std::vector<item> items = migratable_by_load(inst);
  std::vector<int> bin(items.size());
  double total = 0;
  for (double l : loads) total += l;
  double limit = total / static_cast<double>(loads.size());
  if (!items.empty()) limit = std::max(limit, items.front().load);
  for (std::size_t k = 0; k < items.size(); ++k) bin[k] = inst.objects[items[k].id].pe;
  refine_with_retries(loads, items, bin, limit, opts.tolerance);
  return placed(inst, items, bin);
}

}  // namespace

std::unique_ptr<strategy> make_refine() {
  return strategy_from(&refine);
}

}  // namespace weft::lb::detail
