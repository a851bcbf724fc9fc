/* What the study's two kernels (ep.c, mg.c) share: the NAS Parallel
 * Benchmarks' random number generator, the command line, the runtime's
 * start before the timed part, and the result line (docs/affinity.md).
 *
 * The generator (NPB 3 report, "pseudorandom number generator"):
 * x_{k+1} = a * x_k mod 2^46 with a = 5^13, r_k = x_k * 2^-46. The
 * specification computes it in double precision with split 23-bit halves so
 * that Fortran without 64-bit integers gets it exact; with 64-bit unsigned
 * integers the product modulo 2^64 and then 2^46 is the same number (2^46
 * divides 2^64), so one multiplication and a mask give the same sequence
 * bit for bit, and 46 bits fit a double's 53-bit mantissa exactly. */
#ifndef WEFT_BENCH_AFFINITY_NPB_H
#define WEFT_BENCH_AFFINITY_NPB_H

#include <dirent.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NPB_RUNTIME
#error "build with -DNPB_RUNTIME=\"gomp\" or \"weft\" (bench/affinity/CMakeLists.txt)"
#endif

#define NPB_A 1220703125ull /* 5^13 */
#define NPB_MASK ((1ull << 46) - 1)

static inline uint64_t npb_mul(uint64_t x, uint64_t y) {
  return (x * y) & NPB_MASK;
}

/* a^n mod 2^46: the multiplier that jumps the generator n steps ahead, so
 * that each thread starts its share of the sequence where a serial run
 * would be. */
static inline uint64_t npb_pow(uint64_t a, uint64_t n) {
  uint64_t r = 1;
  while (n) {
    if (n & 1) r = npb_mul(r, a);
    a = npb_mul(a, a);
    n >>= 1;
  }
  return r;
}

static inline double npb_unit(uint64_t x) {
  return (double)x * 0x1p-46;
}

struct npb_args {
  char cls;  /* problem class, one of the kernel's */
  int json;  /* --json: one JSON object on stdout after the readable line */
  int quiet; /* --quiet: the JSON object only */
};

/* --class=X, --json, --quiet, --help; anything else is a one-line error
 * naming the argument and the accepted forms, exit 2. */
static inline struct npb_args npb_parse(int argc, char** argv, const char* kernel,
                                        const char* classes) {
  struct npb_args a = {classes[0], 0, 0};
  for (int i = 1; i < argc; ++i) {
    const char* s = argv[i];
    if (strncmp(s, "--class=", 8) == 0 && strlen(s) == 9 && strchr(classes, s[8]) != NULL) {
      a.cls = s[8];
    } else if (strcmp(s, "--json") == 0) {
      a.json = 1;
    } else if (strcmp(s, "--quiet") == 0) {
      a.quiet = a.json = 1;
    } else if (strcmp(s, "--help") == 0) {
      printf(
          "usage: %s [--class=C] [--json] [--quiet]\n"
          "  NAS Parallel Benchmarks kernel %s, OpenMP (%s runtime); classes: %s (default %c).\n"
          "  Threads: OMP_NUM_THREADS; placement: the runtime's variables\n"
          "  (libgomp: OMP_PROC_BIND, OMP_PLACES; libweft-omp: WEFT_BIND, WEFT_MEM).\n"
          "  Prints VERIFIED or FAILED against the specification's reference values;\n"
          "  exit 0 when verified, 1 when not, 2 on bad arguments.\n",
          argv[0], kernel, NPB_RUNTIME, classes, classes[0]);
      exit(0);
    } else {
      char forms[32] = "";
      for (const char* c = classes; *c != '\0'; ++c) {
        const size_t len = strlen(forms);
        snprintf(forms + len, sizeof forms - len, "%s%c", c == classes ? "" : "|", *c);
      }
      fprintf(stderr,
              "%s: error: bad argument '%s'; accepted: --class=%s, --json, --quiet, --help\n",
              kernel, s, forms);
      exit(2);
    }
  }
  return a;
}

/* Starts the OpenMP runtime's team before the data is allocated and before
 * the clock starts: libweft-omp starts its node (and applies WEFT_BIND and
 * WEFT_MEM to its threads) at the first parallel region, libgomp its pool;
 * the study times the kernels, not the start of a runtime, and the data
 * must be touched under the memory policy being measured. */
static inline int npb_start_team(void) {
  int threads = 0;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
  }
  return threads;
}

/* The process's thread migrations so far: the sum of se.nr_migrations over
 * /proc/self/task/<tid>/sched (kernels built with scheduler statistics);
 * -1 where the file cannot be read. The study's "migrations beside" each
 * run: read after the team exists, before and after the timed part. */
static inline long long npb_migrations(void) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return -1;
  long long total = 0;
  int found = 0;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/sched", e->d_name);
    FILE* f = fopen(path, "r");
    if (f == NULL) continue;
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
      long long v = 0;
      if (strncmp(line, "se.nr_migrations", 16) == 0 &&
          sscanf(strchr(line, ':') + 1, "%lld", &v) == 1) {
        total += v;
        found = 1;
      }
    }
    fclose(f);
  }
  closedir(dir);
  return found ? total : -1;
}

/* The readable line (unless --quiet) and, with --json, the JSON object the
 * driver (study.py) reads. */
static inline void npb_report(const struct npb_args* a, const char* kernel, int threads,
                              double seconds, int verified, long long migrations,
                              const char* detail) {
  if (!a->quiet)
    printf("%s class %c: %d threads (%s), %.6f s, %s; %s\n", kernel, a->cls, threads, NPB_RUNTIME,
           seconds, verified ? "VERIFIED" : "FAILED", detail);
  if (a->json) {
    printf(
        "{\"kernel\":\"%s\",\"class\":\"%c\",\"runtime\":\"%s\",\"threads\":%d,"
        "\"seconds\":%.9g,\"verified\":%s,\"migrations\":",
        kernel, a->cls, NPB_RUNTIME, threads, seconds, verified ? "true" : "false");
    if (migrations >= 0)
      printf("%lld}\n", migrations);
    else
      printf("null}\n");
  }
  fflush(stdout);
}

#endif
