// ring: one message travels around the PEs of the job, hop by hop, and the
// last hop ends the program. Inside a process the message is never copied:
// each handler gets the pointer the previous PE sent, decrements the counter
// inside it, and sends the same message on. Between processes the transport
// carries it; as all its state travels in the message, the program is the
// same in one process and in several.
#include <cstdio>
#include <cstdlib>
#include <weft/weft.hpp>

namespace {

struct hop_state {
  int left;  // hops still to go
  int laps;  // times the message passed PE 0
};

void hop(weft::message_ptr m);
const weft::handler_id h_hop = weft::register_handler("ring.hop", hop);

void hop(weft::message_ptr m) {
  hop_state& s = m->as<hop_state>();
  if (weft::my_pe() == 0) ++s.laps;
  if (--s.left == 0) {
    std::printf("ring: done on PE %d after %d laps of %d PEs\n", weft::my_pe(), s.laps,
                weft::num_pes());
    weft::exit(0);
    return;
  }
  weft::send((weft::my_pe() + 1) % weft::num_pes(), std::move(m));  // the pointer moves on
}

}  // namespace

int main(int argc, char** argv) {
  return weft::run(argc, argv, [](weft::args a) {
    int hops = a.argc > 1 ? std::atoi(a.argv[1]) : 1000;
    if (hops < 1) {
      std::fprintf(stderr, "usage: ring [HOPS>=1] [--weft:options]\n");
      weft::exit(2);
      return;
    }
    weft::send(0, weft::make_message_with(h_hop, hop_state{hops, 0}));
  });
}
