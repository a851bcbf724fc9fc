// A weft program linked without -rdynamic (ENABLE_EXPORTS OFF, as a consumer
// links now that weft does not force it) whose handler on the last PE never
// returns: run with --weft:timeout, the watchdog's backtrace must still name
// weft's hidden functions and this program's own static one, from the
// objects' symbol tables (src/base/symbolize.hpp). tests/cli/CMakeLists.txt,
// cli.timeout_dump_names_frames*.
#include <chrono>
#include <thread>
#include <weft/weft.hpp>

namespace {

// Not inlined, so that its frame is in the backtrace; sleeps rather than
// spins, to leave the CPUs of a loaded machine to the others.
[[gnu::noinline]] void probe_hang_in_handler(weft::message_ptr) {
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

weft::handler_id h_hang;

}  // namespace

int main(int argc, char** argv) {
  h_hang = weft::register_handler("probe.hang_in_handler", probe_hang_in_handler);
  return weft::run(argc, argv, [](weft::args) {
    weft::send(weft::num_pes() - 1, weft::make_message(h_hang, 8));
  });
}
