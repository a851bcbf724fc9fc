// An attached node (detail::start_attached_node): the calling thread is PE 0
// between calls that serve its messages, the other PEs run on their own; it
// stops cleanly, and weft::run works after it (and stops one left running
// by its own thread).
#include <gtest/gtest.h>

#include <atomic>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::make_config;
using weft_test::threads_opt;

std::atomic<int> g_replies{0};
std::atomic<int> g_pong_pe{-1};
void on_pong(weft::message_ptr) {
  g_pong_pe = weft::my_pe();
  g_replies.fetch_add(1);
}
const weft::handler_id h_pong = weft::register_handler("attached.pong", on_pong);
void on_ping(weft::message_ptr) {
  weft::send(0, weft::make_message(h_pong, 0));
}
const weft::handler_id h_ping = weft::register_handler("attached.ping", on_ping);

TEST(Attached, CallingThreadIsPeZeroAndServesItsMessagesWhenAsked) {
  g_replies = 0;
  g_pong_pe = -1;
  ASSERT_FALSE(weft::detail::node_runs());
  weft::detail::start_attached_node(make_config({threads_opt(3)}));
  ASSERT_TRUE(weft::detail::attached_node_runs());
  EXPECT_EQ(weft::my_pe(), 0);
  EXPECT_EQ(weft::node_size(), 3);
  for (int pe = 1; pe < 3; ++pe) weft::send(pe, weft::make_message(h_ping, 0));
  // The replies wait in PE 0's queue until this thread serves it.
  while (g_replies.load() < 2) weft::detail::serve_messages(16);
  EXPECT_EQ(g_pong_pe.load(), 0);
  EXPECT_EQ(weft::detail::stop_attached_node(), 0);
  EXPECT_FALSE(weft::detail::node_runs());
  EXPECT_EQ(weft::my_pe(), -1);
}

TEST(Attached, RunStopsAnAttachedNodeOfItsThreadAndStartsAfresh) {
  weft::detail::start_attached_node(make_config({threads_opt(2)}));
  int pes_in_run = 0;
  const int rc = weft_test::run_node({threads_opt(2)}, [&] {
    pes_in_run = weft::node_size();
    EXPECT_FALSE(weft::detail::attached_node_runs());
    weft::exit(7);
  });
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(pes_in_run, 2);
  EXPECT_FALSE(weft::detail::node_runs());
}

}  // namespace
