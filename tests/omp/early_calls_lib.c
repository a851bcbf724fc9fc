/* The library of omp-test early_calls: its constructor asks the OpenMP
 * runtime for what libraries ask at load time (OpenBLAS: the places and
 * processors, to size its thread pool) and runs a parallel region, before
 * the program's main. Under LD_PRELOAD=libweft-omp.so the dynamic linker
 * would run this constructor before libweft-omp's own initializers, had
 * libweft-omp not asked to be initialized first (-z initfirst). */
#include <omp.h>
#include <string.h>

int early_places = -1, early_procs = -1, early_max = -1, early_team = -1, early_sum = -1;
char early_format[64];

__attribute__((constructor)) static void early_calls(void) {
  early_places = omp_get_num_places();
  early_procs = omp_get_num_procs();
  early_max = omp_get_max_threads();
  omp_get_affinity_format(early_format, sizeof early_format);
  int team = 0, sum = 0;
#pragma omp parallel reduction(+ : sum)
  {
    sum += omp_get_thread_num() + 1;
#pragma omp single
    team = omp_get_num_threads();
  }
  early_team = team;
  early_sum = sum;
}
