// kNeighbor (seeds 000 and 004): elements on a ring, one per PE; in each
// iteration every element sends a message to its k neighbours on both sides
// (wrapping around) and moves to the next iteration once all 2k messages of
// the current one have arrived. The time per iteration shows what one
// message round costs the runtime; with `touch=false` the receiver reads only
// an 8-byte stamp, so with zero-copy delivery the time must stay flat from
// 16 B to 64 KiB. With `touch=true` the sender fills the payload and the
// receiver reads and checks every byte, as an application would.
//
// Two levels, measured side by side in one run (interleaved, so drift of the
// machine hits both alike), and their ratio per size:
//  - core: one handler per message kind, state in thread_local (one element
//    per PE);
//  - objects: a chare array with one element per PE (block map: element i on
//    PE i), entry methods, the payload a weft::buffer<std::byte> argument
//    (handed over without a copy inside the process) or a
//    std::vector<std::byte> (packed and unpacked: two copies).
// In both, the first 8 bytes of the payload are the stamp (round,
// iteration); with touch the rest is filled by the sender and checked by the
// receiver.
//
// Run as several processes (mpirun -n P ...), both levels span the job: one
// element per PE, neighbours by job-wide PE number (core) or array index
// (objects, element i on PE i), so messages to PEs of other nodes go through
// the transport. Each row's "mode" says what was compared: smp (several PEs
// per process), or nonsmp-<transport> (one PE per process, e.g. nonsmp-shm,
// nonsmp-mpi).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "common/nodes.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

namespace {

const char* about =
    "kneighbor: time per iteration of the kNeighbor pattern (one element per PE, each sends to\n"
    "k neighbours on both sides per iteration), at the core level (handlers) and the objects\n"
    "level (a chare array, entry methods), side by side, with the ratio objects/core. Flags:\n"
    "  --k=K             neighbours on each side (default 3, as in the seed paper)\n"
    "  --bytes=LIST      payload sizes (default 16,64,256,1024,4096,16384,65536)\n"
    "  --iters=N         iterations per measurement (default 2000)\n"
    "  --touch=MODE      false | true | both (default both): receiver reads every byte\n"
    "  --level=L         core | objects | both (default both)\n"
    "  --payload=LIST    the objects level's payload argument, one or more of: span\n"
    "                    (std::span<const std::byte>: copied into the message, viewed there by\n"
    "                    the receiver, as the core level's payload), buffer "
    "(weft::buffer<std::byte>:\n"
    "                    its block handed over), vector (std::vector<std::byte>: copied in and\n"
    "                    out); all = span,buffer,vector (default span)\n"
    "  --migratable=B    false | true (default false): the objects level's elements have a\n"
    "                    pup, so that with --weft:lb on the load database times their entry\n"
    "                    methods (they never move: no balancing step runs)\n"
    "Under mpirun (several processes) both levels span the job, one element per PE.";

enum class level_kind : std::uint8_t { core, objects };
enum class payload_kind : std::uint8_t { message, span, buffer, vector };

const char* level_name(level_kind l) {
  return l == level_kind::core ? "core" : "objects";
}
const char* payload_name(payload_kind p) {
  switch (p) {
    case payload_kind::message:
      return "message";
    case payload_kind::span:
      return "span";
    case payload_kind::buffer:
      return "buffer";
    case payload_kind::vector:
      return "vector";
  }
  return "?";
}

struct round_params {
  int round;
  int k;
  int iters;
  std::uint32_t bytes;
  bool touch;
  payload_kind payload;
};

// ---- payload: the stamp, the fill, the check (both levels) ------------------------

void write_payload(std::byte* data, std::uint32_t bytes, int round, int iter, bool touch) {
  const std::int32_t stamp[2] = {round, iter};
  std::memcpy(data, stamp, sizeof stamp);
  if (touch) std::memset(data + 8, iter & 0x7f, bytes - 8);
}

int stamp_round(const std::byte* data) {
  std::int32_t r;
  std::memcpy(&r, data, sizeof r);
  return r;
}

// Reads the stamp; with touch, reads and checks every byte (exits on a
// corrupt payload). Returns the iteration.
std::int64_t read_payload(const std::byte* data, std::uint32_t bytes, bool touch, int src,
                          const char* level) {
  std::int32_t st[2];
  std::memcpy(st, data, sizeof st);
  const std::int64_t stamp = st[1];
  if (touch) {
    // Read every byte, and check it: the data must be what the sender wrote.
    const unsigned char want = static_cast<unsigned char>(stamp & 0x7f);
    const auto* b = reinterpret_cast<const unsigned char*>(data) + 8;
    unsigned bad = 0;
    for (std::uint32_t i = 0; i < bytes - 8; ++i) bad |= b[i] ^ want;
    if (bad != 0) {
      std::uint32_t i = 0;
      while (b[i] == want) ++i;
      std::fprintf(stderr,
                   "kneighbor (%s): corrupt payload on PE %d from %d: round %d iteration %lld, %u "
                   "bytes, byte %u is %u, not %u\n",
                   level, weft::my_pe(), src, st[0], (long long)stamp, bytes, i + 8, b[i], want);
      weft::exit(1);
    }
  }
  return stamp;
}

void check_iteration(std::int64_t stamp, int iter, const char* level) {
  if (stamp != iter && stamp != iter + 1) {
    std::fprintf(stderr, "kneighbor (%s): PE %d got iteration %lld during %d\n", level,
                 weft::my_pe(), (long long)stamp, iter);
    weft::exit(1);
  }
}

// ---- PE 0's driver ------------------------------------------------------------------

struct measurement {
  level_kind level;
  payload_kind payload;
  std::uint32_t bytes;
  bool touch;
  int repeat;  // -1: warm-up
};

void measurement_done();  // PE 0, when every element finished the round

// ---- core level ---------------------------------------------------------------------

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

weft::handler_id h_start, h_neighbour, h_done;

void send_iteration() {
  element& e = t_elem;
  const int me = weft::my_pe(), n = weft::num_pes();
  for (int d = 1; d <= e.p.k; ++d) {
    for (int target : {(me + d) % n, ((me - d) % n + n) % n}) {
      weft::message_ptr m = weft::make_message(h_neighbour, e.p.bytes);
      write_payload(m->data(), e.p.bytes, e.p.round, e.iter, e.p.touch);
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
  if (stamp_round(m->data()) != e.round) {
    e.early.push_back(std::move(m));
    return;
  }
  const std::int64_t stamp = read_payload(m->data(), e.p.bytes, e.p.touch, m->src_pe, "core");
  check_iteration(stamp, e.iter, "core");
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

int g_core_done = 0;  // PE 0
void on_done(weft::message_ptr) {
  if (++g_core_done < weft::num_pes()) return;
  g_core_done = 0;
  measurement_done();
}

// ---- objects level ------------------------------------------------------------------

// Migratable: a type with pup, whose entry methods the load database
// measures while --weft:lb is on (docs/lb.md "Load options"); nothing moves.
template <bool Migratable>
struct NeighbourT : weft::array_element<NeighbourT<Migratable>, int> {
  void pup(weft::pupper& pp)
    requires Migratable
  {
    pp | iter | round;
  }

  round_params p{};
  int iter = 0;
  int count[2] = {0, 0};
  int round = -1;
  weft::callback<int> done;
  // Messages of a round that has not started here yet.
  std::vector<weft::buffer<std::byte>> early_buffers;
  std::vector<std::vector<std::byte>> early_vectors;
  std::vector<std::byte> scratch;  // vector payload: filled for each send, packed (copied)

  void start(round_params rp, weft::callback<int> cb) {
    auto eb = std::move(early_buffers);
    auto ev = std::move(early_vectors);
    early_buffers.clear();
    early_vectors.clear();
    p = rp;
    iter = 0;
    count[0] = count[1] = 0;
    round = rp.round;
    done = cb;
    send_iteration();
    for (auto& b : eb) arrived(b.data());
    for (auto& v : ev) arrived(v.data());
  }

  void recv_buffer(weft::buffer<std::byte> b) {
    if (stamp_round(b.data()) != round) {
      early_buffers.push_back(std::move(b));
      return;
    }
    arrived(b.data());
  }

  // The payload viewed in the message (copied once into it by the sender,
  // like the core level's payload).
  void recv_span(std::span<const std::byte> s) {
    if (stamp_round(s.data()) != round) {
      early_vectors.emplace_back(s.begin(), s.end());
      return;
    }
    arrived(s.data());
  }

  void recv_vector(std::vector<std::byte> v) {
    if (stamp_round(v.data()) != round) {
      early_vectors.push_back(std::move(v));
      return;
    }
    arrived(v.data());
  }

  // Element 0 (PE 0): every element finished the round.
  void finished(int) { measurement_done(); }

 private:
  void send_iteration() {
    const int me = this->this_index(), n = this->array_size();
    const auto all = this->this_proxy();
    if (p.payload != payload_kind::buffer) {
      // One payload for the iteration, copied into each message by the send
      // (as the core level fills each of its messages).
      scratch.resize(p.bytes);
      write_payload(scratch.data(), p.bytes, p.round, iter, p.touch);
    }
    for (int d = 1; d <= p.k; ++d) {
      for (int target : {(me + d) % n, ((me - d) % n + n) % n}) {
        if (p.payload == payload_kind::buffer) {
          weft::buffer<std::byte> b(p.bytes);  // handed over: each message needs its own
          write_payload(b.data(), p.bytes, p.round, iter, p.touch);
          all[target].template send<&NeighbourT::recv_buffer>(std::move(b));
        } else if (p.payload == payload_kind::span) {
          all[target].template send<&NeighbourT::recv_span>(std::span<const std::byte>(scratch));
        } else {
          all[target].template send<&NeighbourT::recv_vector>(scratch);
        }
      }
    }
  }

  void arrived(const std::byte* data) {
    const std::int64_t stamp = read_payload(data, p.bytes, p.touch, -1, "objects");
    check_iteration(stamp, iter, "objects");
    ++count[stamp & 1];
    while (iter < p.iters && count[iter & 1] == 2 * p.k) {
      count[iter & 1] = 0;
      ++iter;
      if (iter == p.iters) {
        this->contribute(1, weft::op::sum, done);
        return;
      }
      send_iteration();
    }
  }
};
using Neighbour = NeighbourT<false>;
using MigratableNeighbour = NeighbourT<true>;

// ---- the driver (PE 0) --------------------------------------------------------------

struct driver_state {
  weft::bench::cli cli;
  std::vector<measurement> plan;
  std::size_t next = 0;
  std::uint64_t t0 = 0;
  std::vector<double> samples;  // iter_us per plan entry
  int k = 3, iters = 2000;
  bool objects = false;     // the plan has objects-level measurements
  std::string transport;    // the job's transport (rows' "mode" in non-SMP runs)
  bool migratable = false;  // --migratable: marr, else arr
  weft::array<Neighbour> arr;
  weft::array<MigratableNeighbour> marr;
  weft::callback<int> finished_cb;
} g_driver;

void start_next() {
  driver_state& d = g_driver;
  const measurement& ms = d.plan[d.next];
  const round_params rp{int(d.next), d.k, d.iters, ms.bytes, ms.touch, ms.payload};
  d.t0 = weft::base::wall_ns();
  if (ms.level == level_kind::core)
    weft::broadcast(weft::make_message_with(h_start, rp));
  else if (d.migratable)
    d.marr.broadcast<&MigratableNeighbour::start>(rp, d.finished_cb);
  else
    d.arr.broadcast<&Neighbour::start>(rp, d.finished_cb);
}

void report_and_exit();

void measurement_done() {
  driver_state& d = g_driver;
  d.samples.push_back(double(weft::base::wall_ns() - d.t0) * 1e-3 / d.iters);
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
  struct group {
    measurement ms;
    std::vector<double> xs;
    std::vector<double> ratios;  // objects: ÷ core of the same repeat, touch and size
  };
  // Groups by (level, payload, touch, bytes), in plan order.
  std::vector<group> groups;
  auto same = [](const measurement& a, const measurement& b) {
    return a.level == b.level && a.payload == b.payload && a.bytes == b.bytes && a.touch == b.touch;
  };
  for (std::size_t i = 0; i < d.plan.size(); ++i) {
    const measurement& ms = d.plan[i];
    if (ms.repeat < 0) continue;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const group& g) { return same(g.ms, ms); });
    if (it == groups.end()) {
      groups.push_back({ms, {}, {}});
      it = groups.end() - 1;
    }
    it->xs.push_back(d.samples[i]);
    if (ms.level == level_kind::objects) {
      for (std::size_t j = 0; j < d.plan.size(); ++j) {
        const measurement& o = d.plan[j];
        if (o.level == level_kind::core && o.repeat == ms.repeat && o.bytes == ms.bytes &&
            o.touch == ms.touch)
          it->ratios.push_back(d.samples[i] / d.samples[j]);
      }
    }
  }
  const std::string mode = weft::node_size() > 1 ? "smp" : "nonsmp-" + d.transport;
  auto common = [&](const measurement& ms) {
    std::vector<weft::bench::field> f = {{"mode", mode},
                                         {"pes", weft::num_pes()},
                                         {"k", d.k},
                                         {"level", level_name(ms.level)},
                                         {"payload", payload_name(ms.payload)},
                                         {"bytes", long(ms.bytes)},
                                         {"touch", ms.touch},
                                         {"queue", weft::to_string(c.queue)},
                                         {"bind", c.bind},
                                         {"alloc", weft::to_string(c.alloc)}};
    if (weft::num_nodes() > 1)
      f.insert(f.end(), {{"nodes", weft::num_nodes()},
                         {"transport", d.transport},
                         {"comm", c.comm.empty() ? "default" : c.comm}});
    return f;
  };
  // Per (touch, bytes): the core row, the objects rows, then their ratios.
  for (auto& g : groups) {
    if (g.ms.level != level_kind::core && !g.ratios.empty()) continue;  // printed beside core
    auto emit = [&](const group& x) {
      auto s = weft::bench::summarize(x.xs);
      auto f = common(x.ms);
      f.insert(f.end(),
               {{"metric", "iter_us"}, {"value", s.median}, {"min", s.min}, {"max", s.max}});
      out.row(std::move(f));
    };
    emit(g);
    if (g.ms.level != level_kind::core) continue;
    for (auto& o : groups)
      if (o.ms.level == level_kind::objects && o.ms.bytes == g.ms.bytes &&
          o.ms.touch == g.ms.touch && !o.ratios.empty())
        emit(o);
    for (auto& o : groups)
      if (o.ms.level == level_kind::objects && o.ms.bytes == g.ms.bytes &&
          o.ms.touch == g.ms.touch && !o.ratios.empty()) {
        auto r = weft::bench::summarize(o.ratios);
        auto f = common(o.ms);
        f.insert(f.end(), {{"metric", "ratio_objects_over_core"},
                           {"value", r.median},
                           {"min", r.min},
                           {"max", r.max}});
        out.row(std::move(f));
      }
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
  weft::bench::reject_unknown(d.cli,
                              {"k", "bytes", "iters", "touch", "level", "payload", "migratable"});
  d.k = int(weft::bench::positive_arg(d.cli, "k", 3, 1024));
  d.iters = int(weft::bench::positive_arg(d.cli, "iters", 2000, 100000000));
  const std::string touch = weft::bench::arg(d.cli, "touch", "both");
  const std::string level = weft::bench::arg(d.cli, "level", "both");
  std::string payload = weft::bench::arg(d.cli, "payload", "span");
  if (payload == "all") payload = "span,buffer,vector";
  std::vector<payload_kind> payloads;
  for (const std::string& one : weft::bench::split_list(payload)) {
    payload_kind k;
    if (one == "span")
      k = payload_kind::span;
    else if (one == "buffer")
      k = payload_kind::buffer;
    else if (one == "vector")
      k = payload_kind::vector;
    else {
      std::fprintf(stderr,
                   "error: --payload=%s: '%s' is not a payload; expected a list of span, "
                   "buffer, vector, or all\n",
                   payload.c_str(), one.c_str());
      return 2;
    }
    if (std::find(payloads.begin(), payloads.end(), k) == payloads.end()) payloads.push_back(k);
  }
  std::vector<std::uint32_t> sizes;
  for (long b :
       weft::bench::int_list_arg(d.cli, "bytes", "16,64,256,1024,4096,16384,65536", 8, 1l << 24))
    sizes.push_back(std::uint32_t(b));
  if (touch != "both" && touch != "true" && touch != "false") {
    std::fprintf(stderr, "error: --touch=%s: expected false, true or both\n", touch.c_str());
    return 2;
  }
  const std::string migratable = weft::bench::arg(d.cli, "migratable", "false");
  if (migratable != "true" && migratable != "false") {
    std::fprintf(stderr, "error: --migratable=%s: expected false or true\n", migratable.c_str());
    return 2;
  }
  d.migratable = migratable == "true";
  if (level != "both" && level != "core" && level != "objects") {
    std::fprintf(stderr, "error: --level=%s: expected core, objects or both\n", level.c_str());
    return 2;
  }
  std::vector<bool> touches;
  if (touch != "true") touches.push_back(false);
  if (touch != "false") touches.push_back(true);
  // The variants measured for each size: core, then the objects payloads.
  std::vector<std::pair<level_kind, payload_kind>> variants;
  if (level != "objects") variants.push_back({level_kind::core, payload_kind::message});
  if (level != "core") {
    for (payload_kind k : payloads) variants.push_back({level_kind::objects, k});
  }
  d.objects = level != "core";
  // One warm-up round per variant, then the repeats interleaved: every size
  // and variant once per repeat, so slow drift of this virtual machine
  // spreads over all alike; the variants of one size run back to back (their
  // ratio is what counts), in reverse order every other repeat.
  for (auto [l, p] : variants) d.plan.push_back({l, p, sizes.front(), false, -1});
  for (int r = 0; r < d.cli.repeat; ++r)
    for (bool t : touches)
      for (std::uint32_t b : sizes)
        for (std::size_t v = 0; v < variants.size(); ++v) {
          const auto [l, p] = variants[r % 2 == 0 ? v : variants.size() - 1 - v];
          d.plan.push_back({l, p, b, t, r});
        }

  weft::runtime_config cfg = weft::parse_options(argc, argv);
  return weft::run(cfg, argc, argv, [](weft::args) {
    driver_state& dr = g_driver;
    dr.transport = weft::config().transport;
    if (dr.objects) {
      // Block map over num_pes elements: element i on PE i.
      if (dr.migratable) {
        dr.marr = weft::array<MigratableNeighbour>::create(weft::num_pes());
        dr.finished_cb = dr.marr[0].callback<&MigratableNeighbour::finished>();
      } else {
        dr.arr = weft::array<Neighbour>::create(weft::num_pes());
        dr.finished_cb = dr.arr[0].callback<&Neighbour::finished>();
      }
    }
    start_next();
  });
}
