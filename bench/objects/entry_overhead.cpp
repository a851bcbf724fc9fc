// entry_overhead: what the objects layer adds to one message, measured side
// by side with the core-level equivalent in the same run (interleaved, the
// order alternating between repeats), and their ratio per repeat:
//
//  - same_pe: an empty entry method that calls itself again, `calls` times
//    in a chain (each invocation sends the next), on one PE; core: a handler
//    that sends an empty message (make_message + weft::send) to itself.
//  - other_pe: ping-pong of an empty entry method between element 0 (PE 0)
//    and element 1 (PE 1); ns per one-way call (round trip / 2); core: the
//    same ping-pong of empty messages between two handlers.
//  - create: `chares` chares created in a burst on PE 0
//    (weft::create_on<Nop>(0)); each constructor sends its chare an empty
//    entry that destroys it; ns per chare from the first creation to the
//    last destruction. Core: a burst of as many empty messages to a counting
//    handler (the cost of one plain send, the floor any creation pays).
//    Beside it, what a creation touches that other PEs touch too (peer
//    visits and shared read-modify-writes, weft/base/op_counts.hpp, as PE
//    0 counted them, where all of it runs): the count that has to stay flat
//    as P grows (tests/objects/test_op_growth.cpp checks it at 2-16 PEs).
//
// The calls go to a chare array (round-robin map: element i on PE i % PEs)
// and to a group, so the cost of the array's location lookup shows beside
// the group's direct send.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/base/op_counts.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "entry_overhead: cost of an empty entry-method call (same PE: a chain of self-calls; other\n"
    "PE: ping-pong between PE 0 and PE 1) on a chare array and a group, and of creating and\n"
    "destroying a chare, each beside the core-level send (make_message + weft::send to a\n"
    "handler) in the same run, with the ratio objects/core. Flags:\n"
    "  --calls=N     calls per call measurement (default 200000; ping-pong: N/2 round trips)\n"
    "  --chares=N    chares per creation measurement (default 20000)\n"
    "  --cases=LIST  same_pe,other_pe,create (default all; other_pe needs 2 PEs)";

enum class case_kind { same_pe, other_pe, create };
enum class target_kind { handler, array, group, chare };

const char* case_name(case_kind c) {
  switch (c) {
    case case_kind::same_pe:
      return "same_pe";
    case case_kind::other_pe:
      return "other_pe";
    case case_kind::create:
      return "create";
  }
  return "?";
}
const char* target_name(target_kind t) {
  switch (t) {
    case target_kind::handler:
      return "handler";
    case target_kind::array:
      return "array";
    case target_kind::group:
      return "group";
    case target_kind::chare:
      return "chare";
  }
  return "?";
}

// ---- completion (PE 0) ------------------------------------------------------------

long g_left = 0;           // PE 0: calls (or chares) still to go
weft::future<int> g_done;  // PE 0: set when the current measurement ends
std::uint64_t g_t1 = 0;    // when it ended
void complete() {
  g_t1 = weft::base::wall_ns();
  g_done.set(0);
}

// ---- core level -------------------------------------------------------------------

weft::handler_id h_self, h_ping, h_count;

void on_self(weft::message_ptr) {
  if (--g_left > 0)
    weft::send(weft::my_pe(), weft::make_message(h_self, 0));
  else
    complete();
}

void on_ping(weft::message_ptr) {
  if (weft::my_pe() != 0)
    weft::send(0, weft::make_message(h_ping, 0));
  else if (--g_left > 0)
    weft::send(1, weft::make_message(h_ping, 0));
  else
    complete();
}

void on_count(weft::message_ptr) {
  if (--g_left == 0) complete();
}

// ---- objects level ----------------------------------------------------------------

struct ArrayCaller : weft::array_element<ArrayCaller, int> {
  void self() {
    if (--g_left > 0)
      this_proxy()[this_index()].send<&ArrayCaller::self>();
    else
      complete();
  }
  void ping() {
    if (this_index() != 0)
      this_proxy()[0].send<&ArrayCaller::ping>();
    else if (--g_left > 0)
      this_proxy()[1].send<&ArrayCaller::ping>();
    else
      complete();
  }
};

struct GroupCaller : weft::group_element<GroupCaller> {
  void self() {
    if (--g_left > 0)
      this_proxy()[this_pe()].send<&GroupCaller::self>();
    else
      complete();
  }
  void ping() {
    if (this_pe() != 0)
      this_proxy()[0].send<&GroupCaller::ping>();
    else if (--g_left > 0)
      this_proxy()[1].send<&GroupCaller::ping>();
    else
      complete();
  }
};

struct Nop : weft::chare<Nop> {
  Nop() { this_proxy().send<&Nop::die>(); }
  void die() {
    destroy();
    if (--g_left == 0) complete();
  }
};

// ---- the driver (main, PE 0) ----------------------------------------------------------

struct variant {
  case_kind c;
  target_kind t;
};

struct driver_state {
  weft::bench::cli cli;
  long calls = 200000, chares = 20000;
  std::vector<case_kind> cases;
  weft::array<ArrayCaller> arr;
  weft::group_proxy<GroupCaller> grp;
  // samples[case][target] per repeat, ns per operation
  std::vector<std::pair<variant, std::vector<double>>> samples;
  std::vector<double> shared_per_creation;  // chare creation, per repeat (PE 0's counts)
} g_d;

std::vector<double>& samples_of(variant v) {
  for (auto& [k, xs] : g_d.samples)
    if (k.c == v.c && k.t == v.t) return xs;
  g_d.samples.push_back({v, {}});
  return g_d.samples.back().second;
}

// Starts one measurement; returns the operations it counts.
long start(variant v) {
  driver_state& d = g_d;
  switch (v.c) {
    case case_kind::same_pe:
      g_left = d.calls;
      if (v.t == target_kind::handler)
        weft::send(0, weft::make_message(h_self, 0));
      else if (v.t == target_kind::array)
        d.arr[0].send<&ArrayCaller::self>();
      else
        d.grp[0].send<&GroupCaller::self>();
      return d.calls;
    case case_kind::other_pe:
      g_left = d.calls / 2;
      if (v.t == target_kind::handler)
        weft::send(1, weft::make_message(h_ping, 0));
      else if (v.t == target_kind::array)
        d.arr[1].send<&ArrayCaller::ping>();
      else
        d.grp[1].send<&GroupCaller::ping>();
      return 2 * (d.calls / 2);
    case case_kind::create:
      g_left = d.chares;
      if (v.t == target_kind::handler)
        for (long i = 0; i < d.chares; ++i) weft::send(0, weft::make_message(h_count, 0));
      else
        for (long i = 0; i < d.chares; ++i) weft::create_on<Nop>(0);
      return d.chares;
  }
  return 1;
}

void report() {
  driver_state& d = g_d;
  weft::bench::reporter out("entry_overhead", d.cli.json);
  const int pes = weft::num_pes();
  for (case_kind c : d.cases) {
    const char* metric = c == case_kind::create ? "ns_per_creation" : "ns_per_call";
    const std::vector<double>* core = nullptr;
    for (auto& [v, xs] : d.samples) {
      if (v.c != c) continue;
      if (v.t == target_kind::handler) core = &xs;
      auto s = weft::bench::summarize(xs);
      out.row({{"case", case_name(c)},
               {"level", v.t == target_kind::handler ? "core" : "objects"},
               {"target", target_name(v.t)},
               {"pes", pes},
               {"metric", metric},
               {"value", s.median},
               {"min", s.min},
               {"max", s.max}});
    }
    if (c == case_kind::create && !d.shared_per_creation.empty()) {
      auto s = weft::bench::summarize(d.shared_per_creation);
      out.row({{"case", case_name(c)},
               {"level", "objects"},
               {"target", target_name(target_kind::chare)},
               {"pes", pes},
               {"metric", "shared_ops_per_creation"},
               {"value", s.median},
               {"min", s.min},
               {"max", s.max}});
    }
    for (auto& [v, xs] : d.samples) {
      if (v.c != c || v.t == target_kind::handler || core == nullptr) continue;
      std::vector<double> ratios;
      for (std::size_t i = 0; i < xs.size() && i < core->size(); ++i)
        ratios.push_back(xs[i] / (*core)[i]);
      auto r = weft::bench::summarize(ratios);
      out.row({{"case", case_name(c)},
               {"level", "objects"},
               {"target", target_name(v.t)},
               {"pes", pes},
               {"metric", "ratio_objects_over_core"},
               {"value", r.median},
               {"min", r.min},
               {"max", r.max}});
    }
  }
  out.flush();
}

weft::task<> drive() {
  driver_state& d = g_d;
  d.arr = weft::array<ArrayCaller>::create(weft::array_options{weft::array_map::round_robin()}, 2);
  d.grp = weft::group_proxy<GroupCaller>::create();
  std::vector<variant> order;
  for (case_kind c : d.cases) {
    if (c == case_kind::other_pe && weft::num_pes() < 2) {
      std::fprintf(stderr, "entry_overhead: other_pe skipped: it needs 2 PEs (--weft:threads=2)\n");
      continue;
    }
    order.push_back({c, target_kind::handler});
    if (c == case_kind::create) {
      order.push_back({c, target_kind::chare});
    } else {
      order.push_back({c, target_kind::array});
      order.push_back({c, target_kind::group});
    }
  }
  // Repeat -1 warms up (allocator free lists, the location tables, caches).
  for (int r = -1; r < d.cli.repeat; ++r) {
    // Each case's variants back to back; reversed every other repeat.
    std::vector<variant> now = order;
    if (r % 2 != 0) {
      for (std::size_t i = 0; i < now.size();) {
        std::size_t j = i;
        while (j < now.size() && now[j].c == now[i].c) ++j;
        std::reverse(now.begin() + long(i), now.begin() + long(j));
        i = j;
      }
    }
    for (variant v : now) {
      g_done = weft::make_future<int>();
      const weft::base::op_counts c0 = weft::base::this_thread_op_counts();
      const std::uint64_t t0 = weft::base::wall_ns();
      const long ops = start(v);
      co_await g_done;
      if (r >= 0) samples_of(v).push_back(double(g_t1 - t0) / double(ops));
      if (r >= 0 && v.c == case_kind::create && v.t == target_kind::chare) {
        const weft::base::op_counts dc = weft::base::this_thread_op_counts() - c0;
        d.shared_per_creation.push_back(
            double(dc[weft::base::op::peer_visit] + dc[weft::base::op::shared_rmw]) / double(ops));
      }
    }
  }
  report();
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  h_self = weft::register_handler("entry_overhead.self", on_self);
  h_ping = weft::register_handler("entry_overhead.ping", on_ping);
  h_count = weft::register_handler("entry_overhead.count", on_count);

  driver_state& d = g_d;
  d.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(d.cli, {"calls", "chares", "cases"});
  d.calls = weft::bench::positive_arg(d.cli, "calls", 200000, 1000000000);
  d.chares = weft::bench::positive_arg(d.cli, "chares", 20000, 100000000);
  if (d.calls < 2) {
    std::fprintf(stderr, "error: --calls must be at least 2\n");
    return 2;
  }
  for (const std::string& c :
       weft::bench::split_list(weft::bench::arg(d.cli, "cases", "same_pe,other_pe,create"))) {
    if (c == "same_pe")
      d.cases.push_back(case_kind::same_pe);
    else if (c == "other_pe")
      d.cases.push_back(case_kind::other_pe);
    else if (c == "create")
      d.cases.push_back(case_kind::create);
    else {
      std::fprintf(stderr, "error: --cases: unknown case '%s' (same_pe, other_pe, create)\n",
                   c.c_str());
      return 2;
    }
  }
  return weft::run(argc, argv, [](weft::args) -> weft::task<> { return drive(); });
}
