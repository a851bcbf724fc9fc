// Balancing steps at run time: at_sync() and resume_from_sync(), the
// strategies carrying out their plans (rotate moves every element every
// step, greedy spreads heavy ones), co_await at_sync() in a coroutine,
// messages during steps (none lost, duplicated or reordered per pair), and
// the errors of misuse.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <vector>
#include "objects/support.hpp"

using namespace objects_test;

namespace {

// ---- rotate every step while elements exchange messages --------------------------

struct pair_log {
  std::mutex mu;
  std::map<std::pair<int, int>, long> received;  // (from, to) -> messages received
  std::map<int, std::vector<int>> pes;           // element -> PE at each resume
  std::atomic<long> resumes{0};
  std::atomic<long> finished{0};
};
pair_log g_log;

constexpr int ring_steps = 6;
constexpr int late_per_step = 3;  // sent after at_sync: in flight while elements move

struct Walker : weft::array_element<Walker, int> {
  Walker() = default;
  explicit Walker(int steps) : steps_(steps) {}
  int steps_ = 0;
  int step_ = 0;
  std::map<int, long> next_seq_;  // sender -> the next sequence number expected
  std::map<int, long> sent_seq_;  // receiver -> the next sequence number to send
  std::map<int, int> got_;        // step -> on-time messages received for it
  std::vector<double> ballast_ = std::vector<double>(300, 1.5);

  void pup(weft::pupper& p) { p | steps_ | step_ | next_seq_ | sent_seq_ | got_ | ballast_; }

  int left() const { return (this_index() + array_size() - 1) % array_size(); }
  int right() const { return (this_index() + 1) % array_size(); }
  void send_to(int to, int step, bool on_time) {
    this_proxy()[to].send<&Walker::msg>(this_index(), sent_seq_[to]++, step, on_time);
  }

  void start() {
    send_to(left(), step_, true);
    send_to(right(), step_, true);
    check_step();
  }
  void msg(int from, long seq, int step, bool on_time) {
    PE_CHECK(seq == next_seq_[from], "element " + std::to_string(this_index()) + " from " +
                                         std::to_string(from) + ": seq " + std::to_string(seq) +
                                         ", expected " + std::to_string(next_seq_[from]));
    next_seq_[from] = seq + 1;
    {
      std::lock_guard<std::mutex> lock(g_log.mu);
      ++g_log.received[{from, this_index()}];
    }
    if (on_time) {
      ++got_[step];
      if (step == step_) check_step();
    }
  }
  void check_step() {
    if (got_[step_] < 2 || step_ >= steps_) return;
    got_.erase(step_);
    at_sync();
    for (int k = 0; k < late_per_step; ++k) send_to(k % 2 ? left() : right(), step_, false);
  }
  void resume_from_sync() override {
    ++g_log.resumes;
    {
      std::lock_guard<std::mutex> lock(g_log.mu);
      g_log.pes[this_index()].push_back(weft::my_pe());
    }
    ++step_;
    if (step_ == steps_) {
      ++g_log.finished;
      return;
    }
    start();
  }
};

class AtSyncTest : public PesTest {};

void run_walkers(int pes, int n, const std::string& lb) {
  g_log.received.clear();
  g_log.pes.clear();
  g_log.resumes = 0;
  g_log.finished = 0;
  ASSERT_EQ(run_pes(pes,
                    [n]() -> weft::task<> {
                      auto a = weft::array<Walker>::create(n, ring_steps);
                      a.broadcast<&Walker::start>();
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=" + lb}),
            0);
}

TEST_P(AtSyncTest, RotateEveryStepLosesNothing) {
  const int n = elements();
  run_walkers(pes(), n, "rotate");
  expect_no_pe_errors();
  EXPECT_EQ(g_log.finished.load(), n);
  EXPECT_EQ(g_log.resumes.load(), long(n) * ring_steps);
  // Every message arrived exactly once: on time and late, both neighbours.
  for (int i = 0; i < n; ++i)
    for (int to : {(i + n - 1) % n, (i + 1) % n}) {
      long expect = ring_steps;  // on time
      // Late ones alternate right, left, right per step.
      const long late_right = (late_per_step + 1) / 2, late_left = late_per_step / 2;
      if (to == (i + 1) % n) expect += late_right * ring_steps;
      if (to == (i + n - 1) % n) expect += late_left * ring_steps;
      EXPECT_EQ((g_log.received[{i, to}]), expect) << i << " -> " << to;
    }
  // rotate moves every element one PE on at each step.
  for (int i = 0; i < n; ++i) {
    const std::vector<int>& seen = g_log.pes[i];
    ASSERT_EQ(int(seen.size()), ring_steps) << i;
    for (int s = 1; s < ring_steps; ++s)
      EXPECT_EQ(seen[s], (seen[s - 1] + 1) % pes()) << "element " << i << " step " << s;
  }
}

TEST_P(AtSyncTest, OffResumesInPlace) {
  const int n = elements();
  run_walkers(pes(), n, "off");
  expect_no_pe_errors();
  EXPECT_EQ(g_log.finished.load(), n);
  for (int i = 0; i < n; ++i)
    for (int pe : g_log.pes[i]) EXPECT_EQ(pe, g_log.pes[i][0]) << i;
}

// ---- greedy spreads the heavy elements -----------------------------------------------

struct placed_log {
  std::mutex mu;
  std::map<int, int> pe_of;  // element -> PE after the step
};
placed_log g_placed;

// Elements 0..P-1 are heavy (estimate 4), the rest light (1); the block map
// puts the heavy ones on the first PEs together.
struct Weight : weft::array_element<Weight, int> {
  Weight() = default;
  void pup(weft::pupper&) {}
  double load_estimate() const override { return this_index() < weft::num_pes() ? 4.0 : 1.0; }
  void go() { at_sync(); }
  void resume_from_sync() override {
    std::lock_guard<std::mutex> lock(g_placed.mu);
    g_placed.pe_of[this_index()] = weft::my_pe();
  }
};

TEST_P(AtSyncTest, GreedySpreadsHeavyElements) {
  g_placed.pe_of.clear();
  const int p = pes(), n = 2 * p;
  ASSERT_EQ(run_pes(p,
                    [n]() -> weft::task<> {
                      auto a = weft::array<Weight>::create(n);
                      a.broadcast<&Weight::go>();
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=greedy"}),
            0);
  expect_no_pe_errors();
  ASSERT_EQ(int(g_placed.pe_of.size()), n);
  std::map<int, double> load;
  std::map<int, int> heavy;
  for (auto [i, pe] : g_placed.pe_of) {
    load[pe] += i < p ? 4.0 : 1.0;
    if (i < p) ++heavy[pe];
  }
  for (int pe = 0; pe < p; ++pe) {
    EXPECT_EQ(heavy[pe], 1) << "PE " << pe;
    EXPECT_DOUBLE_EQ(load[pe], 5.0) << "PE " << pe;
  }
}

// ---- co_await at_sync() in a coroutine ------------------------------------------------

std::atomic<long> g_co_done{0};
std::atomic<long> g_co_wrong_pe{0};

// In one process a coroutine awaiting at_sync moves with its element (by
// pointer): rotate puts it one PE on at each step, with its mailbox.
struct Looper : weft::array_element<Looper, int> {
  Looper() = default;
  void pup(weft::pupper&) {}
  void token(int) {}
  weft::task<> run(int steps) {
    const int n = array_size(), pes = weft::num_pes();
    int pe = weft::my_pe();
    for (int s = 0; s < steps; ++s) {
      this_proxy()[(this_index() + 1) % n].send<&Looper::token>(s);
      auto got = co_await next<&Looper::token>(1);
      PE_CHECK(std::get<0>(got[0]) == s, "token of another step");
      const long all = co_await all_reduce(1L, weft::op::sum);
      PE_CHECK(all == n, "all_reduce after a move");
      co_await at_sync();
      if (weft::my_pe() != (pe + 1) % pes) ++g_co_wrong_pe;
      pe = weft::my_pe();
    }
    ++g_co_done;
  }
};

TEST_P(AtSyncTest, CoroutineMovesWithItsElement) {
  g_co_done = 0;
  g_co_wrong_pe = 0;
  const int n = elements();
  ASSERT_EQ(run_pes(pes(),
                    [n]() -> weft::task<> {
                      auto a = weft::array<Looper>::create(n);
                      a.broadcast<&Looper::run>(5);
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=rotate"}),
            0);
  expect_no_pe_errors();
  EXPECT_EQ(g_co_done.load(), n);
  EXPECT_EQ(g_co_wrong_pe.load(), 0);
}

// ---- on demand: weft::lb::balance() from main ---------------------------------------

struct Idle : weft::array_element<Idle, int> {
  Idle() = default;
  void pup(weft::pupper&) {}
  double load_estimate() const override { return this_index() < weft::num_pes() ? 4.0 : 1.0; }
  void where() {
    std::lock_guard<std::mutex> lock(g_placed.mu);
    g_placed.pe_of[this_index()] = weft::my_pe();
  }
};

TEST_P(AtSyncTest, BalanceOnDemandMovesIdleElements) {
  g_placed.pe_of.clear();
  const int p = pes(), n = 2 * p;
  ASSERT_EQ(run_pes(p,
                    [n]() -> weft::task<> {
                      auto a = weft::array<Idle>::create(n);
                      co_await quiescence();
                      weft::lb::balance();
                      co_await quiescence();
                      a.broadcast<&Idle::where>();
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=greedy"}),
            0);
  expect_no_pe_errors();
  ASSERT_EQ(int(g_placed.pe_of.size()), n);
  std::map<int, int> heavy;
  for (auto [i, pe] : g_placed.pe_of)
    if (i < p) ++heavy[pe];
  for (int pe = 0; pe < p; ++pe) EXPECT_EQ(heavy[pe], 1) << "PE " << pe;
}

// ---- periodic: elements move between entry methods while messages flow -------------

std::atomic<long> g_hops{0};
std::atomic<long> g_moves{0};
std::atomic<long> g_stopped{0};
constexpr long max_hops = 2000000;

struct Token : weft::array_element<Token, int> {
  Token() = default;
  long seen = 0;  // tokens through this element
  void pup(weft::pupper& p) { p | seen; }
  void on_migrated() override { ++g_moves; }
  void pass(long hop) {
    ++seen;
    ++g_hops;
    // Go on until elements have moved a few times (or a cap, so that a
    // run never hangs: then the test fails on the moves).
    if (g_moves.load() >= 3 * array_size() || hop >= max_hops) {
      ++g_stopped;  // this token ends here: each must end exactly once
      return;
    }
    this_proxy()[(this_index() + 1) % array_size()].send<&Token::pass>(hop + 1);
  }
};

TEST_P(AtSyncTest, PeriodicBalancingMovesElementsWithoutLosingTokens) {
  if (pes() == 1) GTEST_SKIP() << "nothing to move on one PE";
  g_hops = 0;
  g_moves = 0;
  g_stopped = 0;
  const int n = elements();
  ASSERT_EQ(run_pes(pes(),
                    [n]() -> weft::task<> {
                      auto a = weft::array<Token>::create(n);
                      // Several tokens circulate at once.
                      for (int t = 0; t < 3; ++t) a[t].send<&Token::pass>(0L);
                      co_await quiescence();
                      weft::exit(0);
                    },
                    {"--weft:lb=rotate", "--weft:lb-period=0.002"}),
            0);
  expect_no_pe_errors();
  EXPECT_GE(g_moves.load(), 3L * n);
  EXPECT_EQ(g_stopped.load(), 3);
}

INSTANTIATE_TEST_SUITE_P(Pes, AtSyncTest, testing::Values(1, 2, 4), pes_name);

// ---- misuse --------------------------------------------------------------------------

class AtSyncDeathTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

struct Twice : weft::array_element<Twice, int> {
  void go() {
    at_sync();
    at_sync();
  }
};
struct Mover : weft::array_element<Mover, int> {
  Mover() = default;
  void pup(weft::pupper&) {}
  void go() { at_sync(); }
  void poke() { migrate_to((weft::my_pe() + 1) % weft::num_pes()); }
};

TEST_F(AtSyncDeathTest, TwiceInOneStep) {
  EXPECT_EXIT((void)run_pes(2,
                            []() -> weft::task<> {
                              auto a = weft::array<Twice>::create(3);
                              a.broadcast<&Twice::go>();
                              co_return;
                            }),
              testing::ExitedWithCode(3), "called at_sync\\(\\) again before its balancing step");
}

TEST_F(AtSyncDeathTest, MigrateToWhileWaiting) {
  EXPECT_EXIT((void)run_pes(2,
                            []() -> weft::task<> {
                              auto a = weft::array<Mover>::create(4);
                              a[0].send<&Mover::go>();
                              a[0].send<&Mover::poke>();
                              co_return;
                            }),
              testing::ExitedWithCode(3), "migrate_to\\(\\) while it waits in at_sync");
}

TEST_F(AtSyncDeathTest, UnknownStrategyIsAUsageError) {
  EXPECT_EXIT((void)run_pes(1, []() -> weft::task<> { co_return; }, {"--weft:lb=bogus"}),
              testing::ExitedWithCode(2),
              "--weft:lb=bogus: no such strategy; accepted: off\\|.*greedy");
}

}  // namespace
