// weft-lbsim: the offline load-balancing simulator (issue 27). It makes an
// instance -- objects with loads on PEs grouped into nodes, and their
// communication graph -- runs one strategy or several side by side on it,
// and prints what each plan achieves: max/avg/min load, spread, quality
// against the lower bound, migrations, bytes moved, communication left
// between PEs and nodes, and the strategy's time. It can also write the
// instance in LBAF's JSON input, for DARMA's analysis framework. With
// --replay=FILE the instances are instead the balancing steps a run dumped
// (--weft:lb-dump, weft/lb/dump.hpp), one report per step.
//
// Strategies, evaluation and instances are the lb layer's (weft_lb), the
// very code the runtime calls; nothing here starts a node. Options are
// parsed here (no runtime options to share); a bad one is a usage error
// naming what is accepted (exit 2), as in every weft program; a dump that
// cannot be read is a failure (exit 3) naming the file and byte.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <weft/base/error.hpp>
#include <weft/base/json.hpp>
#include <weft/lb/dump.hpp>
#include <weft/lb/evaluate.hpp>
#include <weft/lb/generate.hpp>
#include <weft/lb/lbaf.hpp>
#include <weft/lb/strategy.hpp>

namespace lb = weft::lb;
namespace {

constexpr const char* about =
    "usage: weft-lbsim [options]\n"
    "\n"
    "Generates a load-balancing instance, runs strategies on it and prints what\n"
    "each plan achieves (docs/lb.md). Options (--name=value or --name value):\n"
    "  --objects=N          objects (default 10000)\n"
    "  --pes=P              PEs (default 64)\n"
    "  --pes-per-node=K     PEs per node (default 8)\n"
    "  --graph=G            communication graph: ring, mesh2d, random, none (default ring)\n"
    "  --load=L             object loads: uniform, lognormal, hotspot (default lognormal)\n"
    "  --background=X       background load added to every PE (default 0)\n"
    "  --seed=S             generator seed (default 1); also the seed of 'random'\n"
    "  --lb=NAME            the strategy to run (default greedy-refine)\n"
    "  --compare=A,B,...    run several strategies on the one instance, side by side\n"
    "  --tolerance=T        allowed max over the strategy's bound, >= 1 (default 1.02)\n"
    "  --group-size=G       hierarchical: nodes per group (default 16)\n"
    "  --inner=NAME         node-aware, hierarchical: strategy inside a node\n"
    "                       (greedy, greedy-refine, refine, comm: METIS on the\n"
    "                       edges between the node's objects; default refine;\n"
    "                       --weft:lb-tree-inner at run time)\n"
    "  --json               one JSON object instead of the table\n"
    "  --lbaf=FILE          also write the instance in LBAF's JSON input; a FILE with\n"
    "                       %r gets one file per PE (e.g. data.%r.json); with\n"
    "                       --replay, %s in FILE is the step number and every\n"
    "                       replayed step is written, without %s the first only\n"
    "  --replay=FILE        instead of generating, replay the balancing steps a run\n"
    "                       dumped with --weft:lb-dump=FILE (FILE.node<N> for node N):\n"
    "                       one report per step, with a '(dumped)' row for the plan\n"
    "                       the run chose; each step's tolerance and seed are the\n"
    "                       run's unless --tolerance or --seed is given\n"
    "  --steps=A:B          with --replay: only steps A..B (also A: or A)\n"
    "  --collection=NAME    with --replay: only the steps of this collection\n"
    "                       (as printed, e.g. 'array Block#0.1')\n"
    "  --help               this text\n"
    "Strategies: greedy, greedy-refine, refine, node-aware, hierarchical, comm\n"
    "(METIS graph partitioning), rotate, random.\n"
    "Objects start in blocks (object i on PE i*P/N). --objects, --pes,\n"
    "--pes-per-node, --graph, --load and --background make the generated\n"
    "instance and are errors with --replay.\n"
    "Exit code 0, 2 for a bad option, 3 for a failed strategy, output file or an\n"
    "unreadable dump (or one without the selected steps).\n";

constexpr const char* accepted =
    "--objects, --pes, --pes-per-node, --graph, --load, --background, --seed, --lb, --compare, "
    "--tolerance, --group-size, --inner, --json, --lbaf, --replay, --steps, --collection, --help";

struct config {
  config() {
    gen.objects = 10000;
    gen.pes = 64;
    gen.pes_per_node = 8;
  }
  lb::generator gen;
  std::vector<std::string> strategies{"greedy-refine"};
  lb::options opts;
  bool json = false;
  std::string lbaf;
  // --replay
  std::string replay, collection;
  long first_step = 0, last_step = -1;  // last -1: to the end
  bool seed_given = false, tolerance_given = false;
};

// "A:B", "A:" or "A" as the runtime's --weft:lb-dump-steps reads it.
void parse_steps(const std::string& v, long& a, long& b) {
  auto number = [&](const std::string& t, long& out) {
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 18)
      weft::base::usage_error(
          "weft-lbsim: --steps=%s: accepted: A:B, A: or A (step numbers from 0)", v.c_str());
    out = std::stol(t);
  };
  const std::size_t colon = v.find(':');
  number(v.substr(0, colon), a);
  b = a;
  if (colon == std::string::npos) return;
  if (colon + 1 == v.size()) {
    b = -1;
    return;
  }
  number(v.substr(colon + 1), b);
  if (b < a)
    weft::base::usage_error("weft-lbsim: --steps=%s: the last step comes before the first",
                            v.c_str());
}

std::uint64_t parse_count(const std::string& opt, const std::string& v, std::uint64_t min) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-' || n < min)
    weft::base::usage_error("weft-lbsim: %s=%s: accepted: an integer >= %llu", opt.c_str(),
                            v.c_str(), static_cast<unsigned long long>(min));
  return n;
}

double parse_real(const std::string& opt, const std::string& v, double min) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= min) || x > 1e300)
    weft::base::usage_error("weft-lbsim: %s=%s: accepted: a number >= %g", opt.c_str(), v.c_str(),
                            min);
  return x;
}

void check_strategy(const std::string& name) {
  if (!lb::has_strategy(name)) lb::make_strategy(name);  // the usage (or not-implemented) error
}

config parse(int argc, char** argv) {
  config c;
  std::string generator_option;  // the first one given: an error with --replay
  bool steps_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      std::fputs(about, stdout);
      std::exit(0);
    }
    if (arg == "--json") {
      c.json = true;
      continue;
    }
    const std::size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg.rfind("--", 0) == 0 && i + 1 < argc) {
      value = argv[++i];
    } else {
      weft::base::usage_error("weft-lbsim: '%s' is not an option or lacks its value (accepted: %s)",
                              arg.c_str(), accepted);
    }
    if (arg == "--objects" || arg == "--pes" || arg == "--pes-per-node" || arg == "--graph" ||
        arg == "--load" || arg == "--background")
      if (generator_option.empty()) generator_option = arg;
    if (arg == "--objects")
      c.gen.objects = parse_count(arg, value, 0);
    else if (arg == "--pes")
      c.gen.pes = static_cast<int>(parse_count(arg, value, 1));
    else if (arg == "--pes-per-node")
      c.gen.pes_per_node = static_cast<int>(parse_count(arg, value, 1));
    else if (arg == "--seed") {
      c.gen.seed = c.opts.seed = parse_count(arg, value, 0);
      c.seed_given = true;
    } else if (arg == "--background")
      c.gen.background = parse_real(arg, value, 0);
    else if (arg == "--tolerance") {
      c.opts.tolerance = parse_real(arg, value, 1);
      c.tolerance_given = true;
    } else if (arg == "--group-size")
      c.opts.group_size = static_cast<int>(parse_count(arg, value, 1));
    else if (arg == "--inner") {
      if (value != "greedy" && value != "greedy-refine" && value != "refine" && value != "comm")
        weft::base::usage_error(
            "weft-lbsim: --inner=%s: accepted: greedy, greedy-refine, refine, comm", value.c_str());
      c.opts.inner = value;
    } else if (arg == "--graph") {
      if (!lb::parse_graph(value, c.gen.graph))
        weft::base::usage_error("weft-lbsim: --graph=%s: accepted: %s", value.c_str(),
                                lb::graph_names());
    } else if (arg == "--load") {
      if (!lb::parse_load(value, c.gen.load))
        weft::base::usage_error("weft-lbsim: --load=%s: accepted: %s", value.c_str(),
                                lb::load_names());
    } else if (arg == "--lb") {
      check_strategy(value);
      c.strategies = {value};
    } else if (arg == "--compare") {
      c.strategies.clear();
      std::size_t start = 0;
      while (start <= value.size()) {
        const std::size_t comma = std::min(value.find(',', start), value.size());
        const std::string name = value.substr(start, comma - start);
        check_strategy(name);
        c.strategies.push_back(name);
        start = comma + 1;
      }
    } else if (arg == "--lbaf") {
      if (value.empty()) weft::base::usage_error("weft-lbsim: --lbaf needs a file name");
      c.lbaf = value;
    } else if (arg == "--replay") {
      if (value.empty()) weft::base::usage_error("weft-lbsim: --replay needs a file name");
      c.replay = value;
    } else if (arg == "--steps") {
      parse_steps(value, c.first_step, c.last_step);
      steps_given = true;
    } else if (arg == "--collection") {
      if (value.empty()) weft::base::usage_error("weft-lbsim: --collection needs a name");
      c.collection = value;
    } else {
      weft::base::usage_error("weft-lbsim: unknown option '%s' (accepted: %s)", arg.c_str(),
                              accepted);
    }
  }
  if (c.replay.empty() && (steps_given || !c.collection.empty()))
    weft::base::usage_error("weft-lbsim: %s applies only with --replay=FILE",
                            steps_given ? "--steps" : "--collection");
  if (!c.replay.empty() && !generator_option.empty())
    weft::base::usage_error(
        "weft-lbsim: %s makes a generated instance; with --replay the instances are the "
        "dump's (accepted with --replay: --lb, --compare, --tolerance, --seed, --group-size, "
        "--inner, --json, --lbaf, --steps, --collection)",
        generator_option.c_str());
  if (c.gen.objects > 0xffffffffull)
    weft::base::usage_error("weft-lbsim: --objects: at most 4294967295");
  return c;
}

void json_row(const std::string& name, const lb::metrics& m, bool last) {
  std::printf(
      "{\"strategy\":%s,\"max\":%.9g,\"avg\":%.9g,\"min\":%.9g,\"stddev\":%.9g,\"max_over_avg\":%."
      "6f,"
      "\"max_over_lower_bound\":%.6f,\"migrations\":%llu,\"bytes_moved\":%llu,\"off_pe_messages\":%"
      "llu,"
      "\"off_pe_bytes\":%llu,\"off_node_messages\":%llu,\"off_node_bytes\":%llu,\"seconds\":%.6f}%"
      "s",
      weft::base::json_quote(name).c_str(), m.max_load, m.avg_load, m.min_load, m.stddev,
      m.imbalance(), m.quality(), static_cast<unsigned long long>(m.migrations),
      static_cast<unsigned long long>(m.bytes_moved),
      static_cast<unsigned long long>(m.off_pe_messages),
      static_cast<unsigned long long>(m.off_pe_bytes),
      static_cast<unsigned long long>(m.off_node_messages),
      static_cast<unsigned long long>(m.off_node_bytes), m.strategy_seconds, last ? "" : ",");
}

void text_row(const std::string& name, const lb::metrics& m) {
  std::printf("%-14s %10.4g %10.4g %10.4g %9.4g %7.4f %7.4f %10llu %12llu %10llu %10llu %9.4f\n",
              name.c_str(), m.max_load, m.avg_load, m.min_load, m.stddev, m.imbalance(),
              m.quality(), static_cast<unsigned long long>(m.migrations),
              static_cast<unsigned long long>(m.bytes_moved),
              static_cast<unsigned long long>(m.off_pe_messages),
              static_cast<unsigned long long>(m.off_node_messages), m.strategy_seconds);
}

// One report: the instance's line (or JSON object) and a row per strategy.
// `step` is null for a generated instance; for a replayed one, its plan is
// the '(dumped)' row when the dump carries it.
void report(const config& c, const lb::instance& inst, const lb::options& opts, std::uint64_t seed,
            const lb::dumped_step* step) {
  std::vector<std::pair<std::string, lb::metrics>> rows;
  rows.emplace_back("(before)", lb::evaluate(inst, lb::current_placement(inst)));
  if (step && !step->chosen.empty())
    rows.emplace_back("(dumped)", lb::evaluate(inst, step->chosen));
  for (const std::string& name : c.strategies) {
    const lb::result r = lb::run(name, inst, opts);
    rows.emplace_back(
        name, lb::evaluate(inst, r.placement.empty() ? lb::current_placement(inst) : r.placement,
                           r.seconds));
  }
  if (c.json) {
    std::printf("{");
    if (step)
      std::printf("\"step\":%llu,\"collection\":%s,\"dumped_strategy\":%s,",
                  static_cast<unsigned long long>(step->step),
                  weft::base::json_quote(step->collection).c_str(),
                  weft::base::json_quote(step->strategy).c_str());
    std::printf(
        "\"instance\":{\"objects\":%llu,\"pes\":%d,\"nodes\":%d,\"edges\":%zu,\"seed\":%llu,"
        "\"tolerance\":%g},\"results\":[",
        static_cast<unsigned long long>(inst.objects.size()), inst.num_pes(), inst.num_nodes(),
        inst.edges.size(), static_cast<unsigned long long>(seed), opts.tolerance);
    for (std::size_t i = 0; i < rows.size(); ++i)
      json_row(rows[i].first, rows[i].second, i + 1 == rows.size());
    std::printf("]}\n");
    return;
  }
  if (step)
    std::printf("step %llu of %s (the run used %s, tolerance %g, seed %llu)\n",
                static_cast<unsigned long long>(step->step), step->collection.c_str(),
                step->strategy.empty() ? "?" : step->strategy.c_str(), step->tolerance,
                static_cast<unsigned long long>(step->seed));
  std::printf("instance: %zu objects on %d PEs (%d nodes), %zu edges, lower bound %.4g\n",
              inst.objects.size(), inst.num_pes(), inst.num_nodes(), inst.edges.size(),
              lb::lower_bound(inst));
  std::printf("%-14s %10s %10s %10s %9s %7s %7s %10s %12s %10s %10s %9s\n", "strategy", "max",
              "avg", "min", "stddev", "max/avg", "max/lb", "migrations", "bytes moved",
              "off-PE msg", "off-node", "time (s)");
  for (const auto& [name, m] : rows) text_row(name, m);
}

void write_lbaf_or_fail(const lb::instance& inst, const std::string& path) {
  const std::string err = lb::write_lbaf(inst, path);
  if (!err.empty()) weft::base::fatal("weft-lbsim: %s", err.c_str());
}

// --replay: the selected steps of the dump, one report each.
int replay(const config& c) {
  std::vector<lb::dumped_step> steps;
  try {
    steps = lb::read_dump(c.replay);
  } catch (const lb::dump_error& e) {
    weft::base::fatal("weft-lbsim: --replay: %s", e.what());
  }
  const std::size_t in_file = steps.size();
  std::erase_if(steps, [&](const lb::dumped_step& s) {
    return s.step < std::uint64_t(c.first_step) ||
           (c.last_step >= 0 && s.step > std::uint64_t(c.last_step)) ||
           (!c.collection.empty() && s.collection != c.collection);
  });
  if (steps.empty()) {
    if (in_file == 0)
      weft::base::fatal(
          "weft-lbsim: --replay: %s holds no balancing step (no array whose root PE "
          "is on the node that wrote it reached at_sync, or --weft:lb-dump-steps "
          "left them all out)",
          c.replay.c_str());
    weft::base::fatal(
        "weft-lbsim: --replay: none of the %zu steps in %s is selected by "
        "--steps/--collection",
        in_file, c.replay.c_str());
  }
  const std::size_t s_at = c.lbaf.find("%s");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const lb::dumped_step& s = steps[i];
    if (!c.lbaf.empty() && (i == 0 || s_at != std::string::npos)) {
      std::string path = c.lbaf;
      if (s_at != std::string::npos) {
        path.replace(s_at, 2, std::to_string(s.step));
        for (std::size_t j = 0; j < i; ++j)
          if (steps[j].step == s.step)
            weft::base::fatal(
                "weft-lbsim: --lbaf=%s: step %llu of %s and of %s would both be "
                "written to %s; choose one with --collection",
                c.lbaf.c_str(), static_cast<unsigned long long>(s.step),
                steps[j].collection.c_str(), s.collection.c_str(), path.c_str());
      }
      write_lbaf_or_fail(s.inst, path);
    }
    lb::options opts = c.opts;
    // A dump written by a tool rather than a run may carry no options.
    if (!c.tolerance_given && s.tolerance >= 1) opts.tolerance = s.tolerance;
    if (!c.seed_given) opts.seed = s.seed;
    if (!c.json && i > 0) std::printf("\n");
    report(c, s.inst, opts, opts.seed, &s);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const config c = parse(argc, argv);
  if (!c.replay.empty()) return replay(c);
  const lb::instance inst = lb::generate(c.gen);
  if (!c.lbaf.empty()) write_lbaf_or_fail(inst, c.lbaf);
  report(c, inst, c.opts, c.gen.seed, nullptr);
  return 0;
}
