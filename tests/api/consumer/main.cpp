// Uses the public API through the one installed header only: a token goes
// around every PE once (core: handlers and messages), each PE adding its
// rank; PE 0 checks the sum and hands over to a chare array (objects, with a
// coroutine main function) whose elements each sum a loop with
// weft::parallel_for (tasks) and pass the total along. When compiled with
// OpenMP (weft::omp), the last element also sums the loop with
// `#pragma omp parallel for`, which runs on the PEs of the node.
#include <cstdio>
#include <weft/weft.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr int loop_n = 10000;
constexpr long loop_sum = long(loop_n) * (loop_n - 1) / 2;
constexpr int cells = 6;

void fail(const char* what, long got, long want) {
  std::printf("consumer: wrong %s: %ld, expected %ld (PE %d)\n", what, got, want, weft::my_pe());
  weft::exit(1);
}

struct Cell : weft::array_element<Cell, int> {
  void add(long carried) {
    const long s = weft::parallel_for(0, loop_n, weft::reduce::sum,
                                      [](int i) { return long(i); });
    if (s != loop_sum) return fail("parallel_for sum", s, loop_sum);
    carried += s;
    if (this_index() + 1 < array_size()) {
      this_proxy()[this_index() + 1].send<&Cell::add>(carried);
      return;
    }
    if (carried != loop_sum * cells) return fail("array total", carried, loop_sum * cells);
    std::printf("consumer: objects and parallel_for ok\n");
#ifdef _OPENMP
    long omp_sum = 0;
    int team = 0;
#pragma omp parallel for reduction(+ : omp_sum)
    for (int i = 0; i < loop_n; ++i) {
      if (i == 0) team = omp_get_num_threads();
      omp_sum += i;
    }
    if (omp_sum != loop_sum) return fail("OpenMP sum", omp_sum, loop_sum);
    if (team != weft::num_pes()) return fail("OpenMP team size", team, weft::num_pes());
    std::printf("consumer: openmp ok: team of %d on the PEs\n", team);
#endif
    std::printf("consumer ok: %d PEs\n", weft::num_pes());
    weft::exit(0);
  }
};

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
    if (weft::my_pe() != n - 1 || t.sum != n * (n - 1) / 2) return fail("token sum", t.sum, n * (n - 1) / 2);
    auto array = weft::array<Cell>::create(cells);
    array[0].send<&Cell::add>(0L);
    return;
  }
  weft::send(weft::my_pe() + 1, std::move(m));
}

}  // namespace

int main(int argc, char** argv) {
  h_token = weft::register_handler("consumer.token", on_token);
  return weft::run(argc, argv, [](weft::args) -> weft::task<> {
    weft::send(0, weft::make_message_with(h_token, token{0, 0}));
    co_return;
  });
}
