// The registry and the plan check: a user's strategy by name, names
// listed, unknown names a usage error (exit 2) listing the accepted ones,
// and every invalid plan fatal (exit 3)
// naming the strategy that made it.
#include <gtest/gtest.h>
#include <algorithm>
#include <weft/lb/generate.hpp>
#include "lb/lb_fixtures.hpp"

namespace lb = weft::lb;
using lbtest::objects_on;

namespace {

// Returns whatever plan it was built with.
class fixed_plan final : public lb::strategy {
 public:
  explicit fixed_plan(lb::plan p) : p_(std::move(p)) {}
  lb::plan balance(const lb::instance&, const lb::options&) override { return p_; }

 private:
  lb::plan p_;
};

void register_fixed(const std::string& name, lb::plan p) {
  lb::register_strategy(name, [p] { return std::make_unique<fixed_plan>(p); });
}

}  // namespace

TEST(lb_registry, BuiltinNamesListed) {
  const std::vector<std::string> names = lb::strategy_names();
  for (const char* n : lbtest::all_builtin())
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(lb::has_strategy("comm"));
}

TEST(lb_registry, UserStrategyRunsByName) {
  register_fixed("user-all-on-1", {1, 1, 1});
  EXPECT_TRUE(lb::has_strategy("user-all-on-1"));
  const lb::instance inst = objects_on({1, 2, 3}, 2);
  const lb::result r = lb::run("user-all-on-1", inst);
  EXPECT_EQ(r.placement, (lb::plan{1, 1, 1}));
  EXPECT_GE(r.seconds, 0.0);
}

TEST(lb_registry_death, DuplicateNameIsFatal) {
  EXPECT_EXIT(register_fixed("greedy", {}), testing::ExitedWithCode(3),
              "strategy 'greedy' is already registered");
}

TEST(lb_registry_death, UnknownNameListsAccepted) {
  EXPECT_EXIT(lb::make_strategy("gredy"), testing::ExitedWithCode(2),
              "unknown load-balancing strategy 'gredy' \\(accepted: comm, greedy, greedy-refine, "
              "hierarchical, node-aware, random, refine, rotate");
}

TEST(lb_registry_death, PlanNamingAMissingPEIsFatalNamingTheStrategy) {
  const lb::instance inst = objects_on({1, 2, 3}, 2);
  EXPECT_EXIT(
      {
        register_fixed("bad-user", {0, 5, 1});
        lb::run("bad-user", inst);
      },
      testing::ExitedWithCode(3),
      "strategy 'bad-user' placed object 1 on PE 5, which does not exist");
  EXPECT_EXIT(
      {
        register_fixed("negative", {0, -1, 1});
        lb::run("negative", inst);
      },
      testing::ExitedWithCode(3), "strategy 'negative' placed object 1 on PE -1");
}

TEST(lb_registry_death, PlanOfWrongLengthIsFatal) {
  const lb::instance inst = objects_on({1, 2, 3}, 2);
  EXPECT_EXIT(
      {
        register_fixed("short", {0, 1});
        lb::run("short", inst);
      },
      testing::ExitedWithCode(3),
      "strategy 'short' returned a plan for 2 objects, the instance has 3");
}

TEST(lb_registry_death, MovingANonMigratableObjectIsFatal) {
  lb::instance inst = objects_on({1, 2, 3}, 2);
  inst.objects[2].migratable = false;
  EXPECT_EXIT(
      {
        register_fixed("mover", {0, 0, 1});
        lb::run("mover", inst);
      },
      testing::ExitedWithCode(3), "strategy 'mover' moved object 2, which is not migratable");
}

TEST(lb_registry_death, MalformedInstanceIsFatal) {
  lb::instance inst = objects_on({1, 2}, 2);
  inst.objects[1].pe = 7;
  EXPECT_EXIT(lb::run("greedy", inst), testing::ExitedWithCode(3),
              "strategy 'greedy' given a malformed instance: object 1 is on PE 7 of 2");
}

TEST(lb_registry_death, BadInnerStrategyIsAUsageError) {
  const lb::instance inst = objects_on({1, 2}, 2);
  lb::options o;
  o.inner = "rotate";
  EXPECT_EXIT(lb::run("node-aware", inst, o), testing::ExitedWithCode(2),
              "node-aware: inner strategy 'rotate' is not accepted \\(accepted: greedy, "
              "greedy-refine, refine, comm\\)");
}
