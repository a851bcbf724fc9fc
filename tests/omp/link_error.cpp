// omp-test link_error: a call to an entry point libweft-omp does not
// provide -- GOMP_taskwait_depend_nowait, which GCC 13 emits for
// `taskwait depend(...) nowait` and GCC 12's libgomp lacks -- named
// directly, since GCC 12 emits none that is missing. Never run: linking it
// against libweft-omp must fail, naming it (docs/omp.md: an entry point not
// provided fails at link time).
#include <cstdio>

extern "C" void GOMP_taskwait_depend_nowait(void** depend);

int main(int argc, char**) {
  if (argc > 5) GOMP_taskwait_depend_nowait(nullptr);
  std::printf("ok\n");
  return 0;
}
