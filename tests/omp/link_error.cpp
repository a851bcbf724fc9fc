// omp-test link_error: a call to an entry point libweft-omp does not
// provide -- GOMP_parallel_loop_static_start, which only GCC before 4.9
// emitted for `parallel for schedule(static)` -- named directly, since GCC
// 12 emits none that is missing. Never run: linking it against libweft-omp
// must fail, naming it (docs/omp.md: an entry point not provided fails at
// link time).
#include <cstdio>

extern "C" void GOMP_parallel_loop_static_start(void (*fn)(void*), void* data, unsigned threads,
                                                long start, long end, long incr, long chunk);

int main(int argc, char**) {
  if (argc > 5) GOMP_parallel_loop_static_start(nullptr, nullptr, 0, 0, 0, 1, 0);
  std::printf("ok\n");
  return 0;
}
