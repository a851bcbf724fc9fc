// Strategies: one interface, a registry by name, and the checked call.
//
// A strategy maps an lb::instance to a plan. The built-in ones (each in its
// own file under src/lb/, described in docs/lb.md) are registered at first
// use under the names of --weft:lb: greedy, greedy-refine, refine,
// node-aware, hierarchical, rotate, random. A program may add its own with
// register_strategy(); a name registered twice is a fatal error.
//
// run() is the one way to call a strategy: it times it and validates the
// plan it returns. A plan of the wrong length, naming a PE that does not
// exist, or moving a non-migratable object is a fatal error (exit 3) that
// names the strategy: a strategy's bug never reaches the migration driver.
//
// All calls are for one thread at a time (the registry is not locked);
// strategies themselves keep no state between calls.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/lb/instance.hpp"

namespace weft::lb {

struct options {
  // Allowed max load over the strategy's bound (greedy-refine: over greedy's
  // max; refine, node-aware, hierarchical: over the average).
  double tolerance = 1.02;
  std::uint64_t seed = 1;  // random
  // hierarchical: nodes per group of the tree (PE -> node -> group -> root).
  int group_size = 16;
  // node-aware and hierarchical: the strategy inside a node, across its PEs
  // ("greedy", "greedy-refine" or "refine"; refine: fewest moves, and on
  // the simulator's instances also the best max load).
  std::string inner = "refine";
};

class WEFT_API strategy {
 public:
  virtual ~strategy() = default;
  // Returns one new PE per object of `inst`. May assume check_instance(inst)
  // is "" and inst.num_pes() >= 1.
  virtual plan balance(const instance& inst, const options& opts) = 0;
};

using factory = std::function<std::unique_ptr<strategy>()>;

// Adds `name` to the registry. Fatal if the name is taken or empty.
WEFT_API void register_strategy(const std::string& name, factory make);

// The registered names, sorted (built-in ones included).
WEFT_API std::vector<std::string> strategy_names();

// A new strategy by name. An unknown name is a usage error (exit 2) that
// lists the accepted names; "comm" (METIS placement) is a fatal
// "not implemented" until it is built.
WEFT_API std::unique_ptr<strategy> make_strategy(const std::string& name);
// Whether `name` is registered.
WEFT_API bool has_strategy(const std::string& name);

// Fatal (exit 3, naming `strategy_name`) unless `p` is a valid plan for
// `inst`: one entry per object, each an existing PE, non-migratable
// objects unmoved.
WEFT_API void validate_plan(const std::string& strategy_name, const instance& inst, const plan& p);

struct result {
  plan placement;
  double seconds = 0;  // the strategy's wall time
};

// make_strategy(name)->balance(inst, opts), timed and validated. An
// instance that check_instance() rejects is a fatal error; an empty
// instance (no objects) gives an empty plan without calling the strategy.
WEFT_API result run(const std::string& name, const instance& inst, const options& opts = {});

}  // namespace weft::lb
