// Checks that a per-operation count does not grow faster than O(log P)
// (DESIGN.md, lesson 13), from figures taken at 2, 4, 8 and 16 PEs (the
// counts of weft/base/op_counts.hpp divided by the operations). A 2-core
// machine runs 16 PEs oversubscribed, which is fine for counting.
//
// The check: each doubling of P from 4 on may add no more than the first
// doubling (2 -> 4) did (nothing, if it lowered the count), plus `slack`.
// a + b log2 P adds b per doubling and passes; a + c P adds 2c, 4c, 8c and
// fails once c is above the slack, whatever the constant a (a plain ratio
// to the count at 2 PEs would let a large a hide the P term).
#pragma once
#include <gtest/gtest.h>
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace weft_test {

inline ::testing::AssertionResult grows_at_most_log(const std::string& what,
                                                    const std::map<int, double>& per_op,
                                                    double slack) {
  std::ostringstream table;
  table << what << ":";
  for (const auto& [p, v] : per_op) table << "  P=" << p << ": " << v;
  std::printf("%s\n", table.str().c_str());
  if (per_op.size() < 3) return ::testing::AssertionFailure() << "need figures at 3 or more P";
  auto it = per_op.begin();
  const double v0 = it->second;
  ++it;
  // A first doubling that lowered the count is timing's noise (how many
  // chunks the caller ran itself, who woke when), not a falling cost: it
  // counts as adding nothing.
  const double first_step = std::max(0.0, it->second - v0);
  double prev = it->second;
  for (++it; it != per_op.end(); ++it) {
    const double step = it->second - prev;
    if (step > first_step + slack)
      return ::testing::AssertionFailure()
             << table.str() << ": going to P=" << it->first << " added " << step
             << ", more than the first doubling's " << first_step << " + " << slack
             << " (O(log P) adds the same per doubling)";
    prev = it->second;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace weft_test
