// omp-test tls_cxx: C++ thread-locals per OpenMP thread.
//
// thread_local objects with constructors and destructors (dynamic
// initialisation on each thread's first use), and the C++ runtime's own
// per-thread state: the exception being handled. For teams of 1, 2, 4, 8 and
// 16 threads, each thread
//  - appends to a thread_local std::vector and keeps a thread_local object
//    stamped with its id, across barriers and taskyields, and finds them
//    untouched;
//  - throws an exception of its own, and inside the handler meets barriers
//    (where a runtime may switch threads) before it looks at
//    std::current_exception(): still its own.
// --rounds=N sets the regions per team size (default 40); OMPTEST_LOAD=k adds
// k spinning processes (load.h).
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "load.h"

namespace {

std::atomic<int> g_constructed{0}, g_destroyed{0};

struct stamped {
  long owner = -1;
  std::vector<long> history;
  stamped() { g_constructed.fetch_add(1, std::memory_order_relaxed); }
  ~stamped() { g_destroyed.fetch_add(1, std::memory_order_relaxed); }
};

thread_local stamped tl_stamp;
thread_local std::vector<int> tl_values;

constexpr int team_sizes[] = {1, 2, 4, 8, 16};

void test_objects(int n, int rounds) {
  std::atomic<int> bad{0};
  for (int r = 0; r < rounds; ++r) {
#pragma omp parallel num_threads(n)
    {
      probe_here();
      const int id = omp_get_thread_num();
      const long mark = long(r) * 1000 + id;
      tl_values.assign(64, id + r);
      tl_stamp.owner = mark;
      tl_stamp.history.push_back(mark);
#pragma omp barrier
#pragma omp taskyield
#pragma omp barrier
      bool ok = tl_stamp.owner == mark && !tl_stamp.history.empty() &&
                tl_stamp.history.back() == mark && tl_values.size() == 64;
      for (int v : tl_values) ok = ok && v == id + r;
#pragma omp barrier
      if (!ok) bad.fetch_add(1, std::memory_order_relaxed);
      tl_stamp.history.clear();
    }
  }
  CHECK_EQ(bad.load(), 0,
           "thread_local objects, teams of %d: threads whose objects another thread changed", n);
}

void test_exceptions(int n, int rounds) {
  std::atomic<int> bad{0}, handled{0};
  for (int r = 0; r < rounds; ++r) {
#pragma omp parallel num_threads(n)
    {
      const int id = omp_get_thread_num();
      const std::string mine = "thread " + std::to_string(id) + " round " + std::to_string(r);
      try {
        throw std::runtime_error(mine);
      } catch (const std::runtime_error& e) {
        // Inside the handler, the exception is this thread's "current" one.
#pragma omp barrier
#pragma omp taskyield
#pragma omp barrier
        bool ok = mine == e.what();
        try {
          std::rethrow_exception(std::current_exception());
        } catch (const std::runtime_error& again) {
          ok = ok && mine == again.what();
        } catch (...) {
          ok = false;
        }
        if (!ok) bad.fetch_add(1, std::memory_order_relaxed);
        handled.fetch_add(1, std::memory_order_relaxed);
      }
#pragma omp barrier
    }
  }
  CHECK_EQ(bad.load(), 0,
           "exceptions, teams of %d: handlers that saw another thread's exception", n);
  if (!omp_get_dynamic()) CHECK_EQ(handled.load(), n * rounds, "exceptions, teams of %d: handlers run", n);
}

}  // namespace

int main(int argc, char** argv) {
  test_begin("tls_cxx");
  int rounds = 40;
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], "--rounds=", 9) == 0 && std::atoi(argv[a] + 9) > 0) {
      rounds = std::atoi(argv[a] + 9);
    } else {
      std::printf("omp-test tls_cxx: unknown argument '%s' (accepted: --rounds=N, N > 0)\n",
                  argv[a]);
      return 2;
    }
  }
  load_begin();
  for (int n : team_sizes) {
    test_objects(n, rounds);
    test_exceptions(n, rounds);
  }
  load_end();
  check_true(g_constructed.load() >= 1, "thread_local objects constructed (%d)",
             g_constructed.load());
  return test_end();
}
