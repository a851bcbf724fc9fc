// What creating and destroying a chare costs other PEs, counted at 2, 4, 8
// and 16 PEs (DESIGN.md, lesson 13; issue 25): the messages every PE
// handles, and what the runtime counts of other PEs' state and shared lines
// (weft/base/op_counts.hpp), per creation, may grow no faster than
// O(log P). A creation that told every PE (a broadcast, a loop over PEs
// with its count) would add P per creation and fail the check; a 2-core
// machine cannot time 16 PEs, it can count for them.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <vector>
#include "objects/support.hpp"
#include "op_growth.hpp"
#include "weft/base/op_counts.hpp"
#include "weft/core/handler.hpp"

using namespace objects_test;
using weft::base::op;
using weft::base::op_counts;
using weft_test::grows_at_most_log;

namespace {

constexpr int pe_counts[] = {2, 4, 8, 16};

std::atomic<long> g_alive{0}, g_made{0};

// Destroys itself in its first entry method, sent by its constructor: the
// benchmark's chare (bench/objects/entry_overhead.cpp, case create).
struct Mayfly : weft::chare<Mayfly> {
  Mayfly() {
    g_alive.fetch_add(1, std::memory_order_relaxed);
    g_made.fetch_add(1, std::memory_order_relaxed);
    this_proxy().send<&Mayfly::die>();
  }
  ~Mayfly() override { g_alive.fetch_sub(1, std::memory_order_relaxed); }
  void die() { destroy(); }
};

std::mutex g_mu;
std::vector<op_counts> g_counts;  // per PE, at the last snapshot

// One per PE: makes chares from its PE, and reads its PE's counts.
struct Maker : weft::group_element<Maker> {
  // `n` chares on the next PE (create_on), or placed by the runtime.
  void make(int n, bool placed) {
    const int to = (weft::my_pe() + 1) % weft::num_pes();
    for (int i = 0; i < n; ++i) {
      if (placed)
        (void)weft::create_on<Mayfly>(to);
      else
        (void)weft::create<Mayfly>();
    }
  }
  void snapshot() {
    const op_counts c = weft::base::this_thread_op_counts();
    std::lock_guard<std::mutex> lock(g_mu);
    g_counts[std::size_t(weft::my_pe())] = c;
  }
};

op_counts sum_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  op_counts s;
  for (const op_counts& c : g_counts) s += c;
  return s;
}

// Messages handled by every PE of the node so far (pe_progress counts two
// per message; the caller's own handler adds one to both readings).
double messages_handled() {
  std::uint64_t p = 0;
  for (int r = 0; r < weft::num_pes(); ++r) p += weft::detail::pe_progress(r);
  return double(p) / 2;
}

struct per_creation {
  double messages = 0;
  double shared = 0;  // peer_visit + shared_rmw
};

// Every PE makes `n` chares, each of which destroys itself; what all PEs
// handled and counted meanwhile, per chare.
per_creation measure(int pes, int n, bool placed) {
  per_creation out;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_counts.assign(std::size_t(pes), op_counts{});
  }
  g_made = 0;
  int rc = run_pes(pes, [&]() -> weft::task<> {
    auto makers = weft::group_proxy<Maker>::create();
    makers.broadcast<&Maker::snapshot>();
    auto q0 = quiescence();
    co_await q0;
    const op_counts before = sum_counts();
    const double msgs_before = messages_handled();
    makers.broadcast<&Maker::make>(n, placed);
    auto q1 = quiescence();
    co_await q1;
    const double msgs = messages_handled() - msgs_before;
    makers.broadcast<&Maker::snapshot>();
    auto q2 = quiescence();
    co_await q2;
    const op_counts d = sum_counts() - before;
    const double made = double(pes) * n;
    out.messages = msgs / made;
    out.shared = double(d[op::peer_visit] + d[op::shared_rmw]) / made;
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  expect_no_pe_errors();
  EXPECT_EQ(g_made.load(), long(pes) * n) << pes << " PEs";
  EXPECT_EQ(g_alive.load(), 0) << pes << " PEs: every chare destroyed itself";
  return out;
}

void check_growth(bool placed) {
  const int n = int(weft_test::scaled(2000, 300));
  std::map<int, double> msgs, shared;
  for (int pes : pe_counts) {
    const per_creation c = measure(pes, n, placed);
    msgs[pes] = c.messages;
    shared[pes] = c.shared;
    // The broadcasts and the quiescence detection around the burst add a
    // little to each figure.
    if (placed) {
      // The insert and the chare's own message; nobody else hears of
      // either (the creator kept a home entry and got two location
      // messages per chare before: 4).
      EXPECT_LT(c.messages, 2.25) << pes << " PEs";
    } else {
      // The insert, the chare's own message, and its home (the creator)
      // told where it is and that it is gone when another PE of the node
      // took it: 2 to 4 as it happens, too loose for a growth check.
      EXPECT_LT(c.messages, 4.25) << pes << " PEs";
    }
  }
  const char* what = placed ? "create_on" : "create";
  if (placed) {
    EXPECT_TRUE(
        grows_at_most_log(std::string("messages handled per chare (") + what + ")", msgs, 0.25));
  }
  // A loop over PEs per creation, with its count, adds 2, 4 and 8 per
  // doubling (tried: it fails here).
  EXPECT_TRUE(grows_at_most_log(std::string("peer visits and shared RMWs per chare (") + what + ")",
                                shared, 0.5));
}

TEST(ObjectsOpGrowth, ChareMadeOnAnotherPeAndDestroyedTellsNobody) {
  reset_errors();
  check_growth(true);
}

TEST(ObjectsOpGrowth, CharePlacedByTheRuntimeCostsTheSameAtEveryP) {
  reset_errors();
  check_growth(false);
}

}  // namespace
