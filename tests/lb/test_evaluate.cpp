// Plan evaluation on a hand-made instance with known figures; the
// generators' shapes; the LBAF export parses and carries the instance.
#include <gtest/gtest.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <weft/lb/generate.hpp>
#include <weft/lb/lbaf.hpp>
#include "lb/lb_fixtures.hpp"

namespace lb = weft::lb;

// 4 PEs on 2 nodes; objects 0..3 of loads 1..4 on PE 0; a chain 0-1-2-3.
static lb::instance chain() {
  lb::instance inst = lbtest::objects_on({1, 2, 3, 4}, 4, 2);
  inst.pes[3].background = 0.5;
  inst.edges = {{0, 1, 1, 10}, {1, 2, 2, 20}, {2, 3, 3, 30}};
  return inst;
}

TEST(lb_evaluate, KnownFigures) {
  const lb::instance inst = chain();
  const lb::plan p = {0, 1, 2, 2};  // 1 | 2 | 7 | 0.5
  const lb::metrics m = lb::evaluate(inst, p, 0.25);
  EXPECT_DOUBLE_EQ(m.max_load, 7);
  EXPECT_DOUBLE_EQ(m.min_load, 0.5);
  EXPECT_DOUBLE_EQ(m.avg_load, 10.5 / 4);
  const double a = 10.5 / 4;
  EXPECT_NEAR(
      m.stddev,
      std::sqrt(
          ((1 - a) * (1 - a) + (2 - a) * (2 - a) + (7 - a) * (7 - a) + (0.5 - a) * (0.5 - a)) / 4),
      1e-12);
  EXPECT_EQ(m.migrations, 3u);
  EXPECT_EQ(m.bytes_moved, 300u);
  EXPECT_EQ(m.off_pe_messages, 3u);  // 0-1 and 1-2 cross PEs; 2-3 does not
  EXPECT_EQ(m.off_pe_bytes, 30u);
  EXPECT_EQ(m.off_node_messages, 2u);  // 1-2: PE 1 (node 0) to PE 2 (node 1)
  EXPECT_EQ(m.off_node_bytes, 20u);
  EXPECT_DOUBLE_EQ(m.lower_bound, 4);  // heaviest object above avg 2.625
  EXPECT_DOUBLE_EQ(m.quality(), 7.0 / 4);
  EXPECT_DOUBLE_EQ(m.strategy_seconds, 0.25);
  const lb::metrics here = lb::evaluate(inst, lb::current_placement(inst));
  EXPECT_EQ(here.migrations, 0u);
  EXPECT_EQ(here.off_pe_messages, 0u);
}

TEST(lb_evaluate, LowerBoundCountsFixedLoad) {
  lb::instance inst = chain();
  inst.objects[0].migratable = false;
  inst.objects[0].load = 9;
  EXPECT_DOUBLE_EQ(lb::lower_bound(inst), 9);
}

TEST(lb_generate, ShapesAndSeeds) {
  lb::generator g;
  g.objects = 100;
  g.pes = 10;
  g.pes_per_node = 4;
  g.graph = lb::graph_kind::ring;
  lb::instance ring = lb::generate(g);
  EXPECT_EQ(ring.objects.size(), 100u);
  EXPECT_EQ(ring.edges.size(), 100u);
  EXPECT_EQ(ring.num_nodes(), 3);
  EXPECT_EQ(ring.objects[99].pe, 9);
  EXPECT_EQ(lb::check_instance(ring), "");
  g.graph = lb::graph_kind::mesh2d;
  EXPECT_EQ(lb::generate(g).edges.size(), 180u);  // 10x10: 90 right, 90 down
  g.graph = lb::graph_kind::random;
  EXPECT_GT(lb::generate(g).edges.size(), 350u);
  g.load = lb::load_kind::hotspot;
  const lb::instance hot = lb::generate(g);
  EXPECT_GT(hot.pe_loads()[0], 5 * hot.pe_loads()[5]);
  lb::graph_kind gk;
  lb::load_kind lk;
  EXPECT_FALSE(lb::parse_graph("torus", gk));
  EXPECT_TRUE(lb::parse_load("lognormal", lk));
  EXPECT_EQ(lb::generate(g).objects[3].load, hot.objects[3].load);  // same seed, same instance
}

TEST(lb_lbaf, ExportParsesAndCarriesTheInstance) {
  const lb::instance inst = chain();
  const nlohmann::json all = nlohmann::json::parse(lb::lbaf_json(inst, -1));
  EXPECT_EQ(all["type"], "LBDatafile");
  const auto& phase = all["phases"][0];
  ASSERT_EQ(phase["tasks"].size(), 4u);
  EXPECT_EQ(phase["tasks"][3]["entity"]["id"], 3);
  EXPECT_EQ(phase["tasks"][3]["time"], 4.0);
  EXPECT_EQ(phase["tasks"][3]["entity"]["migratable"], true);
  ASSERT_EQ(phase["communications"].size(), 3u);
  EXPECT_EQ(phase["communications"][2]["bytes"], 30);
  // Per rank: PE 0 holds every object, PE 1 none.
  EXPECT_EQ(nlohmann::json::parse(lb::lbaf_json(inst, 1))["phases"][0]["tasks"].size(), 0u);
  EXPECT_EQ(nlohmann::json::parse(lb::lbaf_json(inst, 1))["metadata"]["rank"], 1);
  const std::string dir = testing::TempDir();
  ASSERT_EQ(lb::write_lbaf(inst, dir + "/lb_lbaf_test.%r.json"), "");
  std::ifstream f(dir + "/lb_lbaf_test.0.json");
  EXPECT_EQ(nlohmann::json::parse(f)["phases"][0]["tasks"].size(), 4u);
  for (int r = 0; r < 4; ++r)
    std::remove((dir + "/lb_lbaf_test." + std::to_string(r) + ".json").c_str());
  EXPECT_NE(
      lb::write_lbaf(inst, "/nonexistent-dir/x.json").find("cannot write /nonexistent-dir/x.json"),
      std::string::npos);
}
