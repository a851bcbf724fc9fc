// A program whose array balances a few steps: the run behind the CLI tests
// of --weft:lb-dump and weft-lbsim --replay (lbsim_replay.py).
//
// Usage: cli_lb_stepper [ELEMENTS [STEPS [TALK]]] --weft:lb=NAME [--weft:lb-dump=FILE] ...
// Elements 0..3 are heavy (load_estimate 3, the others 1) and all start in
// blocks, so a balancer has work at every step. With TALK > 0 each element
// sends TALK messages to its right neighbour before each at_sync (the
// dump's edges, with --weft:lb-comm).
#include <cstdlib>
#include <weft/weft.hpp>

namespace {

int g_steps = 3;
int g_talk = 0;

struct Stepper : weft::array_element<Stepper, int> {
  Stepper() = default;
  int done_ = 0;
  void pup(weft::pupper& p) { p | done_; }
  double load_estimate() const override { return this_index() < 4 ? 3.0 : 1.0; }
  void go() {
    for (int k = 0; k < g_talk; ++k)
      this_proxy()[(this_index() + 1) % array_size()].send<&Stepper::take>(k);
    at_sync();
  }
  void take(int) {}
  // A new step by message: resume_from_sync runs inside the step's end.
  void resume_from_sync() override {
    if (++done_ < g_steps) this_proxy()[this_index()].send<&Stepper::go>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Read in every process (main's function runs in the first only), from
  // the leading arguments, before weft::run takes its own options.
  int pos[3] = {24, 3, 0};
  for (int i = 1, k = 0; i < argc && k < 3 && argv[i][0] != '-'; ++i) pos[k++] = std::atoi(argv[i]);
  g_steps = pos[1];
  g_talk = pos[2];
  return weft::run(argc, argv, [n = pos[0]](weft::args) {
    auto arr = weft::array<Stepper>::create(n);
    arr.broadcast<&Stepper::go>();
    weft::on_quiescence([] { weft::exit(0); });
  });
}
