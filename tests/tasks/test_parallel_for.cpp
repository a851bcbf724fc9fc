// weft::parallel_for: every scheme on 1, 2 and 8 PEs (8 PEs oversubscribe a
// 2-core machine), checked for loss and duplication per index; grain sizes,
// empty and one-iteration ranges, range bodies, reductions against serial
// results, exceptions, nested calls, calls from every PE at once, the
// asynchronous form, messages served during a loop, sleeping PEs woken by
// exposed tasks, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;
using weft_test::run_node;
using weft_test::scaled;
using weft_test::threads_opt;

constexpr weft::tasks_scheme all_schemes[] = {
    weft::tasks_scheme::split, weft::tasks_scheme::broadcast, weft::tasks_scheme::static_blocks,
    weft::tasks_scheme::adaptive_idle, weft::tasks_scheme::adaptive_history};

// Runs `fn` as the main function of a node of `pes` PEs and exits the node
// when it returns; the test fails on any error recorded on a PE.
void on_node(int pes, const std::function<void()>& fn, std::vector<std::string> extra = {}) {
  reset_errors();
  std::vector<std::string> opts{threads_opt(pes)};
  for (auto& e : extra) opts.push_back(e);
  const int code = run_node(opts, [&] {
    fn();
    weft::exit(0);
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(g_errors.load(), 0) << first_error();
}

// Per-index run counts: every index must run exactly once.
struct counts {
  explicit counts(std::size_t n) : c(new std::atomic<int>[n]), n(n) {
    for (std::size_t i = 0; i < n; ++i) c[i].store(0, std::memory_order_relaxed);
  }
  void hit(std::size_t i) { c[i].fetch_add(1, std::memory_order_relaxed); }
  // Describes the first index not run exactly once ("" when all were).
  std::string check() const {
    for (std::size_t i = 0; i < n; ++i) {
      const int k = c[i].load();
      if (k != 1) return "index " + std::to_string(i) + " ran " + std::to_string(k) + " times";
    }
    return "";
  }
  std::unique_ptr<std::atomic<int>[]> c;
  std::size_t n;
};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  return x;
}

class schemes : public ::testing::TestWithParam<std::tuple<weft::tasks_scheme, int>> {
 protected:
  weft::tasks_scheme scheme() const { return std::get<0>(GetParam()); }
  int pes() const { return std::get<1>(GetParam()); }
};

std::string scheme_name(const ::testing::TestParamInfo<std::tuple<weft::tasks_scheme, int>>& i) {
  std::string s = weft::to_string(std::get<0>(i.param));
  std::replace(s.begin(), s.end(), '-', '_');
  return s + "_" + std::to_string(std::get<1>(i.param)) + "pes";
}

TEST_P(schemes, every_index_once_for_each_grain) {
  const std::size_t n = std::size_t(scaled(100'003, 20'011));
  on_node(pes(), [&] {
    for (std::optional<std::size_t> grain :
         {std::optional<std::size_t>{}, std::optional<std::size_t>{1},
          std::optional<std::size_t>{7}, std::optional<std::size_t>{256},
          std::optional<std::size_t>{n + 5}}) {
      counts c(n);
      std::atomic<int> other_pes{0};
      const int me = weft::my_pe();
      weft::parallel_for(std::size_t(0), n,
                         [&](std::size_t i) {
                           c.hit(i);
                           if (weft::my_pe() != me)
                             other_pes.fetch_add(1, std::memory_order_relaxed);
                           if (weft::my_node() != 0 || weft::my_pe() < 0)
                             record_error("body off the node");
                         },
                         {.grain = grain, .scheme = scheme()});
      if (std::string e = c.check(); !e.empty())
        record_error("grain " + std::to_string(grain.value_or(0)) + ": " + e);
    }
  });
}

TEST_P(schemes, empty_one_and_negative_ranges) {
  on_node(pes(), [&] {
    std::atomic<int> calls{0};
    weft::parallel_for(5, 5, [&](int) { calls++; }, {.scheme = scheme()});
    if (calls != 0) record_error("empty range ran the body");
    int seen = -1;
    weft::parallel_for(41, 42, [&](int i) { seen = i, calls++; }, {.scheme = scheme()});
    if (calls != 1 || seen != 41) record_error("one-iteration range: wrong calls");
    // Negative indices, a signed/unsigned-free mix of int and long.
    counts c(200);
    weft::parallel_for(-100, 100L, [&](long i) { c.hit(std::size_t(i + 100)); },
                       {.grain = 3, .scheme = scheme()});
    if (std::string e = c.check(); !e.empty()) record_error("[-100, 100): " + e);
    // Empty reductions give the identity.
    if (weft::parallel_for(0, 0, weft::reduce::sum, [](int i) { return i; },
                           {.scheme = scheme()}) != 0)
      record_error("empty sum");
    if (weft::parallel_for(0, 0, weft::reduce::min, [](int i) { return i; },
                           {.scheme = scheme()}) != std::numeric_limits<int>::max())
      record_error("empty min");
  });
}

TEST_P(schemes, range_bodies_get_disjoint_chunks_of_at_most_grain) {
  const std::size_t n = 10'000;
  on_node(pes(), [&] {
    for (std::size_t grain : {1ul, 13ul, 1000ul}) {
      counts c(n);
      std::atomic<bool> too_big{false};
      weft::parallel_for(std::size_t(0), n,
                         [&](weft::index_range<std::size_t> r) {
                           if (r.size() == 0 || r.size() > grain) too_big = true;
                           for (std::size_t i : r) c.hit(i);
                         },
                         {.grain = grain, .scheme = scheme()});
      if (too_big) record_error("a chunk was empty or larger than the grain");
      if (std::string e = c.check(); !e.empty()) record_error(e);
    }
  });
}

TEST_P(schemes, reductions_equal_the_serial_results) {
  const std::uint64_t n = std::uint64_t(scaled(200'000, 30'000));
  std::uint64_t sum = 0, mn = ~0ull, mx = 0, xr = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t v = mix(i) >> 16;
    sum += v;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    xr ^= mix(i);
  }
  on_node(pes(), [&] {
    for (std::optional<std::size_t> grain :
         {std::optional<std::size_t>{}, std::optional<std::size_t>{1},
          std::optional<std::size_t>{999}}) {
      const weft::for_options o{.grain = grain, .scheme = scheme()};
      auto v = [](std::uint64_t i) { return mix(i) >> 16; };
      if (weft::parallel_for(std::uint64_t(0), n, weft::reduce::sum, v, o) != sum)
        record_error("sum");
      if (weft::parallel_for(std::uint64_t(0), n, weft::reduce::min, v, o) != mn)
        record_error("min");
      if (weft::parallel_for(std::uint64_t(0), n, weft::reduce::max, v, o) != mx)
        record_error("max");
      const auto x = weft::parallel_for(
          std::uint64_t(0), n,
          weft::reduce::custom(std::uint64_t(0),
                               [](std::uint64_t a, std::uint64_t b) { return a ^ b; }),
          [](std::uint64_t i) { return mix(i); }, o);
      if (x != xr) record_error("custom xor");
      // A range body returns its chunk's reduction.
      const auto s = weft::parallel_for(
          std::uint64_t(0), n, weft::reduce::sum,
          [&](weft::index_range<std::uint64_t> r) {
            std::uint64_t a = 0;
            for (auto i : r) a += v(i);
            return a;
          },
          o);
      if (s != sum) record_error("range sum");
    }
  });
}

TEST_P(schemes, first_exception_reaches_the_caller_and_nothing_runs_after) {
  const std::size_t n = 50'000;
  on_node(pes(), [&] {
    for (int round = 0; round < 5; ++round) {
      counts c(n);
      std::atomic<long> running{0}, after{0};
      std::atomic<bool> returned{false};
      const std::size_t bad = std::size_t(mix(std::uint64_t(round)) % n);
      try {
        weft::parallel_for(std::size_t(0), n,
                           [&](std::size_t i) {
                             running++;
                             if (returned.load()) after++;
                             c.hit(i);
                             running--;
                             if (i == bad || i == (bad + n / 2) % n)
                               throw std::runtime_error("bad index " + std::to_string(i));
                           },
                           {.grain = 16, .scheme = scheme()});
        record_error("no exception");
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()).rfind("bad index ", 0) != 0)
          record_error(std::string("wrong exception: ") + e.what());
      }
      returned = true;
      if (running.load() != 0) record_error("a body still ran when parallel_for threw");
      for (std::size_t i = 0; i < n; ++i)
        if (c.c[i].load() > 1) record_error("index ran twice");
      // Run another loop: a chunk of the failed one left behind would run now.
      weft::parallel_for(0, 10'000, [](int) {}, {.scheme = scheme()});
      if (after.load() != 0) record_error("a body of the failed loop ran after it returned");
    }
  });
}

TEST_P(schemes, nested_calls_run_inline_and_complete) {
  on_node(pes(), [&] {
    const int outer = 64, inner = 1000;
    std::vector<std::uint64_t> sums(outer, 0);
    std::atomic<int> nested_elsewhere{0};
    weft::parallel_for(0, outer,
                       [&](int i) {
                         const int pe = weft::my_pe();
                         sums[std::size_t(i)] = weft::parallel_for(
                             0, inner, weft::reduce::sum,
                             [&](int j) {
                               if (weft::my_pe() != pe) nested_elsewhere++;
                               return std::uint64_t(i) * 1'000'000 + std::uint64_t(j);
                             },
                             {.grain = 10, .scheme = scheme()});
                       },
                       {.grain = 1, .scheme = scheme()});
    for (int i = 0; i < outer; ++i) {
      const std::uint64_t want =
          std::uint64_t(i) * 1'000'000 * inner + std::uint64_t(inner) * (inner - 1) / 2;
      if (sums[std::size_t(i)] != want) record_error("nested sum " + std::to_string(i));
    }
    if (nested_elsewhere != 0) record_error("a nested loop ran on another PE");
  });
}

// Every PE calls parallel_for at once (from a handler), over loops of its
// own, many times: loss and duplication counted per index per loop.
struct many_state {
  weft::tasks_scheme scheme;
  int rounds;
  std::size_t n;
  std::atomic<int> finished{0};
  int pes;
};
many_state* g_many = nullptr;

void on_many(weft::message_ptr) {
  many_state& s = *g_many;
  for (int r = 0; r < s.rounds; ++r) {
    counts c(s.n);
    const std::uint64_t got =
        weft::parallel_for(std::size_t(0), s.n, weft::reduce::sum,
                           [&](std::size_t i) {
                             c.hit(i);
                             return std::uint64_t(i);
                           },
                           {.grain = std::size_t(1 + r % 50), .scheme = s.scheme});
    if (std::string e = c.check(); !e.empty())
      record_error("PE " + std::to_string(weft::my_pe()) + ": " + e);
    if (got != std::uint64_t(s.n) * (s.n - 1) / 2)
      record_error("sum from PE " + std::to_string(weft::my_pe()));
  }
  if (s.finished.fetch_add(1) + 1 == s.pes) weft::exit(0);
}
const weft::handler_id h_many = weft::register_handler("test.tasks.many", on_many);

TEST_P(schemes, every_pe_at_once_stress) {
  many_state s{scheme(), int(scaled(200, 30)), 3000, {}, pes()};
  g_many = &s;
  reset_errors();
  const int code =
      run_node({threads_opt(pes())}, [] { weft::broadcast(weft::make_message(h_many, 0)); });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(s.finished.load(), pes());
  EXPECT_EQ(g_errors.load(), 0) << first_error();
}

TEST_P(schemes, async_loops_call_back_on_the_caller) {
  reset_errors();
  const std::size_t n = 20'000;
  auto c = std::make_shared<counts>(n);
  std::atomic<int> callbacks{0};
  const int code = run_node({threads_opt(pes())}, [&, c] {
    const int me = weft::my_pe();
    weft::parallel_for_async(
        std::size_t(0), n, [c](std::size_t i) { c->hit(i); },
        [&, c, me] {
          if (weft::my_pe() != me) record_error("callback on another PE");
          if (std::string e = c->check(); !e.empty()) record_error("async: " + e);
          callbacks++;
          weft::parallel_for_async(
              0, 1000, weft::reduce::max, [](int i) { return (i * 7919) % 1000; },
              [&, me](int m) {
                if (weft::my_pe() != me) record_error("reduction callback on another PE");
                if (m != 999) record_error("async max " + std::to_string(m));
                callbacks++;
                // An empty asynchronous loop still calls back, later.
                weft::parallel_for_async(
                    0, 0, [](int) {},
                    [&] {
                      callbacks++;
                      weft::exit_at_quiescence(0);
                    },
                    {.scheme = scheme()});
              },
              {.grain = 10, .scheme = scheme()});
        },
        {.grain = 64, .scheme = scheme()});
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(callbacks.load(), 3);
  EXPECT_EQ(g_errors.load(), 0) << first_error();
}

INSTANTIATE_TEST_SUITE_P(tasks, schemes,
                         ::testing::Combine(::testing::ValuesIn(all_schemes),
                                            ::testing::Values(1, 2, 8)),
                         scheme_name);

// ---- scheduler integration ---------------------------------------------------------

// PEs that went to sleep (no spinning, no yielding) must be woken when a
// loop exposes work: the first chunk waits until another PE ran a piece of
// the loop. A lost wake-up leaves it waiting until the bound (an error).
class wakeup : public ::testing::TestWithParam<weft::tasks_scheme> {};

TEST_P(wakeup, sleeping_pes_are_woken_by_exposed_work) {
  on_node(
      4,
      [&] {
        for (int round = 0; round < 10; ++round) {
          // The other PEs are idle (adaptive-idle decides on this count) and
          // asleep in the kernel (with these options they sleep as soon as
          // they are idle): only a wake-up gets them to the loop's tasks.
          const auto idle_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          auto others_asleep = [] {
            if (weft::detail::idle_pes() < 3) return false;
            for (int pe = 1; pe < 4; ++pe)
              if (!weft::detail::pe_blocked(pe)) return false;
            return true;
          };
          while (!others_asleep() && std::chrono::steady_clock::now() < idle_by)
            std::this_thread::yield();
          if (!others_asleep()) {
            record_error("round " + std::to_string(round) + ": the other PEs did not go to sleep");
            return;
          }
          const int me = weft::my_pe();
          std::atomic<bool> elsewhere{false};
          weft::parallel_for(0, 64,
                             [&](int i) {
                               if (weft::my_pe() != me) elsewhere = true;
                               if (i != 0) return;
                               const auto until =
                                   std::chrono::steady_clock::now() + std::chrono::seconds(60);
                               while (!elsewhere.load() && std::chrono::steady_clock::now() < until)
                                 std::this_thread::yield();
                               if (!elsewhere.load())
                                 record_error("no other PE ran a chunk: a wake-up was lost");
                             },
                             {.grain = 1, .scheme = GetParam()});
        }
      },
      {"--weft:idle-spin-us=0", "--weft:idle-yield-us=0"});
}

INSTANTIATE_TEST_SUITE_P(tasks, wakeup, ::testing::ValuesIn(all_schemes), [](const auto& i) {
  std::string s = weft::to_string(i.param);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
});

// Past 64 PEs the marks of visible deques and of sleepers take a word per
// 64 PEs. A loop called on PE 129 of 130, every other PE asleep: its
// exposed chunks are in the third word, and only a PE woken through the
// sleeper mask and finding them through the visible marks can run one.
struct last_word_state {
  weft::tasks_scheme scheme;
  std::atomic<bool> elsewhere{false};
};
last_word_state* g_last_word = nullptr;

void on_last_word_loop(weft::message_ptr) {
  last_word_state& s = *g_last_word;
  const int me = weft::my_pe();
  const int pes = weft::num_pes();
  const auto idle_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto others_asleep = [&] {
    for (int pe = 0; pe < pes; ++pe)
      if (pe != me && !weft::detail::pe_blocked(pe)) return false;
    return true;
  };
  while (!others_asleep() && std::chrono::steady_clock::now() < idle_by) std::this_thread::yield();
  if (!others_asleep()) {
    record_error("the other PEs did not go to sleep");
  } else {
    weft::parallel_for(0, 64,
                       [&](int i) {
                         if (weft::my_pe() != me) s.elsewhere = true;
                         if (i != 0) return;
                         const auto until =
                             std::chrono::steady_clock::now() + std::chrono::seconds(60);
                         while (!s.elsewhere.load() && std::chrono::steady_clock::now() < until)
                           std::this_thread::yield();
                         if (!s.elsewhere.load())
                           record_error("no other PE ran a chunk of PE " + std::to_string(me));
                       },
                       {.grain = 1, .scheme = s.scheme});
  }
  weft::exit(0);
}
const weft::handler_id h_last_word =
    weft::register_handler("test.tasks.last_word", on_last_word_loop);

TEST_P(wakeup, a_caller_in_the_last_mask_word_is_helped) {
  constexpr int pes = 130;
  last_word_state s{GetParam()};
  g_last_word = &s;
  reset_errors();
  const int code = run_node({threads_opt(pes), "--weft:idle-spin-us=0", "--weft:idle-yield-us=0"},
                            [] { weft::send(pes - 1, weft::make_message(h_last_word, 0)); });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(g_errors.load(), 0) << first_error();
  EXPECT_TRUE(s.elsewhere.load());
}

// A PE in a synchronous loop keeps handling its messages: PE 1 runs a chunk
// that waits for a message PE 0 handles; PE 0 only gets to it by serving its
// queue while it waits for the loop. Every round must get there: PE 0 runs
// iteration 0 (split keeps the lower half) and holds it until PE 1 has
// taken iteration 1, so PE 0 cannot run both.
std::atomic<bool> g_served{false};
void on_serve(weft::message_ptr) {
  g_served = true;
}
const weft::handler_id h_serve = weft::register_handler("test.tasks.serve", on_serve);

TEST(tasks, caller_serves_its_messages_while_waiting) {
  int checked = 0;
  on_node(2, [&] {
    for (int round = 0; round < 5; ++round) {
      g_served = false;
      std::atomic<bool> started_elsewhere{false};
      weft::parallel_for(
          0, 2,
          [&](int i) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            if (weft::my_pe() == 0) {
              if (i != 0) {
                record_error("PE 0 ran iteration " + std::to_string(i) + ", not 0");
                return;
              }
              // Keep PE 0 busy until PE 1 took the other iteration.
              while (!started_elsewhere.load() && std::chrono::steady_clock::now() < until)
                std::this_thread::yield();
              if (!started_elsewhere.load()) record_error("PE 1 never took iteration 1");
              return;
            }
            started_elsewhere = true;
            weft::send(0, weft::make_message(h_serve, 0));
            while (!g_served.load() && std::chrono::steady_clock::now() < until)
              std::this_thread::yield();
            if (!g_served.load()) record_error("PE 0 did not handle its message during the loop");
          },
          {.grain = 1, .scheme = weft::tasks_scheme::split});
      if (!started_elsewhere) record_error("round " + std::to_string(round) + ": PE 0 ran both");
      if (started_elsewhere && !g_served) record_error("loop returned before the message ran");
      checked += started_elsewhere && g_served;
    }
  });
  EXPECT_EQ(checked, 5) << "rounds where PE 0 served PE 1's message during the loop";
}

// ---- bad input -----------------------------------------------------------------------

TEST(tasks, bad_input_is_a_clear_error) {
  on_node(2, [] {
    try {
      weft::parallel_for(5, 3, [](int) {});
      record_error("first > last accepted");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("first (5) > last (3)") == std::string::npos)
        record_error(std::string("first > last: ") + e.what());
    }
    try {
      weft::parallel_for(0, 10, [](int) {}, {.grain = 0});
      record_error("grain 0 accepted");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("grain 0") == std::string::npos)
        record_error(std::string("grain 0: ") + e.what());
    }
    try {
      weft::parallel_for(0, 10, [](int) {}, {.scheme = weft::tasks_scheme(77)});
      record_error("scheme 77 accepted");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("unknown scheme value 77") == std::string::npos)
        record_error(std::string("scheme 77: ") + e.what());
    }
  });
  // Off a PE (this thread runs no node).
  EXPECT_THROW(weft::parallel_for(0, 10, [](int) {}), std::logic_error);
}

// The option is read, and a loop that names no scheme runs with it: with
// static, PE 1 runs exactly its block [500, 1000) and PE 0 the rest. PE 0
// holds its first iteration until PE 1 has run one (else PE 0 may claim
// PE 1's block too); split (the default) would hand PE 1 upper halves of
// 3-iteration chunks ([501, 1000) first), broadcast chunks of 3 in any order.
TEST(tasks, scheme_option_is_validated_and_read) {
  EXPECT_EXIT(weft_test::make_config({"--weft:tasks-scheme=fastest"}), ::testing::ExitedWithCode(2),
              "tasks-scheme.*split\\|broadcast\\|static\\|adaptive-idle\\|adaptive-history");
  std::string seen;
  on_node(2,
          [&] {
            seen = weft::config().tasks_scheme;
            constexpr int n = 1000;
            counts c(n);
            std::vector<std::atomic<int>> ran_on(n);
            std::atomic<bool> pe1_ran{false};
            weft::parallel_for(0, n,
                               [&](int i) {
                                 c.hit(std::size_t(i));
                                 ran_on[std::size_t(i)].store(weft::my_pe());
                                 if (weft::my_pe() != 0) pe1_ran = true;
                                 if (i != 0 || weft::my_pe() != 0) return;
                                 const auto until =
                                     std::chrono::steady_clock::now() + std::chrono::seconds(60);
                                 while (!pe1_ran.load() && std::chrono::steady_clock::now() < until)
                                   std::this_thread::yield();
                                 if (!pe1_ran.load()) record_error("PE 1 ran no iteration");
                               },
                               {.grain = 3});
            if (std::string e = c.check(); !e.empty()) record_error(e);
            for (int i = 0; i < n; ++i) {
              const int want = i < n / 2 ? 0 : 1;
              if (ran_on[std::size_t(i)].load() != want) {
                record_error("index " + std::to_string(i) + " ran on PE " +
                             std::to_string(ran_on[std::size_t(i)].load()) +
                             ", its static block's is " + std::to_string(want));
                break;
              }
            }
          },
          {"--weft:tasks-scheme=static"});
  EXPECT_EQ(seen, "static");
}

}  // namespace
