// The shared steps of the hierarchical tree's levels (tree.hpp).
#include "tree.hpp"
#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>

namespace weft::lb::detail {

std::vector<double> shed_amounts(const std::vector<double>& load, const std::vector<double>& cap,
                                 double incoming, double tolerance) {
  std::vector<double> shed(load.size(), 0.0);
  const double total = std::accumulate(load.begin(), load.end(), incoming);
  const double pes = std::accumulate(cap.begin(), cap.end(), 0.0);
  if (pes <= 0) return shed;
  const double per_pe = total / pes;
  for (std::size_t c = 0; c < load.size(); ++c) {
    const double target = cap[c] * per_pe;
    if (cap[c] > 0 && load[c] > target * tree_upper_tolerance(tolerance))
      shed[c] = load[c] - target;
  }
  return shed;
}

std::vector<double> split_shed(const std::vector<double>& load, const std::vector<double>& cap,
                               double amount) {
  std::vector<double> ask(load.size(), 0.0);
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  const double pes = std::accumulate(cap.begin(), cap.end(), 0.0);
  if (pes <= 0 || amount <= 0) return ask;
  const double keep_per_pe = (total - amount) / pes;
  double left = amount;
  for (std::size_t n = 0; n < load.size() && left > 0; ++n) {
    const double excess = load[n] - cap[n] * keep_per_pe;
    if (excess <= 0) continue;
    ask[n] = std::min(excess, left);
    left -= ask[n];
  }
  return ask;
}

std::vector<std::vector<item>> share_pool(std::vector<double>& load, const std::vector<double>& cap,
                                          std::vector<item>& pool) {
  std::vector<std::vector<item>> got(load.size());
  sort_by_load(pool);
  // Children of unequal size (a last, smaller node or group): an item goes
  // where the load per PE after it is least, by a scan (few children).
  if (std::adjacent_find(cap.begin(), cap.end(), std::not_equal_to<>()) != cap.end()) {
    for (const item& it : pool) {
      std::size_t best = load.size();
      for (std::size_t c = 0; c < load.size(); ++c)
        if (cap[c] > 0 && (best == load.size() ||
                           (load[c] + it.load) / cap[c] < (load[best] + it.load) / cap[best]))
          best = c;
      load[best] += it.load;
      got[best].push_back(it);
    }
    pool.clear();
    return got;
  }
  using entry = std::pair<double, std::size_t>;  // (load per PE, child)
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap;
  for (std::size_t c = 0; c < load.size(); ++c)
    if (cap[c] > 0) heap.push({load[c] / cap[c], c});
  for (const item& it : pool) {
    const std::size_t c = heap.top().second;
    heap.pop();
    load[c] += it.load;
    got[c].push_back(it);
    heap.push({load[c] / cap[c], c});
  }
  pool.clear();
  return got;
}

}  // namespace weft::lb::detail
