// Transport conformance: one program, run under mpirun with 2..4 processes,
// that checks any backend through the public interface alone
// (create_transport + launch_from_environment), so every backend is held to
// the same contract:
//
//   net_mp_transport --transport=NAME [--case=all|LIST]
//
// LIST is a comma list of: pingpong, alltoall, large, persistent, allgather,
// barrier, hold, finalize. Exit 0 on success; a failure prints
// "mp_transport: FAIL (node R): <what>" and ends the job with exit code 1.
//
// Every message describes itself (kind, stream, sequence number in its first
// 8 bytes; a pattern derived from sender, receiver, stream and sequence after
// them), so a receiver checks each one as it arrives, whatever case it
// belongs to: messages of one case may still be in flight while the next
// runs, as they would be in the runtime. Per (sender, stream) the sequence
// numbers must arrive as 0, 1, 2, ...: that catches loss, duplication and
// reordering at once. Stream 0 is send(); each persistent channel is a stream
// of its own: the contract does not say how a channel's messages order
// against send()'s, so only the order within each stream is checked.
//
// No duration is asserted. Every wait has a deadline (and a watchdog thread
// guards the blocking calls) only to turn a hang into a failure that names
// what was awaited.
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include "mp_fail.hpp"
#include "weft/base/timer.hpp"
#include "weft/net/transport.hpp"

namespace {

using weft::net::transport;

constexpr double kWaitSeconds = 60;
constexpr std::uint16_t kMagic = 0x7e57;
constexpr std::size_t kHeader = 8;

enum kind : std::uint8_t {
  k_ping = 1,
  k_pong,
  k_alltoall,
  k_large,
  k_persistent,
  k_during_allgather,
  k_burst,
  k_hold,
  k_kinds
};
// Stream 0: send(); 1 and 2: the two persistent channels to each peer.
constexpr int kStreams = 3;

struct header {
  std::uint16_t magic;
  std::uint8_t kind;
  std::uint8_t stream;
  std::uint32_t seq;
};
static_assert(sizeof(header) == kHeader);

// ---- test parameters: what each node sends to each peer ------------------

constexpr int kPingRounds = 200;
constexpr int kAllToAll = 20000;
constexpr std::size_t kLargeSizes[] = {
    16, 64 << 10, 8, 24, 1 << 20, 40, 4 << 20, 8, 100, (64 << 10) + 8, (4 << 20) + 24, 16};
constexpr int kLargeCount = int(sizeof kLargeSizes / sizeof kLargeSizes[0]);
constexpr std::size_t kChannelMax[kStreams] = {0, 256, 64 << 10};
constexpr int kPersistentPerStream[kStreams] = {300, 600, 100};
constexpr int kDuringAllgather = 50;
// Then one 1 MiB message, then 5 small ones. More than the mpi transport
// lets one node leave unmatched (4096): finalize() must start the rest.
constexpr int kBurst = 5000;
// Sent to each peer without a progress() call between: past the mpi
// transport's bound, the rest wait in it until the peer has matched some.
constexpr int kHold = 10000;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The size of message `index` of `kind` on `stream`: both sides compute it.
std::size_t size_of(int k, int stream, std::uint64_t index) {
  switch (k) {
    case k_ping:
    case k_pong:
      return 8;
    case k_alltoall:
      // 8 B .. 4 KiB, both ends included.
      if (index % 100 == 0) return 8;
      if (index % 100 == 1) return 4096;
      return 8 + mix(index) % 4089;
    case k_large:
      return index < std::uint64_t(kLargeCount) ? kLargeSizes[index] : 0;
    case k_persistent:
      if (stream == 0) return 8 + index % 64;
      return 8 + mix(index * 7 + std::uint64_t(stream)) % (kChannelMax[stream] - 7);
    case k_during_allgather:
      return 8 + index * 13;
    case k_burst:
      if (index == kBurst) return 1 << 20;
      if (index > kBurst) return 8 + index % 16;
      return 8 + mix(index) % 4089;
    case k_hold:
      return 8 + mix(index) % 57;
  }
  return 0;
}

// ---- state (hooks are plain function pointers, so it is global) ------------

std::unique_ptr<transport> g_transport;
std::atomic<bool> g_transport_live{false};  // between init() and finalize(); any thread
int g_me = 0, g_nodes = 1;

struct peer_state {
  // Sender side: next sequence per stream, next index per (kind, stream).
  std::uint32_t send_seq[kStreams] = {};
  std::uint64_t sent[k_kinds][kStreams] = {};
  // Receiver side: the same, as seen from this node.
  std::uint32_t recv_seq[kStreams] = {};
  std::uint64_t received[k_kinds][kStreams] = {};
};
std::vector<peer_state> g_peers;

std::uint64_t g_sends = 0, g_releases = 0, g_allocs = 0, g_deliveries = 0;
std::set<void*> g_send_buffers;                         // sent, not yet released
std::unordered_map<void*, std::size_t> g_recv_buffers;  // allocated, not yet delivered

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mp_test::fail_job("mp_transport", g_me, g_transport_live ? g_transport.get() : nullptr, fmt, ap);
}

// The blocking calls (init, allgather, barrier, finalize) cannot be polled
// with a deadline like the waits below, so a thread watches them: one that
// has not returned after kWaitSeconds fails the run, naming the call.
class call_watchdog {
 public:
  call_watchdog() : thread_([this] { watch(); }) {}
  ~call_watchdog() {
    stop_ = true;
    thread_.join();
  }
  // Scope of one watched call.
  struct guard {
    guard(call_watchdog& w, const char* what) : w_(w) {
      w_.what_ = what;
      w_.deadline_ = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
    }
    ~guard() { w_.deadline_ = 0; }
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    call_watchdog& w_;
  };

 private:
  void watch() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::uint64_t deadline = deadline_;
      if (deadline != 0 && weft::base::wall_ns() > deadline)
        fail("timed out after %g s in transport::%s", kWaitSeconds, what_.load());
    }
  }
  std::atomic<const char*> what_{""};
  std::atomic<std::uint64_t> deadline_{0};  // 0: no call watched
  std::atomic<bool> stop_{false};
  std::thread thread_;
};
call_watchdog* g_watchdog = nullptr;

std::uint64_t pattern_key(int src, int dst, int stream, std::uint32_t seq) {
  return mix((std::uint64_t(src) << 40) ^ (std::uint64_t(dst) << 20) ^
             (std::uint64_t(stream) << 36) ^ seq);
}

// The payload after the header: 64-bit words of a sequence derived from the
// key, then the tail bytes. Returns the first offset that differs, or bytes.
std::size_t fill_or_check(unsigned char* p, std::size_t bytes, std::uint64_t key, bool fill) {
  std::size_t at = kHeader;
  std::uint64_t w = key;
  for (; at + 8 <= bytes; at += 8, w += 0x9e3779b97f4a7c15ull) {
    if (fill) {
      std::memcpy(p + at, &w, 8);
    } else {
      std::uint64_t got;
      std::memcpy(&got, p + at, 8);
      if (got != w) return at;
    }
  }
  for (; at < bytes; ++at) {
    auto b = static_cast<unsigned char>(w >> (8 * (at % 8)));
    if (fill)
      p[at] = b;
    else if (p[at] != b)
      return at;
  }
  return bytes;
}

void* hook_alloc(std::size_t bytes) {
  std::size_t rounded = (bytes + 15) / 16 * 16;
  void* p = std::aligned_alloc(16, rounded == 0 ? 16 : rounded);
  if (p == nullptr) fail("out of memory allocating a %zu-byte receive buffer", bytes);
  g_recv_buffers[p] = bytes;
  ++g_allocs;
  return p;
}

void hook_deliver(int src, void* buffer, std::size_t bytes) {
  auto it = g_recv_buffers.find(buffer);
  if (it == g_recv_buffers.end())
    fail("deliver from node %d: buffer %p did not come from hooks.alloc (or was delivered twice)",
         src, buffer);
  if (bytes > it->second)
    fail("deliver from node %d: %zu bytes in a buffer allocated for %zu", src, bytes, it->second);
  g_recv_buffers.erase(it);
  ++g_deliveries;
  if (src < 0 || src >= g_nodes || src == g_me)
    fail("deliver: source node %d is not another node of the %d", src, g_nodes);
  if (bytes < kHeader)
    fail("deliver from node %d: %zu bytes, shorter than any message", src, bytes);
  auto* p = static_cast<unsigned char*>(buffer);
  header h;
  std::memcpy(&h, p, kHeader);
  if (h.magic != kMagic || h.kind == 0 || h.kind >= k_kinds || h.stream >= kStreams)
    fail("deliver from node %d: %zu bytes with a corrupt header (magic %#x, kind %u, stream %u)",
         src, bytes, h.magic, h.kind, h.stream);
  peer_state& peer = g_peers[std::size_t(src)];
  if (h.seq != peer.recv_seq[h.stream])
    fail("from node %d, stream %u: message %" PRIu32 " arrived when %" PRIu32
         " was due (%s; kind %u)",
         src, h.stream, h.seq, peer.recv_seq[h.stream],
         h.seq < peer.recv_seq[h.stream] ? "duplicate or reordered" : "lost or reordered", h.kind);
  ++peer.recv_seq[h.stream];
  std::uint64_t index = peer.received[h.kind][h.stream]++;
  std::size_t want = size_of(h.kind, h.stream, index);
  if (bytes != want)
    fail("from node %d: message %" PRIu64 " of kind %u on stream %u has %zu bytes, sent %zu", src,
         index, h.kind, h.stream, bytes, want);
  std::size_t bad = fill_or_check(p, bytes, pattern_key(src, g_me, h.stream, h.seq), false);
  if (bad != bytes)
    fail("from node %d: message %" PRIu64 " of kind %u (%zu bytes) is corrupt at byte %zu", src,
         index, h.kind, bytes, bad);
  std::free(buffer);
}

void hook_release(void* buffer) {
  if (g_send_buffers.erase(buffer) != 1)
    fail("hooks.release(%p): not a buffer passed to send() and not yet released", buffer);
  ++g_releases;
  std::free(buffer);
}

void hook_node_lost(int node, const char* why) {
  fail("hooks.node_lost(%d): %s", node, why);
}

// ---- sending and waiting ------------------------------------------------------

std::size_t outstanding() {
  return g_send_buffers.size();
}

// Builds message `index` of `kind` for `dst` on `stream` and sends it through
// send() (stream 0) or the persistent `channel`.
void send_message(int dst, int k, int stream, int channel = -1) {
  peer_state& peer = g_peers[std::size_t(dst)];
  std::uint64_t index = peer.sent[k][stream]++;
  std::size_t bytes = size_of(k, stream, index);
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(16, (bytes + 15) / 16 * 16));
  if (p == nullptr) fail("out of memory allocating a %zu-byte message", bytes);
  header h{kMagic, std::uint8_t(k), std::uint8_t(stream), peer.send_seq[stream]++};
  std::memcpy(p, &h, kHeader);
  fill_or_check(p, bytes, pattern_key(g_me, dst, stream, h.seq), true);
  g_send_buffers.insert(p);
  ++g_sends;
  if (stream == 0)
    g_transport->send(dst, p, bytes);
  else
    g_transport->send_persistent(channel, p, bytes);
}

// Progresses until `done`; after kWaitSeconds, fails naming `what`.
void wait_until(const std::function<bool()>& done, const char* what, ...)
    __attribute__((format(printf, 2, 3)));
void wait_until(const std::function<bool()>& done, const char* what, ...) {
  std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
  for (int idle = 0; !done();) {
    if (g_transport->progress() != 0) {
      idle = 0;
      continue;
    }
    if (++idle < 32) continue;
    std::this_thread::yield();  // the peer may need this core (oversubscribed)
    if (weft::base::wall_ns() > deadline) {
      char text[512];
      va_list ap;
      va_start(ap, what);
      std::vsnprintf(text, sizeof text, what, ap);
      va_end(ap);
      fail("timed out after %g s waiting for %s", kWaitSeconds, text);
    }
  }
}

// Keeps the memory of a long stream of sends bounded, as core's pools would.
void throttle() {
  if (outstanding() > 4096)
    wait_until([] { return outstanding() <= 2048; }, "send buffers to be released (%zu pending)",
               outstanding());
}

std::uint64_t received_from(int src, int k, int stream = 0) {
  return g_peers[std::size_t(src)].received[k][stream];
}

void wait_all_from_peers(int k, int stream, std::uint64_t count, const char* what) {
  for (int src = 0; src < g_nodes; ++src) {
    if (src == g_me) continue;
    wait_until([&] { return received_from(src, k, stream) >= count; },
               "%s from node %d (%" PRIu64 " of %" PRIu64 " arrived)", what, src,
               received_from(src, k, stream), count);
  }
}

template <class F>
void for_each_peer(F f) {
  for (int d = 1; d < g_nodes; ++d) f((g_me + d) % g_nodes);
}

// ---- the cases -------------------------------------------------------------------

// Node 0 plays ping-pong with each other node in turn, 8-byte messages.
void case_pingpong() {
  if (g_me == 0) {
    for (int peer = 1; peer < g_nodes; ++peer)
      for (int r = 0; r < kPingRounds; ++r) {
        send_message(peer, k_ping, 0);
        wait_until([&] { return received_from(peer, k_pong) >= std::uint64_t(r) + 1; },
                   "pong %d from node %d", r, peer);
      }
  } else {
    for (int r = 0; r < kPingRounds; ++r) {
      wait_until([&] { return received_from(0, k_ping) >= std::uint64_t(r) + 1; },
                 "ping %d from node 0", r);
      send_message(0, k_pong, 0);
    }
  }
}

// Every node sends kAllToAll numbered messages of 8 B .. 4 KiB to every other
// node, round robin, while receiving theirs.
void case_alltoall() {
  for (int i = 0; i < kAllToAll; ++i) {
    for_each_peer([](int dst) { send_message(dst, k_alltoall, 0); });
    g_transport->progress();
    throttle();
  }
  wait_all_from_peers(k_alltoall, 0, kAllToAll, "the all-to-all messages");
}

// 64 KiB, 1 MiB and 4 MiB messages among small ones: the small ones behind a
// large one must not overtake it.
void case_large() {
  for (int i = 0; i < kLargeCount; ++i) {
    for_each_peer([](int dst) { send_message(dst, k_large, 0); });
    g_transport->progress();
  }
  wait_all_from_peers(k_large, 0, kLargeCount, "the large and small messages");
}

// Two persistent channels per peer (small and 64 KiB messages), interleaved
// with ordinary sends to the same peer.
void case_persistent() {
  std::vector<int> channel(std::size_t(g_nodes) * kStreams, -1);
  for_each_peer([&](int dst) {
    for (int s = 1; s < kStreams; ++s)
      channel[std::size_t(dst) * kStreams + std::size_t(s)] =
          g_transport->create_persistent(dst, kChannelMax[s]);
  });
  int rounds = 0;
  for (int s = 0; s < kStreams; ++s) rounds = std::max(rounds, kPersistentPerStream[s]);
  for (int i = 0; i < rounds; ++i) {
    for_each_peer([&](int dst) {
      for (int s = 0; s < kStreams; ++s)
        if (i < kPersistentPerStream[s])
          send_message(dst, k_persistent, s, channel[std::size_t(dst) * kStreams + std::size_t(s)]);
    });
    g_transport->progress();
    throttle();
  }
  for (int s = 0; s < kStreams; ++s)
    wait_all_from_peers(k_persistent, s, std::uint64_t(kPersistentPerStream[s]),
                        "the persistent-channel messages");
}

// Node-specific data, in a small and a large allgather; messages sent just
// before must arrive too (delivered during or after the collective).
void case_allgather() {
  for (int i = 0; i < kDuringAllgather; ++i)
    for_each_peer([](int dst) { send_message(dst, k_during_allgather, 0); });
  for (std::size_t words : {std::size_t(1), std::size_t(1000)}) {
    std::vector<std::uint64_t> mine(words), all(words * std::size_t(g_nodes), 0);
    for (std::size_t w = 0; w < words; ++w) mine[w] = mix(std::uint64_t(g_me) * 1000003 + w);
    {
      call_watchdog::guard g(*g_watchdog, "allgather");
      g_transport->allgather(mine.data(), words * 8, all.data());
    }
    for (int n = 0; n < g_nodes; ++n)
      for (std::size_t w = 0; w < words; ++w)
        if (all[std::size_t(n) * words + w] != mix(std::uint64_t(n) * 1000003 + w))
          fail("allgather of %zu bytes: word %zu of node %d is wrong", words * 8, w, n);
  }
  wait_all_from_peers(k_during_allgather, 0, kDuringAllgather,
                      "the messages sent before the allgather");
}

std::int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One node arrives late at each barrier; nobody may leave before it arrived.
// The order is read from the host's clock, which all processes share when
// they run on one host (as in CI); it asserts order, not durations.
void case_barrier() {
  for (int round = 0; round < 3; ++round) {
    int late = (g_nodes - 1 + round) % g_nodes;
    if (g_me == late) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::int64_t times[2];
    times[0] = realtime_ns();
    {
      call_watchdog::guard g(*g_watchdog, "barrier");
      g_transport->barrier();
    }
    times[1] = realtime_ns();
    std::vector<std::int64_t> all(2 * std::size_t(g_nodes));
    {
      call_watchdog::guard g(*g_watchdog, "allgather");
      g_transport->allgather(times, sizeof times, all.data());
    }
    for (int n = 0; n < g_nodes; ++n)
      if (all[2 * std::size_t(n) + 1] < all[2 * std::size_t(late)])
        fail("barrier round %d: node %d left the barrier before node %d entered it", round, n,
             late);
  }
}

// A flood with no progress() between the sends, as from elements that never
// wait: a transport that bounds what a peer leaves unmatched (mpi) holds the
// rest back and must start them, in order, once the peer catches up.
void case_hold() {
  for (int i = 0; i < kHold; ++i) for_each_peer([](int dst) { send_message(dst, k_hold, 0); });
  wait_all_from_peers(k_hold, 0, kHold, "the messages sent without progress()");
}

// A burst to every peer, ending with a 1 MiB message and small ones behind
// it, then straight into finalize(): it must deliver all of them.
void case_finalize_burst() {
  for (int i = 0; i < kBurst + 6; ++i)
    for_each_peer([](int dst) { send_message(dst, k_burst, 0); });
}

const char* const kCases[] = {"pingpong",  "alltoall", "large", "persistent",
                              "allgather", "barrier",  "hold",  "finalize"};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "mp_transport: %s\nusage: net_mp_transport --transport=NAME "
               "[--case=all|LIST]\n  LIST: comma list of pingpong, alltoall, large, persistent, "
               "allgather, barrier, hold, finalize\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string transport_name;
  std::set<std::string> cases;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--transport=", 0) == 0) {
      transport_name = a.substr(12);
    } else if (a.rfind("--case=", 0) == 0) {
      std::string list = a.substr(7);
      for (std::size_t at = 0; at <= list.size();) {
        std::size_t comma = std::min(list.find(',', at), list.size());
        std::string c = list.substr(at, comma - at);
        if (c == "all") {
          cases.insert(std::begin(kCases), std::end(kCases));
        } else if (std::find(std::begin(kCases), std::end(kCases), c) != std::end(kCases)) {
          cases.insert(c);
        } else {
          usage(("--case: unknown case '" + c + "'").c_str());
        }
        at = comma + 1;
      }
    } else {
      usage(("unknown argument '" + a + "'").c_str());
    }
  }
  if (transport_name.empty()) usage("--transport=NAME is required");
  if (cases.empty()) cases.insert(std::begin(kCases), std::end(kCases));

  // An unknown or missing transport is the library's usage error (exit 2).
  g_transport = weft::net::create_transport(transport_name);
  weft::net::launch_info launch = weft::net::launch_from_environment();
  weft::net::hooks h;
  h.alloc = hook_alloc;
  h.deliver = hook_deliver;
  h.release = hook_release;
  h.node_lost = hook_node_lost;
  // A transport may deliver messages from peers that finished init() first
  // before its own init() returns: be ready for them.
  g_me = launch.rank;
  g_nodes = launch.size;
  g_peers.resize(std::size_t(g_nodes));
  call_watchdog watchdog;
  g_watchdog = &watchdog;
  {
    // Half the time for the transport's own start-up timeout: it should
    // report a missing node itself, by name, before the watchdog fires.
    call_watchdog::guard g(watchdog, "init");
    g_transport->init(launch, h, kWaitSeconds / 2);
  }
  g_transport_live = true;
  g_me = g_transport->node_rank();
  g_nodes = g_transport->num_nodes();
  if (std::strcmp(g_transport->name(), transport_name.c_str()) != 0)
    fail("create_transport(\"%s\") made a transport named \"%s\"", transport_name.c_str(),
         g_transport->name());
  if (launch.launcher != "none" &&
      (g_me != launch.rank || (launch.launcher != "pmix" && g_nodes != launch.size)))
    fail("the transport says node %d of %d, the launcher (%s) rank %d of %d", g_me, g_nodes,
         launch.launcher.c_str(), launch.rank, launch.size);
  g_peers.resize(std::size_t(g_nodes));  // no launcher: the transport knows better

  auto run = [&](const char* name, void (*body)()) {
    if (cases.count(name) != 0) body();
  };
  run("pingpong", case_pingpong);
  run("alltoall", case_alltoall);
  run("large", case_large);
  run("persistent", case_persistent);
  run("allgather", case_allgather);
  run("barrier", case_barrier);
  run("hold", case_hold);
  run("finalize", case_finalize_burst);

  {
    call_watchdog::guard g(watchdog, "finalize");
    g_transport->finalize();
  }
  g_transport_live = false;

  // After finalize, every message sent to this node has been delivered and
  // every buffer this node sent has been released.
  for (int src = 0; src < g_nodes; ++src) {
    if (src == g_me) continue;
    // The peer sent us what we sent it: every case is symmetric except
    // ping-pong, whose counts are checked by the case itself.
    const peer_state& peer = g_peers[std::size_t(src)];
    for (int k = k_alltoall; k < k_kinds; ++k)
      for (int s = 0; s < kStreams; ++s)
        if (peer.received[k][s] != peer.sent[k][s])
          fail("after finalize: %" PRIu64 " messages of kind %d on stream %d from node %d, %" PRIu64
               " expected",
               peer.received[k][s], k, s, src, peer.sent[k][s]);
  }
  if (g_releases != g_sends || !g_send_buffers.empty())
    fail("after finalize: %" PRIu64 " sends but %" PRIu64 " releases", g_sends, g_releases);
  if (g_deliveries != g_allocs || !g_recv_buffers.empty())
    fail("after finalize: %" PRIu64 " receive buffers allocated but %" PRIu64 " delivered",
         g_allocs, g_deliveries);
  if (g_me == 0) {
    std::string list;
    for (const char* c : kCases)
      if (cases.count(c) != 0) list += (list.empty() ? "" : ",") + std::string(c);
    std::printf("mp_transport: ok: transport %s, %d nodes, cases %s\n", transport_name.c_str(),
                g_nodes, list.c_str());
  }
  g_transport.reset();
  return 0;
}
