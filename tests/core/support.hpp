// Helpers shared by the tests of tests/core: building a configuration from
// option strings, and scaling stress sizes down under the sanitizers.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "weft/weft.hpp"

namespace weft_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif

// Stress sizes: `full` in normal builds, `reduced` under ASan/TSan.
constexpr long scaled(long full, long reduced) {
  return sanitized ? reduced : full;
}

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

inline std::uint64_t now_ns() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
}

}  // namespace weft_test
