// Communication records at run time (--weft:lb-comm): what elements send to
// elements of their own array becomes the instance's edges, counted exactly
// (messages, and bytes of packed arguments) per step, across migrations
// (a sender's counts stay on the PE it sent from, and are gathered there);
// nothing with lb-comm=off or under auto with another strategy; a step
// without at_sync (weft::lb::balance()) sees them too; `comm` puts
// communicating pairs spread over PEs on one PE; and a dump has the edges.
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <vector>
#include <weft/lb/dump.hpp>
#include <weft/lb/strategy.hpp>
#include "lb/capture_strategy.hpp"
#include "objects/support.hpp"

using namespace objects_test;
namespace lb = weft::lb;

namespace {

// ---- a strategy that keeps what it saw (lb/capture_strategy.hpp) ---------------

using lb_test::g_seen;
const bool g_capture_registered = lb_test::register_capture("test-capture");

// Each object's element, by its load (load_estimate: index + 1).
int element_of(const lb::instance& inst, std::uint32_t object) {
  return int(inst.objects.at(object).load) - 1;
}

// ---- a ring: each element sends `per_step` messages to its right neighbour ------

constexpr int ring_steps = 3;
constexpr int per_step = 5;
constexpr std::size_t payload = 100;
std::atomic<long> g_ring_done{0};

struct Ring : weft::array_element<Ring, int> {
  Ring() = default;
  int step_ = 0;
  long got_ = 0;
  void pup(weft::pupper& p) { p | step_ | got_; }
  double load_estimate() const override { return this_index() + 1.0; }

  void send_all() {
    const int right = (this_index() + 1) % array_size();
    for (int k = 0; k < per_step; ++k)
      this_proxy()[right].send<&Ring::take>(step_, std::vector<char>(payload, 'x'));
  }
  // First step from an entry method, the others from resume_from_sync.
  void go() {
    send_all();
    at_sync();
  }
  void take(int, std::vector<char> bytes) {
    PE_CHECK(bytes.size() == payload, "payload");
    ++got_;
  }
  void resume_from_sync() override {
    if (++step_ == ring_steps) {
      PE_CHECK(got_ == long(per_step) * ring_steps, "received " + std::to_string(got_));
      ++g_ring_done;
      return;
    }
    send_all();
    at_sync();
  }
};

// What one message's packed arguments take.
std::uint64_t ring_message_bytes() {
  return weft::packed_size(int(0), std::vector<char>(payload, 'x'));
}

void run_ring(int pes, int n, std::vector<std::string> opts) {
  g_seen.steps.clear();
  g_ring_done = 0;
  ASSERT_EQ(run_pes(
                pes,
                [n]() -> weft::task<> {
                  auto a = weft::array<Ring>::create(n);
                  a.broadcast<&Ring::go>();
                  co_await quiescence();
                  weft::exit(0);
                },
                std::move(opts)),
            0);
  expect_no_pe_errors();
  EXPECT_EQ(g_ring_done.load(), n);
}

// Every step's edges are exactly the ring's: one per neighbour pair.
void expect_ring_edges(const lb::instance& inst, int n, std::size_t step) {
  ASSERT_EQ(int(inst.objects.size()), n) << "step " << step;
  ASSERT_EQ(int(inst.edges.size()), n) << "step " << step;
  std::set<int> lefts;
  for (const lb::edge& e : inst.edges) {
    const int a = element_of(inst, e.a), b = element_of(inst, e.b);
    EXPECT_LT(e.a, e.b);
    // The sender is the one whose right neighbour the other is.
    const int left = (a + 1) % n == b ? a : b;
    EXPECT_EQ((left + 1) % n, left == a ? b : a) << a << "-" << b << " step " << step;
    lefts.insert(left);
    EXPECT_EQ(e.messages, std::uint64_t(per_step)) << a << "-" << b << " step " << step;
    EXPECT_EQ(e.bytes, per_step * ring_message_bytes()) << a << "-" << b << " step " << step;
  }
  EXPECT_EQ(int(lefts.size()), n) << "step " << step;
}

class CommRecordsTest : public PesTest {};

TEST_P(CommRecordsTest, RingEdgesAreExactlyTheCounts) {
  const int n = elements();
  run_ring(pes(), n, {"--weft:lb=test-capture", "--weft:lb-comm=element"});
  std::lock_guard<std::mutex> lock(g_seen.mu);
  ASSERT_EQ(int(g_seen.steps.size()), ring_steps);
  for (std::size_t s = 0; s < g_seen.steps.size(); ++s) expect_ring_edges(g_seen.steps[s], n, s);
}

TEST_P(CommRecordsTest, OffAndAutoWithAnotherStrategyCountNothing) {
  const int n = elements();
  for (const char* mode : {"--weft:lb-comm=off", "--weft:lb-comm=auto"}) {
    run_ring(pes(), n, {"--weft:lb=test-capture", mode});
    std::lock_guard<std::mutex> lock(g_seen.mu);
    ASSERT_EQ(int(g_seen.steps.size()), ring_steps) << mode;
    for (const lb::instance& inst : g_seen.steps) EXPECT_TRUE(inst.edges.empty()) << mode;
  }
}

// ---- a sender that moves between its sends ---------------------------------------

// Each element sends per_step messages, moves one PE on (migrate_to), then
// sends per_step more and calls at_sync: the first half is counted on the
// PE it left, the second on its new one, and the edge has both.
struct Mover : weft::array_element<Mover, int> {
  Mover() = default;
  void pup(weft::pupper&) {}
  double load_estimate() const override { return this_index() + 1.0; }
  void send_all() {
    const int right = (this_index() + 1) % array_size();
    for (int k = 0; k < per_step; ++k)
      this_proxy()[right].send<&Mover::take>(0, std::vector<char>(payload, 'x'));
  }
  void first() {
    send_all();
    migrate_to((weft::my_pe() + 1) % weft::num_pes());
  }
  void second() {
    send_all();
    at_sync();
  }
  void take(int, std::vector<char>) {}
  void resume_from_sync() override {}
};

TEST_P(CommRecordsTest, MovedSenderCountsFromBothPes) {
  const int n = elements();
  g_seen.steps.clear();
  ASSERT_EQ(run_pes(pes(),
                    [n]() -> weft::task<> {
                      auto a = weft::array<Mover>::create(n);
                      a.broadcast<&Mover::first>();
                      co_await quiescence();
                      a.broadcast<&Mover::second>();
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=test-capture", "--weft:lb-comm=element"}),
            0);
  expect_no_pe_errors();
  std::lock_guard<std::mutex> lock(g_seen.mu);
  ASSERT_EQ(g_seen.steps.size(), 1u);
  const lb::instance& inst = g_seen.steps[0];
  ASSERT_EQ(int(inst.edges.size()), n);
  for (const lb::edge& e : inst.edges) {
    EXPECT_EQ(e.messages, 2u * per_step) << e.a << "-" << e.b;
    EXPECT_EQ(e.bytes, 2 * per_step * ring_message_bytes()) << e.a << "-" << e.b;
  }
}

// ---- a step without at_sync ---------------------------------------------------------

struct Talker : weft::array_element<Talker, int> {
  Talker() = default;
  void pup(weft::pupper&) {}
  double load_estimate() const override { return this_index() + 1.0; }
  void go() {
    const int right = (this_index() + 1) % array_size();
    for (int k = 0; k < per_step; ++k)
      this_proxy()[right].send<&Talker::take>(0, std::vector<char>(payload, 'x'));
  }
  void take(int, std::vector<char>) {}
};

TEST_P(CommRecordsTest, BalanceOnDemandSeesTheEdges) {
  const int n = elements();
  g_seen.steps.clear();
  ASSERT_EQ(run_pes(pes(),
                    [n]() -> weft::task<> {
                      auto a = weft::array<Talker>::create(n);
                      a.broadcast<&Talker::go>();
                      co_await quiescence();
                      weft::lb::balance();
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=test-capture", "--weft:lb-comm=element"}),
            0);
  expect_no_pe_errors();
  std::lock_guard<std::mutex> lock(g_seen.mu);
  ASSERT_EQ(g_seen.steps.size(), 1u);
  expect_ring_edges(g_seen.steps[0], n, 0);
}

// ---- comm keeps communicating pairs together ---------------------------------------

// Element j talks with j + n/2 (block map: another PE when there are
// several); equal loads, two pairs per PE.
constexpr int pair_steps = 2;
struct pair_log {
  std::mutex mu;
  std::map<int, int> pe;  // element -> its PE at the last resume
};
pair_log g_pairs;

struct Partner : weft::array_element<Partner, int> {
  Partner() = default;
  int step_ = 0;
  void pup(weft::pupper& p) { p | step_; }
  double load_estimate() const override { return 1.0; }
  int partner() const { return (this_index() + array_size() / 2) % array_size(); }
  void go() {
    for (int k = 0; k < per_step; ++k)
      this_proxy()[partner()].send<&Partner::take>(std::vector<char>(payload, 'y'));
    at_sync();
  }
  void take(std::vector<char>) {}
  void resume_from_sync() override {
    {
      std::lock_guard<std::mutex> lock(g_pairs.mu);
      g_pairs.pe[this_index()] = weft::my_pe();
    }
    if (++step_ < pair_steps) go();
  }
};

TEST_P(CommRecordsTest, CommPutsEachPairOnOnePe) {
  const int n = 4 * pes();
  g_pairs.pe.clear();
  ASSERT_EQ(run_pes(pes(),
                    [n]() -> weft::task<> {
                      auto a = weft::array<Partner>::create(n);
                      a.broadcast<&Partner::go>();
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=comm"}),  // auto: element
            0);
  expect_no_pe_errors();
  std::lock_guard<std::mutex> lock(g_pairs.mu);
  ASSERT_EQ(int(g_pairs.pe.size()), n);
  std::map<int, int> per_pe;
  for (int j = 0; j < n / 2; ++j) {
    EXPECT_EQ(g_pairs.pe[j], g_pairs.pe[j + n / 2]) << "pair " << j;
    ++per_pe[g_pairs.pe[j]];
  }
  // And the loads stay balanced: two pairs on each PE.
  for (const auto& [pe, pairs] : per_pe) EXPECT_EQ(pairs, 2) << "PE " << pe;
}

// ---- a dump carries the edges ---------------------------------------------------------

TEST_P(CommRecordsTest, DumpHasTheEdges) {
  const std::string path = testing::TempDir() + "weft_comm_" + std::to_string(::getpid()) + "_" +
                           std::to_string(pes()) + ".lbdump";
  const int n = elements();
  run_ring(pes(), n, {"--weft:lb=greedy", "--weft:lb-dump=" + path});  // auto: element
  const std::vector<lb::dumped_step> steps = lb::read_dump(path);
  ASSERT_EQ(int(steps.size()), ring_steps);
  for (const lb::dumped_step& s : steps) expect_ring_edges(s.inst, n, s.step);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Pes, CommRecordsTest, testing::Values(1, 2, 4), pes_name);

}  // namespace
