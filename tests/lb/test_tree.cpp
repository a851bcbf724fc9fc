// --weft:lb=hierarchical at run time: the step as a tree (records stay on
// their node, the root sees totals and what changes node;
// src/objects/sync_tree.cpp). In one process the tree has one node; across
// processes, net.objects.*.lb_tree. Placement quality, every element
// resumed once per step, numbered messages between neighbours neither lost
// nor reordered, steps without at_sync, the node level's strategy
// (--weft:lb-tree-inner) and the combinations of options it refuses.
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>
#include "objects/support.hpp"
#include "weft/lb/dump.hpp"

using namespace objects_test;

namespace {

struct tree_log {
  std::mutex mu;
  std::map<int, std::vector<int>> pes;  // element -> PE at each resume
  std::atomic<long> received{0};
};
tree_log g_log;

constexpr int steps = 4;

// Heavy elements (estimate 4) are the first P, which the block map puts on
// the first PEs, the rest light (1); each step every element sends a
// numbered message to its right neighbour before at_sync.
struct Heavy : weft::array_element<Heavy, int> {
  Heavy() = default;
  int step_ = 0;
  int got_ = 0;
  long next_from_left_ = 0, sent_ = 0;
  bool waiting_ = false;  // in at_sync: a message of the next step may come meanwhile
  void pup(weft::pupper& p) { p | step_ | got_ | next_from_left_ | sent_ | waiting_; }
  void sync_if_ready() {
    if (waiting_ || got_ <= step_ || sent_ <= step_) return;
    waiting_ = true;
    at_sync();
  }
  double load_estimate() const override { return this_index() < weft::num_pes() ? 4.0 : 1.0; }
  void start() {
    this_proxy()[(this_index() + 1) % array_size()].send<&Heavy::msg>(sent_++);
    sync_if_ready();
  }
  void msg(long seq) {
    PE_CHECK(seq == next_from_left_, "element " + std::to_string(this_index()) + ": seq " +
                                         std::to_string(seq) + ", expected " +
                                         std::to_string(next_from_left_));
    next_from_left_ = seq + 1;
    ++g_log.received;
    ++got_;
    sync_if_ready();
  }
  void resume_from_sync() override {
    waiting_ = false;
    {
      std::lock_guard<std::mutex> lock(g_log.mu);
      g_log.pes[this_index()].push_back(weft::my_pe());
    }
    if (++step_ < steps) start();
  }
};

class TreeTest : public PesTest {};

void run_heavy(int pes, int n, std::vector<std::string> opts) {
  g_log.pes.clear();
  g_log.received = 0;
  ASSERT_EQ(run_pes(
                pes,
                [n]() -> weft::task<> {
                  auto a = weft::array<Heavy>::create(n);
                  a.broadcast<&Heavy::start>();
                  co_await quiescence();
                  weft::exit(0);
                },
                std::move(opts)),
            0);
  expect_no_pe_errors();
}

TEST_P(TreeTest, SpreadsTheHeavyElementsAndKeepsMessageOrder) {
  const int p = pes(), n = 3 * p;
  run_heavy(p, n, {"--weft:lb=hierarchical"});
  EXPECT_EQ(g_log.received.load(), long(n) * steps);
  ASSERT_EQ(int(g_log.pes.size()), n);
  std::map<int, double> load;
  for (const auto& [e, at] : g_log.pes) {
    EXPECT_EQ(int(at.size()), steps) << "element " << e;
    load[at.back()] += e < p ? 4.0 : 1.0;
  }
  // Total 6P over P PEs: 6 each is the bound; the block map starts at 12
  // on the first PEs. Refine inside the node gets within its tolerance
  // of the average, one light element over at worst.
  for (auto [pe, l] : load) EXPECT_LE(l, 7.0) << "PE " << pe;
}

// One process is one node, so one group whatever the group size: the
// same step (groups appear across processes, net.objects.*.lb_tree_group*).
TEST_P(TreeTest, AGroupOfOneNodeIsTheSameStep) {
  const int p = pes(), n = 3 * p;
  run_heavy(p, n, {"--weft:lb=hierarchical", "--weft:lb-tree-group=1"});
  EXPECT_EQ(g_log.received.load(), long(n) * steps);
  ASSERT_EQ(int(g_log.pes.size()), n);
  std::map<int, double> load;
  for (const auto& [e, at] : g_log.pes) load[at.back()] += e < p ? 4.0 : 1.0;
  for (auto [pe, l] : load) EXPECT_LE(l, 7.0) << "PE " << pe;
}

INSTANTIATE_TEST_SUITE_P(lb, TreeTest, testing::Values(1, 2, 4), pes_name);

// On demand (a step without at_sync): the records are taken when the tree
// starts; elements move between their entry methods.
struct Idle : weft::array_element<Idle, int> {
  Idle() = default;
  void pup(weft::pupper&) {}
  double load_estimate() const override { return this_index() < 2 ? 10.0 : 1.0; }
  void where(weft::callback<std::vector<int>> cb) {
    std::vector<int> v(std::size_t(array_size()), 0);
    v[std::size_t(this_index())] = weft::my_pe();
    contribute(v, weft::op::sum, cb);
  }
};

TEST(Tree, OnDemandStepMovesIdleElements) {
  reset_errors();
  std::vector<int> before, after;
  ASSERT_EQ(run_pes(4,
                    [&]() -> weft::task<> {
                      auto a = weft::array<Idle>::create(8);
                      auto f0 = weft::make_future<std::vector<int>>();
                      a.broadcast<&Idle::where>(weft::callback<std::vector<int>>(f0));
                      before = co_await f0;
                      weft::lb::balance();
                      co_await quiescence();
                      auto f1 = weft::make_future<std::vector<int>>();
                      a.broadcast<&Idle::where>(weft::callback<std::vector<int>>(f1));
                      after = co_await f1;
                      weft::exit(0);
                    },
                    {"--weft:lb=hierarchical"}),
            0);
  expect_no_pe_errors();
  ASSERT_EQ(before.size(), 8u);
  ASSERT_EQ(after.size(), 8u);
  // The block map puts the two heavy ones (10 each) on PE 0: one leaves.
  EXPECT_EQ(before[0], before[1]);
  EXPECT_NE(after[0], after[1]);
}

// A dumped step without at_sync (on demand): every PE's records, taken
// between entry methods, go to the root, which places them with the
// offline strategy and writes the whole snapshot.
TEST(Tree, OnDemandStepIsDumpedWhole) {
  reset_errors();
  const std::string path =
      testing::TempDir() + "weft_tree_dump_" + std::to_string(::getpid()) + ".lbdump";
  std::vector<int> after;
  ASSERT_EQ(run_pes(4,
                    [&]() -> weft::task<> {
                      auto a = weft::array<Idle>::create(8);
                      // Created everywhere before the step is asked for.
                      auto f0 = weft::make_future<std::vector<int>>();
                      a.broadcast<&Idle::where>(weft::callback<std::vector<int>>(f0));
                      (void)co_await f0;
                      weft::lb::balance();
                      co_await quiescence();
                      auto f = weft::make_future<std::vector<int>>();
                      a.broadcast<&Idle::where>(weft::callback<std::vector<int>>(f));
                      after = co_await f;
                      weft::exit(0);
                    },
                    {"--weft:lb=hierarchical", "--weft:lb-dump=" + path}),
            0);
  expect_no_pe_errors();
  const auto steps = weft::lb::read_dump(path);
  std::remove(path.c_str());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].strategy, "hierarchical");
  ASSERT_EQ(steps[0].inst.objects.size(), 8u);
  EXPECT_EQ(steps[0].inst.num_pes(), 4);
  ASSERT_EQ(steps[0].chosen.size(), 8u);
  // The dumped plan is the one carried out, and it splits the heavy two.
  ASSERT_EQ(after.size(), 8u);
  EXPECT_NE(after[0], after[1]);
  int heavy = 0;
  for (const auto& o : steps[0].inst.objects) heavy += o.load == 10.0;
  EXPECT_EQ(heavy, 2);
}

// --weft:lb-tree-inner at run time: the strategy that places a node's
// elements on its PEs. Eight elements of equal estimate on 4 PEs (one
// node), two per PE by the block map; element i sends 20 messages a step
// to its partner i + 4, which is on another PE. The load is balanced
// already, so refine (load only) moves nothing; comm (METIS on the pairs'
// edges) puts each pair on one PE, two elements per PE: the max stays the
// average.
struct pair_log {
  std::mutex mu;
  std::map<int, std::vector<int>> pes;  // element -> PE at each resume
};
pair_log g_pairs;

constexpr int pair_elements = 8, pair_steps = 2, pair_messages = 20;

struct Partner : weft::array_element<Partner, int> {
  Partner() = default;
  int step_ = 0;
  void pup(weft::pupper& p) { p | step_; }
  double load_estimate() const override { return 1.0; }
  void go() {
    const int partner = (this_index() + pair_elements / 2) % pair_elements;
    for (int k = 0; k < pair_messages; ++k) this_proxy()[partner].send<&Partner::take>(k);
    at_sync();
  }
  void take(int) {}
  void resume_from_sync() override {
    {
      std::lock_guard<std::mutex> lock(g_pairs.mu);
      g_pairs.pes[this_index()].push_back(weft::my_pe());
    }
    if (++step_ < pair_steps) go();
  }
};

// Where each element was after each step.
std::map<int, std::vector<int>> run_pairs(std::vector<std::string> opts) {
  reset_errors();
  g_pairs.pes.clear();
  opts.insert(opts.begin(), "--weft:lb=hierarchical");
  EXPECT_EQ(run_pes(
                4,
                []() -> weft::task<> {
                  auto a = weft::array<Partner>::create(pair_elements);
                  a.broadcast<&Partner::go>();
                  co_await quiescence();
                  weft::exit(0);
                },
                std::move(opts)),
            0);
  expect_no_pe_errors();
  return g_pairs.pes;
}

void expect_pairs_together(const std::map<int, std::vector<int>>& at, const std::string& how) {
  ASSERT_EQ(int(at.size()), pair_elements) << how;
  for (int step = 0; step < pair_steps; ++step) {
    std::map<int, int> per_pe;
    for (const auto& [e, pes] : at) {
      ASSERT_EQ(int(pes.size()), pair_steps) << how << " element " << e;
      ++per_pe[pes[std::size_t(step)]];
    }
    for (int e = 0; e < pair_elements / 2; ++e)
      EXPECT_EQ(at.at(e)[std::size_t(step)], at.at(e + pair_elements / 2)[std::size_t(step)])
          << how << ": pair " << e << " apart after step " << step;
    // Load within the tolerance: 2 of 1.0 on each PE, the average.
    for (auto [pe, n] : per_pe) EXPECT_EQ(n, 2) << how << " PE " << pe << " step " << step;
  }
}

TEST(TreeInner, CommAtTheNodeLevelKeepsPartnersOnOnePE) {
  // Asked for by --weft:lb-comm=element (comm is then the node level's
  // default), or by --weft:lb-tree-inner=comm (lb-comm auto: element).
  expect_pairs_together(run_pairs({"--weft:lb-comm=element"}), "lb-comm=element");
  expect_pairs_together(run_pairs({"--weft:lb-tree-inner=comm"}), "lb-tree-inner=comm");
}

TEST(TreeInner, LoadOnlyNodeLevelsLeaveABalancedNodeAlone) {
  for (const char* inner : {"refine", "greedy-refine"}) {
    const auto at = run_pairs({std::string("--weft:lb-tree-inner=") + inner});
    ASSERT_EQ(int(at.size()), pair_elements) << inner;
    for (const auto& [e, pes] : at)
      for (int pe : pes) EXPECT_EQ(pe, e / 2) << inner << " element " << e;
  }
  // greedy places every element afresh: still two per PE.
  std::map<int, int> per_pe;
  for (const auto& [e, pes] : run_pairs({"--weft:lb-tree-inner=greedy"})) ++per_pe[pes.back()];
  for (auto [pe, n] : per_pe) EXPECT_EQ(n, 2) << "greedy PE " << pe;
}

// The option resolved: the node level, and whether elements count what
// they send.
TEST(TreeInner, OptionsResolve) {
  auto cfg = weft_test::make_config({"--weft:lb=hierarchical"});
  EXPECT_EQ(cfg.lb_tree_inner, "refine");
  EXPECT_FALSE(cfg.lb_comm);
  cfg = weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-comm=element"});
  EXPECT_EQ(cfg.lb_tree_inner, "comm");
  EXPECT_TRUE(cfg.lb_comm);
  cfg = weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-tree-inner=comm"});
  EXPECT_TRUE(cfg.lb_comm);
  cfg = weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-tree-inner=greedy"});
  EXPECT_EQ(cfg.lb_tree_inner, "greedy");
  EXPECT_FALSE(cfg.lb_comm);
  // A dump reads the records whatever the node level.
  cfg = weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-dump=/dev/null"});
  EXPECT_EQ(cfg.lb_tree_inner, "refine");
  EXPECT_TRUE(cfg.lb_comm);
  cfg = weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-dump=/dev/null",
                                "--weft:lb-tree-inner=refine", "--weft:lb-comm=element"});
  EXPECT_EQ(cfg.lb_tree_inner, "refine");
  EXPECT_TRUE(cfg.lb_comm);
}

using TreeDeathTest = testing::Test;

TEST_F(TreeDeathTest, BadNodeLevelsAreUsageErrors) {
  EXPECT_EXIT(weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-tree-inner=best"}),
              testing::ExitedWithCode(2), "lb-tree-inner.*refine\\|greedy\\|greedy-refine\\|comm");
  EXPECT_EXIT(weft_test::make_config({"--weft:lb=greedy", "--weft:lb-tree-inner=comm"}),
              testing::ExitedWithCode(2),
              "lb-tree-inner.*applies only with --weft:lb=hierarchical");
  EXPECT_EXIT(weft_test::make_config({"--weft:lb=hierarchical", "--weft:lb-tree-inner=refine",
                                      "--weft:lb-comm=element"}),
              testing::ExitedWithCode(2),
              "lb-tree-inner.*places by load only.*accepted with --weft:lb=hierarchical");
  EXPECT_EXIT(weft_test::make_config(
                  {"--weft:lb=hierarchical", "--weft:lb-tree-inner=comm", "--weft:lb-comm=off"}),
              testing::ExitedWithCode(2), "lb-tree-inner.*needs communication records");
}

}  // namespace
