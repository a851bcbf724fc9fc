// kNeighbor (seeds 000 and 004): elements on a ring, one per PE; in each
// iteration every element sends a message to its k neighbours on both sides
// (wrapping around) and moves to the next iteration once all 2k messages of
// the current one have arrived. The time per iteration shows what one
// message round costs the runtime; with `touch=false` the receiver reads only
// an 8-byte stamp, so with zero-copy delivery the time must stay flat from
// 16 B to 64 KiB. With `touch=true` the sender fills the payload and the
// receiver reads and checks every byte, as an application would.
//
// Here it runs at the core level: one handler per message kind, state in
// thread_local (one element per PE).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "kneighbor: time per iteration of the kNeighbor pattern (one element per PE, each sends to\n"
    "k neighbours on both sides per iteration). Flags:\n"
    "  --k=K             neighbours on each side (default 3, as in the seed paper)\n"
    "  --bytes=LIST      payload sizes (default 16,64,256,1024,4096,16384,65536)\n"
    "  --iters=N         iterations per measurement (default 2000)\n"
    "  --touch=MODE      false | true | both (default both): receiver reads every byte";

struct round_params {
  int round;
  int k;
  int iters;
  std::uint32_t bytes;
  bool touch;
};

// Per-PE element state (PE-private: thread_local).
struct element {
  round_params p{};
  int iter = 0;
  int count[2] = {0, 0};  // messages received for iterations of each parity
  int round = -1;
  // A neighbour may start a round (and send to us) before our own start
  // message arrives: such messages wait here.
  std::vector<weft::message_ptr> early;
};
thread_local element t_elem;

// PE 0's driver state.
struct measurement {
  std::uint32_t bytes;
  bool touch;
  bool warmup;
};
struct driver_state {
  weft::bench::cli cli;
  std::vector<measurement> plan;
  std::size_t next = 0;
  int done = 0;
  std::uint64_t t0 = 0;
  std::vector<double> samples;  // iter_us per plan entry (warmups skipped)
  int k = 3, iters = 2000;
} g_driver;

weft::handler_id h_start, h_neighbour, h_done;

void send_iteration() {
  element& e = t_elem;
  const int me = weft::my_pe(), n = weft::num_pes();
  for (int d = 1; d <= e.p.k; ++d) {
    for (int target : {(me + d) % n, ((me - d) % n + n) % n}) {
      weft::message_ptr m = weft::make_message(h_neighbour, e.p.bytes);
      const std::int32_t stamp[2] = {e.p.round, e.iter};
      std::memcpy(m->data(), stamp, sizeof stamp);
      if (e.p.touch) std::memset(m->data() + 8, e.iter & 0x7f, e.p.bytes - 8);
      weft::send(target, std::move(m));
    }
  }
}

void on_neighbour(weft::message_ptr m);

void on_start(weft::message_ptr m) {
  element& e = t_elem;
  std::vector<weft::message_ptr> early = std::move(e.early);
  e = element{};
  e.p = m->as<round_params>();
  e.round = e.p.round;
  send_iteration();
  for (auto& x : early) on_neighbour(std::move(x));
}

void on_neighbour(weft::message_ptr m) {
  element& e = t_elem;
  std::int32_t st[2];
  std::memcpy(st, m->data(), sizeof st);
  if (st[0] != e.round) {
    e.early.push_back(std::move(m));
    return;
  }
  const std::int64_t stamp = st[1];
  if (e.p.touch) {
    // Read every byte, and check it: the data must be what the sender wrote.
    const unsigned char want = static_cast<unsigned char>(stamp & 0x7f);
    const auto* b = reinterpret_cast<const unsigned char*>(m->data()) + 8;
    unsigned bad = 0;
    for (std::uint32_t i = 0; i < e.p.bytes - 8; ++i) bad |= b[i] ^ want;
    if (bad != 0) {
      std::uint32_t i = 0;
      while (b[i] == want) ++i;
      std::fprintf(stderr,
                   "kneighbor: corrupt payload on PE %d from PE %d: round %d iteration %lld, %u "
                   "bytes, byte %u is %u, not %u\n",
                   weft::my_pe(), m->src_pe, st[0], (long long)stamp, e.p.bytes, i + 8, b[i], want);
      weft::exit(1);
    }
  }
  if (stamp != e.iter && stamp != e.iter + 1) {
    std::fprintf(stderr, "kneighbor: PE %d got iteration %lld during %d\n", weft::my_pe(),
                 (long long)stamp, e.iter);
    weft::exit(1);
  }
  ++e.count[stamp & 1];
  while (e.iter < e.p.iters && e.count[e.iter & 1] == 2 * e.p.k) {
    e.count[e.iter & 1] = 0;
    ++e.iter;
    if (e.iter == e.p.iters) {
      weft::send(0, weft::make_message(h_done, 0));
      return;
    }
    send_iteration();
  }
}

void start_next() {
  driver_state& d = g_driver;
  const measurement& ms = d.plan[d.next];
  d.done = 0;
  d.t0 = weft::base::wall_ns();
  weft::broadcast(weft::make_message_with(
      h_start, round_params{int(d.next), d.k, d.iters, ms.bytes, ms.touch}));
}

void report_and_exit();

void on_done(weft::message_ptr) {
  driver_state& d = g_driver;
  if (++d.done < weft::num_pes()) return;
  const double us = double(weft::base::wall_ns() - d.t0) * 1e-3 / d.iters;
  if (!d.plan[d.next].warmup)
    d.samples.push_back(us);
  else
    d.samples.push_back(-1);
  if (++d.next < d.plan.size()) {
    start_next();
    return;
  }
  report_and_exit();
}

void report_and_exit() {
  driver_state& d = g_driver;
  const weft::runtime_config& c = weft::config();
  weft::bench::reporter out("kneighbor", d.cli.json);
  // Group samples by (touch, bytes), in plan order.
  std::vector<std::pair<measurement, std::vector<double>>> groups;
  for (std::size_t i = 0; i < d.plan.size(); ++i) {
    if (d.plan[i].warmup) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) {
      return g.first.bytes == d.plan[i].bytes && g.first.touch == d.plan[i].touch;
    });
    if (it == groups.end()) {
      groups.push_back({d.plan[i], {}});
      it = groups.end() - 1;
    }
    it->second.push_back(d.samples[i]);
  }
  for (auto& [ms, xs] : groups) {
    auto s = weft::bench::summarize(xs);
    out.row({{"mode", weft::num_pes() > 1 ? "smp" : "non-smp"},
             {"pes", weft::num_pes()},
             {"k", d.k},
             {"bytes", long(ms.bytes)},
             {"touch", ms.touch},
             {"queue", weft::to_string(c.queue)},
             {"bind", c.bind},
             {"alloc", weft::to_string(c.alloc)},
             {"metric", "iter_us"},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max}});
  }
  out.flush();
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  h_start = weft::register_handler("kneighbor.start", on_start);
  h_neighbour = weft::register_handler("kneighbor.neighbour", on_neighbour);
  h_done = weft::register_handler("kneighbor.done", on_done);

  driver_state& d = g_driver;
  d.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(d.cli, {"k", "bytes", "iters", "touch"});
  d.k = int(weft::bench::positive_arg(d.cli, "k", 3, 1024));
  d.iters = int(weft::bench::positive_arg(d.cli, "iters", 2000, 100000000));
  std::string touch = weft::bench::arg(d.cli, "touch", "both");
  std::vector<std::uint32_t> sizes;
  std::string list = weft::bench::arg(d.cli, "bytes", "16,64,256,1024,4096,16384,65536");
  for (std::size_t pos = 0; pos <= list.size();) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    long b = std::atol(list.substr(pos, comma - pos).c_str());
    if (b < 8 || b > (1l << 24)) {
      std::fprintf(stderr, "error: --bytes: each size must be 8 .. 16777216 (got '%s')\n",
                   list.substr(pos, comma - pos).c_str());
      return 2;
    }
    sizes.push_back(std::uint32_t(b));
    pos = comma + 1;
  }
  if (d.k < 1 || d.iters < 1 || (touch != "both" && touch != "true" && touch != "false")) {
    std::fprintf(stderr, "error: need --k>=1, --iters>=1, --touch=false|true|both\n");
    return 2;
  }
  std::vector<bool> touches;
  if (touch != "true") touches.push_back(false);
  if (touch != "false") touches.push_back(true);
  // Interleave repeats: every size once per repeat, so slow drift of this
  // virtual machine spreads over all sizes alike. One warm-up round first.
  d.plan.push_back({sizes.front(), false, true});
  for (int r = 0; r < d.cli.repeat; ++r)
    for (bool t : touches)
      for (std::uint32_t b : sizes) d.plan.push_back({b, t, false});

  return weft::run(argc, argv, [](weft::args) { start_next(); });
}
