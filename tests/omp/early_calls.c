/* omp-test early_calls: OpenMP called from a library's constructor, before
 * main (early_calls_lib.c): the answers are the ones main gets, and the
 * region the constructor ran had its whole team. Run under LD_PRELOAD (the
 * omp.preload.early_calls test), where that constructor runs before any of
 * libweft-omp's own unless libweft-omp is initialized first. */
#include <omp.h>
#include <string.h>

#include "check.h"

extern int early_places, early_procs, early_max, early_team, early_sum;
extern char early_format[64];

int main(void) {
  test_begin("early_calls");
  CHECK_EQ(early_places, omp_get_num_places(), "omp_get_num_places() in a constructor");
  CHECK_EQ(early_procs, omp_get_num_procs(), "omp_get_num_procs() in a constructor");
  CHECK_EQ(early_max, omp_get_max_threads(), "omp_get_max_threads() in a constructor");
  char format[64];
  omp_get_affinity_format(format, sizeof format);
  check_true(strcmp(early_format, format) == 0, "omp_get_affinity_format() in a constructor");
  CHECK_EQ(early_team, omp_get_max_threads(), "team of a region in a constructor");
  CHECK_EQ(early_sum, early_team * (early_team + 1) / 2, "reduction of that region");
  int team = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    team = omp_get_num_threads();
  }
  CHECK_EQ(team, omp_get_max_threads(), "team of a region in main");
  return test_end();
}
