// omp-test link_error: an `error` directive at execution (OpenMP 5.1), whose
// GOMP_warning libweft-omp does not provide. Never run: linking it against
// libweft-omp must fail, naming it (docs/omp.md: an entry point not provided
// fails at link time). It took this role from link_doacross.cpp once
// doacross loops were provided.
#include <cstdio>

int main(int argc, char**) {
  if (argc > 5) {
#pragma omp error at(execution) severity(warning) message("not shown")
  }
  std::printf("ok\n");
  return 0;
}
