// The strategies by name, the plan check and the timed call (strategy.hpp).
// The built-in strategies are added at first use of the registry, so a
// static library needs no initialisation order.
#include <algorithm>
#include <map>
#include "builtin.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/lb/strategy.hpp"

namespace weft::lb {

namespace detail {
namespace {
class function_strategy final : public strategy {
 public:
  explicit function_strategy(balance_fn balance) : balance_(balance) {}
  plan balance(const instance& inst, const options& opts) override { return balance_(inst, opts); }

 private:
  balance_fn balance_;
};
}  // namespace

std::unique_ptr<strategy> strategy_from(balance_fn balance) {
  return std::make_unique<function_strategy>(balance);
}
}  // namespace detail

namespace {

std::map<std::string, factory>& table() {
  static std::map<std::string, factory> t = {
      {"comm", detail::make_comm},
      {"greedy", detail::make_greedy},
      {"greedy-refine", detail::make_greedy_refine},
      {"refine", detail::make_refine},
      {"node-aware", detail::make_node_aware},
      {"hierarchical", detail::make_hierarchical},
      {"rotate", detail::make_rotate},
      {"random", detail::make_random},
  };
  return t;
}

std::string joined_names() {
  std::string s;
  for (const std::string& n : strategy_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void register_strategy(const std::string& name, factory make) {
  if (name.empty()) base::fatal("lb::register_strategy: an empty name");
  if (!make) base::fatal("lb::register_strategy('%s'): no factory", name.c_str());
  if (!table().emplace(name, std::move(make)).second)
    base::fatal("lb::register_strategy: the strategy '%s' is already registered", name.c_str());
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : table()) names.push_back(n);
  return names;
}

bool has_strategy(const std::string& name) {
  return table().count(name) != 0;
}

std::unique_ptr<strategy> make_strategy(const std::string& name) {
  auto it = table().find(name);
  if (it == table().end()) {
    base::usage_error("unknown load-balancing strategy '%s' (accepted: %s)", name.c_str(),
                      joined_names().c_str());
  }
  std::unique_ptr<strategy> s = it->second();
  if (!s) base::fatal("lb: the factory of strategy '%s' returned no strategy", name.c_str());
  return s;
}

void validate_plan(const std::string& name, const instance& inst, const plan& p) {
  if (p.size() != inst.objects.size())
    base::fatal("lb: strategy '%s' returned a plan for %zu objects, the instance has %zu",
                name.c_str(), p.size(), inst.objects.size());
  const int np = inst.num_pes();
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] < 0 || p[i] >= np)
      base::fatal("lb: strategy '%s' placed object %zu on PE %d, which does not exist (PEs 0..%d)",
                  name.c_str(), i, p[i], np - 1);
    if (!inst.objects[i].migratable && p[i] != inst.objects[i].pe)
      base::fatal(
          "lb: strategy '%s' moved object %zu, which is not migratable, from PE %d to PE %d",
          name.c_str(), i, inst.objects[i].pe, p[i]);
  }
}

result run(const std::string& name, const instance& inst, const options& opts) {
  std::unique_ptr<strategy> s = make_strategy(name);
  const std::string bad = check_instance(inst);
  if (!bad.empty())
    base::fatal("lb: strategy '%s' given a malformed instance: %s", name.c_str(), bad.c_str());
  result r;
  if (inst.objects.empty()) return r;
  const std::uint64_t t0 = base::wall_ns();
  r.placement = s->balance(inst, opts);
  r.seconds = static_cast<double>(base::wall_ns() - t0) * 1e-9;
  validate_plan(name, inst, r.placement);
  return r;
}

}  // namespace weft::lb
