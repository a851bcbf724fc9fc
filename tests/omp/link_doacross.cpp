// omp-test link_doacross: a doacross loop (ordered(2) with depend(sink) /
// depend(source)), linked against libweft-omp.so as docs/omp.md says (no
// -fopenmp at link time): it must link, libweft-omp providing the
// GOMP_doacross_* and GOMP_loop_doacross_* entry points (doacross.c runs
// such loops). Never run.
#include <cstdio>

int main() {
  static int a[64][64];
#pragma omp parallel for ordered(2)
  for (int i = 1; i < 64; ++i)
    for (int j = 1; j < 64; ++j) {
#pragma omp ordered depend(sink : i - 1, j) depend(sink : i, j - 1)
      a[i][j] = a[i - 1][j] + a[i][j - 1] + 1;
#pragma omp ordered depend(source)
    }
  std::printf("%d\n", a[63][63]);
  return 0;
}
