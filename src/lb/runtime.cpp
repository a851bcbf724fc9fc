// The balancer behind at_sync (src/objects/sync.cpp): the step's records
// become an lb::instance, the strategy named by --weft:lb places them, and
// the plan goes back with a line for --weft:lb-stats. With
// --weft:lb-dump=FILE each step in the chosen range is also appended to
// the node's dump file (weft/lb/dump.hpp). With --weft:lb-comm the
// elements' communication records become the instance's edges: those
// between elements of the step's arrays (of one array, or of every array
// taking part with --weft:lb-arrays=together); what they sent to arrays
// not in the step is no edge (nobody places those elements in this step)
// and --weft:lb-stats reports it as off-array traffic.
#include "weft/lb/runtime.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include "lb/builtin.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/lb/dump.hpp"
#include "weft/lb/evaluate.hpp"
#include "weft/lb/strategy.hpp"
#include "weft/objects/detail/runtime.hpp"

namespace weft::lb {

namespace {

namespace od = weft::objects::detail;

// The node's dump file. Several arrays may balance at once, each on its
// root PE, so every access holds `mu`; a step is encoded outside the lock
// and written with one fwrite and a flush, so a killed run leaves whole
// steps (a reader reports a step cut short by the kill as truncated).
// Opened by the node's first PE as it starts (a stale file from an earlier
// run is replaced even when this run balances nothing), closed at node
// stop; a program running weft::run again opens it afresh.
struct dump_file {
  std::mutex mu;
  std::FILE* f = nullptr;  // guarded by mu
  std::string path;        // guarded by mu
};
dump_file g_dump;

// Opens the file if it is not open yet. Caller holds g_dump.mu. PE.
void open_dump_locked() {
  if (g_dump.f) return;
  const int node = my_node();
  g_dump.path = dump_path_for_node(weft::config().lb_dump, node);
  g_dump.f = std::fopen(g_dump.path.c_str(), "wb");
  if (!g_dump.f)
    base::fatal_sys(errno, "fopen", "--weft:lb-dump: cannot create %s", g_dump.path.c_str());
  const std::string header = encode_dump_header(node);
  if (std::fwrite(header.data(), 1, header.size(), g_dump.f) != header.size() ||
      std::fflush(g_dump.f) != 0)
    base::fatal_sys(errno, "fwrite", "--weft:lb-dump: cannot write %s", g_dump.path.c_str());
}

using detail::dumps_step;

void dump_step(const dumped_step& s) {
  const std::string bytes = encode_step(s);
  std::lock_guard<std::mutex> lock(g_dump.mu);
  open_dump_locked();
  if (std::fwrite(bytes.data(), 1, bytes.size(), g_dump.f) != bytes.size() ||
      std::fflush(g_dump.f) != 0)
    base::fatal_sys(errno, "fwrite", "--weft:lb-dump: cannot write step %llu of %s to %s",
                    static_cast<unsigned long long>(s.step), s.collection.c_str(),
                    g_dump.path.c_str());
}

std::string format(const char* fmt, double a, double b) {
  char buf[96];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

// An element of a step: its array's collection id and its key (two
// arrays' keys may be alike).
struct element_name {
  std::uint64_t collection;
  index_key key;
  friend bool operator==(const element_name&, const element_name&) = default;
};
struct element_name_hash {
  std::size_t operator()(const element_name& e) const noexcept {
    return index_key_hash{}(e.key) ^ (e.collection * 0x9E3779B97F4A7C15ull);
  }
};

// What the step's elements sent to elements of arrays outside the step.
struct off_array {
  std::uint64_t messages = 0, bytes = 0;
};

// The step's communication records as edges between the records' objects:
// one per unordered pair, both directions and every PE that counted it
// summed (strategies treat the graph as undirected). A record whose
// receiver's array is not in the step is off-array traffic; one naming an
// element of the step's arrays that has no record (destroyed, inserted
// since) is dropped, as is an element's sending to itself (no placement
// changes it).
std::vector<edge> edges_of(const std::vector<od::step_array>& arrays,
                           const std::vector<od::sync_record>& records,
                           const std::vector<od::comm_record>& comm, off_array& off) {
  if (comm.empty()) return {};
  std::unordered_map<element_name, std::uint32_t, element_name_hash> object_of;
  object_of.reserve(records.size());
  std::size_t i = 0;
  for (const od::step_array& a : arrays)
    for (std::uint64_t r = 0; r < a.records && i < records.size(); ++r, ++i)
      object_of.emplace(element_name{a.collection, records[i].key}, std::uint32_t(i));
  auto in_step = [&arrays](std::uint64_t collection) {
    return std::any_of(arrays.begin(), arrays.end(), [collection](const od::step_array& a) {
      return a.collection == collection;
    });
  };
  std::unordered_map<std::uint64_t, std::size_t> edge_of;  // (a << 32 | b), a < b
  std::vector<edge> edges;
  for (const od::comm_record& c : comm) {
    if (!in_step(c.to_collection)) {
      off.messages += c.messages;
      off.bytes += c.bytes;
      continue;
    }
    auto from = object_of.find({c.from_collection, c.from}),
         to = object_of.find({c.to_collection, c.to});
    if (from == object_of.end() || to == object_of.end() || from->second == to->second) continue;
    const std::uint32_t a = std::min(from->second, to->second),
                        b = std::max(from->second, to->second);
    auto [it, fresh] = edge_of.try_emplace(std::uint64_t(a) << 32 | b, edges.size());
    if (fresh) edges.push_back({a, b, 0, 0});
    edges[it->second].messages += c.messages;
    edges[it->second].bytes += c.bytes;
  }
  // In object order, whatever order the PEs replied in: a dump of the
  // same run replays alike.
  std::sort(edges.begin(), edges.end(),
            [](const edge& x, const edge& y) { return x.a != y.a ? x.a < y.a : x.b < y.b; });
  return edges;
}

od::balance_plan balance(const std::string& name, std::uint64_t step,
                         const std::vector<od::step_array>& arrays,
                         const std::vector<od::sync_record>& records,
                         const std::vector<od::comm_record>& comm) {
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
  std::uint64_t counted = 0;
  for (const od::step_array& a : arrays) counted += a.records;
  if (counted != records.size())
    base::fatal("lb: step %llu of %s: its arrays name %llu records, the step has %zu",
                static_cast<unsigned long long>(step), name.c_str(),
                static_cast<unsigned long long>(counted), records.size());
  off_array off;
  inst.edges = edges_of(arrays, records, comm, off);
  options opts;
  opts.tolerance = cfg.lb_tolerance;
  opts.seed = step + 1;
  opts.group_size = cfg.lb_tree_group;
  // hierarchical placed here (a dumped step, arrays together): the tree's
  // levels in one place, its node level the one the tree uses.
  opts.inner = cfg.lb_tree_inner;
  result res = run(cfg.lb, inst, opts);
  if (dumps_step(step)) {
    dumped_step s;
    s.step = step;
    s.collection = name;
    s.strategy = cfg.lb;
    s.tolerance = opts.tolerance;
    s.seed = opts.seed;
    s.inst = inst;
    if (res.placement.size() == inst.objects.size()) s.chosen = res.placement;
    dump_step(s);
  }
  od::balance_plan plan;
  if (cfg.lb_stats) {
    const metrics before = evaluate(inst, current_placement(inst));
    const metrics after = evaluate(inst, res.placement, res.seconds);
    plan.summary = cfg.lb + ": max/avg " +
                   format("%.3f (max %.3g s)", before.imbalance(), before.max_load) +
                   format(" -> predicted %.3f (max %.3g s)", after.imbalance(), after.max_load) +
                   ", " + std::to_string(after.migrations) + " migrations, " +
                   std::to_string(after.bytes_moved) + " bytes";
    if (!inst.edges.empty())
      plan.summary += ", off-PE " + std::to_string(before.off_pe_messages) + " messages " +
                      std::to_string(before.off_pe_bytes) + " bytes -> predicted " +
                      std::to_string(after.off_pe_messages) + " messages " +
                      std::to_string(after.off_pe_bytes) + " bytes";
    if (off.messages != 0)
      plan.summary += ", off-array " + std::to_string(off.messages) + " messages " +
                      std::to_string(off.bytes) + " bytes (not placed)";
  }
  plan.pe = std::move(res.placement);
  return plan;
}

void node_start() {
  const runtime_config& cfg = weft::config();
  const std::string& name = cfg.lb;
  if (name == "off" || has_strategy(name)) return;
  std::string accepted = "off";
  for (const std::string& s : strategy_names()) accepted += "|" + s;
  base::usage_error("--weft:lb=%s: no such strategy; accepted: %s (or one the program registers)",
                    name.c_str(), accepted.c_str());
}

void pe_start() {
  if (weft::config().lb_dump.empty() || my_rank() != 0) return;
  std::lock_guard<std::mutex> lock(g_dump.mu);
  open_dump_locked();
}

void node_stop() {
  std::lock_guard<std::mutex> lock(g_dump.mu);
  if (g_dump.f && std::fclose(g_dump.f) != 0)
    base::fatal_sys(errno, "fclose", "--weft:lb-dump: cannot close %s", g_dump.path.c_str());
  g_dump.f = nullptr;
}

}  // namespace

bool detail::dumps_step(std::uint64_t step) {
  const runtime_config& cfg = weft::config();
  if (cfg.lb_dump.empty() || step < std::uint64_t(cfg.lb_dump_first)) return false;
  return cfg.lb_dump_last < 0 || step <= std::uint64_t(cfg.lb_dump_last);
}

void balance() {
  od::request_balance_everywhere();
}

bool detail::install_runtime() noexcept {
  static const bool done = [] {
    od::set_balancer(&balance);
    detail::install_tree_runtime();
    weft::detail::register_layer({"lb", &node_start, &pe_start, nullptr, &node_stop});
    return true;
  }();
  return done;
}

}  // namespace weft::lb
