// Coroutines of the objects layer: entry methods returning weft::task<>
// that await next<&T::m>(n) (messages arriving before the await are kept),
// all_reduce in a loop (a 1-D Jacobi exchange checked against a serial run),
// futures set on other PEs, sub-tasks returning values or exceptions, a
// coroutine main function, readonly globals, the destruction of an element
// with a suspended coroutine, and the fatal errors of misuse (death tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include "core/support.hpp"
#include "objects/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace objects_test;  // with the weft_test helpers it names

// ---- next<&T::m>(n) ---------------------------------------------------------------------

std::string item_text(int seq) {
  return "item #" + std::to_string(seq);
}

struct Box : weft::array_element<Box, int> {
  Box() = default;
  // Awaited: its body never runs; the messages go to the mailbox.
  void item(int, std::string) { record_error("the body of an awaited entry method ran"); }
  weft::task<> collect(int n, weft::future<std::vector<int>> out) {
    auto got = co_await next<&Box::item>(std::size_t(n));
    std::vector<int> seqs;
    for (auto& t : got) {
      PE_CHECK(std::get<1>(t) == item_text(std::get<0>(t)), "item payload");
      seqs.push_back(std::get<0>(t));
    }
    out.set(seqs);
  }
  // One message at a time, in a loop.
  weft::task<> one_by_one(int n, weft::future<long> out) {
    long sum = 0;
    for (int k = 0; k < n; ++k) {
      auto got = co_await next<&Box::item>();
      PE_CHECK(got.size() == 1u, "next<>() gives one message");
      sum += std::get<0>(got[0]);
    }
    out.set(sum);
  }
};

class Next : public PesTest {};

TEST_P(Next, MessagesBeforeAndAfterTheAwaitInArrivalOrder) {
  const int n = 2 * pes() + 1;
  std::vector<std::vector<int>> got(static_cast<std::size_t>(n));
  std::vector<long> sums;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Box>::create(weft::array_options{weft::array_map::round_robin()}, n);
    std::vector<weft::future<std::vector<int>>> fs;
    for (int i = 0; i < n; ++i) {
      for (int s = 0; s < 4; ++s) a[i].send<&Box::item>(s, item_text(s));  // before the await
      fs.push_back(weft::make_future<std::vector<int>>());
      a[i].send<&Box::collect>(9, fs.back());
      for (int s = 4; s < 9; ++s) a[i].send<&Box::item>(s, item_text(s));  // maybe after it
    }
    for (int i = 0; i < n; ++i) {
      auto v = co_await fs[std::size_t(i)];
      got[std::size_t(i)] = v;
    }
    // Now surely awaiting before any message comes, and one at a time.
    std::vector<weft::future<long>> ls;
    for (int i = 0; i < n; ++i) {
      ls.push_back(weft::make_future<long>());
      a[i].send<&Box::one_by_one>(20, ls.back());
    }
    auto q = quiescence();
    co_await q;  // every coroutine is suspended in next<>() now
    for (int i = 0; i < n; ++i)
      for (int s = 0; s < 20; ++s) a[i].send<&Box::item>(s, item_text(s));
    for (auto& f : ls) {
      long v = co_await f;
      sums.push_back(v);
    }
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(got[std::size_t(i)], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8})) << i;
  EXPECT_EQ(sums, std::vector<long>(std::size_t(n), 190L));
}

// Messages kept in a mailbox travel with a migrating element.
struct Postbox : weft::array_element<Postbox, int> {
  Postbox() = default;
  int moves = 0;
  void pup(weft::pupper& p) { p | moves; }
  void letter(int) {}  // awaited
  void move_to(int pe) {
    ++moves;
    migrate_to(pe);
  }
  weft::task<> read_all(int n, weft::future<std::vector<int>> out) {
    auto got = co_await next<&Postbox::letter>(std::size_t(n));
    std::vector<int> seqs;
    for (auto& t : got) seqs.push_back(std::get<0>(t));
    seqs.push_back(-weft::my_pe() - 1);  // where it ran, last
    out.set(seqs);
  }
};

TEST_P(Next, MailboxFollowsAMigratingElement) {
  const int n = 2 * pes();
  std::vector<std::vector<int>> got;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Postbox>::create(n);
    const int pes = weft::num_pes();
    for (int i = 0; i < n; ++i) {
      for (int s = 0; s < 10; ++s) a[i].send<&Postbox::letter>(s);  // kept in the mailbox
      a[i].send<&Postbox::move_to>((i + 1) % pes);
      for (int s = 10; s < 20; ++s) a[i].send<&Postbox::letter>(s);  // follow it
    }
    auto q = quiescence();
    co_await q;
    std::vector<weft::future<std::vector<int>>> fs;
    for (int i = 0; i < n; ++i) {
      fs.push_back(weft::make_future<std::vector<int>>());
      a[i].send<&Postbox::read_all>(20, fs.back());
    }
    for (auto& f : fs) {
      auto v = co_await f;
      got.push_back(v);
    }
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  ASSERT_EQ(int(got.size()), n);
  for (int i = 0; i < n; ++i) {
    std::vector<int> v = got[std::size_t(i)];
    ASSERT_EQ(v.size(), 21u) << i;
    EXPECT_EQ(-v.back() - 1, (i + 1) % pes()) << "element " << i << " did not move";
    v.pop_back();
    std::sort(v.begin(), v.end());  // order across a migration is not promised
    std::vector<int> want(20);
    for (int s = 0; s < 20; ++s) want[std::size_t(s)] = s;
    EXPECT_EQ(v, want) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Pes, Next, testing::Values(1, 2, 8), pes_name);

// ---- all_reduce: a 1-D Jacobi iteration -------------------------------------------------

constexpr double left_boundary = 1.0;
constexpr double right_boundary = 0.25;

struct jacobi_log {
  std::mutex mu;
  std::vector<double> residuals;  // element 0's view, per iteration
  std::map<int, std::vector<double>> residuals_of;
};
jacobi_log g_jac;

struct Jacobi : weft::array_element<Jacobi, int> {
  Jacobi() = default;
  double u = 0;
  // Messages of `ghost` are awaited: a neighbour one iteration ahead has its
  // message kept for the next await.
  void ghost(int, int, double) {}
  weft::task<> run(int iterations, weft::callback<std::vector<std::pair<int, double>>> done) {
    const int i = this_index(), n = array_size();
    std::vector<double> residuals;
    for (int it = 0; it < iterations; ++it) {
      if (i > 0) this_proxy()[i - 1].send<&Jacobi::ghost>(it, +1, u);
      if (i < n - 1) this_proxy()[i + 1].send<&Jacobi::ghost>(it, -1, u);
      double left = i == 0 ? left_boundary : 0, right = i == n - 1 ? right_boundary : 0;
      const std::size_t need = std::size_t(i > 0) + std::size_t(i < n - 1);
      auto got = co_await next<&Jacobi::ghost>(need);
      for (auto& g : got) {
        PE_CHECK(std::get<0>(g) == it, "a ghost of another iteration");
        (std::get<1>(g) < 0 ? left : right) = std::get<2>(g);
      }
      const double nu = 0.5 * (left + right);
      const double diff = std::fabs(nu - u);
      u = nu;
      const double worst = co_await all_reduce(diff, weft::op::max);
      residuals.push_back(worst);
      if (it % 16 == 15) {
        // A second all_reduce in the same iteration, of another type.
        const int count = co_await all_reduce(1, weft::op::sum);
        PE_CHECK(count == n, "all_reduce count");
      }
    }
    {
      std::lock_guard<std::mutex> lock(g_jac.mu);
      g_jac.residuals_of[i] = residuals;
    }
    contribute(u, weft::op::set, done);
  }
};

class AllReduce : public PesTest {};

TEST_P(AllReduce, JacobiLoopMatchesASerialRun) {
  {
    std::lock_guard<std::mutex> lock(g_jac.mu);
    g_jac.residuals_of.clear();
  }
  const int n = 4 * pes();
  const int iterations = int(scaled(200, 60));
  std::vector<std::pair<int, double>> final_values;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Jacobi>::create(n);
    auto f = weft::make_future<std::vector<std::pair<int, double>>>();
    a.broadcast<&Jacobi::run>(iterations, weft::callback<std::vector<std::pair<int, double>>>(f));
    final_values = co_await f;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  // The same arithmetic, serially.
  std::vector<double> u(std::size_t(n), 0.0), want_res;
  for (int it = 0; it < iterations; ++it) {
    std::vector<double> nu(u.size());
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      const double l = i == 0 ? left_boundary : u[std::size_t(i - 1)];
      const double r = i == n - 1 ? right_boundary : u[std::size_t(i + 1)];
      nu[std::size_t(i)] = 0.5 * (l + r);
      worst = std::max(worst, std::fabs(nu[std::size_t(i)] - u[std::size_t(i)]));
    }
    u = nu;
    want_res.push_back(worst);
  }
  std::sort(final_values.begin(), final_values.end());
  ASSERT_EQ(int(final_values.size()), n);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(final_values[std::size_t(i)].first, i);
    EXPECT_EQ(final_values[std::size_t(i)].second, u[std::size_t(i)]) << "element " << i;
  }
  ASSERT_EQ(int(g_jac.residuals_of.size()), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(g_jac.residuals_of[i], want_res) << "element " << i;
}

// all_reduce over a group, several rounds in a row.
struct Syncer : weft::group_element<Syncer> {
  weft::task<> sync(int rounds, weft::callback<std::vector<long>> done) {
    std::vector<long> seen;
    for (int r = 0; r < rounds; ++r) {
      const long s = co_await all_reduce(long(this_pe()) * 100 + r, weft::op::sum);
      seen.push_back(s);
    }
    // Every PE saw the same sequence (element-wise max of equal vectors).
    contribute(seen, weft::op::max, done);
  }
};

TEST_P(AllReduce, GroupRounds) {
  const int rounds = 25;
  std::vector<long> got;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto g = weft::group_proxy<Syncer>::create();
    auto f = weft::make_future<std::vector<long>>();
    g.broadcast<&Syncer::sync>(rounds, weft::callback<std::vector<long>>(f));
    got = co_await f;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  std::vector<long> want;
  for (int r = 0; r < rounds; ++r) want.push_back(100L * pes() * (pes() - 1) / 2 + long(pes()) * r);
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Pes, AllReduce, testing::Values(1, 2, 8), pes_name);

// ---- futures, sub-tasks and a coroutine main -------------------------------------------

struct Asker : weft::array_element<Asker, int> {
  Asker() = default;
  // Sets a future owned by another PE.
  void answer(weft::future<std::string> f, int x) {
    f.set("answer " + std::to_string(x) + " from element " + std::to_string(this_index()) +
          " on PE " + std::to_string(weft::my_pe()));
  }
  void poke(int) {}  // awaited by nested tasks

  weft::task<std::string> ask(int other, int x) {
    auto f = weft::make_future<std::string>();
    this_proxy()[other].send<&Asker::answer>(f, x);
    std::string s = co_await f;
    co_return s;
  }
  weft::task<int> square_after_poke(int x) {
    auto got = co_await next<&Asker::poke>();
    const int sq = x * x;
    co_return sq + std::get<0>(got[0]);
  }
  weft::task<int> deeper(int x) {
    int a = co_await square_after_poke(x);
    int total = co_await all_reduce(a, weft::op::sum);
    co_return total;
  }
  weft::task<int> fails(int x) {
    auto got = co_await next<&Asker::poke>();
    if (x >= 0) throw std::runtime_error("failure " + std::to_string(std::get<0>(got[0])));
    co_return 0;
  }
  weft::task<> go(weft::future<std::vector<std::string>> out) {
    const int n = array_size(), i = this_index();
    std::vector<std::string> r;
    std::string s = co_await ask((i + 1) % n, i);  // usually on another PE
    r.push_back(s);
    // A future set before it is awaited.
    auto early = weft::make_future<std::string>();
    early.set("early");
    std::string e = co_await early;
    r.push_back(e);
    // Sub-tasks with values, nested two deep, resumed by messages and a
    // reduction on behalf of this element.
    this_proxy()[i].send<&Asker::poke>(i);
    int total = co_await deeper(i);
    r.push_back(std::to_string(total));
    // An exception in a sub-task comes out at the co_await.
    this_proxy()[i].send<&Asker::poke>(7);
    try {
      (void)co_await fails(i);
      r.push_back("no exception");
    } catch (const std::runtime_error& ex) {
      r.push_back(ex.what());
    }
    out.set(r);
  }
};

class Futures : public PesTest {};

TEST_P(Futures, FuturesAcrossPesSubTasksAndACoroutineMain) {
  const int n = 2 * pes() + 1;
  std::vector<std::vector<std::string>> results;
  std::vector<std::string> main_answers;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Asker>::create(weft::array_options{weft::array_map::round_robin()}, n);
    // main awaits futures set by elements on every PE, out of order.
    std::vector<weft::future<std::string>> fs;
    for (int i = n - 1; i >= 0; --i) {
      fs.push_back(weft::make_future<std::string>());
      a[i].send<&Asker::answer>(fs.back(), 100 + i);
    }
    for (auto& f : fs) {
      std::string s = co_await f;
      main_answers.push_back(s);
    }
    std::vector<weft::future<std::vector<std::string>>> outs;
    for (int i = 0; i < n; ++i) {
      outs.push_back(weft::make_future<std::vector<std::string>>());
      a[i].send<&Asker::go>(outs.back());
    }
    for (auto& f : outs) {
      auto v = co_await f;
      results.push_back(v);
    }
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  ASSERT_EQ(int(main_answers.size()), n);
  for (int k = 0; k < n; ++k) {
    const int i = n - 1 - k;
    EXPECT_EQ(main_answers[std::size_t(k)], "answer " + std::to_string(100 + i) + " from element " +
                                                std::to_string(i) + " on PE " +
                                                std::to_string(i % pes()));
  }
  int total = 0;
  for (int i = 0; i < n; ++i) total += i * i + i;
  ASSERT_EQ(int(results.size()), n);
  for (int i = 0; i < n; ++i) {
    const int other = (i + 1) % n;
    std::vector<std::string> want{"answer " + std::to_string(i) + " from element " +
                                      std::to_string(other) + " on PE " +
                                      std::to_string(other % pes()),
                                  "early", std::to_string(total), "failure 7"};
    EXPECT_EQ(results[std::size_t(i)], want) << "element " << i;
  }
}

// A task of main's own, awaited by main.
weft::task<long> gather(std::vector<weft::future<long>> fs) {
  long s = 0;
  for (auto& f : fs) {
    long v = co_await f;
    s += v;
  }
  co_return s;
}

struct Setter : weft::group_element<Setter> {
  void set_it(weft::future<long> f, long v) { f.set(v * (this_pe() + 1)); }
};

TEST_P(Futures, MainAwaitsASubTaskOfFuturesSetOnEveryPe) {
  long total = -1;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto g = weft::group_proxy<Setter>::create();
    std::vector<weft::future<long>> fs;
    for (int pe = 0; pe < weft::num_pes(); ++pe) {
      fs.push_back(weft::make_future<long>());
      g[pe].send<&Setter::set_it>(fs.back(), 10L);
    }
    total = co_await gather(fs);
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  EXPECT_EQ(total, 10L * pes() * (pes() + 1) / 2);
}

// A nodegroup's coroutine entry methods: any PE of the node runs them,
// several at once, each resumed where it awaited.
struct Broker : weft::nodegroup_element<Broker> {
  std::atomic<int> started{0};
  weft::task<> ask_all(weft::group_proxy<Setter> g, long v, weft::future<long> out) {
    started.fetch_add(1, std::memory_order_relaxed);
    std::vector<weft::future<long>> fs;
    for (int pe = 0; pe < weft::num_pes(); ++pe) {
      fs.push_back(weft::make_future<long>());
      g[pe].send<&Setter::set_it>(fs.back(), v);
    }
    const int here = weft::my_pe();
    long sum = co_await gather(fs);
    PE_CHECK(weft::my_pe() == here, "a nodegroup coroutine resumes on the PE it awaited on");
    out.set(sum);
  }
  // Never resumed: its frame is freed when the node stops.
  weft::task<> wait_forever(weft::future<int> started_here) {
    auto never = weft::make_future<int>();
    started_here.set(1);
    (void)co_await never;
    PE_CHECK(false, "a future nobody sets was set");
  }
};

TEST_P(Futures, NodegroupCoroutinesRunOnAnyPeAndAwaitFutures) {
  const int calls = 3 * pes();
  std::vector<long> sums;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto g = weft::group_proxy<Setter>::create();
    auto b = weft::nodegroup_proxy<Broker>::create();
    std::vector<weft::future<long>> outs;
    for (int c = 0; c < calls; ++c) {
      outs.push_back(weft::make_future<long>());
      b[0].send<&Broker::ask_all>(g, long(c + 1), outs.back());
    }
    auto parked = weft::make_future<int>();
    b[0].send<&Broker::wait_forever>(parked);
    for (auto& f : outs) sums.push_back(co_await f);
    (void)co_await parked;
    PE_CHECK(b.local()->started.load() == calls, "every call started");
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  ASSERT_EQ(int(sums.size()), calls);
  for (int c = 0; c < calls; ++c)
    EXPECT_EQ(sums[std::size_t(c)], long(c + 1) * pes() * (pes() + 1) / 2) << "call " << c;
}

INSTANTIATE_TEST_SUITE_P(Pes, Futures, testing::Values(1, 2, 8), pes_name);

// ---- destroying an element with a suspended coroutine -----------------------------------

std::atomic<int> g_frames_alive{0};
std::atomic<int> g_frames_made{0};

struct frame_guard {
  frame_guard() {
    ++g_frames_alive;
    ++g_frames_made;
  }
  ~frame_guard() { --g_frames_alive; }
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;
};

struct Sleeper : weft::array_element<Sleeper, int> {
  Sleeper() = default;
  void wake(int) {}
  weft::task<> sleep() {
    frame_guard guard;
    (void)co_await next<&Sleeper::wake>();  // never comes
    record_error("a destroyed element's coroutine resumed");
  }
  weft::task<> sleep_on_reduction() {
    frame_guard guard;
    (void)co_await all_reduce(1, weft::op::sum);  // the others never contribute
    record_error("a destroyed element's coroutine resumed");
  }
};

class Lifetime : public PesTest {};

TEST_P(Lifetime, DestroyingAnElementDestroysItsSuspendedCoroutines) {
  g_frames_alive = 0;
  g_frames_made = 0;
  const int n = 2 * pes();
  int alive_before = -1, alive_after = -1;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Sleeper>::create(n);
    for (int i = 0; i < n; ++i) {
      if (i % 2 == 0)
        a[i].send<&Sleeper::sleep>();
      else if (i == 1)
        a[i].send<&Sleeper::sleep_on_reduction>();
    }
    auto q = quiescence();
    co_await q;
    alive_before = g_frames_alive.load();
    for (int i = 0; i < n; ++i)
      if (i % 2 == 0 || i == 1) a[i].destroy();
    auto q2 = quiescence();
    co_await q2;
    alive_after = g_frames_alive.load();
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  EXPECT_EQ(g_frames_made.load(), n / 2 + 1);
  EXPECT_EQ(alive_before, n / 2 + 1);
  EXPECT_EQ(alive_after, 0);
  EXPECT_EQ(g_frames_alive.load(), 0);
}

// A coroutine that has ended is no obstacle to migration: migrate_to in a
// coroutine's last step (after a resumption), or in one that never
// suspends, moves the element when that step returns.
struct Nomad : weft::array_element<Nomad, int> {
  Nomad() = default;
  std::vector<int> trail;
  void pup(weft::pupper& p) { p | trail; }
  void go_on(int) {}  // awaited
  weft::task<> walk(int to) {
    (void)co_await next<&Nomad::go_on>();
    trail.push_back(weft::my_pe());
    migrate_to(to);
  }
  weft::task<> hop(int to) {
    trail.push_back(weft::my_pe());
    migrate_to(to);
    co_return;
  }
  std::vector<int> where() {
    std::vector<int> t = trail;
    t.push_back(weft::my_pe());
    return t;
  }
};

TEST_P(Lifetime, MigrateFromACoroutineThatEnds) {
  const int n = 2 * pes();
  std::vector<std::vector<int>> trails;
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    const int pes = weft::num_pes();
    auto a = weft::array<Nomad>::create(weft::array_options{weft::array_map::round_robin()}, n);
    for (int i = 0; i < n; ++i) a[i].send<&Nomad::hop>((i + 1) % pes);
    auto q = quiescence();
    co_await q;
    for (int i = 0; i < n; ++i) a[i].send<&Nomad::walk>((i + 2) % pes);
    auto q2 = quiescence();
    co_await q2;  // suspended in next<>
    for (int i = 0; i < n; ++i) a[i].send<&Nomad::go_on>(0);
    auto q3 = quiescence();
    co_await q3;
    for (int i = 0; i < n; ++i) {
      auto f = a[i].call<&Nomad::where>();
      auto t = co_await f;
      trails.push_back(t);
    }
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  ASSERT_EQ(int(trails.size()), n);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(trails[std::size_t(i)],
              (std::vector<int>{i % pes(), (i + 1) % pes(), (i + 2) % pes()}))
        << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Pes, Lifetime, testing::Values(1, 2, 8), pes_name);

// ---- readonly globals --------------------------------------------------------------------

weft::readonly<int> ro_size;
weft::readonly<std::string> ro_name;
weft::readonly<std::vector<double>> ro_weights;

struct Reader : weft::group_element<Reader> {
  void read(weft::callback<std::vector<std::pair<int, std::string>>> cb) {
    std::string s = std::to_string(*ro_size) + "/" + *ro_name + "/" +
                    std::to_string(ro_weights->size()) + "/" +
                    std::to_string(ro_weights.get().empty() ? 0.0 : ro_weights.get().back());
    contribute(s, weft::op::set, cb);
  }
};

class Readonly : public PesTest {};

TEST_P(Readonly, SetInMainReadOnEveryPe) {
  // Two runs in one process, with different values: each run's main sets them.
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    std::vector<std::pair<int, std::string>> seen;
    int rc = run_pes(pes(), [&]() -> weft::task<> {
      ro_size = 40 + run;
      ro_name = "grid" + std::to_string(run);
      ro_weights = std::vector<double>{0.5, 1.5, 2.5 + run};
      auto g = weft::group_proxy<Reader>::create();
      auto f = weft::make_future<std::vector<std::pair<int, std::string>>>();
      g.broadcast<&Reader::read>(weft::callback<std::vector<std::pair<int, std::string>>>(f));
      seen = co_await f;
      weft::exit(0);
    });
    ASSERT_EQ(rc, 0);
    expect_no_pe_errors();
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(int(seen.size()), pes());
    const std::string want = std::to_string(40 + run) + "/grid" + std::to_string(run) + "/3/" +
                             std::to_string(2.5 + run);
    for (int pe = 0; pe < pes(); ++pe) {
      EXPECT_EQ(seen[std::size_t(pe)].first, pe);
      EXPECT_EQ(seen[std::size_t(pe)].second, want) << "PE " << pe;
    }
  }
}

TEST_P(Readonly, SetInAPlainMainFunction) {
  std::vector<std::pair<int, std::string>> seen;
  weft::runtime_config cfg = weft_test::make_config({threads_opt(pes())});
  static char prog[] = "test";
  static char* argv[] = {prog, nullptr};
  int rc = weft::run(cfg, 1, argv, [&](weft::args) {
    ro_size = 7;
    ro_name = "plain";
    ro_weights = std::vector<double>{};
    auto g = weft::group_proxy<Reader>::create();
    auto cb = weft::callback<std::vector<std::pair<int, std::string>>>::exit(0);
    g.broadcast<&Reader::read>(cb);
  });
  EXPECT_EQ(rc, 0);
  expect_no_pe_errors();
  EXPECT_EQ(*ro_size, 7);
  EXPECT_EQ(*ro_name, "plain");
}

INSTANTIATE_TEST_SUITE_P(Pes, Readonly, testing::Values(1, 2, 8), pes_name);

// ---- fatal errors ------------------------------------------------------------------------

class CoroutinesDeathTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

const testing::ExitedWithCode fatal_exit(3);

template <class F>
void run_dying(int pes, F body) {
  (void)run_pes(pes, std::move(body));
}

struct ReadonlySetter : weft::group_element<ReadonlySetter> {
  void set() { ro_size = 5; }
};

TEST_F(CoroutinesDeathTest, ReadonlySetAfterMain) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto q = quiescence();
                          (void)co_await q;  // main's setup is over
                          ro_size = 3;
                        }),
              fatal_exit,
              "weft::readonly<int> set after the main function's setup: readonlies are set on PE "
              "0 before the main function returns");
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto g = weft::group_proxy<ReadonlySetter>::create();
                          g[1].send<&ReadonlySetter::set>();
                          co_return;
                        }),
              fatal_exit, "weft::readonly<int> set on PE 1");
}

struct Stuck : weft::array_element<Stuck, int> {
  Stuck() = default;
  void pup(weft::pupper&) {}
  void wake(int) {}
  weft::task<> wait() { (void)co_await next<&Stuck::wake>(); }
  void move() { migrate_to((weft::my_pe() + 1) % weft::num_pes()); }
  weft::task<> throws(int x) {
    auto got = co_await next<&Stuck::wake>();
    if (x > 0) throw std::runtime_error("coroutine failure " + std::to_string(std::get<0>(got[0])));
  }
  weft::task<> await_elsewhere(weft::future<int> f) { (void)co_await f; }
};

TEST_F(CoroutinesDeathTest, TwoCoroutinesAwaitTheSameEntry) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto a = weft::array<Stuck>::create(4);
                          a[1].send<&Stuck::wait>();
                          a[1].send<&Stuck::wait>();
                          co_return;
                        }),
              fatal_exit,
              "two coroutines of element \\[1\\] of array .*Stuck#0\\.1 await next<.*Stuck::wake> "
              "at once");
}

TEST_F(CoroutinesDeathTest, MigrateWhileACoroutineIsSuspended) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto a = weft::array<Stuck>::create(4);
                          a[3].send<&Stuck::wait>();
                          a[3].send<&Stuck::move>();
                          co_return;
                        }),
              fatal_exit,
              "element \\[3\\] of array .*Stuck#0\\.1 cannot migrate while 1 of its coroutine "
              "entry methods are suspended");
}

TEST_F(CoroutinesDeathTest, ExceptionEscapingACoroutineEntry) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto a = weft::array<Stuck>::create(4);
                          a[2].send<&Stuck::throws>(1);
                          a[2].send<&Stuck::wake>(42);
                          co_return;
                        }),
              fatal_exit,
              ".*Stuck::throws of element \\[2\\] of array .*Stuck#0\\.1.* threw "
              "coroutine failure 42");
}

TEST_F(CoroutinesDeathTest, FutureAwaitedOnAnotherPe) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto a = weft::array<Stuck>::create(2);  // element 1 on PE 1
                          a[1].send<&Stuck::await_elsewhere>(weft::make_future<int>());
                          co_return;
                        }),
              fatal_exit, "a weft::future owned by PE 0 is awaited on PE 1");
}

TEST_F(CoroutinesDeathTest, FutureSetTwice) {
  EXPECT_EXIT(run_dying(2,
                        []() -> weft::task<> {
                          auto f = weft::make_future<int>();
                          f.set(1);
                          f.set(2);
                          int v = co_await f;
                          (void)v;
                        }),
              fatal_exit, "a weft::future of PE 0 was set twice");
}

}  // namespace
