// rotate: every migratable object moves to the next PE (pe + 1 mod P).
// Balances nothing: it exists to exercise migration (every object moves
// every step) in the tests of the migration driver.
#include "builtin.hpp"

namespace weft::lb::detail {
namespace {

plan rotate(const instance& inst, const options&) {
  plan p = current_placement(inst);
  const int np = inst.num_pes();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (inst.objects[i].migratable) p[i] = (p[i] + 1) % np;
  return p;
}

}  // namespace

std::unique_ptr<strategy> make_rotate() {
  return strategy_from(&rotate);
}

}  // namespace weft::lb::detail
