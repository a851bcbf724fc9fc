// The order of broadcasts from one sender (core level, weft::broadcast).
//
// What is promised: a broadcast goes down a spanning tree rooted at the
// calling PE (PE 0 for a thread that is not a PE) whose shape depends on the
// root only, every hop is a send to one PE, and a PE's queue is FIFO per
// producer (its own self-sends in a FIFO of their own); priorities reorder
// what waits at a PE but keep arrival order among equals, and "node-queue
// messages and broadcasts are not reordered" (docs/design/scheduler.md).
// So every PE gets the broadcasts of one sender in the order they were
// made, each exactly once; between senders no order is promised.
//
// The stress: every PE and one thread that is not a PE broadcast numbered
// messages at once, a few at a time per scheduler turn, while point-to-point
// messages with priorities flow between the PEs (which puts the receivers in
// their prioritised mode, where waiting messages are ordered in a heap).
// Each PE checks, per sender, that the number it gets is the one it expects
// next: a copy lost, duplicated or overtaken shows at once, named. 1 to 13
// PEs on 2 cores, both queue kinds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;
using weft_test::run_node;
using weft_test::scaled;
using weft_test::threads_opt;

struct bcast_msg {
  std::int32_t sender;  // PE, or n for the thread that is not a PE
  std::uint32_t seq;
  std::uint64_t check;
};

constexpr std::uint64_t check_of(std::int32_t sender, std::uint32_t seq) {
  return (std::uint64_t(std::uint32_t(sender)) << 40) ^ (std::uint64_t(seq) * 0x9e3779b97f4a7c15ull);
}

struct noise_msg {
  std::int32_t src;
};

struct alignas(64) pe_row {
  // next[sender]: the number this PE expects next from `sender`. Written by
  // the owning PE only while the node runs.
  std::vector<std::uint32_t> next;
  long noise = 0;
};

struct order_state {
  int n = 0;           // PEs
  long count = 0;      // broadcasts per sender
  long chunk = 0;      // broadcasts a PE makes per scheduler turn
  bool noise = false;  // point-to-point messages with priorities beside
  std::vector<std::unique_ptr<pe_row>> rows;
  std::atomic<long> received{0};
  std::atomic<long> noise_sent{0};
  std::atomic<long> noise_received{0};
  std::atomic<bool> external_done{false};
  std::thread external;
  int senders() const { return n + 1; }
};
order_state* g_s = nullptr;

void on_bcast(weft::message_ptr m);
void on_more(weft::message_ptr m);
void on_noise(weft::message_ptr m);
const weft::handler_id h_bcast = weft::register_handler("bcast_order.bcast", on_bcast);
const weft::handler_id h_more = weft::register_handler("bcast_order.more", on_more);
const weft::handler_id h_noise = weft::register_handler("bcast_order.noise", on_noise);

void on_bcast(weft::message_ptr m) {
  order_state& s = *g_s;
  const int me = weft::my_pe();
  if (me < 0 || me >= s.n || m->size != sizeof(bcast_msg)) {
    record_error("broadcast copy off a PE or of the wrong size");
    return;
  }
  const bcast_msg b = m->as<bcast_msg>();
  if (b.sender < 0 || b.sender > s.n || b.check != check_of(b.sender, b.seq)) {
    record_error("PE " + std::to_string(me) + ": corrupt broadcast");
    return;
  }
  std::uint32_t& next = s.rows[std::size_t(me)]->next[std::size_t(b.sender)];
  if (b.seq != next) {
    const std::string who = b.sender == s.n ? "the non-PE thread" : "PE " + std::to_string(b.sender);
    record_error("PE " + std::to_string(me) + " got broadcast " + std::to_string(b.seq) + " of " +
                 who + " while expecting " + std::to_string(next) +
                 (b.seq < next ? " (a duplicate, or overtaken)" : " (lost, or overtaken)"));
  }
  if (b.seq + 1 > next) next = b.seq + 1;
  s.received.fetch_add(1, std::memory_order_relaxed);
}

void on_noise(weft::message_ptr m) {
  order_state& s = *g_s;
  ++s.rows[std::size_t(weft::my_pe())]->noise;
  (void)m;
  s.noise_received.fetch_add(1, std::memory_order_relaxed);
}

// `priority`: set on the message before it is broadcast (it must not
// reorder broadcasts).
void broadcast_one(int sender, std::uint32_t seq, int priority = 0) {
  weft::message_ptr m = weft::make_message_with(h_bcast, bcast_msg{sender, seq, check_of(sender, seq)});
  m->priority = priority;
  weft::broadcast(std::move(m));
}

// -2 .. 2, most not 0, changing from one broadcast to the next.
int priority_of(std::uint32_t seq) {
  return int(seq % 5) - 2;
}

// Broadcasts the next `chunk` numbers of this PE, sends a few prioritised
// point-to-point messages, and asks itself for more (a self-send: the PE
// handles what others sent in between).
void on_more(weft::message_ptr m) {
  order_state& s = *g_s;
  const int me = weft::my_pe();
  auto first = m->as<std::uint32_t>();
  const auto end = std::uint32_t(std::min<long>(long(first) + s.chunk, s.count));
  for (std::uint32_t k = first; k < end; ++k) {
    broadcast_one(me, k, s.noise ? priority_of(k) : 0);
    if (s.noise && k % 3 == 0) {
      weft::message_ptr p = weft::make_message_with(h_noise, noise_msg{me});
      p->priority = int(k % 7) - 3;  // -3 .. 3: most are not 0
      s.noise_sent.fetch_add(1, std::memory_order_acq_rel);
      weft::send(int((std::uint32_t(me) + 1 + k) % std::uint32_t(s.n)), std::move(p));
    }
  }
  if (end < std::uint32_t(s.count)) {
    m->as<std::uint32_t>() = end;
    weft::send(me, std::move(m));
  }
}

using param = std::tuple<int, std::string>;  // PEs, queue

class BroadcastOrder : public testing::TestWithParam<param> {
 protected:
  void run(long count, bool noise) {
    const auto& [n, queue] = GetParam();
    reset_errors();
    order_state s;
    s.n = n;
    s.count = count;
    s.chunk = 7;
    s.noise = noise;
    for (int i = 0; i < n; ++i) {
      s.rows.push_back(std::make_unique<pe_row>());
      s.rows.back()->next.assign(std::size_t(s.senders()), 0);
    }
    g_s = &s;
    const int rc = run_node({threads_opt(n), "--weft:queue=" + queue}, [] {
      order_state& st = *g_s;
      for (int pe = 0; pe < st.n; ++pe)
        weft::send(pe, weft::make_message_with(h_more, std::uint32_t(0)));
      // A thread that is not a PE broadcasts too (its tree is rooted at PE 0).
      st.external = std::thread([] {
        order_state& t = *g_s;
        for (long k = 0; k < t.count; ++k)
          broadcast_one(t.n, std::uint32_t(k), t.noise ? priority_of(std::uint32_t(k)) : 0);
        t.external_done.store(true, std::memory_order_release);
      });
      // Once the thread has made its last broadcast, all that is left is
      // messages: the run ends when none is in flight. A copy lost or
      // duplicated shows in the counts, not as a hang.
      weft::poll_while([] {
        if (!g_s->external_done.load(std::memory_order_acquire)) return true;
        weft::exit_at_quiescence(0);
        return false;
      });
    });
    if (s.external.joinable()) s.external.join();
    g_s = nullptr;
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(g_errors.load(), 0) << "first error: " << first_error();
    EXPECT_EQ(s.received.load(), long(s.senders()) * count * n);
    EXPECT_EQ(s.noise_received.load(), s.noise_sent.load());
    for (int pe = 0; pe < n; ++pe)
      for (int sender = 0; sender < s.senders(); ++sender)
        EXPECT_EQ(s.rows[std::size_t(pe)]->next[std::size_t(sender)], std::uint32_t(count))
            << "PE " << pe << " from sender " << sender;
  }
};

TEST_P(BroadcastOrder, EverySenderInOrderAtEveryPe) {
  run(scaled(1500, 200), false);
}

// The broadcasts carry priorities too (which reorder sends, not broadcasts).
TEST_P(BroadcastOrder, EverySenderInOrderBesidePrioritisedTraffic) {
  run(scaled(1500, 200), true);
}

INSTANTIATE_TEST_SUITE_P(Pes, BroadcastOrder,
                         testing::Combine(testing::Values(1, 2, 3, 5, 8, 13),
                                          testing::Values("mpsc", "spsc-pairs")),
                         weft_test::pes_queue_name<testing::TestParamInfo<param>>);

// ---- a broadcast's priority does not reorder it ------------------------------
//
// Deterministic: main_fn runs on PE 0 before its scheduler loop starts, so
// all the broadcasts are queued at once (PE 0's own copies in its FIFO of
// self-sends, the others' at their parents) when the loops first look, and
// with a priority on some a PE sorts what waits by priority. Every PE must
// still get them in the order they were made.

struct alignas(64) arrival_row {
  std::vector<int> got;  // written by the owning PE only
};
std::vector<std::unique_ptr<arrival_row>>* g_arrivals = nullptr;

void on_arrival(weft::message_ptr m) {
  (*g_arrivals)[std::size_t(weft::my_pe())]->got.push_back(m->as<int>());
}
const weft::handler_id h_arrival = weft::register_handler("bcast_order.arrival", on_arrival);

class BroadcastPriority : public testing::TestWithParam<int> {};

TEST_P(BroadcastPriority, BroadcastsWithPrioritiesArriveInSendOrder) {
  const int n = GetParam();
  constexpr int count = 40;
  std::vector<std::unique_ptr<arrival_row>> rows;
  for (int i = 0; i < n; ++i) rows.push_back(std::make_unique<arrival_row>());
  g_arrivals = &rows;
  const int rc = run_node({threads_opt(n)}, [] {
    for (int i = 0; i < count; ++i) {
      weft::message_ptr m = weft::make_message_with(h_arrival, i);
      m->priority = i % 4 == 3 ? 10 : (i % 4 == 1 ? -10 : 0);
      weft::broadcast(std::move(m));
    }
    weft::exit_at_quiescence(0);
  });
  g_arrivals = nullptr;
  EXPECT_EQ(rc, 0);
  std::vector<int> want(count);
  for (int i = 0; i < count; ++i) want[std::size_t(i)] = i;
  for (int pe = 0; pe < n; ++pe) EXPECT_EQ(rows[std::size_t(pe)]->got, want) << "PE " << pe;
}

INSTANTIATE_TEST_SUITE_P(Pes, BroadcastPriority, testing::Values(1, 2, 5),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "pes";
                         });

}  // namespace
