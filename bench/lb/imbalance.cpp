// lb_imbalance: PERSISTENT imbalance, which load balancing at run time is
// for, beside weft::parallel_for (which absorbs transient imbalance; see
// bench/tasks/imbalance.cpp) and the two together (docs/lb.md, "figures").
//
// A chare array of E work items per PE (over-decomposition, --per-pe,
// default 8; block map). One step = main (PE 0) broadcasts `step`, every
// item computes its units, contributes a checksum to a sum reduction whose
// result ends the step. Items of the first half of the index range have H
// times the units of the others (--heavy, default 3) in every step: with the
// block map they sit on the first PEs, so without balancing those carry
// more than their share (at 2 PEs: 3 W per item on PE 0 against W on PE 1,
// step = 1.5 x ideal). Every K steps (--sync-every) each item, after its
// work, calls at_sync(); resume_from_sync() contributes its checksum then,
// so a sync step's time includes the balancing step.
//
// Configurations, each a weft::run of its own in this one process (the
// strategy is a runtime option, given per run):
//  - off:  --weft:lb=off, the item's units run as a plain loop;
//  - lb:   --weft:lb=STRATEGY (--strategy, default greedy-refine), plain loop;
//  - pf:   --weft:lb=off, the units run by weft::parallel_for (grain 1, the
//          default scheme, adaptive-idle unless --weft:tasks-scheme);
//  - both: --weft:lb=STRATEGY and parallel_for.
// Every configuration calls at_sync() at the same steps (with lb=off the
// items resume in place), so they differ only in the strategy and the loop.
// Cases:
//  - persistent: the uneven split above, nothing else;
//  - transient: the same plus noise that no history predicts: in each step
//    each item has, with a chance of 1 in 8 (a hash of step and index, the
//    same in every configuration), S x W more units (--spike, default 4).
//
// The work unit (compute_unit): --work steps of the logistic map on 16
// doubles of the item's data (a calibrated spin: floating-point work, not a
// sleep; bench/tasks/imbalance.cpp explains the choice), about 3.5 us on
// the project's 2-core VM. Its time is measured serially on PE 0 at the
// start of every run (median over all batches of all runs), and the ideal
// step is the step's units x that time / PEs. Each step's checksum must be
// the same in every configuration (items moved with their data, no unit
// lost or run twice), or the run fails (exit 1).
//
// Reported per case and configuration (medians over the repeats, with
// min-max and spread): after = the median over the steps after the first
// balancing step (sync steps left out) of step / ideal; before = the same
// over the steps before it; sync_ms = the median sync step less the median
// ordinary step (what one balancing step costs, migration included).
// The targets (docs/lb.md): lb's `after` within 1.10 on the persistent
// case; both's `after` no worse than the better of lb and pf on transient.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "common/work_unit.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "lb_imbalance: step time / ideal of a chare array (E items per PE) whose first half of items\n"
    "has H x the work of the rest in every step (persistent imbalance), optionally plus random\n"
    "spikes (transient); four configurations side by side, each a weft::run of its own: off (no\n"
    "balancing), lb (at_sync every K steps with a strategy), pf (each item's units by\n"
    "weft::parallel_for), both. Flags:\n"
    "  --steps=N          steps per measurement after the warm-up step (default 40)\n"
    "  --sync-every=K     at_sync() after the work of steps K, 2K, ... (default 10; < steps)\n"
    "  --per-pe=E         items per PE (default 8)\n"
    "  --units=W          units of a light item (default 24)\n"
    "  --heavy=H          units of a heavy item (first half of the index range), x W (default 3)\n"
    "  --spike=S          transient case: a 1-in-8 item gets S x W more units a step (default 4)\n"
    "  --work=N           size of a unit: logistic-map steps on 16 doubles (default 1000)\n"
    "  --strategy=NAME    --weft:lb of the lb and both configurations (default greedy-refine)\n"
    "  --configs=LIST     off,lb,pf,both (all)\n"
    "  --cases=LIST       persistent,transient (both)\n"
    "  --loads=KIND       what the strategy sees: measured (the runtime's wall time of each\n"
    "                     item's entries; default) or model (load_estimate(): the item's units\n"
    "                     since the last step x the unit's time)\n"
    "Runs on one process (the configurations are separate weft::run calls); --weft:lb is set\n"
    "by the program and may not be given.";

using weft::bench::compute_unit;
using weft::bench::init_unit;
using weft::bench::mix;
using weft::bench::unit_len;

struct config_kind {
  const char* name;
  bool balance, tasks;
};
constexpr config_kind configs[] = {
    {"off", false, false}, {"lb", true, false}, {"pf", false, true}, {"both", true, true}};
constexpr int num_configs = 4;
const char* case_names[] = {"persistent", "transient"};

struct settings {
  weft::bench::cli cli;
  long steps = 40, sync_every = 10, work = 1000;
  int per_pe = 8, units = 24, heavy = 3, spike = 4;
  std::string strategy = "greedy-refine";
  bool model_loads = false;  // --loads=model: items say their load (load_estimate)
  std::vector<int> configs, cases;
} g_s;

// --loads=model: seconds per unit, set on PE 0 before the array exists (one
// process: every PE reads it).
double g_unit_s = 0;

// Units of item `index` of `n` in step `step`: every process computes the
// same (main uses it for the ideal).
int units_of(int index, int n, long step, bool transient) {
  int u = index < n / 2 ? g_s.units * g_s.heavy : g_s.units;
  if (transient && step > 0 &&
      mix((std::uint64_t(step) << 32) ^ std::uint64_t(index) ^ 0x5eedull) % 8 == 0)
    u += g_s.units * g_s.spike;
  return u;
}

int max_units() {
  return g_s.units * (g_s.heavy + g_s.spike);
}

struct Item : weft::array_element<Item, int> {
  std::vector<double> x;            // unit u: x[u * unit_len, ...); travels with the item
  std::vector<std::uint64_t> hash;  // scratch, this step's unit results
  std::uint64_t pending = 0;        // a sync step's checksum, contributed at resume
  weft::callback<std::uint64_t> done;
  long units_since_sync = 0;  // for --loads=model

  Item() = default;
  void pup(weft::pupper& p) { p | x | pending | done | units_since_sync; }

  // Measured wall time (the runtime's default) counts whatever else ran on
  // the core meanwhile; --loads=model gives the strategy the work itself.
  double load_estimate() const override {
    return g_s.model_loads ? double(units_since_sync) * g_unit_s : -1.0;
  }

  void step(long it, bool transient, bool tasks, bool sync, weft::callback<std::uint64_t> cb) {
    if (it == 0) {  // a measurement starts: the same data in every configuration
      x.assign(std::size_t(max_units()) * unit_len, 0.0);
      for (int u = 0; u < max_units(); ++u)
        init_unit(&x[std::size_t(u) * unit_len], this_index(), u);
    }
    const int n = units_of(this_index(), array_size(), it, transient);
    units_since_sync += n;
    hash.assign(std::size_t(n), 0);
    double* data = x.data();
    std::uint64_t* out = hash.data();
    const long w = g_s.work;
    if (tasks)
      weft::parallel_for(0, n,
                         [=](int u) { out[u] = compute_unit(data + std::size_t(u) * unit_len, w); },
                         {.grain = std::size_t(1)});
    else
      for (int u = 0; u < n; ++u) out[u] = compute_unit(data + std::size_t(u) * unit_len, w);
    std::uint64_t sum = 0;
    for (int u = 0; u < n; ++u) sum += out[u];
    if (!sync) {
      contribute(sum, weft::op::sum, cb);
      return;
    }
    pending = sum;  // the step ends after the balancing step, on the item's new PE
    done = cb;
    at_sync();
  }
  void resume_from_sync() override {
    units_since_sync = 0;
    contribute(pending, weft::op::sum, done);
  }
};

// One run's measurement: per step, time and ideal.
struct run_result {
  std::vector<double> step_us, ideal_us;
  std::vector<std::uint64_t> sums;
};

// results[case][config]: per repeat, the summaries of one run.
struct per_repeat {
  std::vector<double> after, before, sync_ms;
};
per_repeat g_res[2][num_configs];
std::vector<double> g_unit_us;
std::vector<std::uint64_t> g_ref_sums[2];
run_result g_run;
std::uint64_t g_sink = 0;

void time_unit() {
  weft::bench::time_unit(g_s.work, g_unit_us, g_sink);
}

bool is_sync(long it) {
  return it > 0 && it % g_s.sync_every == 0;
}

weft::task<> drive(bool transient, const config_kind& c) {
  // The unit's time, the model loads and the results live in the process
  // of PE 0 (globals), so one process only.
  if (weft::num_nodes() > 1) {
    std::fprintf(stderr,
                 "error: lb_imbalance runs in one process (its clock unit and model loads live "
                 "in PE 0's process), not %d; run it with --weft:threads=N\n",
                 weft::num_nodes());
    std::fflush(stderr);
    weft::exit(2);
    co_return;
  }
  time_unit();
  g_unit_s = weft::bench::summarize(g_unit_us).median * 1e-6;
  const int pes = weft::num_pes();
  const int n = g_s.per_pe * pes;
  auto arr = weft::array<Item>::create(n);
  g_run = run_result{};
  for (long it = 0; it <= g_s.steps; ++it) {
    auto f = weft::make_future<std::uint64_t>();
    const std::uint64_t t0 = weft::base::wall_ns();
    arr.broadcast<&Item::step>(it, transient, c.tasks, is_sync(it),
                               weft::callback<std::uint64_t>(f));
    const std::uint64_t sum = co_await f;
    const std::uint64_t t1 = weft::base::wall_ns();
    long units = 0;
    for (int i = 0; i < n; ++i) units += units_of(i, n, it, transient);
    g_run.step_us.push_back(double(t1 - t0) * 1e-3);
    g_run.ideal_us.push_back(double(units) / pes);  // x unit time, once the run is over
    g_run.sums.push_back(sum);
  }
  weft::exit(0);
}

void summarize_run(int cs, int ci) {
  const double unit = weft::bench::summarize(g_unit_us).median;
  std::vector<double> after, before, sync_us, plain_us;
  for (long it = 1; it <= g_s.steps; ++it) {
    const double t = g_run.step_us[std::size_t(it)];
    const double r = t / (g_run.ideal_us[std::size_t(it)] * unit);
    if (is_sync(it)) {
      sync_us.push_back(t);
    } else {
      plain_us.push_back(t);
      (it > g_s.sync_every ? after : before).push_back(r);
    }
  }
  per_repeat& p = g_res[cs][ci];
  p.after.push_back(weft::bench::summarize(after).median);
  p.before.push_back(weft::bench::summarize(before).median);
  p.sync_ms.push_back(
      (weft::bench::summarize(sync_us).median - weft::bench::summarize(plain_us).median) * 1e-3);
  std::vector<std::uint64_t>& ref = g_ref_sums[cs];
  if (ref.empty()) {
    ref = g_run.sums;
  } else if (ref != g_run.sums) {
    std::fprintf(stderr,
                 "lb_imbalance: %s, %s: the steps' checksums differ from the first run of this "
                 "case (a unit lost, run twice, or an item's data not carried when it moved)\n",
                 case_names[cs], configs[ci].name);
    std::exit(1);
  }
}

void report(int pes) {
  weft::bench::reporter out("lb_imbalance", g_s.cli.json);
  const weft::bench::summary unit = weft::bench::summarize(g_unit_us);
  out.row({{"pes", pes},
           {"items", g_s.per_pe * pes},
           {"units", g_s.units},
           {"heavy", g_s.heavy},
           {"spike", g_s.spike},
           {"work", g_s.work},
           {"steps", g_s.steps},
           {"sync_every", g_s.sync_every},
           {"strategy", g_s.strategy},
           {"loads", g_s.model_loads ? "model" : "measured"},
           {"metric", "unit_us"},
           {"value", unit.median},
           {"spread", unit.spread()},
           {"checksums", "equal"}});
  out.flush();
  for (int cs : g_s.cases) {
    for (int ci : g_s.configs) {
      const per_repeat& p = g_res[cs][ci];
      const weft::bench::summary a = weft::bench::summarize(p.after);
      const weft::bench::summary b = weft::bench::summarize(p.before);
      const weft::bench::summary s = weft::bench::summarize(p.sync_ms);
      out.row({{"case", case_names[cs]},
               {"config", configs[ci].name},
               {"pes", pes},
               {"metric", "after_vs_ideal"},
               {"value", a.median},
               {"min", a.min},
               {"max", a.max},
               {"spread", a.spread()},
               {"before_vs_ideal", b.median},
               {"sync_ms", s.median},
               {"sync_ms_min", s.min},
               {"sync_ms_max", s.max}});
    }
    out.flush();
  }
}

std::vector<int> pick(const std::string& flag, const std::string& list,
                      std::initializer_list<const char*> names) {
  std::vector<int> out;
  for (const std::string& item : weft::bench::split_list(list)) {
    int i = 0, k = -1;
    for (const char* nm : names) {
      if (item == nm) k = i;
      ++i;
    }
    if (k < 0) {
      std::string all;
      for (const char* nm : names) all += std::string(all.empty() ? "" : ", ") + nm;
      std::fprintf(stderr, "error: --%s: unknown item '%s' (%s)\n", flag.c_str(), item.c_str(),
                   all.c_str());
      std::exit(2);
    }
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  settings& s = g_s;
  s.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(s.cli, {"steps", "sync-every", "per-pe", "units", "heavy", "spike",
                                      "work", "strategy", "configs", "cases", "loads"});
  s.steps = weft::bench::positive_arg(s.cli, "steps", 40, 100'000);
  s.sync_every = weft::bench::positive_arg(s.cli, "sync-every", 10, 100'000);
  s.per_pe = int(weft::bench::positive_arg(s.cli, "per-pe", 8, 10'000));
  s.units = int(weft::bench::positive_arg(s.cli, "units", 24, 100'000));
  s.heavy = int(weft::bench::positive_arg(s.cli, "heavy", 3, 100));
  s.spike = int(weft::bench::positive_arg(s.cli, "spike", 4, 100));
  s.work = weft::bench::positive_arg(s.cli, "work", 1000, 1'000'000'000);
  s.strategy = weft::bench::arg(s.cli, "strategy", "greedy-refine");
  s.configs = pick("configs", weft::bench::arg(s.cli, "configs", "off,lb,pf,both"),
                   {"off", "lb", "pf", "both"});
  s.cases = pick("cases", weft::bench::arg(s.cli, "cases", "persistent,transient"),
                 {"persistent", "transient"});
  const std::string loads = weft::bench::arg(s.cli, "loads", "measured");
  if (loads != "measured" && loads != "model") {
    std::fprintf(stderr, "error: --loads=%s: expected measured or model\n", loads.c_str());
    return 2;
  }
  s.model_loads = loads == "model";
  if (s.sync_every >= s.steps) {
    std::fprintf(stderr,
                 "error: --sync-every=%ld must be below --steps=%ld (steps after the first "
                 "balancing step are what is measured)\n",
                 s.sync_every, s.steps);
    return 2;
  }
  if (s.strategy == "off") {
    std::fprintf(stderr, "error: --strategy=off: name a strategy (greedy-refine, greedy, ...)\n");
    return 2;
  }
  weft::runtime_config base = weft::parse_options(argc, argv);
  if (base.lb != "off") {
    std::fprintf(stderr,
                 "error: --weft:lb=%s: lb_imbalance sets --weft:lb per configuration (off, or "
                 "--strategy=NAME for lb and both)\n",
                 base.lb.c_str());
    return 2;
  }
  int pes = 0;
  for (int r = 0; r < s.cli.repeat; ++r) {
    for (int cs : s.cases) {
      // Configurations back to back, reversed every other repeat (drift of
      // the machine spreads over all of them).
      for (std::size_t k = 0; k < s.configs.size(); ++k) {
        const int ci = s.configs[r % 2 == 0 ? k : s.configs.size() - 1 - k];
        weft::runtime_config cfg = base;
        cfg.lb = configs[ci].balance ? s.strategy : "off";
        const int rc = weft::run(cfg, argc, argv, [cs, ci, &pes](weft::args) -> weft::task<> {
          pes = weft::num_pes();
          return drive(cs == 1, configs[ci]);
        });
        if (rc != 0) return rc;
        summarize_run(cs, ci);
      }
    }
  }
  report(pes);
  return 0;
}
