// A strategy for tests of what the runtime hands a strategy: it keeps every
// instance it is given (g_seen) and moves each migratable object one PE on,
// so that every element lands on a new PE at each step and senders count
// on a new PE each time. register_capture names it for --weft:lb=NAME.
#pragma once
#include <memory>
#include <mutex>
#include <vector>
#include <weft/lb/strategy.hpp>

namespace lb_test {

struct seen_steps {
  std::mutex mu;
  std::vector<weft::lb::instance> steps;
};
inline seen_steps g_seen;

class capture : public weft::lb::strategy {
 public:
  weft::lb::plan balance(const weft::lb::instance& inst, const weft::lb::options&) override {
    {
      std::lock_guard<std::mutex> lock(g_seen.mu);
      g_seen.steps.push_back(inst);
    }
    weft::lb::plan p = weft::lb::current_placement(inst);
    for (std::size_t i = 0; i < p.size(); ++i)
      if (inst.objects[i].migratable) p[i] = (p[i] + 1) % inst.num_pes();
    return p;
  }
};

inline bool register_capture(const char* name) {
  weft::lb::register_strategy(name, [] { return std::make_unique<capture>(); });
  return true;
}

}  // namespace lb_test
