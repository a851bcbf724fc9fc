// The composite transports (shm inside a host, mpi or ucx between hosts)
// through the transport interface, under mpirun:
//
//   net_mp_composite --inter=mpi|ucx [--split=K] [--expect-group=G] [--lose=N]
//
// --split=K makes "hosts" of K consecutive nodes on this machine (the
// composite's test knob for the host key); without it, the real host layout
// decides. --expect-group=G: this node's host group must have G nodes.
// --lose=N: node N leaves without finalize right after init; the nodes of
// its host group must get hooks.node_lost naming it by its job number (shm
// numbers it within the group), print
//   mp_composite: ok: node R was told node N is lost (<why>)
// and exit; the launcher ends the rest.
//
// Every node sends to every other node, on send() and on one persistent
// channel each: small messages and a few large ones (the chunked and the
// cross-memory-attach paths of shm, the rendezvous of mpi and ucx); every
// message says who sent it, on which stream and its sequence number, and a
// pattern fills the rest, so a receiver catches loss, duplication, reordering
// per stream and corruption at once. Then allgather and barrier, then a burst
// to every node followed at once by finalize, which must deliver all of it.
// Last, the composite's counters must show that exactly the messages between
// nodes of one host group went through shm and all others through the inter
// backend (none at all when the group is the whole job), and each node prints
//   mp_composite: node R host-group A,B shm-sent M msgs X B inter-sent N msgs Y B
// which tests/net/two_hosts.sh reads. Exit 0 on success; a failure prints
// "mp_composite: FAIL (node R): ..." and ends the job with exit code 1.
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>
#include "mp_fail.hpp"
#include "net/composite.hpp"
#include "weft/base/timer.hpp"
#include "weft/net/transport.hpp"

namespace {

using weft::net::transport;

constexpr double kWaitSeconds = 60;
constexpr std::uint32_t kMagic = 0x636f6d70;  // "comp"
constexpr int kStreams = 2;                   // 0: send(); 1: the persistent channel
constexpr std::uint32_t kRound = 600;         // stream 0 messages per peer before the burst
constexpr std::uint32_t kPersist = 150;       // stream 1 messages per peer
constexpr std::uint32_t kBurst = 300;         // stream 0 messages per peer just before finalize
constexpr std::size_t kChannelMax = 1024;

struct header {
  std::uint32_t magic;
  std::uint16_t src;
  std::uint8_t stream;
  std::uint8_t pad;
  std::uint32_t seq;
  std::uint32_t bytes;
};
constexpr std::size_t kHeader = sizeof(header);
static_assert(kHeader == 16);

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Both sides compute the size of message `seq` on `stream`.
std::size_t size_of(int stream, std::uint32_t seq) {
  if (stream == 1) return kHeader + mix(seq) % (kChannelMax - kHeader + 1);
  switch (seq) {
    case 100:
      return (std::size_t(64) << 10) + 8;  // shm: chunks through the ring
    case 300:
      return std::size_t(1) << 20;
    case 500:
      return (std::size_t(5) << 20) + 24;  // shm: cross-memory attach where allowed
    case kRound + kBurst - 10:
      return std::size_t(1) << 20;  // a large one in flight at finalize
    default:
      return kHeader + mix(seq) % 4081;
  }
}

std::unique_ptr<transport> g_t;
std::atomic<bool> g_live{false};
int g_me = 0, g_nodes = 1;
std::atomic<const char*> g_phase{"init"};

struct peer_state {
  std::uint32_t sent[kStreams] = {};
  std::uint32_t received[kStreams] = {};
  int channel = -1;
};
std::vector<peer_state> g_peers;
std::unordered_set<void*> g_outgoing;  // sent, not yet released
std::uint64_t g_sent_msgs = 0, g_delivered = 0;

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mp_test::fail_job("mp_composite", g_me, g_live ? g_t.get() : nullptr, fmt, ap);
}

unsigned char pattern(int src, int stream, std::uint32_t seq, std::size_t at) {
  return static_cast<unsigned char>(
      mix((std::uint64_t(src) << 48) ^ (std::uint64_t(stream) << 40) ^ seq) >> (8 * (at % 8)) ^
      (at >> 3));
}

void* hook_alloc(std::size_t bytes) {
  void* p = std::aligned_alloc(16, (bytes + 15) / 16 * 16 + 16);
  if (p == nullptr) fail("out of memory for a %zu-byte receive buffer", bytes);
  return p;
}

void hook_deliver(int src, void* buffer, std::size_t bytes) {
  if (src < 0 || src >= g_nodes || src == g_me) fail("delivery from node %d", src);
  if (bytes < kHeader) fail("%zu bytes from node %d: shorter than a header", bytes, src);
  header h;
  std::memcpy(&h, buffer, kHeader);
  if (h.magic != kMagic || h.src != src || h.stream >= kStreams || h.bytes != bytes)
    fail("corrupt header from node %d (magic %#x, src %u, stream %u, %u bytes of %zu)", src,
         h.magic, unsigned(h.src), unsigned(h.stream), h.bytes, bytes);
  peer_state& p = g_peers[std::size_t(src)];
  if (h.seq != p.received[h.stream])
    fail(
        "from node %d on stream %u: message %u arrived when %u was due (loss, duplicate or "
        "reordering)",
        src, unsigned(h.stream), h.seq, p.received[h.stream]);
  if (bytes != size_of(h.stream, h.seq))
    fail("from node %d on stream %u: message %u has %zu bytes, not %zu", src, unsigned(h.stream),
         h.seq, bytes, size_of(h.stream, h.seq));
  const auto* b = static_cast<const unsigned char*>(buffer);
  for (std::size_t at = kHeader; at < bytes; ++at)
    if (b[at] != pattern(src, h.stream, h.seq, at))
      fail("from node %d on stream %u: message %u differs at byte %zu of %zu", src,
           unsigned(h.stream), h.seq, at, bytes);
  ++p.received[h.stream];
  ++g_delivered;
  std::free(buffer);
}

void hook_release(void* buffer) {
  if (g_outgoing.erase(buffer) != 1) fail("release of %p, which is not in flight", buffer);
  std::free(buffer);
}

int g_lose = -1;  // --lose=N

void hook_node_lost(int node, const char* why) {
  if (node != g_lose) fail("node %d lost: %s", node, why);
  std::printf("mp_composite: ok: node %d was told node %d is lost (%s)\n", g_me, node, why);
  std::fflush(stdout);
  std::_Exit(0);  // the contract: node_lost does not return
}

void send_one(int dst, int stream) {
  peer_state& p = g_peers[std::size_t(dst)];
  const std::uint32_t seq = p.sent[stream]++;
  const std::size_t bytes = size_of(stream, seq);
  auto* b = static_cast<unsigned char*>(std::aligned_alloc(16, (bytes + 15) / 16 * 16));
  if (b == nullptr) fail("out of memory for a %zu-byte message", bytes);
  const header h{kMagic, std::uint16_t(g_me), std::uint8_t(stream), 0, seq, std::uint32_t(bytes)};
  std::memcpy(b, &h, kHeader);
  for (std::size_t at = kHeader; at < bytes; ++at) b[at] = pattern(g_me, stream, seq, at);
  g_outgoing.insert(b);
  ++g_sent_msgs;
  if (stream == 0)
    g_t->send(dst, b, bytes);
  else
    g_t->send_persistent(p.channel, b, bytes);
}

template <class Done>
void progress_until(Done done, const char* what) {
  g_phase = what;
  const std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
  while (!done()) {
    if (g_t->progress() == 0) std::this_thread::yield();
    if (weft::base::wall_ns() > deadline) {
      std::string got;
      for (int n = 0; n < g_nodes; ++n)
        if (n != g_me)
          got += " node " + std::to_string(n) + ": " +
                 std::to_string(g_peers[std::size_t(n)].received[0]) + "+" +
                 std::to_string(g_peers[std::size_t(n)].received[1]) + ";";
      fail("%s: not done after %g s; received%s", what, kWaitSeconds, got.c_str());
    }
  }
}

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  const std::size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string inter = arg(argc, argv, "--inter", "mpi");
  const int split = std::atoi(arg(argc, argv, "--split", "0").c_str());
  const int expect_group = std::atoi(arg(argc, argv, "--expect-group", "0").c_str());
  g_lose = std::atoi(arg(argc, argv, "--lose", "-1").c_str());

  const weft::net::launch_info launch = weft::net::launch_from_environment();
  g_me = launch.rank;
  weft::net::composite_options opts;
  if (split > 0) opts.host_key = "test-host-" + std::to_string(launch.rank / split);
  g_t = weft::net::make_composite_transport(inter, opts);

  // The blocking calls cannot be polled with a deadline: a thread turns a
  // hang anywhere into a failure naming the phase.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3 * int(kWaitSeconds));
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (std::chrono::steady_clock::now() > end) fail("hangs in phase '%s'", g_phase.load());
    }
  });

  weft::net::hooks h;
  h.alloc = hook_alloc;
  h.deliver = hook_deliver;
  h.release = hook_release;
  h.node_lost = hook_node_lost;
  g_peers.resize(std::size_t(launch.size));
  g_t->init(launch, h, 60);
  g_live = true;
  g_me = g_t->node_rank();
  g_nodes = g_t->num_nodes();
  if (g_nodes != launch.size) fail("%d nodes, the launcher says %d", g_nodes, launch.size);

  const std::vector<int> group = weft::net::composite_host_group(*g_t);
  std::vector<bool> same_host(std::size_t(g_nodes), false);
  std::string group_text;
  for (int n : group) {
    same_host[std::size_t(n)] = true;
    group_text += (group_text.empty() ? "" : ",") + std::to_string(n);
  }
  if (!same_host[std::size_t(g_me)]) fail("host group %s lacks this node", group_text.c_str());
  if (split > 0)
    for (int n = 0; n < g_nodes; ++n)
      if (same_host[std::size_t(n)] != (n / split == g_me / split))
        fail("--split=%d, but the host group is %s", split, group_text.c_str());
  if (expect_group > 0 && int(group.size()) != expect_group)
    fail("host group %s has %zu nodes, expected %d", group_text.c_str(), group.size(),
         expect_group);

  if (g_lose >= 0) {
    g_phase = "waiting for a lost node";
    g_t->barrier();
    if (g_me == g_lose) std::_Exit(0);
    // Only the lost node's host group watches it (shm); everybody else waits
    // for the launcher to end the job.
    progress_until([] { return false; }, "waiting for hooks.node_lost");
  }

  // All to all, on both streams.
  g_phase = "all to all";
  for (int n = 0; n < g_nodes; ++n)
    if (n != g_me) g_peers[std::size_t(n)].channel = g_t->create_persistent(n, kChannelMax);
  for (std::uint32_t i = 0; i < kRound; ++i) {
    for (int n = 0; n < g_nodes; ++n) {
      if (n == g_me) continue;
      send_one(n, 0);
      if (i % 4 == 0) send_one(n, 1);
    }
    if (i % 8 == 0) g_t->progress();
  }
  progress_until(
      [] {
        for (int n = 0; n < g_nodes; ++n)
          if (n != g_me && (g_peers[std::size_t(n)].received[0] != kRound ||
                            g_peers[std::size_t(n)].received[1] != kPersist))
            return false;
        return true;
      },
      "all to all");

  // Collectives through the inter backend.
  g_phase = "allgather";
  std::uint64_t mine = 1000003ull * std::uint64_t(g_me) + 7;
  std::vector<std::uint64_t> all(static_cast<std::size_t>(g_nodes));
  g_t->allgather(&mine, sizeof mine, all.data());
  for (int n = 0; n < g_nodes; ++n)
    if (all[std::size_t(n)] != 1000003ull * std::uint64_t(n) + 7)
      fail("allgather: node %d's part is %llu", n, (unsigned long long)all[std::size_t(n)]);
  g_phase = "barrier";
  g_t->barrier();

  // A burst, then finalize at once: finalize must deliver all of it.
  g_phase = "burst and finalize";
  for (std::uint32_t i = 0; i < kBurst; ++i)
    for (int n = 0; n < g_nodes; ++n)
      if (n != g_me) send_one(n, 0);
  g_t->finalize();
  g_live = false;
  for (int n = 0; n < g_nodes; ++n)
    if (n != g_me && (g_peers[std::size_t(n)].received[0] != kRound + kBurst ||
                      g_peers[std::size_t(n)].received[1] != kPersist))
      fail("after finalize: %u + %u messages from node %d, expected %u + %u",
           g_peers[std::size_t(n)].received[0], g_peers[std::size_t(n)].received[1], n,
           kRound + kBurst, kPersist);
  if (!g_outgoing.empty())
    fail("after finalize: %zu send buffers never released", g_outgoing.size());

  // Which path the messages took.
  const weft::net::composite_counters* c = weft::net::composite_counters_of(*g_t);
  if (c == nullptr) fail("transport %s is not a composite", g_t->name());
  std::uint64_t want_shm = 0, want_inter = 0, want_shm_in = 0, want_inter_in = 0;
  for (int n = 0; n < g_nodes; ++n) {
    if (n == g_me) continue;
    const peer_state& p = g_peers[std::size_t(n)];
    (same_host[std::size_t(n)] ? want_shm : want_inter) += p.sent[0] + p.sent[1];
    (same_host[std::size_t(n)] ? want_shm_in : want_inter_in) += p.received[0] + p.received[1];
  }
  if (c->shm_sent != want_shm || c->inter_sent != want_inter)
    fail("sent %llu messages through shm and %llu through %s; expected %llu and %llu",
         (unsigned long long)c->shm_sent, (unsigned long long)c->inter_sent, inter.c_str(),
         (unsigned long long)want_shm, (unsigned long long)want_inter);
  if (c->shm_delivered != want_shm_in || c->inter_delivered != want_inter_in)
    fail("received %llu messages through shm and %llu through %s; expected %llu and %llu",
         (unsigned long long)c->shm_delivered, (unsigned long long)c->inter_delivered,
         inter.c_str(), (unsigned long long)want_shm_in, (unsigned long long)want_inter_in);
  std::printf(
      "mp_composite: node %d host-group %s shm-sent %llu msgs %llu B inter-sent %llu "
      "msgs %llu B\n",
      g_me, group_text.c_str(), (unsigned long long)c->shm_sent,
      (unsigned long long)c->shm_sent_bytes, (unsigned long long)c->inter_sent,
      (unsigned long long)c->inter_sent_bytes);
  std::fflush(stdout);
  const std::string name = g_t->name();
  done = true;
  watchdog.join();
  g_t.reset();
  if (g_me == 0) std::printf("mp_composite: passed, %d processes over %s\n", g_nodes, name.c_str());
  return 0;
}
