// A program whose trace has every kind of event the runtime records: entry
// methods of a chare array with trailing imbalance, parallel_for loops that
// idle PEs steal from, reductions every step, a migration, user marks and
// regions, idle periods. Run by tests/trace/CMakeLists.txt with
// --weft:trace=DIR; tools/weft-trace then reads the directory back.
//
//   trace_program STEPS [abort|hang|marks|ARGS...]
//
// Prints "trace_program: steps=N sum=S" (S checked against the serial value),
// or with `abort` ends the job with a fatal error after half the steps (a
// message to a handler never registered), so the abort path is traced too.
// With `hang`, after the steps one element records `hang_marks` marks (more
// than a 1 MiB buffer holds, so its PE has flushed), prints
// "trace_program: hanging" and spins forever: a run for --weft:timeout or a
// signal to end (tests/trace/traced_run.py). With `marks`, after the steps
// every element records `hang_marks` marks as fast as it can (several 1 MiB
// buffers per PE: a writer thread made slow falls behind) and the run ends
// as usual, printing "trace_program: marks=N". Other arguments are ignored (a
// test passes bytes that are not UTF-8 there).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <weft/trace/trace.hpp>
#include <weft/weft.hpp>

namespace {

constexpr int elements = 8;
int g_steps = 20;
bool g_abort = false;
bool g_hang = false;
bool g_marks = false;
constexpr int hang_marks = 100000;

// About `units` x 100 us of arithmetic (the run lasts long enough that the
// few milliseconds its threads take to start are under 1% of it); the
// result keeps it from being elided.
double work(int units, int seed) {
  double x = seed;
  for (int u = 0; u < units; ++u)
    for (int k = 0; k < 25000; ++k) x = x * 0.999999 + std::sqrt(double(k + u + 1));
  return x;
}

struct Worker : weft::array_element<Worker, int> {
  Worker() = default;
  void pup(weft::pupper&) {}

  void step(int s, weft::callback<double> done) {
    static const weft::trace::event_name compute{"compute"};
    weft::trace::region r{compute};
    // The last two elements have three times the work: the others finish
    // early and their PEs steal from the loop.
    const int units = this_index() >= elements - 2 ? 48 : 16;
    const double local = weft::parallel_for(
        0, units, weft::reduce::sum, [&](int u) { return std::isfinite(work(1, u)) ? 1.0 : 0.0; });
    if (this_index() == 0 && s == g_steps / 2) {
      weft::trace::mark("half way");
      // One element moves once, so the trace has a migration.
      migrate_to((weft::my_pe() + 1) % weft::num_pes());
    }
    contribute(local, weft::op::sum, done);
  }

  void marks(weft::callback<double> done) {
    static const weft::trace::event_name burst{"burst"};
    for (int i = 0; i < hang_marks; ++i) weft::trace::mark(burst);
    contribute(double(hang_marks), weft::op::sum, done);
  }

  // A handler that never returns, as in a deadlocked program.
  void hang() {
    static const weft::trace::event_name before{"before the hang"};
    for (int i = 0; i < hang_marks; ++i) weft::trace::mark(before);
    std::printf("trace_program: hanging on PE %d\n", weft::my_pe());
    std::fflush(stdout);
    volatile bool forever = true;
    while (forever) {
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  return weft::run(argc, argv, [](weft::args a) -> weft::task<> {
    if (a.argc < 2) {
      std::fprintf(stderr, "usage: trace_program STEPS [abort]\n");
      weft::exit(2);
      co_return;
    }
    g_steps = std::atoi(a.argv[1]);
    g_abort = a.argc > 2 && std::strcmp(a.argv[2], "abort") == 0;
    g_hang = a.argc > 2 && std::strcmp(a.argv[2], "hang") == 0;
    g_marks = a.argc > 2 && std::strcmp(a.argv[2], "marks") == 0;
    auto workers = weft::array<Worker>::create(elements);
    double sum = 0;
    for (int s = 0; s < g_steps; ++s) {
      if (g_abort && s == g_steps / 2) {
        std::fflush(stdout);
        weft::send(weft::num_pes() - 1, weft::make_message(weft::handler_id(123456), 0));
      }
      auto f = weft::make_future<double>();
      workers.broadcast<&Worker::step>(s, weft::callback<double>(f));
      sum += co_await f;
    }
    if (g_hang) {
      workers[0].send<&Worker::hang>();
      co_return;  // no exit: the run ends by --weft:timeout or a signal
    }
    if (g_marks) {
      auto f = weft::make_future<double>();
      workers.broadcast<&Worker::marks>(weft::callback<double>(f));
      std::printf("trace_program: marks=%.0f\n", co_await f);
    }
    // Every element adds 1.0 per iteration of its loop.
    const double want = double(g_steps) * (16.0 * (elements - 2) + 48.0 * 2);
    std::printf("trace_program: steps=%d sum=%.0f want=%.0f\n", g_steps, sum, want);
    weft::exit(std::fabs(sum - want) < 1e-6 * want ? 0 : 1);
  });
}
