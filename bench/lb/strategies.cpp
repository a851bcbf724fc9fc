// The lb strategies at scale (issue 27's simulator targets): 10^6 objects
// with lognormal loads on 10^5 PEs (10 objects per PE) and on 10^4 PEs
// (100 per PE), timing greedy, greedy-refine and hierarchical against a
// plain greedy in the same run -- std::sort of the objects plus a
// std::priority_queue of PEs, one pop and one push per object -- as the
// baseline every ratio is taken to. Each figure is the median of --repeat
// runs with the min and max beside it; quality is max load over the lower
// bound max(avg, heaviest object). Then strategy time from 10^3 to 10^6
// objects (10 per PE), to show how it grows.
//
// The strategies run on one thread and start no node: this is the
// simulator's path (tools/weft-lbsim), the code the runtime will call.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <string>
#include <vector>
#include <weft/base/error.hpp>
#include <weft/base/timer.hpp>
#include <weft/lb/evaluate.hpp>
#include <weft/lb/generate.hpp>
#include <weft/lb/strategy.hpp>
#include "common/harness.hpp"

namespace lb = weft::lb;
namespace {

constexpr const char* about =
    "lb_strategies: load-balancing strategy time and quality at 10^6 objects\n"
    "(docs/lb.md). Flags: --objects=N (default 1000000), --pes-per-node=K\n"
    "(default 32), --scaling=0 to skip the growth table.";

// The baseline: sort, then a binary heap of (load, PE) with pop and push.
lb::plan baseline_greedy(const lb::instance& inst) {
  std::vector<std::pair<double, std::uint32_t>> order(inst.objects.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = {inst.objects[i].load, static_cast<std::uint32_t>(i)};
  std::sort(order.begin(), order.end(), std::greater<>());
  using entry = std::pair<double, int>;
  std::vector<entry> init(inst.pes.size());
  for (std::size_t p = 0; p < init.size(); ++p)
    init[p] = {inst.pes[p].background, static_cast<int>(p)};
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap(std::greater<>(),
                                                                      std::move(init));
  lb::plan plan(inst.objects.size());
  for (const auto& [load, id] : order) {
    entry e = heap.top();
    heap.pop();
    plan[id] = e.second;
    e.first += load;
    heap.push(e);
  }
  return plan;
}

struct sample {
  double median = 0, min = 0, max = 0, quality = 0, imbalance = 0;
  std::uint64_t migrations = 0;
};

sample measure(const lb::instance& inst, int repeat, const std::function<lb::plan(double&)>& once) {
  std::vector<double> t;
  lb::plan p;
  for (int r = 0; r < repeat; ++r) {
    double s = 0;
    p = once(s);
    t.push_back(s);
  }
  std::sort(t.begin(), t.end());
  sample out;
  out.median = t[t.size() / 2];
  out.min = t.front();
  out.max = t.back();
  const lb::metrics m = lb::evaluate(inst, p);
  out.quality = m.quality();
  out.imbalance = m.imbalance();
  out.migrations = m.migrations;
  return out;
}

sample run_baseline(const lb::instance& inst, int repeat) {
  return measure(inst, repeat, [&](double& s) {
    const std::uint64_t t0 = weft::base::wall_ns();
    lb::plan p = baseline_greedy(inst);
    s = static_cast<double>(weft::base::wall_ns() - t0) * 1e-9;
    return p;
  });
}

sample run_strategy(const lb::instance& inst, const std::string& name, int repeat,
                    const lb::options& o) {
  return measure(inst, repeat, [&](double& s) {
    lb::result r = lb::run(name, inst, o);
    s = r.seconds;
    return r.placement;
  });
}

void report(const weft::bench::cli& c, const char* table, std::uint64_t objects, int pes,
            const std::string& name, const sample& s, double base) {
  if (c.json) {
    std::printf(
        "{\"bench\":\"lb_strategies\",\"table\":\"%s\",\"objects\":%llu,\"pes\":%d,\"strategy\":%s,"
        "\"seconds\":%.6f,\"min\":%.6f,\"max\":%.6f,\"ratio_to_baseline\":%.4f,"
        "\"max_over_lower_bound\":%.5f,\"max_over_avg\":%.5f,\"migrations\":%llu}\n",
        table, static_cast<unsigned long long>(objects), pes, weft::base::json_quote(name).c_str(),
        s.median, s.min, s.max, base > 0 ? s.median / base : 0, s.quality, s.imbalance,
        static_cast<unsigned long long>(s.migrations));
  } else {
    std::printf("  %-26s %8.4f s [%.4f, %.4f] x%5.2f  max/lb %.4f  max/avg %.4f  migrations %llu\n",
                name.c_str(), s.median, s.min, s.max, base > 0 ? s.median / base : 0, s.quality,
                s.imbalance, static_cast<unsigned long long>(s.migrations));
  }
}

void full_table(const weft::bench::cli& c, std::uint64_t objects, int pes, int per_node) {
  lb::generator g;
  g.objects = objects;
  g.pes = pes;
  g.pes_per_node = per_node;
  g.graph = lb::graph_kind::none;
  g.load = lb::load_kind::lognormal;
  lb::instance inst = lb::generate(g);
  if (!c.json)
    std::printf("%llu objects on %d PEs (%d per node), lognormal loads, median of %d [min, max]:\n",
                static_cast<unsigned long long>(objects), pes, per_node, c.repeat);
  const sample base = run_baseline(inst, c.repeat);
  report(c, "strategies", objects, pes, "baseline (sort + heap)", base, base.median);
  lb::options o;
  for (const char* name : {"greedy", "greedy-refine", "hierarchical"})
    report(c, "strategies", objects, pes, name, run_strategy(inst, name, c.repeat, o), base.median);
  // greedy-refine's own case: the step after a balanced one, loads drifted
  // by up to 5%.
  const lb::plan first = lb::run("greedy", inst).placement;
  for (std::size_t i = 0; i < first.size(); ++i) {
    inst.objects[i].pe = first[i];
    inst.objects[i].load *= 0.95 + 0.1 * static_cast<double>((i * 2654435761u) % 1000) / 1000.0;
  }
  const sample base2 = run_baseline(inst, c.repeat);
  for (const char* name : {"greedy-refine", "hierarchical"})
    report(c, "next_step", objects, pes, std::string(name) + " (next step)",
           run_strategy(inst, name, c.repeat, o), base2.median);
}

}  // namespace

int main(int argc, char** argv) {
  const weft::bench::cli c = weft::bench::parse_cli(argc, argv, about);
  const long objects = weft::bench::positive_arg(c, "objects", 1000000, 100000000);
  const long per_node = weft::bench::positive_arg(c, "pes-per-node", 32, 1 << 20);
  const bool scaling = weft::bench::arg(c, "scaling", "1") != "0";
  for (const auto& a : c.args)
    if (a.rfind("--objects=", 0) != 0 && a.rfind("--pes-per-node=", 0) != 0 &&
        a.rfind("--scaling=", 0) != 0)
      weft::base::usage_error(
          "lb_strategies: unknown argument '%s' (accepted: --objects=N, --pes-per-node=K, "
          "--scaling=0|1, --json, --repeat N, --help)",
          a.c_str());
  const auto n = static_cast<std::uint64_t>(objects);
  full_table(c, n, static_cast<int>(std::max<std::uint64_t>(1, n / 10)),
             static_cast<int>(per_node));
  full_table(c, n, static_cast<int>(std::max<std::uint64_t>(1, n / 100)),
             static_cast<int>(per_node));
  if (!scaling) return 0;
  if (!c.json) std::printf("strategy time as objects grow (10 per PE), median of %d:\n", c.repeat);
  for (std::uint64_t m = 1000; m <= n; m *= 10) {
    lb::generator g;
    g.objects = m;
    g.pes = static_cast<int>(m / 10);
    g.pes_per_node = static_cast<int>(per_node);
    g.graph = lb::graph_kind::none;
    const lb::instance inst = lb::generate(g);
    const sample base = run_baseline(inst, c.repeat);
    report(c, "scaling", m, g.pes, "baseline (sort + heap)", base, base.median);
    for (const char* name : {"greedy", "greedy-refine", "hierarchical"})
      report(c, "scaling", m, g.pes, name, run_strategy(inst, name, c.repeat, lb::options{}),
             base.median);
  }
  return 0;
}
