// comm_modes: a compute-heavy kernel for comparing who drives the network
// (--weft:comm=thread|workers|hybrid: a dedicated comm thread, the PEs
// between messages, or both). Every PE, in each iteration, computes a fixed
// amount of work (sweeps over a private array of doubles that stays in the
// L1 cache), then sends one message to the PE of the same rank on the next
// node and one to the PE of the same rank on the previous node (the ring of
// nodes), and starts the next iteration once both messages of the current one
// have arrived. So every message crosses a process boundary, and the network
// must be driven while the PEs compute.
//
// The time per iteration is reported beside the compute time alone (the same
// work timed on PE 0 in the same run, just before each measurement), so
// iter_us - compute_us is what communication added. The comm mode is a
// process option: comparing modes means several runs, which bench/run_all.sh
// interleaves (thread, workers, hybrid, thread, ...) and bench/report.py
// turns into ratios.
//
//   mpirun --oversubscribe --bind-to none -n 2 build/release/bench/comm_modes --json
//          --weft:comm=workers --weft:threads=1 (one line)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "common/nodes.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "comm_modes: a compute-heavy kernel across nodes: each PE computes a fixed amount of work\n"
    "per iteration, then exchanges a message with the PE of its rank on the next and on the\n"
    "previous node; time per iteration beside the compute time alone. Run under mpirun with 2\n"
    "or more processes, once per --weft:comm mode. Flags:\n"
    "  --work=N       sweeps over a 1024-double array per iteration (default 1000)\n"
    "  --bytes=LIST   message sizes (default 1024,65536)\n"
    "  --iters=N      iterations per measurement (default 500)";

constexpr int kArray = 1024;
volatile double g_sink = 0;

struct round_params {
  int round;
  int iters;
  int work;
  std::uint32_t bytes;
};

// The fixed work: `sweeps` passes of a multiply-add over the array. The
// result feeds back into the array, so no pass can be skipped.
double compute(std::vector<double>& a, int sweeps) {
  for (int s = 0; s < sweeps; ++s)
    for (int i = 0; i < kArray; ++i) a[std::size_t(i)] = a[std::size_t(i)] * 0.999999 + 1e-6;
  return a[std::size_t(sweeps) % kArray];
}

// ---- per-PE element ------------------------------------------------------------------

struct element {
  round_params p{};
  int round = -1;
  int iter = 0;
  int count[2] = {0, 0};  // messages received for iterations of each parity
  std::vector<double> data = std::vector<double>(kArray, 1.0);
  double sink = 0;
  std::vector<weft::message_ptr> early;  // messages of a round not started here yet
};
thread_local element t_elem;

weft::handler_id h_start, h_msg, h_done;

int stamp_round(const weft::message_ptr& m) {
  std::int32_t r;
  std::memcpy(&r, m->data(), sizeof r);
  return r;
}

// Computes, then sends this iteration's two messages.
void do_iteration() {
  element& e = t_elem;
  e.sink += compute(e.data, e.p.work);
  const int nodes = weft::num_nodes(), size = weft::node_size(), node = weft::my_node();
  const int rank = weft::my_rank();
  for (int to : {(node + 1) % nodes, (node - 1 + nodes) % nodes}) {
    weft::message_ptr m = weft::make_message(h_msg, e.p.bytes);
    const std::int32_t stamp[2] = {e.p.round, e.iter};
    std::memcpy(m->data(), stamp, sizeof stamp);
    weft::send(to * size + rank, std::move(m));
  }
}

void on_msg(weft::message_ptr m);

void on_start(weft::message_ptr m) {
  element& e = t_elem;
  std::vector<weft::message_ptr> early = std::move(e.early);
  e.early.clear();
  e.p = m->as<round_params>();
  e.round = e.p.round;
  e.iter = 0;
  e.count[0] = e.count[1] = 0;
  do_iteration();
  for (auto& x : early) on_msg(std::move(x));
}

void on_msg(weft::message_ptr m) {
  element& e = t_elem;
  if (stamp_round(m) != e.round) {
    e.early.push_back(std::move(m));
    return;
  }
  std::int32_t stamp[2];
  std::memcpy(stamp, m->data(), sizeof stamp);
  if (stamp[1] != e.iter && stamp[1] != e.iter + 1) {
    std::fprintf(stderr, "comm_modes: PE %d got iteration %d during %d\n", weft::my_pe(), stamp[1],
                 e.iter);
    weft::exit(1);
    return;
  }
  ++e.count[stamp[1] & 1];
  while (e.iter < e.p.iters && e.count[e.iter & 1] == 2) {
    e.count[e.iter & 1] = 0;
    if (++e.iter == e.p.iters) {
      weft::send(0, weft::make_message(h_done, 0));
      return;
    }
    do_iteration();
  }
}

// ---- the driver (PE 0) -----------------------------------------------------------------

struct step {
  std::uint32_t bytes;
  int repeat;  // -1: warm-up
};

struct driver_state {
  weft::bench::cli cli;
  std::vector<std::uint32_t> sizes;
  std::vector<step> plan;
  std::size_t next = 0;
  int work = 1000, iters = 500, done = 0;
  std::uint64_t t0 = 0;
  double compute_us = 0;
  std::string transport;
  std::vector<std::vector<double>> iter_us, compute_alone_us;  // per size index
} g_d;

void finish();

void start_step() {
  driver_state& d = g_d;
  // The work of one iteration alone, on this PE, just before the measurement
  // (median of a few, so one preemption does not count).
  std::vector<double> once;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t c0 = weft::base::wall_ns();
    t_elem.sink += compute(t_elem.data, d.work);
    once.push_back(double(weft::base::wall_ns() - c0) * 1e-3);
  }
  d.compute_us = weft::bench::summarize(once).median;
  const round_params rp{int(d.next), d.iters, d.work, d.plan[d.next].bytes};
  d.done = 0;
  d.t0 = weft::base::wall_ns();
  weft::broadcast(weft::make_message_with(h_start, rp));
}

void on_done(weft::message_ptr) {
  driver_state& d = g_d;
  if (++d.done < weft::num_pes()) return;
  const double us = double(weft::base::wall_ns() - d.t0) * 1e-3 / d.iters;
  const step& s = d.plan[d.next];
  if (s.repeat >= 0) {
    const auto idx =
        std::size_t(std::find(d.sizes.begin(), d.sizes.end(), s.bytes) - d.sizes.begin());
    d.iter_us[idx].push_back(us);
    d.compute_alone_us[idx].push_back(d.compute_us);
  }
  if (++d.next < d.plan.size())
    start_step();
  else
    finish();
}

void finish() {
  driver_state& d = g_d;
  const weft::runtime_config& c = weft::config();
  weft::bench::reporter out("comm_modes", d.cli.json);
  for (std::size_t i = 0; i < d.sizes.size(); ++i) {
    auto common = [&] {
      return std::vector<weft::bench::field>{{"kernel", "compute"},
                                             {"transport", d.transport},
                                             {"comm", c.comm.empty() ? "default" : c.comm},
                                             {"nodes", weft::num_nodes()},
                                             {"pes_per_node", weft::node_size()},
                                             {"work", d.work},
                                             {"bytes", long(d.sizes[i])}};
    };
    const auto it = weft::bench::summarize(d.iter_us[i]);
    const auto cu = weft::bench::summarize(d.compute_alone_us[i]);
    auto f = common();
    f.insert(f.end(),
             {{"metric", "iter_us"}, {"value", it.median}, {"min", it.min}, {"max", it.max}});
    out.row(std::move(f));
    f = common();
    f.insert(f.end(),
             {{"metric", "compute_us"}, {"value", cu.median}, {"min", cu.min}, {"max", cu.max}});
    out.row(std::move(f));
  }
  out.flush();
  g_sink = t_elem.sink;  // keeps the work observable
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  h_start = weft::register_handler("comm_modes.start", on_start);
  h_msg = weft::register_handler("comm_modes.msg", on_msg);
  h_done = weft::register_handler("comm_modes.done", on_done);
  driver_state& d = g_d;
  d.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(d.cli, {"work", "bytes", "iters"});
  d.work = int(weft::bench::positive_arg(d.cli, "work", 1000, 1000000));
  d.iters = int(weft::bench::positive_arg(d.cli, "iters", 500, 100000000));
  for (long b : weft::bench::int_list_arg(d.cli, "bytes", "1024,65536", 8, 1l << 26))
    d.sizes.push_back(std::uint32_t(b));
  d.iter_us.resize(d.sizes.size());
  d.compute_alone_us.resize(d.sizes.size());
  d.plan.push_back({d.sizes.front(), -1});
  for (int r = 0; r < d.cli.repeat; ++r)
    for (std::uint32_t b : d.sizes) d.plan.push_back({b, r});

  weft::runtime_config cfg = weft::parse_options(argc, argv);
  return weft::bench::run_across_processes("comm_modes", cfg, argc, argv, [] {
    g_d.transport = weft::config().transport;
    start_step();
  });
}
