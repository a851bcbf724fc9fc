// lb_step_cost: what one balancing step at run time costs (docs/lb.md,
// "figures"): gathering the elements' records, the strategy, moving the
// elements, telling every PE where they went, resuming them.
//
// An array of N elements (--elements, default 10^4), each carrying B bytes
// of state (--bytes, default 1024; it travels with the element and is
// checked at the end). One step: main (PE 0) broadcasts `step`; each element
// contributes the wall time of its arrival (op::max) and calls at_sync();
// resume_from_sync() contributes the wall time of its resume (op::max).
// Before each such step main times a plain round: the same broadcast, each
// element contributing, no at_sync (plain_ms). Reported:
//  - step_ms: broadcast to the last resume, less the plain round: the whole
//    balancing step as the program sees it;
//  - tail_ms: the last element's arrival to the last resume. Not the whole
//    step: each at_sync() call already merges its record into its PE's
//    part of the gathering, before the last arrival (at 10^4 elements that
//    is most of the step: docs/lb.md, "figures"). CLOCK_MONOTONIC is one
//    clock for the processes of a machine, so this holds over shm too.
//
// The strategies (--strategies, default rotate,greedy-refine; each a
// weft::run of its own, since --weft:lb is fixed for a run; or the one
// named by --weft:lb):
//  - rotate: every element moves one PE on, every step (N moves);
//  - greedy-refine (or any other): each element's load_estimate() is 4 for
//    a quarter of the index range and 1 for the rest, and that quarter
//    shifts by N/8 every step, so every step has new imbalance to repair.
// Step 0 is a warm-up (not timed). After the timed steps every element
// checks its bytes (an element whose state did not travel whole fails the
// run, exit 1). Moves per step are counted by the elements (their PE at
// resume against their PE at arrival), in a separate round, not timed.
// --weft:lb-stats adds the runtime's own split of each step (counting,
// balancer, migration) on stderr.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "lb_step_cost: the cost of one balancing step (records gathered, strategy, migration,\n"
    "resume) for an array of N elements with B bytes of state each: broadcast to the last\n"
    "resume_from_sync(), less a plain broadcast-and-reduce round; and from the last at_sync()\n"
    "to the last resume (tail_ms). The strategy is --weft:lb (rotate:\n"
    "every element moves every step; greedy-refine etc.: a skewed load_estimate() whose heavy\n"
    "quarter shifts every step). Flags:\n"
    "  --elements=N   array size (default 10000)\n"
    "  --bytes=B      state per element, moved with it (default 1024)\n"
    "  --steps=S      balancing steps per repeat (default 3), after one warm-up step;\n"
    "                 reported: the median over the repeats of each repeat's median step\n"
    "  --strategies=LIST  the strategies measured, each a weft::run of its own in this\n"
    "                 process (default rotate,greedy-refine); or --weft:lb=NAME for one.";

struct settings {
  weft::bench::cli cli;
  long elements = 10000, bytes = 1024, steps = 3;
} g_s;

std::byte pattern(long index, long k) {
  return std::byte((index * 31 + k * 7) & 0xff);
}

struct Elem : weft::array_element<Elem, int> {
  std::vector<std::byte> state;
  long step_no = 0;
  int pe_at_sync = -1;
  int moved_last = 0;
  weft::callback<std::uint64_t> resumed;

  Elem() = default;
  explicit Elem(long bytes) : state(std::size_t(bytes)) {}
  void pup(weft::pupper& p) { p | state | step_no | pe_at_sync | resumed; }

  // A quarter of the index range is heavy; it shifts by N/8 a step.
  double load_estimate() const override {
    const long n = array_size();
    const long shifted = (this_index() + step_no * std::max(1L, n / 8)) % n;
    return shifted < n / 4 ? 4.0 : 1.0;
  }

  void step(weft::callback<std::uint64_t> arrived, weft::callback<std::uint64_t> done) {
    if (pe_at_sync < 0)  // first step: the state's pattern (checked at the end)
      for (std::size_t k = 0; k < state.size(); ++k) state[k] = pattern(this_index(), long(k));
    resumed = done;
    pe_at_sync = weft::my_pe();
    contribute(std::uint64_t(weft::base::wall_ns()), weft::op::max, arrived);
    at_sync();
  }
  void resume_from_sync() override {
    const std::uint64_t now = weft::base::wall_ns();
    moved_last = weft::my_pe() != pe_at_sync;
    ++step_no;
    contribute(now, weft::op::max, resumed);
  }
  // The same round without at_sync(): what the broadcast and a reduction
  // over N elements cost alone.
  void plain(weft::callback<std::uint64_t> cb) {
    contribute(std::uint64_t(weft::base::wall_ns()), weft::op::max, cb);
  }
  void count_moves(weft::callback<long> cb) { contribute(long(moved_last), weft::op::sum, cb); }
  void check(weft::callback<long> cb) {
    long bad = long(state.size()) != g_s.bytes;
    for (std::size_t k = 0; !bad && k < state.size(); ++k)
      bad = state[k] != pattern(this_index(), long(k));
    contribute(bad, weft::op::sum, cb);
  }
};

weft::task<> drive() {
  const settings& s = g_s;
  auto arr = weft::array<Elem>::create(int(s.elements), s.bytes);
  // Per repeat: the medians over its steps.
  std::vector<double> cost_ms, tail_ms, plain_ms, moves;
  std::vector<double> r_cost, r_tail, r_plain, r_moves;
  const long all_steps = s.steps * s.cli.repeat;
  for (long it = 0; it <= all_steps; ++it) {
    auto arrived = weft::make_future<std::uint64_t>();
    auto done = weft::make_future<std::uint64_t>();
    auto plain = weft::make_future<std::uint64_t>();
    const std::uint64_t tp = weft::base::wall_ns();
    arr.broadcast<&Elem::plain>(weft::callback<std::uint64_t>(plain));
    co_await plain;
    const std::uint64_t t0 = weft::base::wall_ns();
    arr.broadcast<&Elem::step>(weft::callback<std::uint64_t>(arrived),
                               weft::callback<std::uint64_t>(done));
    const std::uint64_t last_resume = co_await done;
    const std::uint64_t t1 = weft::base::wall_ns();
    const std::uint64_t last_arrival = co_await arrived;
    auto moved = weft::make_future<long>();
    arr.broadcast<&Elem::count_moves>(weft::callback<long>(moved));
    const long m = co_await moved;
    if (it == 0) continue;  // warm-up
    r_cost.push_back(double(t1 - t0) * 1e-6 - double(t0 - tp) * 1e-6);
    r_tail.push_back(double(last_resume - last_arrival) * 1e-6);
    r_plain.push_back(double(t0 - tp) * 1e-6);
    r_moves.push_back(double(m));
    if (it % s.steps == 0) {
      cost_ms.push_back(weft::bench::summarize(r_cost).median);
      tail_ms.push_back(weft::bench::summarize(r_tail).median);
      plain_ms.push_back(weft::bench::summarize(r_plain).median);
      moves.push_back(weft::bench::summarize(r_moves).median);
      r_cost.clear(), r_tail.clear(), r_plain.clear(), r_moves.clear();
    }
  }
  auto bad = weft::make_future<long>();
  arr.broadcast<&Elem::check>(weft::callback<long>(bad));
  if (const long b = co_await bad; b != 0) {
    std::fprintf(stderr, "lb_step_cost: %ld elements lost (part of) their state moving\n", b);
    std::fflush(stderr);
    std::_Exit(1);
  }
  const weft::bench::summary c = weft::bench::summarize(cost_ms);
  const weft::bench::summary t = weft::bench::summarize(tail_ms);
  const weft::bench::summary pl = weft::bench::summarize(plain_ms);
  const weft::bench::summary mv = weft::bench::summarize(moves);
  weft::bench::reporter out("lb_step_cost", s.cli.json);
  out.row({{"strategy", weft::config().lb},
           {"pes", weft::num_pes()},
           {"nodes", weft::num_nodes()},
           {"elements", s.elements},
           {"bytes", s.bytes},
           {"steps", s.steps},
           {"repeat", s.cli.repeat},
           {"metric", "step_ms"},
           {"value", c.median},
           {"min", c.min},
           {"max", c.max},
           {"spread", c.spread()},
           {"per_element_us", c.median * 1e3 / double(s.elements)},
           {"plain_ms", pl.median},
           {"tail_ms", t.median},
           {"moves", mv.median}});
  out.flush();
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  settings& s = g_s;
  s.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(s.cli, {"elements", "bytes", "steps", "strategies"});
  s.elements = weft::bench::positive_arg(s.cli, "elements", 10000, 10'000'000);
  s.bytes = weft::bench::positive_arg(s.cli, "bytes", 1024, 1 << 24);
  s.steps = weft::bench::positive_arg(s.cli, "steps", 3, 100'000);
  const weft::runtime_config base = weft::parse_options(argc, argv);
  std::vector<std::string> strategies;
  const std::string listed = weft::bench::arg(s.cli, "strategies", "");
  if (base.lb != "off" && !listed.empty()) {
    std::fprintf(stderr, "error: give --weft:lb=NAME or --strategies=LIST, not both\n");
    return 2;
  }
  if (base.lb != "off")
    strategies.push_back(base.lb);
  else
    strategies = weft::bench::split_list(listed.empty() ? "rotate,greedy-refine" : listed);
  for (const std::string& name : strategies)
    if (name.empty() || name == "off") {
      std::fprintf(stderr,
                   "error: --strategies: '%s' balances nothing: name strategies (rotate, "
                   "greedy-refine, ...)\n",
                   name.c_str());
      return 2;
    }
  // One weft::run per strategy: --weft:lb is fixed for a run. (The
  // runtime checks each name: an unknown one is its usage error.)
  for (const std::string& name : strategies) {
    weft::runtime_config cfg = base;
    cfg.lb = name;
    const int rc = weft::run(cfg, argc, argv, [](weft::args) -> weft::task<> { return drive(); });
    if (rc != 0) return rc;
  }
  return 0;
}
