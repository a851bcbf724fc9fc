// The load database's options (docs/lb.md "Load options"): --weft:lb-load=cpu
// leaves out the time an element's thread was not running, --weft:lb-average
// carries part of the last step's load into the next (across a migration
// too), and --weft:lb-sample=N still gives every element a load near the
// one timing every entry gives. A registered strategy records what each
// step saw and moves nothing; elements are told apart by their packed size
// (element i packs i + 1 doubles).
// The work is counted in iterations, never in time, and every comparison
// is an ordering or a ratio with a wide margin: the machine may be loaded.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#include "objects/support.hpp"
#include "weft/lb/strategy.hpp"

using namespace objects_test;

namespace {

// ---- what the steps saw ------------------------------------------------------------

struct seen_steps {
  std::mutex mu;
  // Per step, the elements' loads by index.
  std::vector<std::vector<double>> steps;
};
seen_steps g_seen;

class capture : public weft::lb::strategy {
 public:
  weft::lb::plan balance(const weft::lb::instance& inst, const weft::lb::options&) override {
    // Sizes grow with the index: their order is the elements'.
    std::map<std::uint64_t, double> by_size;
    for (const weft::lb::object_info& o : inst.objects) by_size[o.bytes] = o.load;
    std::vector<double> loads;
    for (const auto& [bytes, load] : by_size) loads.push_back(load);
    std::lock_guard<std::mutex> lock(g_seen.mu);
    g_seen.steps.push_back(std::move(loads));
    return weft::lb::current_placement(inst);
  }
};

const bool g_registered = [] {
  weft::lb::register_strategy("capture-loads", [] { return std::make_unique<capture>(); });
  return true;
}();

using steps_seen = std::vector<std::vector<double>>;

steps_seen run_and_capture(int pes, int n, std::vector<std::string> opts,
                           weft::task<> (*body)(int)) {
  g_seen.steps.clear();
  opts.insert(opts.begin(), "--weft:lb=capture-loads");
  EXPECT_TRUE(g_registered);
  EXPECT_EQ(run_pes(
                pes, [body, n] { return body(n); }, opts),
            0);
  expect_no_pe_errors();
  std::lock_guard<std::mutex> lock(g_seen.mu);
  for (const auto& step : g_seen.steps) EXPECT_EQ(step.size(), std::size_t(n));
  return g_seen.steps;
}

// Work of a fixed size: a dependent chain the compiler cannot shorten.
double spin(long iterations) {
  volatile double sink = 0;
  double x = 0.3;
  for (long i = 0; i < iterations; ++i) x = 3.9 * x * (1 - x);
  sink = x;
  return sink;
}

// ---- cpu: a sleeping element's load is its CPU time, not its wall time -----------

// Element 0 spins, element 1 sleeps for about as long; one step.
struct SpinOrSleep : weft::array_element<SpinOrSleep, int> {
  std::vector<double> id_;
  SpinOrSleep() = default;
  void pup(weft::pupper& p) { p | id_; }
  void start() {
    id_.assign(std::size_t(this_index() + 1), 0.0);
    // Under the sanitizers the sleeper's own handling costs ~0.4 ms of CPU
    // on a loaded machine: the spinner stays well above 5x that.
    if (this_index() == 0)
      spin(scaled(4'000'000, 3'000'000));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // An entry's time counts once it returns: at_sync() in the next.
    this_proxy()[this_index()].send<&SpinOrSleep::sync_now>();
  }
  void sync_now() { at_sync(); }
  void resume_from_sync() override {}
};

weft::task<> spin_or_sleep(int n) {
  auto a = weft::array<SpinOrSleep>::create(n);
  a.broadcast<&SpinOrSleep::start>();
  co_await quiescence();
  weft::exit(0);
}

class LoadOptionsTest : public PesTest {};

TEST_P(LoadOptionsTest, CpuLoadLeavesOutSleep) {
  const auto cpu = run_and_capture(pes(), 2, {"--weft:lb-load=cpu"}, spin_or_sleep);
  const auto wall = run_and_capture(pes(), 2, {}, spin_or_sleep);
  ASSERT_EQ(cpu.size(), 1u);
  ASSERT_EQ(wall.size(), 1u);
  const double spinner = cpu[0].at(std::size_t(0)), sleeper = cpu[0].at(std::size_t(1));
  EXPECT_GT(spinner, 5 * sleeper) << "cpu: spinner " << spinner << " s, sleeper " << sleeper;
  // Wall time counts the sleep: the same element weighs far more.
  EXPECT_GT(wall[0].at(std::size_t(1)), 5 * sleeper)
      << "sleeper: wall " << wall[0].at(std::size_t(1)) << " s, cpu " << sleeper;
}

// ---- average: a load that drops to nothing fades by A per step -----------------------

// Steps 0..2: work only before step 0. Before step 1 the element moves by
// migrate_to (packed, even inside the process): the last step's load goes
// with it.
struct Fading : weft::array_element<Fading, int> {
  std::vector<double> id_;
  int step_ = 0;
  Fading() = default;
  void pup(weft::pupper& p) { p | id_ | step_; }
  void start() {
    id_.assign(std::size_t(this_index() + 1), 0.0);
    // Not scaled down under the sanitizers: the runtime's own CPU time in a
    // step without work, larger there, must stay small next to this (an
    // ASan run on a loaded machine measured it at a fifth of the work
    // scaled down 3x, and the third step's average past its bound).
    spin(3'000'000);
    this_proxy()[this_index()].send<&Fading::sync_now>();
  }
  void resume_from_sync() override {
    if (++step_ == 3) return;
    if (step_ == 1) migrate_to((weft::my_pe() + 1) % weft::num_pes());
    this_proxy()[this_index()].send<&Fading::sync_now>();
  }
  void sync_now() { at_sync(); }
};

weft::task<> fading(int n) {
  auto a = weft::array<Fading>::create(n);
  a.broadcast<&Fading::start>();
  co_await quiescence();
  weft::exit(0);
}

TEST_P(LoadOptionsTest, AverageCarriesHalfTheLastStep) {
  const int n = pes();
  // CPU time: the steps without work weigh next to nothing even if the
  // core was taken from the PE meanwhile.
  const auto half =
      run_and_capture(pes(), n, {"--weft:lb-load=cpu", "--weft:lb-average=0.5"}, fading);
  const auto none = run_and_capture(pes(), n, {"--weft:lb-load=cpu"}, fading);
  ASSERT_EQ(half.size(), 3u);
  ASSERT_EQ(none.size(), 3u);
  for (int i = 0; i < n; ++i) {
    const std::size_t e = std::size_t(i);
    const double first = half[0].at(e), second = half[1].at(e), third = half[2].at(e);
    ASSERT_GT(first, 0) << "element " << i;
    EXPECT_GT(second, 0.35 * first) << "element " << i;
    EXPECT_LT(second, 0.65 * first) << "element " << i;
    EXPECT_GT(third, 0.15 * first) << "element " << i;
    EXPECT_LT(third, 0.35 * first) << "element " << i;
    // Without averaging the step after the work sees (next to) nothing.
    EXPECT_LT(none[1].at(e), 0.1 * none[0].at(e)) << "element " << i;
  }
}

// ---- sample: every element gets a load, about the one full timing gives -------------

constexpr int sample_entries = 200;

// Element i does (i + 1) units in each of its entries, one after the other
// (each sends itself the next), then one step.
struct Chain : weft::array_element<Chain, int> {
  std::vector<double> id_;
  Chain() = default;
  void pup(weft::pupper& p) { p | id_; }
  void start() {
    id_.assign(std::size_t(this_index() + 1), 0.0);
    work(sample_entries);
  }
  void work(int left) {
    // Not scaled down under sanitizers: the heaviest element must still
    // outweigh the runtime's own time per entry (checked below).
    spin(4000L * (this_index() + 1));
    if (left > 0)
      this_proxy()[this_index()].send<&Chain::work>(left - 1);
    else
      at_sync();
  }
  void resume_from_sync() override {}
};

weft::task<> chains(int n) {
  auto a = weft::array<Chain>::create(n);
  a.broadcast<&Chain::start>();
  co_await quiescence();
  weft::exit(0);
}

TEST_P(LoadOptionsTest, SampledLoadsStayNearTimedOnes) {
  const int n = 4 * pes();
  const auto all = run_and_capture(pes(), n, {"--weft:lb-load=cpu"}, chains);
  const auto sampled =
      run_and_capture(pes(), n, {"--weft:lb-load=cpu", "--weft:lb-sample=4"}, chains);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(sampled.size(), 1u);
  double sum_all = 0, sum_sampled = 0;
  for (int i = 0; i < n; ++i) {
    const double s = sampled[0].at(std::size_t(i));
    EXPECT_GT(s, 0) << "element " << i;
    sum_sampled += s;
    sum_all += all[0].at(std::size_t(i));
  }
  EXPECT_GT(sum_sampled, sum_all / 3) << "sampled " << sum_sampled << " s, all " << sum_all;
  EXPECT_LT(sum_sampled, sum_all * 3) << "sampled " << sum_sampled << " s, all " << sum_all;
  // n times the work per entry: the estimate keeps the order of the ends.
  EXPECT_GT(sampled[0].at(std::size_t(n - 1)), 2 * sampled[0].at(std::size_t(0)));
}

INSTANTIATE_TEST_SUITE_P(Pes, LoadOptionsTest, testing::Values(1, 2), pes_name);

}  // namespace
