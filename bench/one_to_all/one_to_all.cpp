// one_to_all: PE 0 (node 0) sends a message to one PE of every other node
// (the first PE of each), and each of them sends it back; a round ends when
// every reply has arrived. The time per round shows how the transport copes
// with one node talking to all the others at once (the sends leave back to
// back, the replies arrive in any order). Run as several processes:
//
//   mpirun --oversubscribe --bind-to none -n 4 build/release/bench/one_to_all --json
//
// Each size is warmed up once; a measurement makes fewer rounds for large
// messages (the rule of bench/pingpong/mpi.cpp: about 64 MiB moved by each peer),
// and the repeats interleave the sizes. With --touch=true every payload is
// written whole by its sender and read whole by its receiver (see
// common/nodes.hpp, touch_arg).
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
    "one_to_all: PE 0 of node 0 sends a message to the first PE of every other node, each\n"
    "sends it back; time per round (all replies in). Run under mpirun with 2 or more\n"
    "processes. Flags:\n"
    "  --bytes=LIST   message sizes (default 8,1024,65536,1048576)\n"
    "  --iters=N      rounds per measurement for small messages (default 2000; fewer for\n"
    "                 large ones, at least 20, about 64 MiB moved by each peer)\n"
    "  --touch=BOOL   true: receivers read every byte (and check it), senders write every\n"
    "                 byte before each send (default false)";

struct step {
  std::uint32_t bytes;
  int repeat;  // -1: warm-up
};

struct driver_state {
  weft::bench::cli cli;
  std::vector<std::uint32_t> sizes;
  std::vector<step> plan;
  std::size_t next = 0;
  long iters = 2000;
  long rounds = 0, rounds_left = 0;
  int replies_left = 0;
  std::uint64_t t0 = 0;
  std::string transport;
  bool touch = false;
  unsigned char fill = 0;  // the value this PE writes next (--touch)
  std::vector<std::vector<double>> round_us;  // per size index
} g_d;

weft::handler_id h_msg;

void start_round();
void finish();

void start_step() {
  driver_state& d = g_d;
  d.rounds = weft::bench::round_trips(d.iters, long(d.plan[d.next].bytes));
  d.rounds_left = d.rounds;
  d.t0 = weft::base::wall_ns();
  start_round();
}

void start_round() {
  driver_state& d = g_d;
  const std::uint32_t bytes = d.plan[d.next].bytes;
  d.replies_left = weft::num_nodes() - 1;
  for (int n = 1; n < weft::num_nodes(); ++n) {
    weft::message_ptr m = weft::make_message(h_msg, bytes);
    std::memset(m->data(), d.fill, d.touch ? bytes : std::min<std::size_t>(bytes, 64));
    weft::send(n * weft::node_size(), std::move(m));
  }
}

void on_msg(weft::message_ptr m) {
  if (g_d.touch) weft::bench::touch_message("one_to_all", *m, g_d.fill);
  if (weft::my_pe() != 0) {
    weft::send(0, std::move(m));  // the reply: the same message back
    return;
  }
  driver_state& d = g_d;
  if (--d.replies_left > 0) return;
  if (--d.rounds_left > 0) {
    start_round();
    return;
  }
  const double us = double(weft::base::wall_ns() - d.t0) * 1e-3 / double(d.rounds);
  const step& s = d.plan[d.next];
  if (s.repeat >= 0) {
    const auto idx =
        std::size_t(std::find(d.sizes.begin(), d.sizes.end(), s.bytes) - d.sizes.begin());
    d.round_us[idx].push_back(us);
  }
  if (++d.next < d.plan.size())
    start_step();
  else
    finish();
}

void finish() {
  driver_state& d = g_d;
  weft::bench::reporter out("one_to_all", d.cli.json);
  for (std::size_t i = 0; i < d.sizes.size(); ++i) {
    const auto s = weft::bench::summarize(d.round_us[i]);
    out.row({{"transport", d.transport},
             {"nodes", weft::num_nodes()},
             {"pes_per_node", weft::node_size()},
             {"touch", d.touch},
             {"bytes", long(d.sizes[i])},
             {"metric", "round_us"},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max}});
  }
  out.flush();
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  h_msg = weft::register_handler("one_to_all.msg", on_msg);
  driver_state& d = g_d;
  d.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(d.cli, {"bytes", "iters", "touch"});
  d.touch = weft::bench::touch_arg(d.cli, false);
  d.iters = weft::bench::positive_arg(d.cli, "iters", 2000, 100000000);
  for (long b : weft::bench::int_list_arg(d.cli, "bytes", "8,1024,65536,1048576", 1, 1l << 30))
    d.sizes.push_back(std::uint32_t(b));
  d.round_us.resize(d.sizes.size());
  for (std::uint32_t b : d.sizes) d.plan.push_back({b, -1});
  for (int r = 0; r < d.cli.repeat; ++r)
    for (std::uint32_t b : d.sizes) d.plan.push_back({b, r});

  weft::runtime_config cfg = weft::parse_options(argc, argv);
  return weft::bench::run_across_processes("one_to_all", cfg, argc, argv, [] {
    g_d.transport = weft::config().transport;
    start_step();
  });
}
