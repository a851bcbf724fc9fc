// What only the ucx transport has, beyond the conformance of mp_transport.cpp;
// run under mpirun with 2 or more processes:
//
//   net_mp_ucx --case=NAME
//
//   pooled      large messages leave from the registered send pool; then
//               small messages one at a time each reach the deliver hook
//               straight from UCX's callback, past the reorder window
//   registered  the per-message registration variant (ucx_options.pooled = false)
//   exhausted   a pool too small for the burst: the rest is registered per
//               message, and nothing is lost or reordered
//   inplace     large messages written in the transport's registered memory
//               (message_memory, as core's are) leave from there, with no
//               copy: buffers on both sides come from it
//   persistent  channels: ping-pong through PUTs, fallbacks while busy and
//               for messages above max_bytes, order against send()
//   wake        wait_for_incoming returns for wake_waiter (before or during
//               the wait) and for an arriving message
//   headers     pool and channels with eager messages that carry the 8-byte
//               header (source, number) instead of naming their source by
//               AM id (ucx_options.eager_source_ids = false)
//   remote      pool and channels with every peer treated as remote
//               (UCX peer-failure handling, which on one host means TCP)
//   lost        node 1 leaves without finalize: the others get
//               hooks.node_lost naming it (peers treated as remote)
//   late        node 1 comes too late: init fails naming it (the test
//               expects that failure)
//   lanes       prints the UCX lanes node 0 uses towards node 1 (no check)
//
// Exit 0 on success; a failure prints "mp_ucx: FAIL (node R): <what>" and
// ends the job with exit code 1. No timing is asserted: every wait has a
// deadline only to turn a hang into a failure naming what was awaited.
#include <unistd.h>
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
#include "net/ucx/ucx.hpp"
#include "weft/base/timer.hpp"
#include "weft/net/transport.hpp"

namespace {

using weft::net::transport;

constexpr double kWaitSeconds = 60;
constexpr std::uint32_t kMagic = 0x75637821;
constexpr std::size_t kHeader = 16;

struct header {
  std::uint32_t magic;
  std::uint32_t src;
  std::uint64_t seq;  // per (source, destination), over send() and every channel
};
static_assert(sizeof(header) == kHeader);

std::unique_ptr<transport> g_transport;
bool g_live = false;
int g_me = 0, g_nodes = 1;
std::vector<std::uint64_t> g_sent_seq, g_recv_seq;  // per peer
std::set<void*> g_send_buffers;
std::unordered_map<void*, std::size_t> g_recv_buffers;
std::uint64_t g_delivered = 0;
// --case=inplace: buffers above the eager limit come from the transport's
// registered memory; these are the ones that did.
bool g_in_pool = false;
std::set<void*> g_pool_buffers;
std::uint64_t g_pool_taken = 0;  // buffers that came from it
constexpr std::size_t kEagerMax = 16 << 10;  // ucx_options' default

// A buffer of `bytes` for a message: from the registered memory when asked
// and it has room, else from the heap.
void* buffer_for(std::size_t bytes) {
  if (g_in_pool && bytes > kEagerMax)
    if (weft::base::registered_memory* m = g_transport->message_memory())
      if (void* p = m->allocate(bytes)) {
        g_pool_buffers.insert(p);
        ++g_pool_taken;
        return p;
      }
  return std::aligned_alloc(16, (bytes + 15) / 16 * 16 + 16);
}
void free_buffer(void* p) {
  if (g_pool_buffers.erase(p) == 1)
    g_transport->message_memory()->deallocate(p);
  else
    std::free(p);
}

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mp_test::fail_job("mp_ucx", g_me, g_live ? g_transport.get() : nullptr, fmt, ap);
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The byte at `at` of message `seq` from `src` to `dst`.
unsigned char pattern(int src, int dst, std::uint64_t seq, std::size_t at) {
  return static_cast<unsigned char>(
             mix((std::uint64_t(src) << 48) ^ (std::uint64_t(dst) << 32) ^ seq) >> (8 * (at % 8))) ^
         static_cast<unsigned char>(at / 8);
}

void* hook_alloc(std::size_t bytes) {
  void* p = buffer_for(bytes);
  if (p == nullptr) fail("out of memory for a %zu-byte receive buffer", bytes);
  g_recv_buffers[p] = bytes;
  return p;
}

void hook_deliver(int src, void* buffer, std::size_t bytes) {
  auto it = g_recv_buffers.find(buffer);
  if (it == g_recv_buffers.end() || it->second != bytes)
    fail("deliver from node %d: buffer %p (%zu bytes) is not one hooks.alloc gave out for it", src,
         buffer, bytes);
  g_recv_buffers.erase(it);
  if (src < 0 || src >= g_nodes || src == g_me) fail("deliver: source node %d", src);
  if (bytes < kHeader)
    fail("deliver from node %d: %zu bytes, shorter than any message", src, bytes);
  header h;
  std::memcpy(&h, buffer, kHeader);
  if (h.magic != kMagic || h.src != std::uint32_t(src))
    fail("deliver from node %d: corrupt header (magic %#x, src %u)", src, h.magic, h.src);
  std::uint64_t& want = g_recv_seq[std::size_t(src)];
  if (h.seq != want)
    fail("from node %d: message %" PRIu64 " arrived when %" PRIu64 " was due", src, h.seq, want);
  ++want;
  auto* p = static_cast<const unsigned char*>(buffer);
  for (std::size_t at = kHeader; at < bytes; ++at)
    if (p[at] != pattern(src, g_me, h.seq, at))
      fail("from node %d: message %" PRIu64 " (%zu bytes) corrupt at byte %zu", src, h.seq, bytes,
           at);
  ++g_delivered;
  free_buffer(buffer);
}

void hook_release(void* buffer) {
  if (g_send_buffers.erase(buffer) != 1) fail("hooks.release(%p): not an unreleased send", buffer);
  free_buffer(buffer);
}

bool g_expect_lost = false;

void hook_node_lost(int node, const char* why) {
  if (!g_expect_lost || node != 1) fail("hooks.node_lost(%d): %s", node, why);
  std::printf("mp_ucx: ok: node %d was told node %d is lost (%s)\n", g_me, node, why);
  std::fflush(stdout);
  std::_Exit(0);  // the contract: node_lost does not return
}

void* make_message(int dst, std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(buffer_for(bytes));
  if (p == nullptr) fail("out of memory for a %zu-byte message", bytes);
  header h{kMagic, std::uint32_t(g_me), g_sent_seq[std::size_t(dst)]++};
  std::memcpy(p, &h, kHeader);
  for (std::size_t at = kHeader; at < bytes; ++at) p[at] = pattern(g_me, dst, h.seq, at);
  g_send_buffers.insert(p);
  return p;
}

void send_to(int dst, std::size_t bytes) {
  g_transport->send(dst, make_message(dst, bytes), bytes);
}

void send_on(int channel, int dst, std::size_t bytes) {
  g_transport->send_persistent(channel, make_message(dst, bytes), bytes);
}

void wait_until(const std::function<bool()>& done, const char* what) {
  std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
  while (!done()) {
    if (g_transport->progress() != 0) continue;
    std::this_thread::yield();  // the peer may need this core (oversubscribed)
    if (weft::base::wall_ns() > deadline)
      fail("timed out after %g s waiting for %s", kWaitSeconds, what);
  }
}

void wait_received_from_all() {
  // Every node sent every other the same number of messages.
  for (int src = 0; src < g_nodes; ++src)
    if (src != g_me)
      wait_until([src] { return g_recv_seq[std::size_t(src)] >= g_sent_seq[std::size_t(src)]; },
                 "the messages of the case");
}

const weft::net::ucx_counters& counters() {
  const weft::net::ucx_counters* c = weft::net::ucx_counters_of(*g_transport);
  if (c == nullptr) fail("ucx_counters_of: the transport is not the ucx one");
  return *c;
}

template <class F>
void for_each_peer(F f) {
  for (int d = 1; d < g_nodes; ++d) f((g_me + d) % g_nodes);
}

// ---- cases -------------------------------------------------------------------

// Small and large messages interleaved to every peer; bytes just around the
// eager limit on both sides.
void large_traffic(int rounds) {
  const std::size_t sizes[] = {16, 16 << 10, (16 << 10) + 1,  24,      64 << 10, 100,     1 << 20,
                               17, 3 << 20,  (256 << 10) + 5, kHeader, 40 << 10, 8 << 20, 33};
  for (int r = 0; r < rounds; ++r)
    for (std::size_t bytes : sizes) {
      for_each_peer([bytes](int dst) { send_to(dst, bytes); });
      g_transport->progress();
    }
  wait_received_from_all();
}

// Node 0 sends a small message to every peer and waits for their replies,
// `rounds` times.
void small_pingpong(int rounds) {
  for (int r = 0; r < rounds; ++r) {
    if (g_me == 0) {
      for_each_peer([](int dst) { send_to(dst, kHeader + 8); });
      for_each_peer([](int src) {
        wait_until([src] { return g_recv_seq[std::size_t(src)] >= g_sent_seq[std::size_t(src)]; },
                   "a reply to node 0");
      });
    } else {
      wait_until([] { return g_recv_seq[0] > g_sent_seq[0]; }, "a message from node 0");
      send_to(0, kHeader + 8);
    }
  }
}

void case_pooled() {
  large_traffic(3);
  const auto& c = counters();
  if (c.rndv_pooled == 0) fail("no rendezvous from the send pool (%" PRIu64 ")", c.rndv_pooled);
  if (c.eager == 0) fail("no eager message");
  // Then small messages one at a time. After the first round (a peer may
  // still be fetching node 0's last large message when it comes) each
  // arrives with nothing of its source waiting before it, inside
  // progress(), so each goes to the deliver hook from UCX's callback (the
  // order checks hold for those as for the ones above, which may have
  // waited behind a rendezvous).
  small_pingpong(1);
  const std::uint64_t at_once_before = c.eager_at_once;
  constexpr int kPings = 10;
  small_pingpong(kPings);
  const int expected = g_me == 0 ? kPings * (g_nodes - 1) : kPings;
  if (c.eager_at_once - at_once_before < std::uint64_t(expected) ||
      c.eager_at_once > c.eager_received)
    fail("%d small messages one at a time, %" PRIu64 " of them delivered at once (%" PRIu64
         " of %" PRIu64 " eager messages in all)",
         expected, c.eager_at_once - at_once_before, c.eager_at_once, c.eager_received);
}

void case_inplace() {
  if (g_transport->message_memory() == nullptr) fail("the pooled transport offers no memory");
  large_traffic(3);
  const auto& c = counters();
  if (c.rndv_in_place == 0 || c.rndv_pooled != 0)
    fail("in place: %" PRIu64 " rendezvous in place, %" PRIu64 " copied to the pool",
         c.rndv_in_place, c.rndv_pooled);
  if (g_pool_taken == 0) fail("no buffer came from the registered memory");
}

void case_registered() {
  large_traffic(3);
  const auto& c = counters();
  if (c.rndv_pooled != 0 || c.rndv_registered == 0)
    fail("per-message registration: %" PRIu64 " pooled, %" PRIu64 " registered", c.rndv_pooled,
         c.rndv_registered);
}

// 64 messages of 100 KiB with no progress in between, into a 512 KiB pool:
// most cannot have a slot.
void case_exhausted() {
  for (int i = 0; i < 64; ++i)
    for_each_peer([i](int dst) { send_to(dst, i % 4 == 3 ? 24 : 100 << 10); });
  wait_received_from_all();
  const auto& c = counters();
  if (c.pool_fallbacks == 0 || c.rndv_pooled == 0)
    fail("exhausted pool: %" PRIu64 " pooled, %" PRIu64 " fallbacks", c.rndv_pooled,
         c.pool_fallbacks);
  if (c.pool_fallbacks != c.rndv_registered)
    fail("exhausted pool: %" PRIu64 " fallbacks but %" PRIu64 " registered", c.pool_fallbacks,
         c.rndv_registered);
}

// Node 0 and each peer ping-pong through channels (small and above the eager
// limit), with sends and oversized messages mixed in; order is checked over
// all of them by the sequence numbers.
void case_persistent() {
  constexpr int kRounds = 300;
  constexpr std::size_t kMax = 64 << 10;
  std::vector<int> channel(std::size_t(g_nodes), -1);
  if (g_me == 0)
    for_each_peer(
        [&](int dst) { channel[std::size_t(dst)] = g_transport->create_persistent(dst, kMax); });
  else
    channel[0] = g_transport->create_persistent(0, kMax);
  auto size_of = [](int r) {
    return r % 3 == 0 ? std::size_t(kHeader) : r % 3 == 1 ? std::size_t(4000) : kMax;
  };
  std::uint64_t oversized = 0;
  if (g_me == 0) {
    for (int r = 0; r < kRounds; ++r) {
      for_each_peer([&](int dst) {
        send_on(channel[std::size_t(dst)], dst, size_of(r));
        if (r % 50 == 0) {
          send_on(channel[std::size_t(dst)], dst, kMax + 1);  // too large: send()
          ++oversized;
        }
        if (r % 7 == 0) send_to(dst, 100);
      });
      // One reply per message before the next round.
      for_each_peer([&](int src) {
        wait_until([src] { return g_recv_seq[std::size_t(src)] >= g_sent_seq[std::size_t(src)]; },
                   "the replies of node 0's peers");
      });
    }
  } else {
    std::uint64_t total = g_sent_seq[0];  // after what earlier cases sent, what node 0 sends here
    for (int r = 0; r < kRounds; ++r) total += 1 + (r % 50 == 0) + (r % 7 == 0);
    while (g_sent_seq[0] < total) {
      wait_until([] { return g_recv_seq[0] > g_sent_seq[0]; }, "a message from node 0");
      while (g_sent_seq[0] < g_recv_seq[0]) send_on(channel[0], 0, size_of(int(g_sent_seq[0])));
    }
  }
  const auto& c = counters();
  // The handshake completes within the first rounds; after it, a ping-pong
  // finds the channel free unless the credit is still on its way.
  if (c.persistent_puts == 0)
    fail("%" PRIu64 " messages through channels, none by PUT (%" PRIu64 " fallbacks)",
         c.persistent_fallbacks, c.persistent_fallbacks);
  if (c.persistent_fallbacks < oversized)
    fail("%" PRIu64 " oversized messages, only %" PRIu64 " fallbacks", oversized,
         c.persistent_fallbacks);
}

void case_wake() {
  if (!g_transport->can_wait()) fail("can_wait() is false");
  // During the wait, from another thread.
  std::atomic<bool> waiting{false};
  std::thread waker([&] {
    while (!waiting.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    g_transport->wake_waiter();
  });
  waiting.store(true);
  std::uint64_t t0 = weft::base::wall_ns();
  g_transport->wait_for_incoming(std::uint64_t(kWaitSeconds * 1e9));
  waker.join();
  if (weft::base::wall_ns() - t0 > std::uint64_t(kWaitSeconds * 1e9 / 2))
    fail("wait_for_incoming did not return for wake_waiter during the wait");
  // Before the wait: ends the next one.
  g_transport->wake_waiter();
  t0 = weft::base::wall_ns();
  g_transport->wait_for_incoming(std::uint64_t(kWaitSeconds * 1e9));
  if (weft::base::wall_ns() - t0 > std::uint64_t(kWaitSeconds * 1e9 / 2))
    fail("wait_for_incoming did not return for a wake_waiter before the wait");
  // A message: node 0 sends one to each peer a moment after the barrier; the
  // peers sleep in wait_for_incoming until it comes.
  g_transport->barrier();
  if (g_me == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for_each_peer([](int dst) { send_to(dst, 64); });
  } else {
    std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
    while (g_recv_seq[0] == 0) {
      g_transport->wait_for_incoming(std::uint64_t(kWaitSeconds * 1e9));
      g_transport->progress();
      if (weft::base::wall_ns() > deadline)
        fail("wait_for_incoming did not return for a message from node 0");
    }
    send_to(0, 64);  // so that every node sent each other as many
  }
  wait_received_from_all();
}

void case_lost() {
  g_expect_lost = true;
  g_transport->barrier();
  if (g_me == 1) std::_Exit(0);
  std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(kWaitSeconds * 1e9);
  for (int i = 0;; ++i) {
    if (i % 100 == 0) send_to(1, 64 << 10);
    g_transport->progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (weft::base::wall_ns() > deadline) fail("node 1 left, but no hooks.node_lost(1) came");
  }
}

void case_lanes() {
  large_traffic(1);  // lanes for RMA are connected on first use
  if (g_me == 0)
    std::printf("mp_ucx: lanes from node 0 to node 1:\n%s",
                weft::net::ucx_describe_lanes(*g_transport, 1).c_str());
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "mp_ucx: %s\nusage: net_mp_ucx --case=pooled|inplace|registered|exhausted|persistent|"
               "headers|wake|remote|lost|late|lanes\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string name;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--case=", 0) == 0)
      name = a.substr(7);
    else
      usage(("unknown argument '" + a + "'").c_str());
  }
  const std::set<std::string> known = {"pooled", "inplace", "registered", "exhausted",
                                       "persistent", "headers", "wake",    "remote",
                                       "lost",    "late",    "lanes"};
  if (known.count(name) == 0) usage(("--case: unknown case '" + name + "'").c_str());

  weft::net::ucx_options options;
  if (name == "registered") options.pooled = false;
  if (name == "inplace") g_in_pool = true;
  if (name == "exhausted") options.pool_bytes = 512 << 10;
  if (name == "remote" || name == "lost") options.detect_local_peer_failure = true;
  if (name == "headers") options.eager_source_ids = false;
  g_transport = weft::net::make_ucx_transport(options);
  weft::net::launch_info launch = weft::net::launch_from_environment();
  g_me = launch.rank;
  if (launch.size < 2) fail("run under mpirun with 2 or more processes");
  double startup_timeout = kWaitSeconds;
  if (name == "late") {
    // Node 1 comes after the others gave up on it; they must say so.
    startup_timeout = 3;
    if (g_me == 1) std::this_thread::sleep_for(std::chrono::seconds(20));
  }
  weft::net::hooks h;
  h.alloc = hook_alloc;
  h.deliver = hook_deliver;
  h.release = hook_release;
  h.node_lost = hook_node_lost;
  g_transport->init(launch, h, startup_timeout);
  g_live = true;
  if (name == "late") fail("init returned although node 1 came %g s late", 20.0);
  g_me = g_transport->node_rank();
  g_nodes = g_transport->num_nodes();
  g_sent_seq.assign(std::size_t(g_nodes), 0);
  g_recv_seq.assign(std::size_t(g_nodes), 0);

  if (name == "pooled") case_pooled();
  if (name == "inplace") case_inplace();
  if (name == "registered") case_registered();
  if (name == "exhausted") case_exhausted();
  if (name == "persistent") case_persistent();
  if (name == "wake") case_wake();
  if (name == "remote") {
    case_pooled();
    case_persistent();
  }
  if (name == "headers") {
    case_pooled();
    case_persistent();
    if (counters().eager_with_header != counters().eager)
      fail("eager_source_ids = false: %" PRIu64 " of %" PRIu64 " eager messages had a header",
           counters().eager_with_header, counters().eager);
  }
  // With an id per source, only messages behind a channel note carry a header.
  if ((name == "pooled" || name == "registered") && counters().eager_with_header != 0)
    fail("%" PRIu64 " eager messages with a header, though no channel was used",
         counters().eager_with_header);
  if (name == "lost") case_lost();
  if (name == "lanes") case_lanes();

  g_transport->finalize();
  g_live = false;
  if (!g_send_buffers.empty())
    fail("after finalize: %zu send buffers not released", g_send_buffers.size());
  if (!g_recv_buffers.empty())
    fail("after finalize: %zu receive buffers not delivered", g_recv_buffers.size());
  for (int src = 0; src < g_nodes; ++src)
    if (src != g_me && g_recv_seq[std::size_t(src)] != g_sent_seq[std::size_t(src)])
      fail("after finalize: %" PRIu64 " messages from node %d, %" PRIu64 " expected",
           g_recv_seq[std::size_t(src)], src, g_sent_seq[std::size_t(src)]);
  if (g_me == 0) std::printf("mp_ucx: ok: case %s, %d nodes\n", name.c_str(), g_nodes);
  g_transport.reset();
  return 0;
}
