// reduction_latency: time per completed reduction of one double (op::sum)
// over every element of a chare array with E elements per PE (block map),
// round after round, each round starting once the previous result arrived:
//
//  - callback=element: the result goes to an entry method of element 0
//    (PE 0), which checks it and broadcasts the next round;
//  - callback=future: the main coroutine broadcasts a round with a fresh
//    future as the callback and co_awaits it;
//  - callback=all_reduce: every element loops `co_await all_reduce(x, sum)`
//    in a coroutine entry method (the result is broadcast to all);
//  - level=core (the baseline, side by side in the same run): the same
//    pattern with plain messages: a broadcast starts the round, each PE adds
//    its E values and sends the partial sum to PE 0, which adds the PEs'
//    partial sums and broadcasts the next round.
// So every variant's round is one gather to PE 0 plus one broadcast from it;
// the ratio objects/core per repeat shows what the objects layer adds.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "reduction_latency: time per completed sum reduction of one double over a chare array with\n"
    "E elements per PE, rounds back to back, the result going to an element's entry method, to a\n"
    "future awaited by main, or to every element (all_reduce in a coroutine); beside a core-level\n"
    "baseline (broadcast, one partial sum per PE to PE 0) in the same run, with the ratio. Flags:\n"
    "  --elems=LIST      elements per PE (default 1,8,64)\n"
    "  --rounds=N        reductions per measurement (default 2000)\n"
    "  --callback=LIST   element,future,all_reduce (default all three)";

enum class via { core, element, future, all_reduce };
const char* via_name(via v) {
  switch (v) {
    case via::core:
      return "handler";
    case via::element:
      return "element";
    case via::future:
      return "future";
    case via::all_reduce:
      return "all_reduce";
  }
  return "?";
}

void wrong_sum(const char* where, double got, double want) {
  std::fprintf(stderr, "reduction_latency (%s): sum %.17g, expected %.17g\n", where, got, want);
  weft::exit(1);
}

// The sum of 1..n (each element contributes its index + 1), exact in a double.
double expected_sum(long n) {
  return double(n) * double(n + 1) / 2;
}

// ---- completion (PE 0) ------------------------------------------------------------

long g_rounds_left = 0;    // PE 0
weft::future<int> g_done;  // PE 0: set when the current measurement ends
void complete() {
  g_done.set(0);
}

// ---- core level -------------------------------------------------------------------

struct go_params {
  int elems_per_pe;
};
weft::handler_id h_go, h_part;
int g_parts = 0;     // PE 0: partial sums of this round so far
double g_acc = 0;    // PE 0
int g_core_epp = 1;  // PE 0: elements per PE of the current measurement

void on_go(weft::message_ptr m) {
  const int epp = m->as<go_params>().elems_per_pe;
  const long first = long(weft::my_pe()) * epp;
  double s = 0;
  for (long i = first; i < first + epp; ++i) s += double(i + 1);
  weft::send(0, weft::make_message_with(h_part, s));
}

void on_part(weft::message_ptr m) {
  g_acc += m->as<double>();
  if (++g_parts < weft::num_pes()) return;
  const double want = expected_sum(long(g_core_epp) * weft::num_pes());
  if (g_acc != want) wrong_sum("core", g_acc, want);
  g_parts = 0;
  g_acc = 0;
  if (--g_rounds_left > 0)
    weft::broadcast(weft::make_message_with(h_go, go_params{g_core_epp}));
  else
    complete();
}

// ---- objects level ----------------------------------------------------------------

struct Summand : weft::array_element<Summand, int> {
  double value() const { return double(this_index() + 1); }

  // One round: contribute, the result to `cb`.
  void go(weft::callback<double> cb) { contribute(value(), weft::op::sum, cb); }

  // Element 0: a round's result (callback=element).
  void result(double s) {
    const double want = expected_sum(array_size());
    if (s != want) wrong_sum("element", s, want);
    if (--g_rounds_left > 0)
      this_proxy().broadcast<&Summand::go>(this_proxy()[0].callback<&Summand::result>());
    else
      complete();
  }

  // callback=all_reduce: `rounds` all_reduce rounds, then one contribution
  // to `done` (so the measurement ends once every element finished).
  weft::task<> loop(long rounds, weft::callback<int> done) {
    const double want = expected_sum(array_size());
    for (long r = 0; r < rounds; ++r) {
      const double s = co_await all_reduce(value(), weft::op::sum);
      if (s != want) wrong_sum("all_reduce", s, want);
    }
    contribute(1, weft::op::sum, done);
  }
};

// ---- the driver (main, PE 0) ----------------------------------------------------------

struct driver_state {
  weft::bench::cli cli;
  long rounds = 2000;
  std::vector<int> elems;
  std::vector<via> vias;                     // objects variants
  std::vector<weft::array<Summand>> arrays;  // per elems entry
  struct series {
    via v;
    int epp;
    std::vector<double> xs;
  };
  std::vector<series> samples;
} g_d;

std::vector<double>& samples_of(via v, int epp) {
  for (auto& s : g_d.samples)
    if (s.v == v && s.epp == epp) return s.xs;
  g_d.samples.push_back({v, epp, {}});
  return g_d.samples.back().xs;
}

void report() {
  driver_state& d = g_d;
  weft::bench::reporter out("reduction_latency", d.cli.json);
  const int pes = weft::num_pes();
  for (int epp : d.elems) {
    const std::vector<double>* core = nullptr;
    for (auto& s : d.samples) {
      if (s.epp != epp) continue;
      if (s.v == via::core) core = &s.xs;
      auto m = weft::bench::summarize(s.xs);
      out.row({{"level", s.v == via::core ? "core" : "objects"},
               {"callback", via_name(s.v)},
               {"pes", pes},
               {"elems_per_pe", epp},
               {"elements", long(epp) * pes},
               {"metric", "us_per_reduction"},
               {"value", m.median},
               {"min", m.min},
               {"max", m.max}});
    }
    for (auto& s : d.samples) {
      if (s.epp != epp || s.v == via::core || core == nullptr) continue;
      std::vector<double> ratios;
      for (std::size_t i = 0; i < s.xs.size() && i < core->size(); ++i)
        ratios.push_back(s.xs[i] / (*core)[i]);
      auto r = weft::bench::summarize(ratios);
      out.row({{"level", "objects"},
               {"callback", via_name(s.v)},
               {"pes", pes},
               {"elems_per_pe", epp},
               {"elements", long(epp) * pes},
               {"metric", "ratio_objects_over_core"},
               {"value", r.median},
               {"min", r.min},
               {"max", r.max}});
    }
  }
  out.flush();
}

// One measurement: `rounds` reductions; returns µs per reduction.
weft::task<double> measure(via v, std::size_t which) {
  driver_state& d = g_d;
  const int epp = d.elems[which];
  const weft::array<Summand>& arr = d.arrays[which];
  const std::uint64_t t0 = weft::base::wall_ns();
  switch (v) {
    case via::core:
      g_done = weft::make_future<int>();
      g_rounds_left = d.rounds;
      g_core_epp = epp;
      weft::broadcast(weft::make_message_with(h_go, go_params{epp}));
      co_await g_done;
      break;
    case via::element:
      g_done = weft::make_future<int>();
      g_rounds_left = d.rounds;
      arr.broadcast<&Summand::go>(arr[0].callback<&Summand::result>());
      co_await g_done;
      break;
    case via::future: {
      const double want = expected_sum(long(epp) * weft::num_pes());
      for (long r = 0; r < d.rounds; ++r) {
        auto f = weft::make_future<double>();
        arr.broadcast<&Summand::go>(weft::callback<double>(f));
        const double s = co_await f;
        if (s != want) wrong_sum("future", s, want);
      }
      break;
    }
    case via::all_reduce: {
      auto f = weft::make_future<int>();
      arr.broadcast<&Summand::loop>(d.rounds, weft::callback<int>(f));
      const int n = co_await f;
      if (n != epp * weft::num_pes()) wrong_sum("all_reduce done", n, epp * weft::num_pes());
      break;
    }
  }
  co_return double(weft::base::wall_ns() - t0) * 1e-3 / double(d.rounds);
}

weft::task<> drive() {
  driver_state& d = g_d;
  for (int epp : d.elems) d.arrays.push_back(weft::array<Summand>::create(epp * weft::num_pes()));
  std::vector<via> order{via::core};
  order.insert(order.end(), d.vias.begin(), d.vias.end());
  // Repeat -1 warms up; each size's variants back to back, reversed every
  // other repeat.
  for (int r = -1; r < d.cli.repeat; ++r)
    for (std::size_t w = 0; w < d.elems.size(); ++w)
      for (std::size_t i = 0; i < order.size(); ++i) {
        const via v = order[r % 2 == 0 ? i : order.size() - 1 - i];
        const double us = co_await measure(v, w);
        if (r >= 0) samples_of(v, d.elems[w]).push_back(us);
      }
  report();
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  h_go = weft::register_handler("reduction_latency.go", on_go);
  h_part = weft::register_handler("reduction_latency.part", on_part);

  driver_state& d = g_d;
  d.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(d.cli, {"elems", "rounds", "callback"});
  d.rounds = weft::bench::positive_arg(d.cli, "rounds", 2000, 100000000);
  for (long v : weft::bench::int_list_arg(d.cli, "elems", "1,8,64", 1, 100000))
    d.elems.push_back(int(v));
  for (const std::string& c :
       weft::bench::split_list(weft::bench::arg(d.cli, "callback", "element,future,all_reduce"))) {
    if (c == "element")
      d.vias.push_back(via::element);
    else if (c == "future")
      d.vias.push_back(via::future);
    else if (c == "all_reduce")
      d.vias.push_back(via::all_reduce);
    else {
      std::fprintf(stderr,
                   "error: --callback: unknown callback '%s' (element, future, all_reduce)\n",
                   c.c_str());
      return 2;
    }
  }
  return weft::run(argc, argv, [](weft::args) -> weft::task<> { return drive(); });
}
