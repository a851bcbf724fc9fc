// Communication records between elements of different arrays
// (--weft:lb-comm=element; docs/lb.md "Communication records"). Two arrays
// with the same keys (0..n-1) message each other and themselves: a record
// names the receiver's array, so that
//  - placed array by array (the default), a step's edges are its own
//    array's sends, exactly; what it sent to the other array is no edge
//    (those elements are not placed in its step) and --weft:lb-stats shows
//    it as off-array traffic; an element of one array sending to the other
//    array's element of the same key is never taken for a send to its own
//    array's;
//  - placed together (--weft:lb-arrays=together), the joint step's edges
//    join the two arrays' elements, exactly; `comm` keeps each element with
//    the other array's element it talks with; a dump of a joint step has
//    those edges.
// At 1, 2 and 4 PEs, while a strategy moves every element every step (the
// senders count on a new PE each step).
#include <unistd.h>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
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
const bool g_capture_registered = lb_test::register_capture("test-capture-arrays");

// ---- two arrays of the same keys ---------------------------------------------------

// Per step, element i of array 0 sends `own` messages to element i+1 of
// array 0 and `across` to element i+1 of array 1; element j of array 1
// sends `back` messages to element j of array 0 (the same key).
struct traffic {
  int own = 0, across = 0, back = 0;
};
constexpr int steps = 3;
constexpr std::size_t payload = 40;
traffic g_traffic;

// An element (array, index) is known to the strategy by its load.
double load_of(int array, int index) {
  return array == 0 ? 1.0 + index : 1000.0 + index;
}
std::pair<int, int> element_of(const lb::instance& inst, std::uint32_t object) {
  const double l = inst.objects.at(object).load;
  return l >= 1000 ? std::pair{1, int(l - 1000)} : std::pair{0, int(l - 1)};
}

template <int which>
struct Side;
using Array0 = weft::array_proxy<Side<0>, int>;
using Array1 = weft::array_proxy<Side<1>, int>;

// Each element sends its step's messages and calls at_sync; the arrays
// call it equally often (the contract of --weft:lb-arrays=together).
template <int which>
struct Side : weft::array_element<Side<which>, int> {
  Side() = default;
  Array0 a0_;
  Array1 a1_;
  int step_ = 0;
  void pup(weft::pupper& p) { p | a0_ | a1_ | step_; }
  double load_estimate() const override { return load_of(which, this->this_index()); }

  void send_all() {
    const int i = this->this_index(), n = this->array_size();
    const traffic t = g_traffic;
    if constexpr (which == 0) {
      for (int k = 0; k < t.own; ++k)
        a0_[(i + 1) % n].template send<&Side<0>::take>(std::vector<char>(payload, 'a'));
      for (int k = 0; k < t.across; ++k)
        a1_[(i + 1) % n].template send<&Side<1>::take>(std::vector<char>(payload, 'b'));
    } else {
      for (int k = 0; k < t.back; ++k)
        a0_[i].template send<&Side<0>::take>(std::vector<char>(payload, 'c'));
    }
  }
  void go(Array0 a0, Array1 a1) {
    a0_ = a0;
    a1_ = a1;
    send_all();
    this->at_sync();
  }
  void take(std::vector<char> bytes) { PE_CHECK(bytes.size() == payload, "payload"); }
  void resume_from_sync() override {
    if (++step_ < steps) {
      send_all();
      this->at_sync();
    }
  }
};

std::uint64_t message_bytes() {
  return weft::packed_size(std::vector<char>(payload, 'x'));
}

void run_arrays(int pes, int n, traffic t, std::vector<std::string> opts) {
  g_seen.steps.clear();
  g_traffic = t;
  ASSERT_EQ(run_pes(
                pes,
                [n]() -> weft::task<> {
                  auto a0 = Array0::create(n);
                  auto a1 = Array1::create(n);
                  a0.broadcast<&Side<0>::go>(a0, a1);
                  a1.broadcast<&Side<1>::go>(a0, a1);
                  co_await quiescence();
                  weft::exit(0);
                },
                std::move(opts)),
            0);
  expect_no_pe_errors();
}

// The undirected pairs (array, index) - (array, index), a < b, and what
// went between them in one step, for the arrays in `present`.
using end_t = std::pair<int, int>;
using pair_t = std::pair<end_t, end_t>;
std::map<pair_t, std::pair<std::uint64_t, std::uint64_t>> expected_edges(int n, traffic t,
                                                                         bool has0, bool has1) {
  std::map<pair_t, std::pair<std::uint64_t, std::uint64_t>> want;
  auto add = [&](end_t from, end_t to, int messages) {
    if (messages == 0 || from == to) return;
    if (!(from.first == 0 ? has0 : has1) || !(to.first == 0 ? has0 : has1)) return;
    auto& e = want[{std::min(from, to), std::max(from, to)}];
    e.first += std::uint64_t(messages);
    e.second += std::uint64_t(messages) * message_bytes();
  };
  for (int i = 0; i < n; ++i) {
    add({0, i}, {0, (i + 1) % n}, t.own);
    add({0, i}, {1, (i + 1) % n}, t.across);
    add({1, i}, {0, i}, t.back);
  }
  return want;
}

// Which arrays the instance holds, and that its edges are exactly what
// they sent each other in a step.
std::pair<bool, bool> expect_edges(const lb::instance& inst, int n, traffic t, std::size_t call) {
  bool has0 = false, has1 = false;
  for (std::uint32_t o = 0; o < inst.objects.size(); ++o)
    (element_of(inst, o).first == 0 ? has0 : has1) = true;
  EXPECT_EQ(int(inst.objects.size()), (has0 ? n : 0) + (has1 ? n : 0)) << "call " << call;
  std::map<pair_t, std::pair<std::uint64_t, std::uint64_t>> got;
  for (const lb::edge& e : inst.edges) {
    EXPECT_LT(e.a, e.b) << "call " << call;
    const end_t a = element_of(inst, e.a), b = element_of(inst, e.b);
    const bool fresh =
        got.emplace(pair_t{std::min(a, b), std::max(a, b)}, std::pair{e.messages, e.bytes}).second;
    EXPECT_TRUE(fresh) << "call " << call << ": two edges between one pair";
  }
  EXPECT_EQ(got, expected_edges(n, t, has0, has1))
      << "call " << call << " (arrays " << has0 << has1 << ")";
  return {has0, has1};
}

class CommArraysTest : public PesTest {};

// Array by array: each step sees its own array's sends only, whatever the
// other array's elements of the same keys got.
TEST_P(CommArraysTest, EachArraySeesItsOwnEdgesOnly) {
  const int n = elements();
  const traffic t{3, 5, 7};
  run_arrays(pes(), n, t, {"--weft:lb=test-capture-arrays", "--weft:lb-comm=element"});
  std::lock_guard<std::mutex> lock(g_seen.mu);
  ASSERT_EQ(int(g_seen.steps.size()), 2 * steps);
  int alone[2] = {0, 0};
  for (std::size_t c = 0; c < g_seen.steps.size(); ++c) {
    const auto [has0, has1] = expect_edges(g_seen.steps[c], n, t, c);
    EXPECT_NE(has0, has1) << "call " << c << " placed both arrays";
    ++alone[has0 ? 0 : 1];
  }
  EXPECT_EQ(alone[0], steps);
  EXPECT_EQ(alone[1], steps);
}

// Equal keys: array 0's element i sends only to array 1's element i+1, and
// array 1's element j only to array 0's element j. Taken for its own
// array's, either would make an edge (i, i+1) or a send to itself; array by
// array no step has an edge.
TEST_P(CommArraysTest, EqualKeysOfTwoArraysAreNotMixedUp) {
  const int n = elements();
  run_arrays(pes(), n, {0, 5, 7}, {"--weft:lb=test-capture-arrays", "--weft:lb-comm=element"});
  std::lock_guard<std::mutex> lock(g_seen.mu);
  ASSERT_EQ(int(g_seen.steps.size()), 2 * steps);
  for (std::size_t c = 0; c < g_seen.steps.size(); ++c)
    EXPECT_TRUE(g_seen.steps[c].edges.empty()) << "call " << c;
}

// Together: the joint steps' edges join the arrays, exactly. The first step
// may be placed array by array (an array whose records reach PE 0 before
// it joined is placed alone once): its edges are then each array's own.
TEST_P(CommArraysTest, TogetherTheEdgesJoinTheArrays) {
  const int n = elements();
  const traffic t{3, 5, 7};
  run_arrays(
      pes(), n, t,
      {"--weft:lb=test-capture-arrays", "--weft:lb-arrays=together", "--weft:lb-comm=element"});
  std::lock_guard<std::mutex> lock(g_seen.mu);
  ASSERT_GE(g_seen.steps.size(), std::size_t(steps));
  ASSERT_LE(g_seen.steps.size(), std::size_t(steps) + 1);
  int joint = 0;
  for (std::size_t c = 0; c < g_seen.steps.size(); ++c) {
    const auto [has0, has1] = expect_edges(g_seen.steps[c], n, t, c);
    if (has0 && has1) ++joint;
  }
  EXPECT_GE(joint, steps - 1);
}

// The stats line of each array's step names what it sent to the other
// array; a joint step has no off-array traffic.
TEST_P(CommArraysTest, StatsShowOffArrayTraffic) {
  const int n = elements();
  const traffic t{3, 5, 7};
  const std::uint64_t b = message_bytes();
  testing::internal::CaptureStderr();
  run_arrays(pes(), n, t,
             {"--weft:lb=test-capture-arrays", "--weft:lb-comm=element", "--weft:lb-stats"});
  const std::string each = testing::internal::GetCapturedStderr();
  const std::string to1 = "off-array " + std::to_string(n * t.across) + " messages " +
                          std::to_string(n * t.across * b) + " bytes \\(not placed\\)";
  const std::string to0 = "off-array " + std::to_string(n * t.back) + " messages " +
                          std::to_string(n * t.back * b) + " bytes \\(not placed\\)";
  const auto count = [](const std::string& text, const std::string& re) {
    const std::regex r(re);
    return std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator());
  };
  EXPECT_EQ(count(each, "Side<0>.* step [0-9]+: .*" + to1), steps) << each;
  EXPECT_EQ(count(each, "Side<1>.* step [0-9]+: .*" + to0), steps) << each;

  testing::internal::CaptureStderr();
  run_arrays(pes(), n, t,
             {"--weft:lb=test-capture-arrays", "--weft:lb-arrays=together",
              "--weft:lb-comm=element", "--weft:lb-stats"});
  const std::string together = testing::internal::GetCapturedStderr();
  EXPECT_GE(count(together, "over " + std::to_string(2 * n) + " elements of 2 arrays"), 1)
      << together;
  EXPECT_EQ(count(together, "over .*off-array|off-array.*over "), 0) << together;
}

// ---- comm keeps partners of the two arrays together ---------------------------------

struct pe_log {
  std::mutex mu;
  std::map<std::pair<int, int>, int> pe;  // (array, element) -> its PE at the last resume
};
pe_log g_pes;

// Element j of array 0 and element j of array 1 talk only with each other;
// array 0 is mapped in blocks, array 1 round robin, so that partners start
// apart (with several PEs).
template <int which>
struct Partner;
using Partners0 = weft::array_proxy<Partner<0>, int>;
using Partners1 = weft::array_proxy<Partner<1>, int>;

template <int which>
struct Partner : weft::array_element<Partner<which>, int> {
  Partner() = default;
  Partners0 a0_;
  Partners1 a1_;
  int step_ = 0;
  void pup(weft::pupper& p) { p | a0_ | a1_ | step_; }
  double load_estimate() const override { return 1.0; }
  void start(Partners0 a0, Partners1 a1) {
    a0_ = a0;
    a1_ = a1;
    go();
  }
  void go() {
    const int j = this->this_index();
    for (int k = 0; k < 5; ++k) {
      if constexpr (which == 0)
        a1_[j].template send<&Partner<1>::take>(std::vector<char>(payload, 'p'));
      else
        a0_[j].template send<&Partner<0>::take>(std::vector<char>(payload, 'q'));
    }
    this->at_sync();
  }
  void take(std::vector<char>) {}
  void resume_from_sync() override {
    {
      std::lock_guard<std::mutex> lock(g_pes.mu);
      g_pes.pe[{which, this->this_index()}] = weft::my_pe();
    }
    if (++step_ < 2) go();
  }
};

TEST_P(CommArraysTest, CommTogetherPutsPartnersOfTwoArraysOnOnePe) {
  const int p = pes(), n = 2 * p;
  g_pes.pe.clear();
  ASSERT_EQ(run_pes(p,
                    [n]() -> weft::task<> {
                      auto a0 = Partners0::create(n);
                      auto a1 =
                          Partners1::create(weft::array_options{weft::array_map::round_robin()}, n);
                      a0.broadcast<&Partner<0>::start>(a0, a1);
                      a1.broadcast<&Partner<1>::start>(a0, a1);
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=comm", "--weft:lb-arrays=together"}),  // auto: element
            0);
  expect_no_pe_errors();
  std::lock_guard<std::mutex> lock(g_pes.mu);
  ASSERT_EQ(int(g_pes.pe.size()), 2 * n);
  std::map<int, int> per_pe;
  for (int j = 0; j < n; ++j) {
    const int p0 = g_pes.pe[std::pair{0, j}], p1 = g_pes.pe[std::pair{1, j}];
    EXPECT_EQ(p0, p1) << "partners " << j;
    ++per_pe[p0];
  }
  // And the loads stay balanced: two pairs on each PE.
  for (const auto& [pe, pairs] : per_pe) EXPECT_EQ(pairs, 2) << "PE " << pe;
}

// ---- a dump of a joint step carries its edges ---------------------------------------

TEST_P(CommArraysTest, DumpOfAJointStepHasTheEdges) {
  const std::string path = testing::TempDir() + "weft_comm_arrays_" + std::to_string(::getpid()) +
                           "_" + std::to_string(pes()) + ".lbdump";
  const int n = elements();
  const traffic t{3, 5, 7};
  run_arrays(pes(), n, t,
             {"--weft:lb=rotate", "--weft:lb-arrays=together", "--weft:lb-dump=" + path});
  const std::vector<lb::dumped_step> dumped = lb::read_dump(path);
  ASSERT_GE(dumped.size(), std::size_t(steps));
  int joint = 0;
  for (std::size_t c = 0; c < dumped.size(); ++c) {
    const auto [has0, has1] = expect_edges(dumped[c].inst, n, t, c);
    if (!(has0 && has1)) continue;
    ++joint;
    EXPECT_EQ(dumped[c].collection.rfind("arrays together: ", 0), 0u) << dumped[c].collection;
  }
  EXPECT_GE(joint, steps - 1);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Pes, CommArraysTest, testing::Values(1, 2, 4), pes_name);

}  // namespace
