// A program for two things of the trace (issue 30): sampled tracing
// (--weft:trace-sample=N), and the work a coroutine entry method and the
// main coroutine do after a co_await, which the trace must name after them.
// Run by tests/trace/sampled_run.py, which reads its trace back.
//
//   sample_program PINGS SPIN_US
//
// Each of `elements` Workers sends PINGS pings (a plain entry method) to the
// next one, in its coroutine entry method run(); run then awaits an
// all_reduce, spins SPIN_US microseconds, awaits the token its own ping
// entry sends itself once all its pings have come, spins again, and
// contributes what it received. The main coroutine awaits the sum, spins
// SPIN_US itself and checks it: exit 0 when every ping arrived, 1 if not.
// The spins read the clock, so a resumed part lasts at least SPIN_US
// whatever the machine's load.
#include <cstdio>
#include <cstdlib>
#include <weft/base/timer.hpp>
#include <weft/weft.hpp>

namespace {

constexpr int elements = 8;
int g_pings = 100;  // set before the array exists; one process
long g_spin_us = 2000;

void spin(long us) {
  const std::uint64_t until = weft::base::wall_ns() + std::uint64_t(us) * 1000;
  while (weft::base::wall_ns() < until) {
  }
}

struct Worker : weft::array_element<Worker, int> {
  Worker() = default;

  void ping(int) {
    if (++received == g_pings) this_proxy()[this_index()].send<&Worker::token>();
  }
  void token() {}

  weft::task<> run(weft::callback<double> done) {
    auto next_one = this_proxy()[(this_index() + 1) % elements];
    for (int p = 0; p < g_pings; ++p) next_one.send<&Worker::ping>(p);
    (void)co_await all_reduce(1.0, weft::op::sum);
    spin(g_spin_us);
    (void)co_await next<&Worker::token>();
    spin(g_spin_us);
    contribute(double(received), weft::op::sum, done);
  }

  int received = 0;
};

}  // namespace

int main(int argc, char** argv) {
  return weft::run(argc, argv, [](weft::args a) -> weft::task<> {
    if (a.argc != 3 || std::atoi(a.argv[1]) < 1 || std::atol(a.argv[2]) < 0) {
      std::fprintf(stderr, "usage: sample_program PINGS SPIN_US (PINGS >= 1, SPIN_US >= 0)\n");
      weft::exit(2);
      co_return;
    }
    g_pings = std::atoi(a.argv[1]);
    g_spin_us = std::atol(a.argv[2]);
    auto workers = weft::array<Worker>::create(elements);
    auto f = weft::make_future<double>();
    workers.broadcast<&Worker::run>(weft::callback<double>(f));
    const double got = co_await f;
    spin(g_spin_us);
    const double want = double(elements) * g_pings;
    std::printf("sample_program: pings=%.0f want=%.0f\n", got, want);
    weft::exit(got == want ? 0 : 1);
  });
}
