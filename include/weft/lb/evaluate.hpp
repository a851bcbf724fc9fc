// What a plan achieves: the figures --weft:lb-stats and weft-lbsim print.
//
// Loads are per PE (background plus the objects placed there). The lower
// bound on any plan's max load is max(avg, heaviest migratable object,
// each PE's fixed load: background plus its non-migratable objects);
// max / lower_bound is the quality figure of docs/lb.md.
#pragma once
#include <cstdint>
#include "weft/base/export.hpp"
#include "weft/lb/instance.hpp"

namespace weft::lb {

struct metrics {
  double max_load = 0, avg_load = 0, min_load = 0, stddev = 0;
  double lower_bound = 0;        // see above; 0 for an empty instance
  std::uint64_t migrations = 0;  // objects whose PE changes
  std::uint64_t bytes_moved = 0;
  // Communication on edges whose ends are on different PEs / nodes.
  std::uint64_t off_pe_messages = 0, off_pe_bytes = 0;
  std::uint64_t off_node_messages = 0, off_node_bytes = 0;
  double strategy_seconds = 0;  // copied from the caller

  // max / avg (1 when balanced; 0 for no load at all).
  double imbalance() const { return avg_load > 0 ? max_load / avg_load : 0; }
  // max / lower_bound (1 is optimal).
  double quality() const { return lower_bound > 0 ? max_load / lower_bound : 0; }
};

// The figures of `p` on `inst` (p must be valid: see validate_plan).
WEFT_API metrics evaluate(const instance& inst, const plan& p, double strategy_seconds = 0);

// max(avg, heaviest migratable object, max fixed load per PE).
WEFT_API double lower_bound(const instance& inst);

}  // namespace weft::lb
