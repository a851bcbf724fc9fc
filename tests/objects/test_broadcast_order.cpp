// The order of array and group broadcasts from one sender, with every PE
// sending at once.
//
// What is promised (docs/design/objects.md, "Broadcasts: exactly once"): a
// collection's broadcast goes to its root PE, which numbers it, and every
// PE delivers the collection's broadcasts in number order, each element
// exactly once. A sender's broadcasts reach the root in the order it made
// them (one sender, one destination: FIFO), so each element gets the
// broadcasts of one sender in the order they were made; between senders no
// order is promised.
//
// Every PE broadcasts numbered calls, a few per entry method, to a group
// and to an array at once; each element checks, per sender, that the number
// it gets is the one it expects next (a loss, a duplicate or an overtaking
// is named at once) and reports its counts at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include "core/support.hpp"
#include "objects/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace objects_test;

struct order_log {
  std::mutex mu;
  // (collection: 0 group, 1 array; element) -> next number expected per sender
  std::map<std::pair<int, int>, std::vector<int>> next;
  void clear() {
    std::lock_guard<std::mutex> lock(mu);
    next.clear();
  }
};
order_log g_order;

// Checks `seq` from `sender` against what `next` expects.
void take(std::vector<int>& next, const std::string& who, int sender, int seq) {
  if (sender < 0 || sender >= int(next.size())) {
    record_error(who + ": bad sender " + std::to_string(sender));
    return;
  }
  int& want = next[std::size_t(sender)];
  if (seq != want)
    record_error(who + " got broadcast " + std::to_string(seq) + " of PE " +
                 std::to_string(sender) + " while expecting " + std::to_string(want) +
                 (seq < want ? " (a duplicate, or overtaken)" : " (lost, or overtaken)"));
  if (seq + 1 > want) want = seq + 1;
}

struct Ear : weft::array_element<Ear, int> {
  std::vector<int> next;
  explicit Ear(int senders) : next(std::size_t(senders), 0) {}
  void hear(int sender, int seq) {
    take(next, "array element " + std::to_string(this_index()), sender, seq);
  }
  void report() {
    std::lock_guard<std::mutex> lock(g_order.mu);
    g_order.next[{1, this_index()}] = next;
  }
};

struct Voice : weft::group_element<Voice> {
  std::vector<int> next;
  weft::array<Ear> ears;
  int count = 0;
  explicit Voice(int senders) : next(std::size_t(senders), 0) {}
  void hear(int sender, int seq) {
    take(next, "group element " + std::to_string(this_pe()), sender, seq);
  }
  void start(weft::array<Ear> a, int c) {
    ears = a;
    count = c;
    more(0);
  }
  // A few broadcasts to each collection, then the rest in a later entry
  // method, so that this PE handles the others' broadcasts in between.
  void more(int first) {
    const int me = this_pe();
    const int end = std::min(first + 5, count);
    for (int k = first; k < end; ++k) {
      this_proxy().broadcast<&Voice::hear>(me, k);
      ears.broadcast<&Ear::hear>(me, k);
    }
    if (end < count) this_proxy()[me].send<&Voice::more>(end);
  }
  void report() {
    std::lock_guard<std::mutex> lock(g_order.mu);
    g_order.next[{0, this_pe()}] = next;
  }
};

class ObjectBroadcastOrder : public PesTest {};

TEST_P(ObjectBroadcastOrder, EachSendersBroadcastsInOrderAtEveryElement) {
  const int pes = this->pes();
  const int count = int(scaled(300, 60));
  const int n = elements();
  g_order.clear();
  int rc = run_pes(pes, [&]() -> weft::task<> {
    auto ears = weft::array<Ear>::create(n, pes);
    auto voices = weft::group_proxy<Voice>::create(pes);
    voices.broadcast<&Voice::start>(ears, count);
    auto q = quiescence();
    co_await q;
    voices.broadcast<&Voice::report>();
    ears.broadcast<&Ear::report>();
    auto q2 = quiescence();
    co_await q2;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  const std::vector<int> all(std::size_t(pes), count);
  std::lock_guard<std::mutex> lock(g_order.mu);
  EXPECT_EQ(g_order.next.size(), std::size_t(pes + n));
  for (int pe = 0; pe < pes; ++pe)
    EXPECT_EQ(g_order.next[std::make_pair(0, pe)], all) << "group element " << pe;
  for (int i = 0; i < n; ++i) EXPECT_EQ(g_order.next[std::make_pair(1, i)], all) << "array element " << i;
}

INSTANTIATE_TEST_SUITE_P(Pes, ObjectBroadcastOrder, testing::Values(1, 2, 3, 5, 8), pes_name);

}  // namespace
