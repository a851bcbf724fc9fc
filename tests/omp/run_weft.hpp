// Runs `body` as the main function of a weft node of `pes` PEs (quiet, a
// 120 s watchdog, one more option if given): the gtests of OpenMP inside
// weft programs (test_in_weft.cpp, task_counts.cpp).
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include "weft/weft.hpp"

namespace weft_test {

inline int run_weft(int pes, std::function<void()> body, const std::string& option = "") {
  std::vector<std::string> words = {"test", "--weft:quiet", "--weft:timeout=120",
                                    "--weft:threads=" + std::to_string(pes)};
  if (!option.empty()) words.push_back(option);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int argc = int(words.size());
  char** av = argv.data();
  return weft::run(argc, av, [fn = std::move(body)](weft::args) { fn(); });
}

}  // namespace weft_test
