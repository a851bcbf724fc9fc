// random: every migratable object to a PE drawn uniformly (seeded by
// options::seed, so a run is repeatable). Balances only on average: it
// exists to exercise migration with an irregular pattern.
#include <random>
#include "builtin.hpp"

namespace weft::lb::detail {
namespace {

plan random_placement(const instance& inst, const options& opts) {
  plan p = current_placement(inst);
  std::mt19937_64 rng(opts.seed);
  std::uniform_int_distribution<int> pick(0, inst.num_pes() - 1);
  for (std::size_t i = 0; i < p.size(); ++i)
    if (inst.objects[i].migratable) p[i] = pick(rng);
  return p;
}

}  // namespace

std::unique_ptr<strategy> make_random() {
  return strategy_from(&random_placement);
}

}  // namespace weft::lb::detail
