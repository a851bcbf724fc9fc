// Regressions found in review of the core (each test failed before its fix).
#include <gtest/gtest.h>

#include <sched.h>
#include <atomic>
#include <chrono>
#include <thread>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_node;

// --- a broadcast copy that its handler sends on is an ordinary message ------
std::atomic<int> g_echoes{0};
std::atomic<int> g_copies{0};

void on_echo(weft::message_ptr) {
  if (g_echoes.fetch_add(1) + 1 == 1) weft::exit_at_quiescence(0);
}
const weft::handler_id h_echo = weft::register_handler("regress.echo", on_echo);

void on_copy(weft::message_ptr m) {
  g_copies.fetch_add(1);
  if (weft::my_pe() == 1) {
    m->handler = h_echo;  // forward the received copy itself
    weft::send(0, std::move(m));
  }
}
const weft::handler_id h_copy = weft::register_handler("regress.copy", on_copy);

TEST(Regress, ForwardedBroadcastCopyIsDeliveredOnce) {
  for (const char* queue : {"--weft:queue=mpsc", "--weft:queue=spsc-pairs"}) {
    g_echoes = 0;
    g_copies = 0;
    int rc = run_node({"--weft:threads=8", queue},
                      [] { weft::broadcast(weft::make_message(h_copy, 16)); });
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(g_copies.load(), 8) << queue;
    EXPECT_EQ(g_echoes.load(), 1) << queue << ": the forwarded copy was broadcast again";
  }
}

// --- spsc-pairs: steady PE traffic must not starve other threads' sends -----
std::atomic<bool> g_stop_spinning{false};

void on_spin(weft::message_ptr m) {
  if (g_stop_spinning.load(std::memory_order_relaxed)) return;
  weft::send(weft::my_pe(), std::move(m));  // keep the rings busy forever
}
const weft::handler_id h_spin = weft::register_handler("regress.spin", on_spin);

void on_external_exit(weft::message_ptr) {
  g_stop_spinning = true;
  weft::exit(7);
}
const weft::handler_id h_external_exit =
    weft::register_handler("regress.external_exit", on_external_exit);

TEST(Regress, ExternalSendIsNotStarvedBySpscPairsTraffic) {
  g_stop_spinning = false;
  std::thread outsider;
  int rc = run_node({"--weft:threads=1", "--weft:queue=spsc-pairs"}, [&] {
    for (int i = 0; i < 8; ++i) weft::send(0, weft::make_message(h_spin, 8));
    outsider = std::thread([] { weft::send(0, weft::make_message(h_external_exit, 0)); });
  });
  outsider.join();
  EXPECT_EQ(rc, 7);
}

}  // namespace

namespace {

std::atomic<bool> g_backlog_hold{false};
std::atomic<int> g_backlog_seen{0};

void on_backlog_hold(weft::message_ptr) {
  while (g_backlog_hold.load()) sched_yield();
}
void on_backlog_count(weft::message_ptr) {
  g_backlog_seen.fetch_add(1);
}
const weft::handler_id h_backlog_hold =
    weft::register_handler("test.backlog.hold", &on_backlog_hold);
const weft::handler_id h_backlog_count =
    weft::register_handler("test.backlog.count", &on_backlog_count);

// A PE that waits by serving its messages (detail::serve_messages, as a
// loop's caller or an OpenMP wait does) still flushes what its sends left
// in spsc-pairs overflow: here PE 0 overfills its ring to PE 1 while PE 1
// is held, then waits for PE 1 to have handled every message. Before the
// fix the overflow stayed with PE 0, which took no scheduler turn, and PE 1
// slept with an empty ring: a hang.
TEST(Regressions, WaitingByServingMessagesFlushesSpscPairsOverflow) {
  constexpr int sent = 3000;  // rings hold 1024
  g_backlog_hold.store(true);
  g_backlog_seen.store(0);
  bool finished = false;
  const int code = weft_test::run_node({"--weft:threads=2", "--weft:queue=spsc-pairs"}, [&] {
    weft::send(1, weft::make_message(h_backlog_hold, 0));
    for (int i = 0; i < sent; ++i) weft::send(1, weft::make_message(h_backlog_count, 0));
    g_backlog_hold.store(false);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (g_backlog_seen.load() != sent && std::chrono::steady_clock::now() < deadline)
      weft::detail::serve_messages(16);
    finished = g_backlog_seen.load() == sent;
    weft::exit(0);
  });
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(finished) << "PE 1 handled " << g_backlog_seen.load() << " of " << sent
                        << " messages: the rest stayed in PE 0's overflow";
}

}  // namespace
