// --weft:lb-arrays=together: the arrays that call at_sync are placed in one
// step, as one set of objects; with each (the default) every array is
// placed alone. What the strategy sees (a strategy of the test's own that
// records the instances it is given), where elements end (greedy, and
// hierarchical, whose levels then run in one place), and that every
// element of both arrays resumes once per step on the PE the plan said.
#include <atomic>
#include <map>
#include <mutex>
#include <vector>
#include "objects/support.hpp"
#include "weft/lb/strategy.hpp"

using namespace objects_test;

namespace {

// ---- what the strategy is given ------------------------------------------------------

struct seen_log {
  std::mutex mu;
  std::vector<std::size_t> objects;  // per call of the strategy: the objects it placed
};
seen_log g_seen;

// Leaves every object where it is, and notes how many it was given.
class recording_strategy : public weft::lb::strategy {
 public:
  weft::lb::plan balance(const weft::lb::instance& inst, const weft::lb::options&) override {
    {
      std::lock_guard<std::mutex> lock(g_seen.mu);
      g_seen.objects.push_back(inst.objects.size());
    }
    return weft::lb::current_placement(inst);
  }
};
const bool g_registered = [] {
  weft::lb::register_strategy("test-record-together",
                              [] { return std::make_unique<recording_strategy>(); });
  return true;
}();

struct resume_log {
  std::mutex mu;
  std::map<std::pair<int, int>, std::vector<int>> pes;  // (array, element) -> PE at each resume
  std::map<std::pair<int, int>, double> load;           // (array, element) -> its estimate
};
resume_log g_resumed;

// An element that calls at_sync `steps` times in a row, noting its PE at
// each resume. `which` tells the arrays apart in the log.
template <int which>
struct Stepper : weft::array_element<Stepper<which>, int> {
  Stepper() = default;
  explicit Stepper(int steps) : steps_(steps) {}
  int steps_ = 0;
  int step_ = 0;
  void pup(weft::pupper& p) { p | steps_ | step_; }
  // Array 0: 1 each. Array 1: 3 for its first two elements (both on PE 0
  // under the block map), 0 for the rest.
  double load_estimate() const override {
    if (which == 0) return 1.0;
    return this->this_index() < 2 ? 3.0 : 0.0;
  }
  void go() { this->at_sync(); }
  void resume_from_sync() override {
    {
      std::lock_guard<std::mutex> lock(g_resumed.mu);
      g_resumed.pes[{which, this->this_index()}].push_back(weft::my_pe());
      g_resumed.load[{which, this->this_index()}] = load_estimate();
    }
    if (++step_ < steps_) this->at_sync();
  }
};

void run_two_arrays(int pes, int na, int nb, int steps, std::vector<std::string> opts) {
  g_seen.objects.clear();
  g_resumed.pes.clear();
  g_resumed.load.clear();
  ASSERT_EQ(run_pes(
                pes,
                [na, nb, steps]() -> weft::task<> {
                  auto a = weft::array<Stepper<0>>::create(na, steps);
                  auto b = weft::array<Stepper<1>>::create(nb, steps);
                  a.broadcast<&Stepper<0>::go>();
                  b.broadcast<&Stepper<1>::go>();
                  co_await quiescence();
                  weft::exit(0);
                },
                std::move(opts)),
            0);
  expect_no_pe_errors();
  for (int e = 0; e < na; ++e)
    EXPECT_EQ(int(g_resumed.pes[{0, e}].size()), steps) << "array 0 element " << e;
  for (int e = 0; e < nb; ++e)
    EXPECT_EQ(int(g_resumed.pes[{1, e}].size()), steps) << "array 1 element " << e;
}

class ArraysTogetherTest : public PesTest {};

// Together, each step's strategy sees both arrays' elements. An array whose
// first records reach PE 0 before any of its elements said it takes part
// is placed alone that once: the first step may be two calls, never more.
TEST_P(ArraysTogetherTest, TheStrategySeesEveryArrayInOneStep) {
  const int na = elements(), nb = elements() + 1, steps = 4;
  run_two_arrays(pes(), na, nb, steps,
                 {"--weft:lb=test-record-together", "--weft:lb-arrays=together"});
  const std::vector<std::size_t>& seen = g_seen.objects;
  ASSERT_GE(seen.size(), std::size_t(steps));
  const std::size_t alone_first = seen.size() - std::size_t(steps);
  ASSERT_LE(alone_first, 1u) << "more than the first step was placed array by array";
  if (alone_first == 1) {
    EXPECT_EQ(seen[0] + seen[1], std::size_t(na + nb)) << "the first step, each array alone";
  }
  for (std::size_t i = alone_first == 1 ? 2 : 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], std::size_t(na + nb)) << "call " << i;
}

// Each (the default): a call per array and step.
TEST_P(ArraysTogetherTest, EachArrayAloneByDefault) {
  const int na = elements(), nb = elements() + 1, steps = 3;
  run_two_arrays(pes(), na, nb, steps, {"--weft:lb=test-record-together"});
  std::map<std::size_t, int> calls;
  for (std::size_t n : g_seen.objects) ++calls[n];
  EXPECT_EQ(calls[std::size_t(na)], steps);
  EXPECT_EQ(calls[std::size_t(nb)], steps);
  EXPECT_EQ(g_seen.objects.size(), std::size_t(2 * steps));
}

// rotate moves every element of both arrays one PE on at each joint step:
// all of them resume once per step, none lost, on the PE the plan said.
TEST_P(ArraysTogetherTest, RotateMovesBothArraysEveryStep) {
  const int na = elements(), nb = elements() + 1, steps = 4;
  run_two_arrays(pes(), na, nb, steps, {"--weft:lb=rotate", "--weft:lb-arrays=together"});
  if (pes() < 2) return;
  for (const auto& [id, at] : g_resumed.pes)
    for (std::size_t s = 1; s < at.size(); ++s)
      EXPECT_EQ(at[s], (at[s - 1] + 1) % pes())
          << "array " << id.first << " element " << id.second << " step " << s;
}

INSTANTIATE_TEST_SUITE_P(lb, ArraysTogetherTest, testing::Values(1, 2, 4), pes_name);

// Placed together, greedy puts array 0's light elements beside array 1's
// heavy ones; alone, each array's plan ignores the other's loads. On 4
// PEs: array 0 has 4 elements of 1, array 1 two of 3 (on PE 0) and six of
// 0. Together the max is 3 (3, 3, 1+1, 1+1); array by array, greedy gives
// each PE one element of array 0 and two PEs a 3 as well: max 4. The last
// step's placement is checked (the first may be array by array).
TEST(ArraysTogether, GreedyPlacesTheArraysAsOneSet) {
  reset_errors();
  run_two_arrays(4, 4, 8, 2, {"--weft:lb=greedy", "--weft:lb-arrays=together"});
  std::map<int, double> per_pe;
  for (const auto& [id, at] : g_resumed.pes) per_pe[at.back()] += g_resumed.load[id];
  double max = 0;
  for (auto [pe, l] : per_pe) max = std::max(max, l);
  EXPECT_DOUBLE_EQ(max, 3.0);
}

// hierarchical, together: the joint step on PE 0 runs the offline
// strategy there (the tree's levels in one place; one process is one
// node, so its node level places all). The same instance as above: its
// refine cannot fit a 3 beside a 1 within the tolerance and places the
// node again as greedy-refine does, max 3, where array by array (each
// array's own tree) array 1's two 3s each join a 1 of array 0: max 4.
TEST(ArraysTogether, HierarchicalPlacesTheArraysAsOneSet) {
  auto max_load = [] {
    std::map<int, double> per_pe;
    for (const auto& [id, at] : g_resumed.pes) per_pe[at.back()] += g_resumed.load[id];
    double max = 0;
    for (auto [pe, l] : per_pe) max = std::max(max, l);
    return max;
  };
  reset_errors();
  run_two_arrays(4, 4, 8, 2, {"--weft:lb=hierarchical", "--weft:lb-arrays=together"});
  EXPECT_DOUBLE_EQ(max_load(), 3.0);
  reset_errors();
  run_two_arrays(4, 4, 8, 2, {"--weft:lb=hierarchical"});
  EXPECT_DOUBLE_EQ(max_load(), 4.0);
}

using ArraysTogetherDeathTest = testing::Test;

TEST_F(ArraysTogetherDeathTest, TogetherWithoutAStrategyIsAUsageError) {
  EXPECT_EXIT(weft_test::make_config({"--weft:lb-arrays=together"}), testing::ExitedWithCode(2),
              "lb-arrays.*needs a strategy");
  EXPECT_EXIT(weft_test::make_config({"--weft:lb=greedy", "--weft:lb-arrays=both"}),
              testing::ExitedWithCode(2), "lb-arrays.*each\\|together");
}

}  // namespace
