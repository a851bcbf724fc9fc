// The GNU OpenMP ABI's entry points are plain C functions that GCC calls by
// name; every one libweft-omp provides is declared with WEFT_GOMP, which
// exports it from libweft-omp.so (the rest of the library is hidden). An
// entry point not provided stays undefined, so a program that needs it fails
// to link against libweft-omp instead of misbehaving at run time.
#pragma once
#include <cstdint>

#define WEFT_GOMP __attribute__((visibility("default")))
