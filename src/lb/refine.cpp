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

class refine final : public strategy {
 public:
  plan balance(const instance& inst, const options& opts) override {
    plan p = current_placement(inst);
    std::vector<double> loads = inst.pe_loads();
    const std::vector<item> items = migratable_by_load(inst);
    std::vector<int> bin(items.size());
    double total = 0;
    for (double l : loads) total += l;
    double limit = total / static_cast<double>(loads.size());
    if (!items.empty()) limit = std::max(limit, items.front().load);
    for (std::size_t k = 0; k < items.size(); ++k) bin[k] = inst.objects[items[k].id].pe;
    // Donors go one after the other: with little room left, the first ones
    // fill the receivers and the last ones keep their excess. Then the limit
    // rises by the tolerance's step and the pass runs again, from the start;
    // the plan with the lowest max load wins (fewest migrations on a tie).
    const double step = std::max(opts.tolerance - 1, 0.01);
    std::vector<int> best = bin;
    double best_max = *std::max_element(loads.begin(), loads.end());
    std::size_t best_moves = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {
      const double l = limit * (opts.tolerance + step * attempt);
      std::vector<double> trial_loads = loads;
      std::vector<int> trial = bin;
      refine_place(trial_loads, items, trial, l);
      const double max = *std::max_element(trial_loads.begin(), trial_loads.end());
      std::size_t moves = 0;
      for (std::size_t k = 0; k < trial.size(); ++k) moves += trial[k] != bin[k];
      if (max < best_max || (max == best_max && moves < best_moves)) {
        best = std::move(trial);
        best_max = max;
        best_moves = moves;
      }
      if (max <= l) break;  // every donor within the limit: a higher one only moves more
    }
    for (std::size_t k = 0; k < items.size(); ++k) p[items[k].id] = best[k];
    return p;
  }
};

}  // namespace

std::unique_ptr<strategy> make_refine() { return std::make_unique<refine>(); }

}  // namespace weft::lb::detail
