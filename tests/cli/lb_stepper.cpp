// A program whose array balances a few steps: the run behind the CLI tests
// of --weft:lb-dump and weft-lbsim --replay (lbsim_replay.py).
//
// Usage: cli_lb_stepper [ELEMENTS [STEPS]] --weft:lb=NAME [--weft:lb-dump=FILE] ...
// Elements 0..3 are heavy (load_estimate 3, the others 1) and all start in
// blocks, so a balancer has work at every step.
#include <cstdlib>
#include <weft/weft.hpp>

namespace {

int g_steps = 3;

struct Stepper : weft::array_element<Stepper, int> {
  Stepper() = default;
  int done_ = 0;
  void pup(weft::pupper& p) { p | done_; }
  double load_estimate() const override { return this_index() < 4 ? 3.0 : 1.0; }
  void go() { at_sync(); }
  // A new step by message: resume_from_sync runs inside the step's end.
  void resume_from_sync() override {
    if (++done_ < g_steps) this_proxy()[this_index()].send<&Stepper::go>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  return weft::run(argc, argv, [](weft::args a) {
    const int n = a.argc > 1 ? std::atoi(a.argv[1]) : 24;
    g_steps = a.argc > 2 ? std::atoi(a.argv[2]) : 3;
    auto arr = weft::array<Stepper>::create(n);
    arr.broadcast<&Stepper::go>();
    weft::on_quiescence([] { weft::exit(0); });
  });
}
