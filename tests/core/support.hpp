// Helpers shared by the tests of tests/core: building a configuration from
// option strings, and scaling stress sizes down under the sanitizers.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>
#include "test_scale.hpp"
#include "weft/weft.hpp"

namespace weft_test {

// The options every test node gets: no startup line, and a hang turns into an
// abort with a per-PE dump (exit 124) long before CTest's own timeout.
inline std::vector<std::string> base_options() {
  return {"--weft:quiet", "--weft:timeout=120"};
}

// A configuration built by weft::parse_options from a fake command line made
// of base_options() followed by `opts`.
inline weft::runtime_config make_config(const std::vector<std::string>& opts,
                                        bool with_base = true) {
  std::vector<std::string> words{"test"};
  if (with_base)
    for (auto& o : base_options()) words.push_back(o);
  for (auto& o : opts) words.push_back(o);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int argc = int(words.size());
  return weft::parse_options(argc, argv.data());
}

inline std::string threads_opt(int n) {
  return "--weft:threads=" + std::to_string(n);
}

// Runs a node with `opts` (after base_options()) and returns weft::run's code.
inline int run_node(const std::vector<std::string>& opts, std::function<void()> main_fn) {
  weft::runtime_config cfg = make_config(opts);
  static char prog[] = "test";
  static char* argv[] = {prog, nullptr};
  return weft::run(cfg, 1, argv, [fn = std::move(main_fn)](weft::args) { fn(); });
}

// The first failure seen on a PE, reported by the test body on the main
// thread (gtest assertions are not made from PEs).
inline std::atomic<long> g_errors{0};
inline std::mutex g_error_mutex;
inline std::string g_first_error;  // guarded by g_error_mutex

inline void record_error(const std::string& what) {
  if (g_errors.fetch_add(1) == 0) {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    g_first_error = what;
  }
}
inline void reset_errors() {
  g_errors = 0;
  std::lock_guard<std::mutex> lock(g_error_mutex);
  g_first_error.clear();
}
inline std::string first_error() {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  return g_first_error;
}

// Test-name suffix for a (PE count, queue kind) parameter: "8pes_spsc_pairs".
template <class Info>
std::string pes_queue_name(const Info& info) {
  const std::string q = std::get<1>(info.param) == std::string("mpsc") ? "mpsc" : "spsc_pairs";
  return std::to_string(std::get<0>(info.param)) + "pes_" + q;
}

inline std::uint64_t now_ns() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
}

}  // namespace weft_test
