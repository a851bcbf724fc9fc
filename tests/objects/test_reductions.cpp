// Reductions over arrays and groups: every built-in op over the value types
// it accepts (exact values, so the order of combination cannot matter), user
// ops, every kind of callback (element entry, broadcast entry, future, exit),
// consecutive rounds with elements contributing ahead, reductions while the
// elements migrate, group reductions, late insertion and destruction in a
// sparse array, and the fatal errors of misuse (death tests).
//
// Results are collected on PE 0 (the main coroutine) or in globals and
// checked on the test thread after weft::run returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include "core/support.hpp"
#include "objects/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace objects_test;  // with the weft_test helpers it names

// ---- values --------------------------------------------------------------------------

// Contributions chosen so that every combination order gives the same exact
// result (small integers, binary fractions).
template <class V>
V value_of(int i);
template <>
int value_of<int>(int i) {
  return i % 4 == 0 ? -1 : (i % 4 == 1 ? 2 : 1 + i % 3);
}
template <>
double value_of<double>(int i) {
  return i % 4 == 0 ? -0.5 : (i % 4 == 1 ? 2.0 : 1.25);
}
template <>
std::vector<double> value_of<std::vector<double>>(int i) {
  return {value_of<double>(i), double(i + 1), -0.25 * (i % 3 + 1)};
}
template <>
bool value_of<bool>(int i) {
  return i % 3 != 1;
}
template <>
std::uint32_t value_of<std::uint32_t>(int i) {
  return (1u << (i % 7)) | (std::uint32_t(i * 37) & 0xF0u) | 0x100u;
}
template <>
std::vector<std::uint32_t> value_of<std::vector<std::uint32_t>>(int i) {
  return {value_of<std::uint32_t>(i), ~value_of<std::uint32_t>(i), std::uint32_t(i)};
}
template <>
std::string value_of<std::string>(int i) {
  return "element-" + std::to_string(i) + std::string(std::size_t(i % 3), '*');
}

// The expected result: the op applied left to right over the elements.
template <class Op, class V>
V fold(int n) {
  V acc = value_of<V>(0);
  for (int i = 1; i < n; ++i) Op::combine(acc, value_of<V>(i));
  return acc;
}

// ---- every op and type -------------------------------------------------------------

struct pair_minmax {
  std::pair<int, int> operator()(std::pair<int, int> a, std::pair<int, int> b) const {
    return {std::min(a.first, b.first), std::max(a.second, b.second)};
  }
};

// A user op over a struct with its own pup.
struct stats {
  long count = 0;
  double sum = 0;
  std::vector<int> seen;  // sorted indices
  void pup(weft::pupper& p) { p | count | sum | seen; }
  bool operator==(const stats&) const = default;
};
struct merge_stats {
  stats operator()(stats a, const stats& b) const {
    a.count += b.count;
    a.sum += b.sum;
    std::vector<int> m;
    std::merge(a.seen.begin(), a.seen.end(), b.seen.begin(), b.seen.end(), std::back_inserter(m));
    a.seen = std::move(m);
    return a;
  }
};

struct Red : weft::array_element<Red, int> {
  Red() = default;
  void pup(weft::pupper&) {}

  // One round: this element's value for V under Op, to `cb`.
  template <class Op, class V, class R>
  void give(weft::callback<R> cb) {
    contribute(value_of<V>(this_index()), Op{}, cb);
  }
  void give_minmax(weft::callback<std::pair<int, int>> cb) {
    contribute(std::pair<int, int>{this_index(), this_index()}, pair_minmax{}, cb);
  }
  void give_stats(weft::callback<stats> cb) {
    contribute(stats{1, this_index() * 0.5, {this_index()}}, merge_stats{}, cb);
  }
};

template <class Op, class V, class R = V>
void round_to(const weft::array<Red>& a, const weft::future<R>& f) {
  a.broadcast<&Red::give<Op, V, R>>(weft::callback<R>(f));
}

class Ops : public PesTest {};

TEST_P(Ops, ArithmeticOverIntDoubleAndVectors) {
  const int n = elements();
  struct results {
    int si, pi, mni, mxi;
    double sd, pd, mnd, mxd;
    std::vector<double> sv, pv, mnv, mxv;
  } r{};
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    namespace op = weft::op;
    auto a = weft::array<Red>::create(n);
    // Twelve rounds launched back to back; each future gets its own round.
    auto fsi = weft::make_future<int>();
    auto fpi = weft::make_future<int>();
    auto fmni = weft::make_future<int>();
    auto fmxi = weft::make_future<int>();
    auto fsd = weft::make_future<double>();
    auto fpd = weft::make_future<double>();
    auto fmnd = weft::make_future<double>();
    auto fmxd = weft::make_future<double>();
    using vd = std::vector<double>;
    auto fsv = weft::make_future<vd>();
    auto fpv = weft::make_future<vd>();
    auto fmnv = weft::make_future<vd>();
    auto fmxv = weft::make_future<vd>();
    round_to<op::sum_t, int>(a, fsi);
    round_to<op::product_t, int>(a, fpi);
    round_to<op::min_t, int>(a, fmni);
    round_to<op::max_t, int>(a, fmxi);
    round_to<op::sum_t, double>(a, fsd);
    round_to<op::product_t, double>(a, fpd);
    round_to<op::min_t, double>(a, fmnd);
    round_to<op::max_t, double>(a, fmxd);
    round_to<op::sum_t, vd>(a, fsv);
    round_to<op::product_t, vd>(a, fpv);
    round_to<op::min_t, vd>(a, fmnv);
    round_to<op::max_t, vd>(a, fmxv);
    r.si = co_await fsi;
    r.pi = co_await fpi;
    r.mni = co_await fmni;
    r.mxi = co_await fmxi;
    r.sd = co_await fsd;
    r.pd = co_await fpd;
    r.mnd = co_await fmnd;
    r.mxd = co_await fmxd;
    r.sv = co_await fsv;
    r.pv = co_await fpv;
    r.mnv = co_await fmnv;
    r.mxv = co_await fmxv;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  namespace op = weft::op;
  using vd = std::vector<double>;
  EXPECT_EQ(r.si, (fold<op::sum_t, int>(n)));
  EXPECT_EQ(r.pi, (fold<op::product_t, int>(n)));
  EXPECT_EQ(r.mni, -1);
  EXPECT_EQ(r.mxi, (fold<op::max_t, int>(n)));
  EXPECT_EQ(r.sd, (fold<op::sum_t, double>(n)));
  EXPECT_EQ(r.pd, (fold<op::product_t, double>(n)));
  EXPECT_EQ(r.mnd, -0.5);
  EXPECT_EQ(r.mxd, 2.0);
  EXPECT_EQ(r.sv, (fold<op::sum_t, vd>(n)));
  EXPECT_EQ(r.pv, (fold<op::product_t, vd>(n)));
  EXPECT_EQ(r.mnv, (fold<op::min_t, vd>(n)));
  EXPECT_EQ(r.mxv, (fold<op::max_t, vd>(n)));
  EXPECT_EQ(r.sv.size(), 3u);
}

TEST_P(Ops, LogicalAndBitwise) {
  const int n = elements();
  bool land = false, lor = false, lxor = false;
  std::uint32_t band = 0, bor = 0, bxor = 0;
  std::vector<std::uint32_t> vand, vor, vxor;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    namespace op = weft::op;
    using vu = std::vector<std::uint32_t>;
    auto a = weft::array<Red>::create(n);
    auto f1 = weft::make_future<bool>();
    auto f2 = weft::make_future<bool>();
    auto f3 = weft::make_future<bool>();
    auto f4 = weft::make_future<std::uint32_t>();
    auto f5 = weft::make_future<std::uint32_t>();
    auto f6 = weft::make_future<std::uint32_t>();
    auto f7 = weft::make_future<vu>();
    auto f8 = weft::make_future<vu>();
    auto f9 = weft::make_future<vu>();
    round_to<op::logical_and_t, bool>(a, f1);
    round_to<op::logical_or_t, bool>(a, f2);
    round_to<op::logical_xor_t, bool>(a, f3);
    round_to<op::bit_and_t, std::uint32_t>(a, f4);
    round_to<op::bit_or_t, std::uint32_t>(a, f5);
    round_to<op::bit_xor_t, std::uint32_t>(a, f6);
    round_to<op::bit_and_t, vu>(a, f7);
    round_to<op::bit_or_t, vu>(a, f8);
    round_to<op::bit_xor_t, vu>(a, f9);
    land = co_await f1;
    lor = co_await f2;
    lxor = co_await f3;
    band = co_await f4;
    bor = co_await f5;
    bxor = co_await f6;
    vand = co_await f7;
    vor = co_await f8;
    vxor = co_await f9;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  namespace op = weft::op;
  using vu = std::vector<std::uint32_t>;
  EXPECT_EQ(land, (fold<op::logical_and_t, bool>(n)));
  EXPECT_FALSE(land);  // element 1 contributes false
  EXPECT_EQ(lor, true);
  EXPECT_EQ(lxor, (fold<op::logical_xor_t, bool>(n)));
  EXPECT_EQ(band, (fold<op::bit_and_t, std::uint32_t>(n)));
  EXPECT_EQ(band & 0x100u, 0x100u);
  EXPECT_EQ(bor, (fold<op::bit_or_t, std::uint32_t>(n)));
  EXPECT_EQ(bxor, (fold<op::bit_xor_t, std::uint32_t>(n)));
  EXPECT_EQ(vand, (fold<op::bit_and_t, vu>(n)));
  EXPECT_EQ(vor, (fold<op::bit_or_t, vu>(n)));
  EXPECT_EQ(vxor, (fold<op::bit_xor_t, vu>(n)));
}

TEST_P(Ops, ConcatSetAndUserOps) {
  const int n = elements();
  std::vector<int> cat_int;
  std::vector<std::string> cat_str;
  std::vector<std::pair<int, double>> set_d;
  std::vector<std::pair<int, std::string>> set_s;
  std::pair<int, int> mm{-1, -1};
  stats st;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    namespace op = weft::op;
    auto a = weft::array<Red>::create(n);
    auto f1 = weft::make_future<std::vector<int>>();
    auto f2 = weft::make_future<std::vector<std::string>>();
    auto f3 = weft::make_future<std::vector<std::pair<int, double>>>();
    auto f4 = weft::make_future<std::vector<std::pair<int, std::string>>>();
    auto f5 = weft::make_future<std::pair<int, int>>();
    auto f6 = weft::make_future<stats>();
    round_to<op::concat_t, int, std::vector<int>>(a, f1);
    round_to<op::concat_t, std::string, std::vector<std::string>>(a, f2);
    round_to<op::set_t, double, std::vector<std::pair<int, double>>>(a, f3);
    round_to<op::set_t, std::string, std::vector<std::pair<int, std::string>>>(a, f4);
    a.broadcast<&Red::give_minmax>(weft::callback<std::pair<int, int>>(f5));
    a.broadcast<&Red::give_stats>(weft::callback<stats>(f6));
    cat_int = co_await f1;
    cat_str = co_await f2;
    set_d = co_await f3;
    set_s = co_await f4;
    mm = co_await f5;
    st = co_await f6;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  // concat: the multiset of every value; set: each index once with its value.
  std::vector<int> want_int;
  std::vector<std::string> want_str;
  std::vector<std::pair<int, double>> want_d;
  std::vector<std::pair<int, std::string>> want_s;
  for (int i = 0; i < n; ++i) {
    want_int.push_back(value_of<int>(i));
    want_str.push_back(value_of<std::string>(i));
    want_d.emplace_back(i, value_of<double>(i));
    want_s.emplace_back(i, value_of<std::string>(i));
  }
  auto sorted = [](auto v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(cat_int), sorted(want_int));
  EXPECT_EQ(sorted(cat_str), sorted(want_str));
  EXPECT_EQ(sorted(set_d), want_d);
  EXPECT_EQ(sorted(set_s), want_s);
  EXPECT_EQ(mm, (std::pair<int, int>{0, n - 1}));
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) all[std::size_t(i)] = i;
  EXPECT_EQ(st, (stats{n, 0.5 * n * (n - 1) / 2, all}));
}

INSTANTIATE_TEST_SUITE_P(Pes, Ops, testing::Values(1, 2, 8), pes_name);

// ---- callbacks ------------------------------------------------------------------------

struct sink_log {
  std::mutex mu;
  std::map<std::string, std::vector<long>> got;  // by sink, in arrival order
  std::map<int, std::vector<long>> by_element;   // broadcast callback: per element
  std::map<int, int> element_pe;
};
sink_log g_sink;

void sink_clear() {
  std::lock_guard<std::mutex> lock(g_sink.mu);
  g_sink.got.clear();
  g_sink.by_element.clear();
  g_sink.element_pe.clear();
}

struct SinkChare : weft::chare<SinkChare> {
  explicit SinkChare(std::string n) : name(std::move(n)) {}
  std::string name;
  void got(long v) {
    std::lock_guard<std::mutex> lock(g_sink.mu);
    g_sink.got[name].push_back(v);
  }
};
struct SinkElement : weft::array_element<SinkElement, int> {
  SinkElement() = default;
  void got(long v) {
    std::lock_guard<std::mutex> lock(g_sink.mu);
    g_sink.got["element " + std::to_string(this_index())].push_back(v);
  }
};

struct Giver : weft::array_element<Giver, int> {
  Giver() = default;
  void pup(weft::pupper& p) { p | rounds | k; }
  int rounds = 0;
  int k = 0;  // next round
  weft::callback<long> cb;

  static long value(int i, int round) { return long(i) * 100 + round; }

  void give(weft::callback<long> to) { contribute(value(this_index(), 0), weft::op::sum, to); }
  // Every element receives each result (broadcast callback).
  void result(long v) {
    std::lock_guard<std::mutex> lock(g_sink.mu);
    g_sink.by_element[this_index()].push_back(v);
    g_sink.element_pe[this_index()] = weft::my_pe();
  }
  // Rounds 0..rounds-1, one per invocation, without waiting for results.
  // Element 0 runs all its rounds before any other element starts.
  void run(int r, weft::callback<long> to) {
    rounds = r;
    cb = to;
    step();
  }
  void step() {
    contribute(value(this_index(), k), weft::op::sum, cb);
    ++k;
    if (k < rounds) {
      this_proxy()[this_index()].send<&Giver::step>();
    } else if (this_index() == 0) {
      for (int j = 1; j < array_size(); ++j) this_proxy()[j].send<&Giver::run>(rounds, cb);
    }
  }
};

long round_sum(int n, int round) {
  long s = 0;
  for (int i = 0; i < n; ++i) s += Giver::value(i, round);
  return s;
}

class Callbacks : public PesTest {};

TEST_P(Callbacks, ToAChareAnElementABroadcastAndAFuture) {
  sink_clear();
  const int n = elements();
  long from_future = -1;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Giver>::create(weft::array_options{weft::array_map::round_robin()}, n);
    auto chare = weft::create_on<SinkChare>(weft::num_pes() - 1, std::string("chare"));
    auto sinks = weft::array<SinkElement>::create(3);
    a.broadcast<&Giver::give>(chare.callback<&SinkChare::got>());
    a.broadcast<&Giver::give>(sinks[2].callback<&SinkElement::got>());
    a.broadcast<&Giver::give>(a.broadcast_callback<&Giver::result>());
    auto f = weft::make_future<long>();
    a.broadcast<&Giver::give>(weft::callback<long>(f));
    from_future = co_await f;
    auto q = quiescence();
    co_await q;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  const long want = round_sum(n, 0);
  EXPECT_EQ(from_future, want);
  EXPECT_EQ(g_sink.got["chare"], std::vector<long>{want});
  EXPECT_EQ(g_sink.got["element 2"], std::vector<long>{want});
  EXPECT_EQ(g_sink.got.size(), 2u);
  ASSERT_EQ(int(g_sink.by_element.size()), n);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(g_sink.by_element[i], std::vector<long>{want}) << "element " << i;
    EXPECT_EQ(g_sink.element_pe[i], i % pes()) << "element " << i;
  }
}

TEST_P(Callbacks, ExitCallbackEndsTheRunWithItsCode) {
  const int n = elements();
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Giver>::create(n);
    a.broadcast<&Giver::give>(weft::callback<long>::exit(7));
    co_return;  // nobody else ends the run
  });
  EXPECT_EQ(rc, 7);
  expect_no_pe_errors();
}

TEST_P(Callbacks, ConsecutiveRoundsWithElementsAhead) {
  sink_clear();
  const int n = elements();
  const int rounds = int(scaled(60, 25));
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Giver>::create(n);
    auto chare = weft::create_on<SinkChare>(0, std::string("rounds"));
    a[0].send<&Giver::run>(rounds, chare.callback<&SinkChare::got>());
    auto q = quiescence();
    co_await q;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  // One result per round, in round order.
  std::vector<long> want;
  for (int k = 0; k < rounds; ++k) want.push_back(round_sum(n, k));
  EXPECT_EQ(g_sink.got["rounds"], want);
}

INSTANTIATE_TEST_SUITE_P(Pes, Callbacks, testing::Values(1, 2, 8), pes_name);

// ---- reductions while elements migrate -------------------------------------------------

std::atomic<long> g_moves{0};

struct Wanderer : weft::array_element<Wanderer, int> {
  Wanderer() = default;
  Wanderer(int r, weft::callback<long> to) : rounds(r), cb(to) {}
  int rounds = 0;
  int k = 0;
  weft::callback<long> cb;
  void pup(weft::pupper& p) { p | rounds | k | cb; }
  void on_migrated() override { ++g_moves; }
  void step() {
    contribute(Giver::value(this_index(), k), weft::op::sum, cb);
    ++k;
    if (k >= rounds) return;
    this_proxy()[this_index()].send<&Wanderer::step>();
    const int pes = weft::num_pes();
    if (pes > 1 && (this_index() + k) % 3 != 0)
      migrate_to((weft::my_pe() + 1 + (this_index() + k) % (pes - 1)) % pes);
  }
};

class MigratingReductions : public PesTest {};

TEST_P(MigratingReductions, EveryRoundCountsEveryElementOnce) {
  sink_clear();
  g_moves = 0;
  const int n = 3 * pes() + 1;
  const int rounds = int(scaled(80, 30));
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto chare = weft::create_on<SinkChare>(weft::num_pes() / 2, std::string("wander"));
    auto a = weft::array<Wanderer>::create(n, rounds, chare.callback<&SinkChare::got>());
    a.broadcast<&Wanderer::step>();
    auto q = quiescence();
    co_await q;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  std::vector<long> want;
  for (int k = 0; k < rounds; ++k) want.push_back(round_sum(n, k));
  EXPECT_EQ(g_sink.got["wander"], want);
  if (pes() > 1) {
    EXPECT_GT(g_moves.load(), 0);
  }
}

// Elements that leave: every fifth element stops after half the rounds and
// destroys itself in the invocation of its last contribution, while the
// others run ahead and migrate. Round r counts the elements still there.
struct Quitter : weft::array_element<Quitter, int> {
  Quitter() = default;
  Quitter(int r, weft::callback<std::vector<int>> to) : rounds(r), cb(to) {}
  int rounds = 0;
  int k = 0;
  weft::callback<std::vector<int>> cb;
  void pup(weft::pupper& p) { p | rounds | k | cb; }
  int last() const { return this_index() % 5 == 0 ? rounds / 2 : rounds; }
  void step() {
    // (count, sum of indices) as a two-element vector.
    contribute(std::vector<int>{1, this_index()}, weft::op::sum, cb);
    ++k;
    if (k >= last()) {
      if (k < rounds) destroy();
      return;
    }
    this_proxy()[this_index()].send<&Quitter::step>();
    const int pes = weft::num_pes();
    if (pes > 1 && (this_index() + k) % 2 == 0) migrate_to((weft::my_pe() + 1) % pes);
  }
};

struct VecSink : weft::chare<VecSink> {
  void got(std::vector<int> v) {
    std::lock_guard<std::mutex> lock(g_sink.mu);
    g_sink.got["quit"].push_back(long(v.at(0)) * 100000 + v.at(1));
  }
};

TEST_P(MigratingReductions, DestroyedElementsStopCountingWhileOthersRunAhead) {
  sink_clear();
  const int n = 3 * pes() + 4;
  const int rounds = int(scaled(40, 20));
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto sink = weft::create_on<VecSink>(0);
    auto a = weft::array<Quitter>::create(n, rounds, sink.callback<&VecSink::got>());
    a.broadcast<&Quitter::step>();
    auto q = quiescence();
    co_await q;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  std::vector<long> want;
  for (int r = 0; r < rounds; ++r) {
    long count = 0, sum = 0;
    for (int i = 0; i < n; ++i)
      if (r < (i % 5 == 0 ? rounds / 2 : rounds)) {
        ++count;
        sum += i;
      }
    want.push_back(count * 100000 + sum);
  }
  EXPECT_EQ(g_sink.got["quit"], want);
}

INSTANTIATE_TEST_SUITE_P(Pes, MigratingReductions, testing::Values(1, 2, 8), pes_name);

// ---- groups -----------------------------------------------------------------------------

struct GroupRed : weft::group_element<GroupRed> {
  GroupRed() = default;
  void sum_pe(int round, weft::callback<long> cb) {
    contribute(long(this_pe() + 1) * 1000 + round, weft::op::sum, cb);
  }
  void max_pe(weft::callback<int> cb) { contribute(this_pe(), weft::op::max, cb); }
  void which(weft::callback<std::vector<std::pair<int, int>>> cb) {
    contribute(weft::my_pe() * 10, weft::op::set, cb);
  }
  // Broadcast callback: every PE's element gets the result.
  void got(long v) {
    std::lock_guard<std::mutex> lock(g_sink.mu);
    g_sink.by_element[this_pe()].push_back(v);
  }
};

class GroupReductions : public PesTest {};

TEST_P(GroupReductions, OneContributionPerPePerRound) {
  sink_clear();
  const int rounds = 10;
  std::vector<long> sums;
  int mx = -1;
  std::vector<std::pair<int, int>> which;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto g = weft::group_proxy<GroupRed>::create();
    std::vector<weft::future<long>> fs;
    for (int r = 0; r < rounds; ++r) {
      fs.push_back(weft::make_future<long>());
      g.broadcast<&GroupRed::sum_pe>(r, weft::callback<long>(fs.back()));
    }
    auto fm = weft::make_future<int>();
    g.broadcast<&GroupRed::max_pe>(weft::callback<int>(fm));
    auto fw = weft::make_future<std::vector<std::pair<int, int>>>();
    g.broadcast<&GroupRed::which>(weft::callback<std::vector<std::pair<int, int>>>(fw));
    g.broadcast<&GroupRed::sum_pe>(rounds, g.broadcast_callback<&GroupRed::got>());
    for (auto& f : fs) {
      long v = co_await f;
      sums.push_back(v);
    }
    mx = co_await fm;
    which = co_await fw;
    auto q = quiescence();
    co_await q;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  ASSERT_EQ(int(sums.size()), rounds);
  const long base = 1000L * pes() * (pes() + 1) / 2;
  for (int r = 0; r < rounds; ++r) EXPECT_EQ(sums[std::size_t(r)], base + long(pes()) * r) << r;
  EXPECT_EQ(mx, pes() - 1);
  std::sort(which.begin(), which.end());
  std::vector<std::pair<int, int>> want;
  for (int pe = 0; pe < pes(); ++pe) want.emplace_back(pe, pe * 10);
  EXPECT_EQ(which, want);
  ASSERT_EQ(int(g_sink.by_element.size()), pes());
  for (int pe = 0; pe < pes(); ++pe)
    EXPECT_EQ(g_sink.by_element[pe], std::vector<long>{base + long(pes()) * rounds}) << pe;
}

INSTANTIATE_TEST_SUITE_P(Pes, GroupReductions, testing::Values(1, 2, 8), pes_name);

// ---- sparse arrays: late insertion and destruction ---------------------------------------

struct slot {
  std::int32_t a = 0;
  std::int32_t b = 0;
};

struct Member : weft::array_element<Member, slot> {
  Member() = default;
  explicit Member(weft::future<int> born) { born.set(weft::my_pe()); }
  void pup(weft::pupper&) {}
  void count(weft::callback<int> cb) { contribute(1, weft::op::sum, cb); }
  void ids(weft::callback<std::vector<std::pair<slot, int>>> cb) {
    contribute(this_index().a, weft::op::set, cb);
  }
};

class LateInsertion : public PesTest {};

TEST_P(LateInsertion, NewElementsJoinLaterRoundsAndDestroyedOnesLeave) {
  const int first = pes() + 2;
  std::vector<int> counts;
  std::vector<int> members_seen;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Member>::create_sparse();
    auto insert = [&](int k) -> weft::future<int> {
      auto born = weft::make_future<int>();
      a[slot{k, -k}].insert_on(k % weft::num_pes(), born);
      return born;
    };
    auto round = [&]() -> weft::future<int> {
      auto f = weft::make_future<int>();
      a.broadcast<&Member::count>(weft::callback<int>(f));
      return f;
    };
    std::vector<weft::future<int>> born;
    for (int k = 0; k < first; ++k) born.push_back(insert(k));
    for (auto& b : born) (void)co_await b;
    for (int r = 0; r < 3; ++r) {
      auto f = round();
      int c = co_await f;
      counts.push_back(c);
    }
    // Two more elements, between reduction phases.
    auto b1 = insert(first);
    auto b2 = insert(first + 1);
    (void)co_await b1;
    (void)co_await b2;
    for (int r = 0; r < 3; ++r) {
      auto f = round();
      int c = co_await f;
      counts.push_back(c);
    }
    // One destroyed: it stops counting from its next round.
    a[slot{0, 0}].destroy();
    auto q = quiescence();
    co_await q;
    for (int r = 0; r < 2; ++r) {
      auto f = round();
      int c = co_await f;
      counts.push_back(c);
    }
    auto fi = weft::make_future<std::vector<std::pair<slot, int>>>();
    a.broadcast<&Member::ids>(weft::callback<std::vector<std::pair<slot, int>>>(fi));
    auto ids = co_await fi;
    for (auto& [s, v] : ids) {
      PE_CHECK(s.a == v && s.b == -v, "set op pairs the index with the value");
      members_seen.push_back(v);
    }
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  EXPECT_EQ(counts, (std::vector<int>{first, first, first, first + 2, first + 2, first + 2,
                                      first + 1, first + 1}));
  std::sort(members_seen.begin(), members_seen.end());
  std::vector<int> want;
  for (int k = 1; k < first + 2; ++k) want.push_back(k);
  EXPECT_EQ(members_seen, want);
}

// Elements inserted after creation are combined inside the node like those
// of a dense array: the root gets one partial per node and round, not one
// per element.
TEST_P(LateInsertion, InsertedElementsAreCombinedInsideTheNode) {
  const int members = 3 * pes() + 1;
  const int rounds = 4;
  std::vector<int> counts;
  std::uint64_t partials_before = 0, partials_after = 0;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Member>::create_sparse();
    std::vector<weft::future<int>> born;
    for (int k = 0; k < members; ++k) {
      born.push_back(weft::make_future<int>());
      a[slot{k, -k}].insert_on(k % weft::num_pes(), born.back());
    }
    for (auto& b : born) (void)co_await b;
    auto q = quiescence();
    co_await q;
    partials_before = weft::objects::detail::reduction_partials_received(a.ref());
    for (int r = 0; r < rounds; ++r) {
      auto f = weft::make_future<int>();
      a.broadcast<&Member::count>(weft::callback<int>(f));
      counts.push_back(co_await f);
    }
    partials_after = weft::objects::detail::reduction_partials_received(a.ref());
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  EXPECT_EQ(counts, std::vector<int>(rounds, members));
  EXPECT_EQ(partials_before, 0u);
  EXPECT_EQ(partials_after - partials_before, std::uint64_t(rounds))
      << "each round should reach the root as one combined partial (one node)";
}

INSTANTIATE_TEST_SUITE_P(Pes, LateInsertion, testing::Values(1, 2, 8), pes_name);

// ---- fatal errors ------------------------------------------------------------------------

class ReductionsDeathTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

const testing::ExitedWithCode fatal_exit(3);

struct Twice : weft::array_element<Twice, int> {
  void go(weft::callback<int> cb) {
    contribute(1, weft::op::sum, cb);
    if (this_index() == 1) contribute(2, weft::op::sum, cb);
  }
  void mixed(weft::callback<int> cb) {
    if (this_index() == 2)
      contribute(1, weft::op::max, cb);
    else
      contribute(1, weft::op::sum, cb);
  }
  void lengths(weft::callback<std::vector<double>> cb) {
    contribute(std::vector<double>(std::size_t(this_index() == 1 ? 3 : 2), 1.0), weft::op::sum, cb);
  }
};

template <class F>
void run_dying(int pes, F body) {
  (void)run_pes(pes, std::move(body));
}

TEST_F(ReductionsDeathTest, ContributingTwiceInOneInvocation) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto a = weft::array<Twice>::create(4);
                          a.broadcast<&Twice::go>(weft::callback<int>::exit(0));
                          co_return;
                        }),
              fatal_exit,
              "element \\[1\\] of array .*Twice#0\\.1 contributed twice to reductions in one "
              "invocation of .*Twice::go");
}

TEST_F(ReductionsDeathTest, MixedOpsInOneRound) {
  EXPECT_EXIT(run_dying(1,
                        []() -> weft::task<> {
                          auto a = weft::array<Twice>::create(4);
                          a.broadcast<&Twice::mixed>(weft::callback<int>::exit(0));
                          co_return;
                        }),
              fatal_exit,
              "round 0 of the reductions of array .*Twice#0\\.1 gets contributions with different "
              "ops or value types");
}

TEST_F(ReductionsDeathTest, VectorsOfDifferentLengths) {
  EXPECT_EXIT(
      run_dying(1,
                []() -> weft::task<> {
                  auto a = weft::array<Twice>::create(3);
                  a.broadcast<&Twice::lengths>(weft::callback<std::vector<double>>::exit(0));
                  co_return;
                }),
      fatal_exit, "element-wise reduction of vectors of different lengths");
}

}  // namespace
