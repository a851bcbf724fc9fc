// Uses the public API through the one installed header only: a token goes
// around every PE once, each PE adding its rank, and PE 0 checks the sum.
#include <cstdio>
#include <weft/weft.hpp>

namespace {

weft::handler_id h_token;

struct token {
  int hops;
  long sum;
};

void on_token(weft::message_ptr m) {
  token& t = m->as<token>();
  t.sum += weft::my_pe();
  if (++t.hops == weft::num_pes()) {
    const long n = weft::num_pes();
    if (weft::my_pe() != n - 1 || t.sum != n * (n - 1) / 2) {
      std::printf("consumer: wrong token: hops %d, sum %ld on PE %d\n", t.hops, t.sum,
                  weft::my_pe());
      weft::exit(1);
      return;
    }
    std::printf("consumer ok: %ld PEs\n", n);
    weft::exit(0);
    return;
  }
  weft::send(weft::my_pe() + 1, std::move(m));
}

}  // namespace

int main(int argc, char** argv) {
  h_token = weft::register_handler("consumer.token", on_token);
  return weft::run(argc, argv, [](weft::args) {
    weft::send(0, weft::make_message_with(h_token, token{0, 0}));
  });
}
