/* A plain OpenMP program (no weft call) linked with libweft-omp.so instead of
   libgomp (weft::omp_shared, pkg-config weft-omp): its regions run on a weft
   node, which WEFT_QUIET=0 makes say so at the first region. */
#include <omp.h>
#include <stdio.h>

int main(void) {
  const int n = 10000;
  long sum = 0;
  int team = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < n; ++i) {
    if (i == 0) team = omp_get_num_threads();
    sum += i;
  }
  if (sum != (long)n * (n - 1) / 2) {
    printf("plain_omp: wrong sum %ld\n", sum);
    return 1;
  }
  printf("plain_omp ok: team of %d\n", team);
  return 0;
}
