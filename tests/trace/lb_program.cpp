// A program whose array balances: the traced run behind trace.lb.* (lb_run.py).
//
// Usage: trace_lb_program [ELEMENTS [STEPS]] --weft:lb=NAME ...
// Elements start in blocks and elements 0..3 are heavy (load_estimate 3,
// the others 1; each also spins for as long as its estimate says, in tens
// of microseconds, so that the trace's busy time shows the imbalance too):
// a balancer moves elements at every step. Each element calls at_sync
// after each of its STEPS iterations; after the last one main asks for
// one step without at_sync (weft::lb::balance()).
#include <chrono>
#include <cstdlib>
#include <weft/weft.hpp>

namespace {

int g_steps = 3;

void spin_us(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

struct Worker : weft::array_element<Worker, int> {
  Worker() = default;
  int done_ = 0;
  void pup(weft::pupper& p) { p | done_; }
  double weight() const { return this_index() < 4 ? 3.0 : 1.0; }
  double load_estimate() const override { return weight(); }
  void go() {
    spin_us(int(20 * weight()));
    at_sync();
  }
  void resume_from_sync() override {
    if (++done_ < g_steps) this_proxy()[this_index()].send<&Worker::go>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int pos[2] = {16, 3};
  for (int i = 1, k = 0; i < argc && k < 2 && argv[i][0] != '-'; ++i) pos[k++] = std::atoi(argv[i]);
  g_steps = pos[1];
  return weft::run(argc, argv, [n = pos[0]](weft::args) {
    auto arr = weft::array<Worker>::create(n);
    arr.broadcast<&Worker::go>();
    // Once the at_sync steps are over: one step on demand, then the end.
    weft::on_quiescence([] {
      weft::lb::balance();
      weft::on_quiescence([] { weft::exit(0); });
    });
  });
}
