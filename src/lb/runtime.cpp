// The balancer behind at_sync (src/objects/sync.cpp): the step's records
// become an lb::instance, the strategy named by --weft:lb places them, and
// the plan goes back with a line for --weft:lb-stats.
#include "weft/lb/runtime.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/lb/evaluate.hpp"
#include "weft/lb/strategy.hpp"
#include "weft/objects/detail/runtime.hpp"

namespace weft::lb {

namespace {

namespace od = weft::objects::detail;

std::string format(const char* fmt, double a, double b) {
  char buf[96];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

od::balance_plan balance(const od::collection_ref&, std::uint64_t step,
                         const std::vector<od::sync_record>& records) {
  const runtime_config& cfg = weft::config();
  instance inst;
  const int pes = num_pes();
  const int per_node = std::max(1, node_size());
  inst.pes.resize(std::size_t(pes));
  for (int p = 0; p < pes; ++p) inst.pes[std::size_t(p)].node = p / per_node;
  inst.objects.reserve(records.size());
  for (const od::sync_record& r : records) {
    pe_info& pe = inst.pes.at(std::size_t(r.pe));
    if (r.background >= 0) pe.background = std::max(pe.background, r.background);
    inst.objects.push_back({r.load, int(r.pe), r.migratable != 0, r.bytes});
  }
  options opts;
  opts.tolerance = cfg.lb_tolerance;
  opts.seed = step + 1;
  result res = run(cfg.lb, inst, opts);
  od::balance_plan plan;
  if (cfg.lb_stats) {
    const metrics before = evaluate(inst, current_placement(inst));
    const metrics after = evaluate(inst, res.placement, res.seconds);
    plan.summary = cfg.lb + ": max/avg " +
                   format("%.3f (max %.3g s)", before.imbalance(), before.max_load) +
                   format(" -> predicted %.3f (max %.3g s)", after.imbalance(), after.max_load) +
                   ", " + std::to_string(after.migrations) + " migrations, " +
                   std::to_string(after.bytes_moved) + " bytes";
  }
  plan.pe = std::move(res.placement);
  return plan;
}

void node_start() {
  const runtime_config& cfg = weft::config();
  if (!cfg.lb_dump.empty()) base::usage_error("not implemented: --weft:lb-dump");
  const std::string& name = cfg.lb;
  if (name == "off" || has_strategy(name)) return;
  std::string accepted = "off";
  for (const std::string& s : strategy_names()) accepted += "|" + s;
  base::usage_error("--weft:lb=%s: no such strategy; accepted: %s (or one the program registers)",
                    name.c_str(), accepted.c_str());
}

}  // namespace

void balance() {
  od::request_balance_everywhere();
}

bool detail::install_runtime() noexcept {
  static const bool done = [] {
    od::set_balancer(&balance);
    weft::detail::register_layer({"lb", &node_start, nullptr, nullptr, nullptr});
    return true;
  }();
  return done;
}

}  // namespace weft::lb
