// Each built-in strategy on fixed instances with known optimal or bounded
// answers (issue 27): identical objects divide evenly, greedy's LPT bound
// against a brute-force optimum, refine leaves a balanced instance alone,
// greedy-refine keeps objects at greedy's quality, node-aware balances
// node totals, hierarchical stays close to greedy (and with comm inside
// its nodes keeps communicating objects together); empty and one-PE
// instances; non-migratable objects stay.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <weft/lb/generate.hpp>
#include "lb/lb_fixtures.hpp"
#include "lb/tree.hpp"

namespace lb = weft::lb;
using lbtest::objects_on;

TEST(lb_strategies, IdenticalObjectsDivideEvenly) {
  const lb::instance inst = objects_on(std::vector<double>(64, 1.0), 8, 4);
  for (const char* name : lbtest::balancers()) {
    const lb::result r = lb::run(name, inst);
    const lb::metrics m = lb::evaluate(inst, r.placement);
    EXPECT_DOUBLE_EQ(m.max_load, 8.0) << name;
    EXPECT_DOUBLE_EQ(m.min_load, 8.0) << name;
    EXPECT_DOUBLE_EQ(m.stddev, 0.0) << name;
  }
}

// Graham's tight LPT instance for m PEs: 2m+1 jobs 2m-1, 2m-1, ..., m+1,
// m+1, m, m, m; the optimum is 3m, LPT gives 4m-1 (within 4/3).
TEST(lb_greedy, GrahamTightInstanceGivesFourMMinusOne) {
  for (int m = 2; m <= 5; ++m) {
    std::vector<double> loads;
    for (int j = 2 * m - 1; j > m; --j) loads.insert(loads.end(), {double(j), double(j)});
    loads.insert(loads.end(), {double(m), double(m), double(m)});
    const lb::instance inst = objects_on(loads, m);
    const double got = lbtest::max_load(inst, lb::run("greedy", inst).placement);
    EXPECT_DOUBLE_EQ(got, 4.0 * m - 1) << "m=" << m;
    EXPECT_LE(got, 4.0 / 3.0 * 3 * m);
  }
}

// The optimum by brute force over every assignment.
static double optimum(const std::vector<double>& loads, int pes) {
  std::vector<double> bin(static_cast<std::size_t>(pes), 0.0);
  double best = 1e300;
  std::function<void(std::size_t)> go = [&](std::size_t k) {
    if (k == loads.size()) {
      best = std::min(best, *std::max_element(bin.begin(), bin.end()));
      return;
    }
    for (auto& b : bin) {
      b += loads[k];
      if (b < best) go(k + 1);
      b -= loads[k];
    }
  };
  go(0);
  return best;
}

TEST(lb_greedy, WithinLptBoundOfBruteForceOptimum) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    lb::generator g;
    g.objects = 9;
    g.pes = 3;
    g.seed = seed;
    g.graph = lb::graph_kind::none;
    lb::instance inst = lb::generate(g);
    std::vector<double> loads;
    for (const auto& o : inst.objects) loads.push_back(o.load);
    const double opt = optimum(loads, 3);
    for (const char* name : {"greedy", "greedy-refine"}) {
      const double got = lbtest::max_load(inst, lb::run(name, inst).placement);
      const double bound =
          (4.0 / 3.0 - 1.0 / 9.0) * opt * (std::string(name) == "greedy" ? 1.0 : 1.02);
      EXPECT_LE(got, bound + 1e-12) << name << " seed " << seed;
      EXPECT_GE(got, opt - 1e-12);
    }
  }
}

TEST(lb_greedy, CountsBackgroundLoad) {
  lb::instance inst = objects_on({1, 1, 1, 1}, 2);
  inst.pes[0].background = 4;
  const lb::plan p = lb::run("greedy", inst).placement;
  for (int pe : p) EXPECT_EQ(pe, 1);
}

TEST(lb_refine, MovesNothingWhenBalanced) {
  lb::generator g;
  g.objects = 1600;
  g.pes = 16;
  g.load = lb::load_kind::uniform;
  lb::instance inst = lb::generate(g);
  for (auto& o : inst.objects) o.load = 1.0;  // 100 per PE, each PE at the average
  const lb::metrics m = lb::evaluate(inst, lb::run("refine", inst).placement);
  EXPECT_EQ(m.migrations, 0u);
  // Within tolerance it also leaves a mildly uneven instance alone.
  inst.objects[0].load = 1.01;
  EXPECT_EQ(lb::evaluate(inst, lb::run("refine", inst).placement).migrations, 0u);
}

TEST(lb_refine, MovesOnlyFromOverloadedPEs) {
  lb::generator g;
  g.objects = 2000;
  g.pes = 20;
  g.load = lb::load_kind::hotspot;  // the first 2 PEs 10x
  const lb::instance inst = lb::generate(g);
  const lb::plan p = lb::run("refine", inst).placement;
  const std::vector<double> before = inst.pe_loads();
  double avg = 0;
  for (double l : before) avg += l / before.size();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != inst.objects[i].pe) {
      EXPECT_GT(before[static_cast<std::size_t>(inst.objects[i].pe)], avg * 1.02);
    }
  const lb::metrics m = lb::evaluate(inst, p);
  EXPECT_LE(m.max_load, 1.02 * m.lower_bound + 1e-9);
  EXPECT_LT(m.migrations, lb::evaluate(inst, lb::run("greedy", inst).placement).migrations);
}

// A hot spot with little room left (2% over the average): the donors that
// come last find the receivers full at the first limit; refine tries
// higher limits and keeps the best plan.
TEST(lb_refine, HotSpotWithLittleRoom) {
  lb::generator g;
  g.objects = 20000;
  g.pes = 256;
  g.pes_per_node = 16;
  g.load = lb::load_kind::hotspot;
  const lb::instance inst = lb::generate(g);
  const lb::metrics m = lb::evaluate(inst, lb::run("refine", inst).placement);
  EXPECT_LE(m.quality(), 1.05);
  EXPECT_LT(m.migrations, inst.objects.size() / 10);
}

// After one greedy step, loads drift by a few percent: greedy-refine keeps
// most objects and reaches greedy's max within the tolerance.
TEST(lb_greedy_refine, FewerMigrationsAtGreedysQuality) {
  lb::generator g;
  g.objects = 4000;
  g.pes = 32;
  lb::instance inst = lb::generate(g);
  const lb::plan first = lb::run("greedy", inst).placement;
  for (std::size_t i = 0; i < first.size(); ++i) inst.objects[i].pe = first[i];
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> drift(0.95, 1.05);
  for (auto& o : inst.objects) o.load *= drift(rng);
  const lb::metrics greedy = lb::evaluate(inst, lb::run("greedy", inst).placement);
  const lb::metrics refined = lb::evaluate(inst, lb::run("greedy-refine", inst).placement);
  EXPECT_LE(refined.max_load, greedy.max_load * 1.02 + 1e-9);
  EXPECT_LT(refined.migrations * 4, greedy.migrations)
      << refined.migrations << " vs " << greedy.migrations;
}

TEST(lb_node_aware, NodeTotalsBalanced) {
  lb::generator g;
  g.objects = 3200;
  g.pes = 32;
  g.pes_per_node = 8;
  g.load = lb::load_kind::hotspot;
  const lb::instance inst = lb::generate(g);
  const lb::plan p = lb::run("node-aware", inst).placement;
  const std::vector<double> loads = lb::pe_loads(inst, p);
  std::vector<double> node(4, 0.0);
  double total = 0;
  for (std::size_t pe = 0; pe < loads.size(); ++pe) {
    node[pe / 8] += loads[pe];
    total += loads[pe];
  }
  for (double n : node) EXPECT_LE(n, total / 4 * 1.02 + 1e-9);
  const lb::metrics m = lb::evaluate(inst, p);
  EXPECT_LE(m.quality(), 1.05);
  // Fewer objects cross nodes than with greedy, which ignores nodes.
  auto crossing = [&](const lb::plan& q) {
    int n = 0;
    for (std::size_t i = 0; i < q.size(); ++i)
      n += inst.pes[static_cast<std::size_t>(q[i])].node !=
           inst.pes[static_cast<std::size_t>(inst.objects[i].pe)].node;
    return n;
  };
  EXPECT_LT(crossing(p), crossing(lb::run("greedy", inst).placement));
}

TEST(lb_hierarchical, WithinBoundOfGreedy) {
  for (lb::load_kind load :
       {lb::load_kind::lognormal, lb::load_kind::hotspot, lb::load_kind::uniform}) {
    lb::generator g;
    g.objects = 20000;
    g.pes = 512;
    g.pes_per_node = 8;
    g.load = load;
    const lb::instance inst = lb::generate(g);
    lb::options o;
    o.group_size = 4;
    const lb::metrics h = lb::evaluate(inst, lb::run("hierarchical", inst, o).placement);
    const lb::metrics gr = lb::evaluate(inst, lb::run("greedy", inst).placement);
    // Hot spots leave a node few small objects to fill its PEs with: the
    // node level's greedy-refine (tolerance 1.02 over its own greedy) ends
    // up to 6.5% over the bound there (docs/lb.md).
    const double bound = load == lb::load_kind::hotspot ? 1.07 : 1.04;
    EXPECT_LE(h.max_load, gr.max_load * bound) << int(load);
    EXPECT_LE(h.quality(), bound) << int(load);
    EXPECT_LT(h.migrations, gr.migrations / 2) << int(load);
    std::printf("load %d: hierarchical %.4f (%llu migrations), greedy %.4f (%llu)\n", int(load),
                h.quality(), (unsigned long long)h.migrations, gr.quality(),
                (unsigned long long)gr.migrations);
  }
}

TEST(lb_hierarchical, EveryInnerStrategyAndOddGroups) {
  lb::generator g;
  g.objects = 3000;
  g.pes = 60;
  g.pes_per_node = 7;  // a last node of 4 PEs, 9 nodes in groups of 2
  const lb::instance inst = lb::generate(g);
  for (const char* inner : {"greedy", "greedy-refine", "refine", "comm"}) {
    lb::options o;
    o.group_size = 2;
    o.inner = inner;
    for (const char* name : {"hierarchical", "node-aware"}) {
      const lb::metrics m = lb::evaluate(inst, lb::run(name, inst, o).placement);
      EXPECT_LE(m.quality(), 1.15) << name << " inner " << inner;
    }
  }
}

// The group level's two decisions, shared by the offline strategy and the
// run-time tree (src/lb/tree.hpp): a group asks all its nodes at once,
// those above their share of what it keeps, in order, for exactly its
// amount; a level's share counts the load arriving from above.
TEST(lb_hierarchical, GroupSplitsItsQuotaAmongItsNodes) {
  namespace d = weft::lb::detail;
  // Four nodes of 2 PEs: 40 in all, 6 to give: keeps 34, 4.25 per PE.
  const std::vector<double> load = {20, 4, 10, 6}, cap = {2, 2, 2, 2};
  const std::vector<double> ask = d::split_shed(load, cap, 6);
  ASSERT_EQ(ask.size(), 4u);
  EXPECT_DOUBLE_EQ(ask[0], 6);  // 11.5 above its share, asked for all 6
  EXPECT_DOUBLE_EQ(ask[1], 0);
  EXPECT_DOUBLE_EQ(ask[2], 0);  // above its share too, but nothing is left
  EXPECT_DOUBLE_EQ(ask[3], 0);
  // 16 to give: keeps 3 per PE; node 0 is 14 above, node 2 gives the rest.
  EXPECT_EQ(d::split_shed(load, cap, 16), (std::vector<double>{14, 0, 2, 0}));
  EXPECT_EQ(d::split_shed(load, cap, 0), std::vector<double>(4, 0.0));
  // 40 over 8 PEs is 10 a node: node 0 sheds 10 (tolerance 1.04: above
  // 10.1); with 8 arriving from above the share is 12, and it sheds 8.
  const std::vector<double> shed = d::shed_amounts(load, cap, 0, 1.04);
  EXPECT_EQ(shed, (std::vector<double>{10, 0, 0, 0}));
  EXPECT_EQ(d::shed_amounts(load, cap, 8, 1.04), (std::vector<double>{8, 0, 0, 0}));
}

TEST(lb_strategies, EmptyInstance) {
  lb::instance inst;
  for (const char* name : lbtest::all_builtin())
    EXPECT_TRUE(lb::run(name, inst).placement.empty()) << name;
  inst.pes.resize(4);
  for (const char* name : lbtest::all_builtin())
    EXPECT_TRUE(lb::run(name, inst).placement.empty()) << name;
}

TEST(lb_strategies, OnePE) {
  const lb::instance inst = objects_on({3, 1, 2, 5}, 1);
  for (const char* name : lbtest::all_builtin()) {
    const lb::plan p = lb::run(name, inst).placement;
    ASSERT_EQ(p.size(), 4u) << name;
    for (int pe : p) EXPECT_EQ(pe, 0) << name;
  }
}

TEST(lb_strategies, NonMigratableObjectsStayAndCount) {
  lb::generator g;
  g.objects = 1000;
  g.pes = 16;
  g.pes_per_node = 4;
  lb::instance inst = lb::generate(g);
  for (std::size_t i = 0; i < inst.objects.size(); i += 3) inst.objects[i].migratable = false;
  // PE 0's fixed objects are heavy: balancers put little else there.
  for (auto& o : inst.objects)
    if (o.pe == 0 && !o.migratable) o.load = 20;
  for (const char* name : lbtest::all_builtin()) {
    const lb::plan p = lb::run(name, inst).placement;
    for (std::size_t i = 0; i < p.size(); i += 3) EXPECT_EQ(p[i], inst.objects[i].pe) << name;
  }
  for (const char* name : lbtest::balancers()) {
    const lb::metrics m = lb::evaluate(inst, lb::run(name, inst).placement);
    EXPECT_LE(m.quality(), 1.1) << name;
  }
}

TEST(lb_rotate, EveryMigratableObjectMovesToTheNextPE) {
  lb::instance inst = objects_on({1, 1, 1}, 3, 1, 2);
  inst.objects[1].migratable = false;
  const lb::plan p = lb::run("rotate", inst).placement;
  EXPECT_EQ(p, (lb::plan{0, 2, 0}));
}

TEST(lb_random, SeededAndRepeatable) {
  lb::generator g;
  g.objects = 500;
  g.pes = 8;
  const lb::instance inst = lb::generate(g);
  lb::options a, b;
  b.seed = 2;
  EXPECT_EQ(lb::run("random", inst, a).placement, lb::run("random", inst, a).placement);
  EXPECT_NE(lb::run("random", inst, a).placement, lb::run("random", inst, b).placement);
  EXPECT_GT(lb::evaluate(inst, lb::run("random", inst, a).placement).migrations, 300u);
}

// comm: K groups of objects that talk only inside their group, scattered
// over K PEs, end one group per PE: no bytes cross PEs, and the loads are
// balanced.
TEST(lb_comm, CommunicatingGroupsShareAPE) {
  constexpr int groups = 4, per_group = 12;
  lb::instance inst;
  inst.pes.resize(groups);
  for (int g = 0; g < groups; ++g) inst.pes[std::size_t(g)].node = g / 2;
  for (int i = 0; i < groups * per_group; ++i)
    inst.objects.push_back({1.0, i % groups, true, 64});  // round robin: every group split
  for (int g = 0; g < groups; ++g)
    for (int a = 0; a < per_group; ++a)
      for (int b = a + 1; b < per_group; ++b)
        inst.edges.push_back(
            {std::uint32_t(g * per_group + a), std::uint32_t(g * per_group + b), 10, 10000});
  const lb::metrics before = lb::evaluate(inst, lb::current_placement(inst));
  const lb::result r = lb::run("comm", inst);
  const lb::metrics after = lb::evaluate(inst, r.placement, r.seconds);
  EXPECT_GT(before.off_pe_bytes, 0u);
  EXPECT_EQ(after.off_pe_bytes, 0u);
  EXPECT_LE(after.quality(), 1.05);
  for (int g = 0; g < groups; ++g)
    for (int a = 1; a < per_group; ++a)
      EXPECT_EQ(r.placement[std::size_t(g * per_group + a)],
                r.placement[std::size_t(g * per_group)]);
  // greedy ignores the graph: it leaves bytes between PEs.
  const lb::metrics greedy = lb::evaluate(inst, lb::run("greedy", inst).placement);
  EXPECT_GT(greedy.off_pe_bytes, after.off_pe_bytes);
}

// comm as the node level of hierarchical and node-aware (options::inner):
// 2 nodes of 2 PEs, four groups of 6 objects (load 1), group g on node
// g / 2 with its objects alternating between the node's PEs; heavy edges
// inside each group, one light edge between groups 0 and 2 (across the
// nodes). The nodes are balanced, so nothing crosses them; inside each
// node the edges between its objects decide: a group per PE. The edge
// across the nodes is not the node level's (it stays cut). refine, by
// load only, moves nothing.
TEST(lb_hierarchical, CommInsideANodeKeepsGroupsOnOnePE) {
  constexpr int groups = 4, per_group = 6;
  lb::instance inst;
  inst.pes.resize(4);
  for (int p = 0; p < 4; ++p) inst.pes[std::size_t(p)].node = p / 2;
  for (int i = 0; i < groups * per_group; ++i) {
    const int g = i / per_group;
    inst.objects.push_back({1.0, 2 * (g / 2) + i % 2, true, 64});
  }
  for (int g = 0; g < groups; ++g)
    for (int a = 0; a < per_group; ++a)
      for (int b = a + 1; b < per_group; ++b)
        inst.edges.push_back(
            {std::uint32_t(g * per_group + a), std::uint32_t(g * per_group + b), 10, 10000});
  inst.edges.push_back({0, std::uint32_t(2 * per_group), 1, 8});
  ASSERT_GT(lb::evaluate(inst, lb::current_placement(inst)).off_pe_bytes, 8u);
  for (const char* name : {"hierarchical", "node-aware"}) {
    lb::options o;
    o.inner = "comm";
    const lb::result r = lb::run(name, inst, o);
    const lb::metrics m = lb::evaluate(inst, r.placement);
    EXPECT_EQ(m.off_pe_bytes, 8u) << name;
    EXPECT_DOUBLE_EQ(m.max_load, 6.0) << name;
    for (int g = 0; g < groups; ++g) {
      const int pe = r.placement[std::size_t(g * per_group)];
      EXPECT_EQ(pe / 2, g / 2) << name << " group " << g << " left its node";
      for (int a = 1; a < per_group; ++a)
        EXPECT_EQ(r.placement[std::size_t(g * per_group + a)], pe) << name << " group " << g;
    }
    o.inner = "refine";
    EXPECT_EQ(lb::evaluate(inst, lb::run(name, inst, o).placement).migrations, 0u) << name;
  }
}

// hierarchical with comm inside the nodes on an imbalanced mesh: objects
// arrive at the light nodes from the heavy ones and the node level places
// them with the node's own; the max load stays within the tolerance, and
// fewer bytes cross PEs than with refine inside the nodes.
TEST(lb_hierarchical, CommInsideNodesOnAnImbalancedMesh) {
  lb::generator g;
  g.objects = 4096;
  g.pes = 32;
  g.pes_per_node = 4;
  g.graph = lb::graph_kind::mesh2d;
  g.load = lb::load_kind::hotspot;
  const lb::instance inst = lb::generate(g);
  lb::options o;
  o.group_size = 2;
  o.inner = "comm";
  const lb::metrics comm = lb::evaluate(inst, lb::run("hierarchical", inst, o).placement);
  o.inner = "refine";
  const lb::metrics refine = lb::evaluate(inst, lb::run("hierarchical", inst, o).placement);
  EXPECT_LE(comm.quality(), 1.1);
  EXPECT_LT(comm.off_pe_bytes, refine.off_pe_bytes);
  std::printf("hotspot mesh: inner comm %.4f, %llu bytes off-PE; inner refine %.4f, %llu\n",
              comm.quality(), (unsigned long long)comm.off_pe_bytes, refine.quality(),
              (unsigned long long)refine.off_pe_bytes);
}

// On a generated mesh, comm keeps the max load within the tolerance of the
// bound and sends fewer bytes between PEs than greedy.
TEST(lb_comm, MeshCutsFewerBytesThanGreedy) {
  lb::generator g;
  g.objects = 4096;
  g.pes = 16;
  g.pes_per_node = 4;
  g.graph = lb::graph_kind::mesh2d;
  const lb::instance inst = lb::generate(g);
  const lb::metrics comm = lb::evaluate(inst, lb::run("comm", inst).placement);
  const lb::metrics greedy = lb::evaluate(inst, lb::run("greedy", inst).placement);
  EXPECT_LE(comm.quality(), 1.1);
  EXPECT_LT(comm.off_pe_bytes, greedy.off_pe_bytes / 2);
}

// Few objects per PE: refine inside a node cannot reach the bound on its
// own (it ended at 1.59 at 10 objects per PE); the node is placed again.
TEST(lb_hierarchical, FewObjectsPerPEStillBalance) {
  lb::generator g;
  g.objects = 1000;
  g.pes = 100;
  const lb::instance inst = lb::generate(g);
  for (const char* name : {"hierarchical", "node-aware"}) {
    const lb::metrics m = lb::evaluate(inst, lb::run(name, inst).placement);
    EXPECT_LE(m.quality(), 1.1) << name;
  }
}
