// Point-to-point messaging: loss, duplication and per-sender FIFO order under
// stress (all-to-all, both queue kinds, 1..8 PEs, bound and unbound), zero
// copy, send_node delivering each message exactly once, and sends from
// threads that are not PEs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_node;
using weft_test::scaled;
using weft_test::threads_opt;

// ---- shared error recording ---------------------------------------------------

using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;

// A per-PE value on its own cache line (tests keep PE-private state padded too).
struct alignas(64) padded_count {
  std::atomic<long> v{0};
};

// ---- all-to-all stress --------------------------------------------------------

struct stress_payload {
  std::int32_t src;
  std::uint32_t seq;
  const void* self;     // the message's own address, written by the sender
  std::uint64_t check;  // a function of (src, seq): payload integrity
};

constexpr std::uint64_t check_of(std::int32_t src, std::uint32_t seq) {
  return (std::uint64_t(std::uint32_t(src)) * 0x9e3779b97f4a7c15ull) ^ (std::uint64_t(seq) << 7) ^
         0x5bd1e995ull;
}

struct stress_state {
  int n = 0;
  long m = 0;      // messages from each PE to each PE
  long chunk = 0;  // messages to each destination per scheduler turn
  // next_seq[dst][src]: the sequence number dst expects next from src. Row
  // dst is written only by PE dst.
  std::vector<std::unique_ptr<std::vector<std::uint32_t>>> next_seq;
  // sent[src]: how many rounds src has sent (written only by PE src).
  std::vector<std::unique_ptr<padded_count>> sent;
  std::atomic<long> received{0};
};
stress_state* g_stress = nullptr;

void on_stress_msg(weft::message_ptr m);
void on_stress_kick(weft::message_ptr m);
const weft::handler_id h_stress_msg = weft::register_handler("stress_msg", on_stress_msg);
const weft::handler_id h_stress_kick = weft::register_handler("stress_kick", on_stress_kick);

void on_stress_msg(weft::message_ptr m) {
  stress_state& s = *g_stress;
  const int me = weft::my_pe();
  if (m->size != sizeof(stress_payload)) {
    record_error("payload size " + std::to_string(m->size));
    return;
  }
  const stress_payload p = m->as<stress_payload>();
  if (p.src < 0 || p.src >= s.n) {
    record_error("bad src " + std::to_string(p.src));
    return;
  }
  if (m->src_pe != p.src)
    record_error("src_pe " + std::to_string(m->src_pe) + " but payload says " +
                 std::to_string(p.src));
  if (p.self != static_cast<const void*>(m.get()))
    record_error("zero copy: PE " + std::to_string(me) + " got a message at another address");
  if (p.check != check_of(p.src, p.seq)) record_error("payload corrupted");
  std::uint32_t& expect = (*s.next_seq[std::size_t(me)])[std::size_t(p.src)];
  if (p.seq != expect)
    record_error("PE " + std::to_string(me) + " from PE " + std::to_string(p.src) + ": seq " +
                 std::to_string(p.seq) + ", expected " + std::to_string(expect) +
                 (p.seq < expect ? " (duplicate or reordered)" : " (lost or reordered)"));
  expect = p.seq + 1;
  const long total = long(s.n) * s.n * s.m;
  // Quiescence after the last one: a duplicate still in flight would be
  // handled (and reported) before the node exits.
  if (s.received.fetch_add(1, std::memory_order_acq_rel) + 1 == total) weft::exit_at_quiescence(0);
}

// Sends the next chunk of messages from this PE to every PE, then re-posts
// itself so that incoming messages are handled between chunks.
void on_stress_kick(weft::message_ptr kick) {
  stress_state& s = *g_stress;
  const int me = weft::my_pe();
  std::atomic<long>& done = s.sent[std::size_t(me)]->v;
  long first = done.load(std::memory_order_relaxed);
  long last = std::min(s.m, first + s.chunk);
  for (long seq = first; seq < last; ++seq) {
    for (int d = 0; d < s.n; ++d) {
      const int dst = (me + d) % s.n;
      weft::message_ptr m = weft::make_message(h_stress_msg, sizeof(stress_payload));
      stress_payload p{me, std::uint32_t(seq), m.get(), check_of(me, std::uint32_t(seq))};
      std::memcpy(m->data(), &p, sizeof p);
      weft::send(dst, std::move(m));
    }
  }
  done.store(last, std::memory_order_relaxed);
  if (last < s.m) weft::send(me, std::move(kick));  // the same block goes round again
}

using stress_param = std::tuple<std::string, int, std::string>;  // queue, threads, bind

class Stress : public testing::TestWithParam<stress_param> {};

TEST_P(Stress, AllToAllNoLossNoDuplicationFifo) {
  const auto& [queue, threads, bind] = GetParam();
  stress_state s;
  s.n = threads;
  s.m = scaled(20000, 2000);
  s.chunk = 128;
  for (int i = 0; i < threads; ++i) {
    s.next_seq.push_back(std::make_unique<std::vector<std::uint32_t>>(std::size_t(threads), 0));
    s.sent.push_back(std::make_unique<padded_count>());
  }
  g_stress = &s;
  reset_errors();

  int rc = run_node({threads_opt(threads), "--weft:queue=" + queue, "--weft:bind=" + bind}, [] {
    for (int pe = 0; pe < weft::num_pes(); ++pe)
      weft::send(pe, weft::make_message(h_stress_kick, 0));
  });

  g_stress = nullptr;
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_errors.load(), 0) << "first error: " << first_error();
  EXPECT_EQ(s.received.load(), long(threads) * threads * s.m);
  for (int dst = 0; dst < threads; ++dst)
    for (int src = 0; src < threads; ++src)
      EXPECT_EQ((*s.next_seq[std::size_t(dst)])[std::size_t(src)], std::uint32_t(s.m))
          << "PE " << dst << " from PE " << src;
}

std::string stress_name(const testing::TestParamInfo<stress_param>& info) {
  std::string q = std::get<0>(info.param) == "mpsc" ? "mpsc" : "spsc_pairs";
  return q + "_" + std::to_string(std::get<1>(info.param)) + "pes_bind_" + std::get<2>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Messaging, Stress,
                         testing::Combine(testing::Values("mpsc", "spsc-pairs"),
                                          testing::Values(1, 2, 8),
                                          testing::Values("compact", "none")),
                         stress_name);

// ---- zero copy ------------------------------------------------------------------

struct zc_payload {
  const void* addr;
  int hops;
  unsigned char bytes[1000];
};
std::atomic<long> g_zc_ok{0};

void on_zc(weft::message_ptr m);
const weft::handler_id h_zc = weft::register_handler("zero_copy", on_zc);

void on_zc(weft::message_ptr m) {
  zc_payload& p = m->as<zc_payload>();
  if (p.addr != static_cast<const void*>(m.get()))
    record_error("received a copy, not the block sent");
  for (int i = 0; i < 1000; ++i)
    if (p.bytes[i] != static_cast<unsigned char>(i * 7 + 3)) {
      record_error("payload byte " + std::to_string(i) + " changed");
      break;
    }
  g_zc_ok.fetch_add(1);
  if (++p.hops == 10) {
    weft::exit(0);
    return;
  }
  // Forward the very same block to the next PE.
  weft::send((weft::my_pe() + 1) % weft::num_pes(), std::move(m));
}

class ZeroCopy : public testing::TestWithParam<std::string> {};

TEST_P(ZeroCopy, ReceiverGetsTheSendersBlock) {
  reset_errors();
  g_zc_ok = 0;
  int rc = run_node({threads_opt(3), "--weft:queue=" + GetParam()}, [] {
    weft::message_ptr m = weft::make_message(h_zc, sizeof(zc_payload));
    zc_payload& p = m->as<zc_payload>();
    p.addr = m.get();
    p.hops = 0;
    for (int i = 0; i < 1000; ++i) p.bytes[i] = static_cast<unsigned char>(i * 7 + 3);
    weft::send(1, std::move(m));
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_errors.load(), 0) << first_error();
  EXPECT_EQ(g_zc_ok.load(), 10);
}

INSTANTIATE_TEST_SUITE_P(Messaging, ZeroCopy, testing::Values("mpsc", "spsc-pairs"),
                         [](const auto& info) {
                           return info.param == "mpsc" ? std::string("mpsc")
                                                       : std::string("spsc_pairs");
                         });

// ---- send_node: exactly once ------------------------------------------------------

struct node_state_t {
  long n = 0;
  std::unique_ptr<std::atomic<unsigned char>[]> seen;
  std::vector<std::unique_ptr<padded_count>> per_pe;
  std::atomic<long> total{0};
};
node_state_t* g_nodeq = nullptr;

void on_node_msg(weft::message_ptr m);
const weft::handler_id h_node_msg = weft::register_handler("node_msg", on_node_msg);

void on_node_msg(weft::message_ptr m) {
  node_state_t& s = *g_nodeq;
  const long i = m->as<long>();
  if (i < 0 || i >= s.n) {
    record_error("bad index " + std::to_string(i));
    return;
  }
  if ((m->flags & weft::message_flags::node) == 0) record_error("node flag not set");
  if (s.seen[std::size_t(i)].fetch_add(1) != 0)
    record_error("message " + std::to_string(i) + " handled twice");
  s.per_pe[std::size_t(weft::my_pe())]->v.fetch_add(1, std::memory_order_relaxed);
  if (s.total.fetch_add(1) + 1 == s.n) weft::exit_at_quiescence(0);
}

using node_param = std::tuple<std::string, int>;
class SendNode : public testing::TestWithParam<node_param> {};

TEST_P(SendNode, EachMessageHandledExactlyOnce) {
  const auto& [queue, threads] = GetParam();
  node_state_t s;
  s.n = scaled(20000, 4000);
  s.seen = std::make_unique<std::atomic<unsigned char>[]>(std::size_t(s.n));
  for (long i = 0; i < s.n; ++i) s.seen[std::size_t(i)] = 0;
  for (int i = 0; i < threads; ++i) s.per_pe.push_back(std::make_unique<padded_count>());
  g_nodeq = &s;
  reset_errors();
  int rc = run_node({threads_opt(threads), "--weft:queue=" + queue}, [] {
    const long n = g_nodeq->n;
    for (long i = 0; i < n; ++i) weft::send_node(weft::make_message_with(h_node_msg, i));
  });
  g_nodeq = nullptr;
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_errors.load(), 0) << first_error();
  EXPECT_EQ(s.total.load(), s.n);
  long sum = 0;
  for (auto& c : s.per_pe) sum += c->v.load();
  EXPECT_EQ(sum, s.n);
  for (long i = 0; i < s.n; ++i) ASSERT_EQ(s.seen[std::size_t(i)].load(), 1) << "message " << i;
}

INSTANTIATE_TEST_SUITE_P(Messaging, SendNode,
                         testing::Combine(testing::Values("mpsc", "spsc-pairs"),
                                          testing::Values(1, 2, 8)),
                         [](const auto& info) {
                           std::string q =
                               std::get<0>(info.param) == "mpsc" ? "mpsc" : "spsc_pairs";
                           return q + "_" + std::to_string(std::get<1>(info.param)) + "pes";
                         });

// ---- sends from threads that are not PEs ----------------------------------------------

struct ext_payload {
  int sender;  // which external thread
  int dst;     // -1: sent with send_node
  std::uint32_t seq;
};

struct ext_state {
  int n = 0;
  int senders = 0;
  long per_dst = 0;   // messages from each external thread to each PE
  long per_node = 0;  // send_node messages from each external thread
  // next[dst][sender] (row dst written only by PE dst).
  std::vector<std::unique_ptr<std::vector<std::uint32_t>>> next;
  std::atomic<long> received{0};
  std::atomic<long> node_received{0};
  std::atomic<int> senders_done{0};
  std::vector<std::thread> threads;
  long expected() const { return long(senders) * (per_dst * n + per_node); }
};
ext_state* g_ext = nullptr;

void on_ext(weft::message_ptr m);
const weft::handler_id h_ext = weft::register_handler("external", on_ext);

void on_ext(weft::message_ptr m) {
  ext_state& s = *g_ext;
  const ext_payload p = m->as<ext_payload>();
  const int me = weft::my_pe();
  if (m->src_pe != -1)
    record_error("src_pe of a message from a non-PE thread is " + std::to_string(m->src_pe));
  if (p.dst == -1) {
    s.node_received.fetch_add(1);
  } else {
    if (p.dst != me)
      record_error("message for PE " + std::to_string(p.dst) + " ran on PE " + std::to_string(me));
    std::uint32_t& expect = (*s.next[std::size_t(me)])[std::size_t(p.sender)];
    if (p.seq != expect)
      record_error("PE " + std::to_string(me) + " from thread " + std::to_string(p.sender) +
                   ": seq " + std::to_string(p.seq) + ", expected " + std::to_string(expect));
    expect = p.seq + 1;
  }
  s.received.fetch_add(1);
}

void external_sender(int id) {
  ext_state& s = *g_ext;
  if (weft::my_pe() != -1) record_error("my_pe() on a non-PE thread is not -1");
  for (long seq = 0; seq < s.per_dst; ++seq) {
    for (int dst = 0; dst < s.n; ++dst)
      weft::send(dst, weft::make_message_with(h_ext, ext_payload{id, dst, std::uint32_t(seq)}));
    if (seq < s.per_node)
      weft::send_node(weft::make_message_with(h_ext, ext_payload{id, -1, std::uint32_t(seq)}));
  }
  // After the last send has returned: the node may end from here on.
  s.senders_done.fetch_add(1, std::memory_order_release);
}

class External : public testing::TestWithParam<node_param> {};

TEST_P(External, MessagesFromNonPeThreadsArrive) {
  const auto& [queue, threads] = GetParam();
  ext_state s;
  s.n = threads;
  s.senders = 2;
  s.per_dst = scaled(5000, 1000);
  s.per_node = s.per_dst / 4;
  for (int i = 0; i < threads; ++i)
    s.next.push_back(std::make_unique<std::vector<std::uint32_t>>(std::size_t(s.senders), 0));
  g_ext = &s;
  reset_errors();
  int rc = run_node({threads_opt(threads), "--weft:queue=" + queue}, [] {
    for (int i = 0; i < g_ext->senders; ++i) g_ext->threads.emplace_back(external_sender, i);
    // PE 0 watches for the end: every sender has returned from its last send
    // and every message has been handled.
    weft::poll_while([] {
      if (g_ext->senders_done.load(std::memory_order_acquire) == g_ext->senders &&
          g_ext->received.load() == g_ext->expected()) {
        weft::exit_at_quiescence(0);
        return false;
      }
      return true;
    });
  });
  for (auto& t : s.threads) t.join();
  g_ext = nullptr;
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_errors.load(), 0) << first_error();
  EXPECT_EQ(s.received.load(), s.expected());
  EXPECT_EQ(s.node_received.load(), s.senders * s.per_node);
  for (int dst = 0; dst < threads; ++dst)
    for (int t = 0; t < s.senders; ++t)
      EXPECT_EQ((*s.next[std::size_t(dst)])[std::size_t(t)], std::uint32_t(s.per_dst))
          << "PE " << dst << " from thread " << t;
}

INSTANTIATE_TEST_SUITE_P(Messaging, External,
                         testing::Combine(testing::Values("mpsc", "spsc-pairs"),
                                          testing::Values(1, 2, 8)),
                         [](const auto& info) {
                           std::string q =
                               std::get<0>(info.param) == "mpsc" ? "mpsc" : "spsc_pairs";
                           return q + "_" + std::to_string(std::get<1>(info.param)) + "pes";
                         });

// ---- a message sent from a handler to itself and a burst larger than a ring ---------

std::atomic<long> g_burst_count{0};
std::atomic<long> g_burst_next{0};
void on_burst(weft::message_ptr m);
const weft::handler_id h_burst = weft::register_handler("burst", on_burst);
constexpr long burst_n = 50000;

void on_burst(weft::message_ptr m) {
  long i = m->as<long>();
  // One sender, one receiver: strict FIFO (single handler thread for PE 1).
  if (i != g_burst_next.load(std::memory_order_relaxed))
    record_error("burst: got " + std::to_string(i) + ", expected " +
                 std::to_string(g_burst_next.load()));
  g_burst_next.store(i + 1, std::memory_order_relaxed);
  if (g_burst_count.fetch_add(1) + 1 == burst_n) weft::exit(0);
}

// spsc-pairs rings hold 1024 messages: a burst of 50,000 sent in one handler
// overflows into the sender's private list, which must be flushed in order.
TEST(Messaging, BurstLargerThanRingKeepsFifo) {
  for (const char* queue : {"mpsc", "spsc-pairs"}) {
    SCOPED_TRACE(queue);
    reset_errors();
    g_burst_count = 0;
    g_burst_next = 0;
    int rc = run_node({threads_opt(2), std::string("--weft:queue=") + queue}, [] {
      for (long i = 0; i < burst_n; ++i) weft::send(1, weft::make_message_with(h_burst, i));
    });
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(g_errors.load(), 0) << first_error();
    EXPECT_EQ(g_burst_count.load(), burst_n);
  }
}

// ---- messages a PE sends to itself ---------------------------------------------------
// They go through a FIFO of the PE's own (no atomic operation); it must keep
// their order, and a PE that keeps sending itself messages must still handle
// what other PEs send it (the two queues take turns).

std::atomic<long> g_self_next{0};
std::atomic<long> g_self_loops{0};
std::atomic<long> g_from_other{0};
void on_self(weft::message_ptr m);
void on_from_other(weft::message_ptr m);
void on_start_other(weft::message_ptr m);
const weft::handler_id h_self = weft::register_handler("self", on_self);
const weft::handler_id h_from_other = weft::register_handler("from_other", on_from_other);
const weft::handler_id h_start_other = weft::register_handler("start_other", on_start_other);
constexpr long self_burst = 20000;
constexpr long other_n = 2000;

void on_self(weft::message_ptr m) {
  const long i = m->as<long>();
  if (weft::my_pe() != 0) record_error("self-send handled on PE " + std::to_string(weft::my_pe()));
  if (i < self_burst) {  // the burst: strict FIFO
    if (i != g_self_next.load(std::memory_order_relaxed))
      record_error("self burst: got " + std::to_string(i) + ", expected " +
                   std::to_string(g_self_next.load()));
    g_self_next.store(i + 1, std::memory_order_relaxed);
    return;
  }
  // The loop: one message to itself after another until PE 1's are all in.
  // Were the own FIFO always served first, they would never be.
  g_self_loops.fetch_add(1, std::memory_order_relaxed);
  if (g_from_other.load() == other_n) {
    weft::exit(0);
    return;
  }
  weft::send(0, weft::make_message_with(h_self, i + 1));
}

void on_from_other(weft::message_ptr) { g_from_other.fetch_add(1); }

void on_start_other(weft::message_ptr) {
  for (long i = 0; i < other_n; ++i) weft::send(0, weft::make_message_with(h_from_other, i));
}

TEST(Messaging, SelfSendsKeepFifoAndDoNotStarveOtherSenders) {
  for (const char* queue : {"mpsc", "spsc-pairs"}) {
    SCOPED_TRACE(queue);
    reset_errors();
    g_self_next = 0;
    g_self_loops = 0;
    g_from_other = 0;
    // Starvation is a hang: the watchdog turns it into a failure.
    const std::vector<std::string> opts = {threads_opt(2), std::string("--weft:queue=") + queue,
                                           "--weft:timeout=30"};
    int rc = run_node(opts, [] {
      if (weft::my_pe() != 0) record_error("main runs on PE " + std::to_string(weft::my_pe()));
      for (long i = 0; i < self_burst; ++i) weft::send(0, weft::make_message_with(h_self, i));
      weft::send(0, weft::make_message_with(h_self, self_burst));  // starts the loop
      weft::send(1, weft::make_message_with(h_start_other, 0L));
    });
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(g_errors.load(), 0) << first_error();
    EXPECT_EQ(g_self_next.load(), self_burst);
    EXPECT_EQ(g_from_other.load(), other_n);
    EXPECT_GT(g_self_loops.load(), 0);
  }
}

}  // namespace
