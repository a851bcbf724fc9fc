// persistent: large messages at the transport level, below core (the seeds'
// Figure 8a/8b). Node 0 and node 1 of a job started by mpirun play
// ping-pong with messages of 64 KiB .. 4 MiB through one transport object
// (create_transport, launch_from_environment, init, send / send_persistent,
// progress), two ways, interleaved in one run:
//
//  - ordinary:   transport::send: for large messages the backend's
//                rendezvous (a handshake per message);
//  - persistent: a channel created once per direction
//                (transport::create_persistent), then send_persistent, which
//                skips the handshake where the backend can (ucx: one PUT into
//                the receiver's registered buffer); backends without a
//                cheaper path send through send().
//
// --pool=on|off (ucx only) picks the ucx transport's large-message buffers:
// the send pool registered once at init, or each message's buffer registered
// for it (ucx_options::pooled). Two transports cannot live in one process
// (each bootstraps through the launcher), so pooled vs registered is two runs,
// which bench/run_all.sh interleaves.
//
// Message buffers come from a free list per size on both sides (as core's
// message pools), so after the warm-up neither variant pays for allocation
// or first touch. No data is checked (the conformance tests do that).
//
//   mpirun -n 2 build/release/bench/persistent --transport=ucx --json
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include "common/harness.hpp"
#include "common/nodes.hpp"
#include "weft/base/timer.hpp"
#include "weft/net/transport.hpp"
#if WEFT_BENCH_HAVE_UCX
#include "net/ucx/ucx.hpp"
#endif

namespace {

const char* about =
    "persistent: large-message ping-pong between node 0 and node 1 at the transport level,\n"
    "ordinary send (rendezvous) vs a persistent channel, interleaved; one-way time and\n"
    "bandwidth per size, and persistent/ordinary per repeat. Run under mpirun with 2 or more\n"
    "processes (nodes above 1 only wait). Flags:\n"
    "  --transport=NAME  shm | mpi | ucx (default ucx); --list-transports prints this build's\n"
    "  --pool=on|off     ucx only: large messages from the send pool registered once (on,\n"
    "                    the default) or each buffer registered per message (off)\n"
    "  --bytes=LIST      sizes (default 65536,262144,1048576,4194304)\n"
    "  --iters=N         round trips per measurement for the smallest size (default 1000;\n"
    "                    fewer for large ones, at least 20, about 64 MiB moved)\n"
    "No --weft: options: no runtime node starts.";

constexpr double kWaitSeconds = 60;
constexpr std::uint32_t kMagic = 0x70657273;  // "pers"
enum kind : std::uint32_t { k_ordinary = 0, k_persistent = 1, k_stop = 2 };
struct header {
  std::uint32_t magic;
  std::uint32_t kind;
};

std::unique_ptr<weft::net::transport> g_t;
bool g_live = false;
int g_me = 0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "persistent: error (node %d): %s\n", g_me, what.c_str());
  std::fflush(stderr);
  if (g_live) g_t->abort(1, "persistent benchmark failed (see above)");
  std::exit(1);
}

// ---- buffers: a free list per size (16-byte multiples) ---------------------------------

std::unordered_map<std::size_t, std::vector<void*>> g_free;
std::unordered_map<void*, std::size_t> g_size_of;

std::size_t rounded(std::size_t bytes) {
  return bytes == 0 ? 16 : (bytes + 15) / 16 * 16;
}

void* get_buffer(std::size_t bytes) {
  const std::size_t r = rounded(bytes);
  auto& list = g_free[r];
  if (!list.empty()) {
    void* p = list.back();
    list.pop_back();
    return p;
  }
  void* p = std::aligned_alloc(16, r);
  if (p == nullptr) fail("out of memory for a " + std::to_string(bytes) + "-byte buffer");
  std::memset(p, 0, r);  // touched once, here, not in a timed round trip
  g_size_of[p] = r;
  return p;
}

void put_buffer(void* p) {
  auto it = g_size_of.find(p);
  if (it == g_size_of.end()) fail("a buffer the benchmark did not allocate came back");
  g_free[it->second].push_back(p);
}

// ---- hooks: deliveries are queued and handled after progress() returns -----------------

struct arrival {
  int src;
  void* buffer;
  std::size_t bytes;
};
std::deque<arrival> g_arrived;

void* hook_alloc(std::size_t bytes) {
  return get_buffer(bytes);
}
void hook_deliver(int src, void* buffer, std::size_t bytes) {
  g_arrived.push_back({src, buffer, bytes});
}
void hook_release(void* buffer) {
  put_buffer(buffer);
}
void hook_node_lost(int node, const char* why) {
  fail("node " + std::to_string(node) + " is lost: " + why);
}

// Progresses until a message has arrived; returns it.
arrival wait_arrival(const char* what) {
  const std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
  for (unsigned spins = 0; g_arrived.empty(); ++spins) {
    g_t->progress();
    if ((spins & 1023) == 0 && weft::base::wall_ns() > deadline)
      fail(std::string("timed out after 60 s waiting for ") + what);
  }
  arrival a = g_arrived.front();
  g_arrived.pop_front();
  return a;
}

void send_kind(int node, int channel, std::uint32_t k, std::size_t bytes) {
  void* p = get_buffer(bytes);
  const header h{kMagic, k};
  std::memcpy(p, &h, sizeof h);
  if (k == k_persistent)
    g_t->send_persistent(channel, p, bytes);
  else
    g_t->send(node, p, bytes);
}

header header_of(const arrival& a) {
  header h{};
  if (a.bytes < sizeof h) fail("a message of " + std::to_string(a.bytes) + " bytes arrived");
  std::memcpy(&h, a.buffer, sizeof h);
  if (h.magic != kMagic || h.kind > k_stop) fail("a message with a corrupt header arrived");
  return h;
}

// ---- node 1: answers each message the way it came -------------------------------------

void serve(int channel) {
  for (;;) {
    arrival a = wait_arrival("the next message from node 0");
    const header h = header_of(a);
    const std::size_t bytes = a.bytes;
    put_buffer(a.buffer);
    if (h.kind == k_stop) return;
    send_kind(0, channel, h.kind, bytes);
  }
}

// ---- node 0: the measurements ---------------------------------------------------------

struct step {
  std::uint32_t kind;  // k_ordinary | k_persistent
  std::size_t bytes;
  int repeat;  // -1: warm-up
};

const char* kind_name(std::uint32_t k) {
  return k == k_persistent ? "persistent" : "ordinary";
}

// One-way ns of `trips` round trips of `bytes` through `kind`.
double measure(int channel, std::uint32_t k, std::size_t bytes, long trips) {
  const std::uint64_t t0 = weft::base::cycles();
  for (long i = 0; i < trips; ++i) {
    send_kind(1, channel, k, bytes);
    arrival a = wait_arrival("the reply from node 1");
    if (a.bytes != bytes || header_of(a).kind != k)
      fail("the reply from node 1 is not the message sent");
    put_buffer(a.buffer);
  }
  return weft::base::cycles_to_ns(weft::base::cycles() - t0) / (2.0 * double(trips));
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--list-transports") {
      std::printf("%s\n", weft::net::available_transports().c_str());
      return 0;
    }
  weft::bench::cli cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(cli, {"transport", "pool", "bytes", "iters"});
  // Below core: no node starts, so runtime options would be ignored.
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--weft:", 7) == 0) {
      std::fprintf(stderr,
                   "error: %s: persistent runs at the transport level, without the runtime: "
                   "--weft: options do not apply (see --help)\n",
                   argv[i]);
      return 2;
    }
  const std::string name = weft::bench::arg(cli, "transport", "ucx");
  const std::string pool = weft::bench::arg(cli, "pool", "");
  const long iters = weft::bench::positive_arg(cli, "iters", 1000, 100000000);
  std::vector<std::size_t> sizes;
  for (long b :
       weft::bench::int_list_arg(cli, "bytes", "65536,262144,1048576,4194304", 16, 1l << 30))
    sizes.push_back(std::size_t(b));
  if (name == "local") {
    std::fprintf(stderr,
                 "error: --transport=local: this benchmark needs a network transport "
                 "(shm, mpi or ucx)\n");
    return 2;
  }
  if (!pool.empty() && pool != "on" && pool != "off") {
    std::fprintf(stderr, "error: --pool=%s: expected on or off\n", pool.c_str());
    return 2;
  }
  if (!pool.empty() && name != "ucx") {
    std::fprintf(stderr,
                 "error: --pool=%s: the pool is an option of the ucx transport only "
                 "(this run: --transport=%s)\n",
                 pool.c_str(), name.c_str());
    return 2;
  }
  std::string buffers = "default";
#if WEFT_BENCH_HAVE_UCX
  if (name == "ucx") {
    weft::net::ucx_options options;
    options.pooled = pool != "off";
    buffers = options.pooled ? "pooled" : "registered";
    g_t = weft::net::make_ucx_transport(options);
  }
#endif
  if (!g_t) g_t = weft::net::create_transport(name);  // an unknown name exits 2

  weft::net::launch_info launch = weft::net::launch_from_environment();
  g_me = launch.rank;
  weft::net::hooks h;
  h.alloc = hook_alloc;
  h.deliver = hook_deliver;
  h.release = hook_release;
  h.node_lost = hook_node_lost;
  g_t->init(launch, h, kWaitSeconds);
  g_live = true;
  g_me = g_t->node_rank();
  if (g_t->num_nodes() < 2) {
    g_t->finalize();
    std::fprintf(stderr,
                 "error: persistent needs a job of 2 or more processes (run it as mpirun -n 2 "
                 "...); this run is one process\n");
    return 2;
  }
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  int channel = -1;
  if (g_me <= 1) channel = g_t->create_persistent(1 - g_me, largest);

  if (g_me == 1) serve(channel);
  if (g_me == 0) {
    // Warm-up of every (size, variant): the channel handshake, the pools, the
    // free lists; then the repeats, the two variants of a size back to back,
    // in reverse order every other repeat.
    std::vector<step> plan;
    for (std::size_t b : sizes)
      for (std::uint32_t k : {k_ordinary, k_persistent}) plan.push_back({k, b, -1});
    for (int r = 0; r < cli.repeat; ++r)
      for (std::size_t b : sizes)
        for (int v = 0; v < 2; ++v) {
          const std::uint32_t k = (v == 0) == (r % 2 == 0) ? k_ordinary : k_persistent;
          plan.push_back({k, b, r});
        }
    // oneway[size index][kind][repeat]
    std::vector<std::vector<std::vector<double>>> oneway(
        sizes.size(),
        std::vector<std::vector<double>>(2, std::vector<double>(std::size_t(cli.repeat))));
    for (const step& s : plan) {
      const double ns =
          measure(channel, s.kind, s.bytes, weft::bench::round_trips(iters, long(s.bytes)));
      if (s.repeat < 0) continue;
      const auto i = std::size_t(std::find(sizes.begin(), sizes.end(), s.bytes) - sizes.begin());
      oneway[i][s.kind][std::size_t(s.repeat)] = ns;
    }
    send_kind(1, channel, k_stop, sizeof(header));

    weft::bench::reporter out("persistent", cli.json);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto common = [&](const char* variant) {
        return std::vector<weft::bench::field>{
            {"transport", name}, {"buffers", buffers}, {"variant", variant}, {"bytes", sizes[i]}};
      };
      std::vector<double> ratio;
      for (int r = 0; r < cli.repeat; ++r)
        ratio.push_back(oneway[i][k_persistent][std::size_t(r)] /
                        oneway[i][k_ordinary][std::size_t(r)]);
      for (std::uint32_t k : {k_ordinary, k_persistent}) {
        std::vector<double> mbps;
        for (double ns : oneway[i][k]) mbps.push_back(double(sizes[i]) / ns * 1e3);
        const auto lat = weft::bench::summarize(oneway[i][k]);
        const auto bw = weft::bench::summarize(mbps);
        auto f = common(kind_name(k));
        f.insert(
            f.end(),
            {{"metric", "oneway_ns"}, {"value", lat.median}, {"min", lat.min}, {"max", lat.max}});
        out.row(std::move(f));
        f = common(kind_name(k));
        f.insert(
            f.end(),
            {{"metric", "bandwidth_MBps"}, {"value", bw.median}, {"min", bw.min}, {"max", bw.max}});
        out.row(std::move(f));
      }
      const auto q = weft::bench::summarize(ratio);
      auto f = common("persistent");
      f.insert(f.end(), {{"metric", "ratio_persistent_over_ordinary"},
                         {"value", q.median},
                         {"min", q.min},
                         {"max", q.max}});
      out.row(std::move(f));
    }
#if WEFT_BENCH_HAVE_UCX
    // Which path the messages took (node 0's sends), so a fallback does not
    // pass for the persistent path.
    if (const weft::net::ucx_counters* c = weft::net::ucx_counters_of(*g_t)) {
      out.row({{"transport", name},
               {"buffers", buffers},
               {"metric", "ucx_sends"},
               {"eager", long(c->eager)},
               {"rndv_pooled", long(c->rndv_pooled)},
               {"rndv_registered", long(c->rndv_registered)},
               {"pool_fallbacks", long(c->pool_fallbacks)},
               {"persistent_puts", long(c->persistent_puts)},
               {"persistent_fallbacks", long(c->persistent_fallbacks)},
               {"value", long(c->persistent_puts)}});
    }
#endif
    out.flush();
  }
  g_t->barrier();
  g_t->finalize();
  g_live = false;
  g_t.reset();
  for (auto& [p, bytes] : g_size_of) std::free(p);
  return 0;
}
