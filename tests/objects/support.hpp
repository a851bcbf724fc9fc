// Helpers shared by the objects-layer tests: a node whose main function is a
// coroutine, quiescence as a future, and failure recording on PEs.
#pragma once
#include <gtest/gtest.h>
#include <string>
#include <vector>
#include "core/support.hpp"
#include "weft/weft.hpp"

// Records a failure seen on a PE (gtest assertions are made on the test
// thread only).
#define PE_CHECK(cond, what)                                                  \
  do {                                                                        \
    if (!(cond)) weft_test::record_error(std::string(what) + " [" #cond "]"); \
  } while (0)

namespace objects_test {

// The core suites' helpers every objects suite uses, so that one
// `using namespace objects_test;` brings them all.
using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;
using weft_test::scaled;
using weft_test::threads_opt;

// Runs a node of `pes` PEs whose main function is the coroutine `body`;
// returns weft::run's exit code.
template <class F>
int run_pes(int pes, F body, std::vector<std::string> extra = {}) {
  std::vector<std::string> opts{weft_test::threads_opt(pes)};
  opts.insert(opts.end(), extra.begin(), extra.end());
  weft::runtime_config cfg = weft_test::make_config(opts);
  static char prog[] = "test";
  static char* argv[] = {prog, nullptr};
  return weft::run(cfg, 1, argv, [&body](weft::args) -> weft::task<> { return body(); });
}

// A future set on PE 0 once nothing is in flight or running anywhere: the
// main coroutine awaits it before it looks at what the elements did.
inline weft::future<int> quiescence() {
  auto f = weft::make_future<int>();
  weft::on_quiescence([f] { f.set(1); });
  return f;
}

inline std::string pes_name(const testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "pes";
}

inline void expect_no_pe_errors() {
  EXPECT_EQ(weft_test::g_errors.load(), 0) << "first error on a PE: " << weft_test::first_error();
}

class PesTest : public testing::TestWithParam<int> {
 protected:
  void SetUp() override { weft_test::reset_errors(); }
  int pes() const { return GetParam(); }
  // Elements per array: not a multiple of the PEs, some PEs get more.
  int elements() const { return 2 * pes() + 3; }
};

}  // namespace objects_test
