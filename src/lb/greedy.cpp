// greedy: the heaviest object to the least-loaded PE, until none is left.
// O(n log n) for the sort and O(n log p) for the heap of PEs; background
// load and non-migratable objects are in each PE's starting load. It
// ignores where objects are (most move), and is within 4/3 of the optimal
// max load (Graham's LPT bound), usually far closer.
#include "builtin.hpp"
#include "placement.hpp"

namespace weft::lb::detail {
namespace {

class greedy final : public strategy {
 public:
  plan balance(const instance& inst, const options&) override {
    plan p = current_placement(inst);
    std::vector<double> loads = fixed_loads(inst);
    const std::vector<item> items = migratable_by_load(inst);
    std::vector<int> out;
    greedy_place(loads, items, out);
    for (std::size_t k = 0; k < items.size(); ++k) p[items[k].id] = out[k];
    return p;
  }
};

}  // namespace

std::unique_ptr<strategy> make_greedy() { return std::make_unique<greedy>(); }

}  // namespace weft::lb::detail
