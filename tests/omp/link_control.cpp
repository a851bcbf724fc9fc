// omp-test link_control: the twin of link_error.cpp without the error
// directive, linked the same way: it must link, so that link_error's failure
// is the missing entry point and nothing else.
#include <cstdio>

int main() {
  static int a[64];
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < 64; ++i) a[i] = i;
  std::printf("%d\n", a[63]);
  return 0;
}
