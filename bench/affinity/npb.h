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
#include <errno.h>
#include <linux/perf_event.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* The counters beside each run (paper 002 reads cycles and cache misses
 * beside the times), per team thread through perf_event_open(2): each
 * thread opens its own at the start (pid 0: the calling thread), the main
 * thread enables them just before the timed part and reads them after,
 * summing over the team. Hardware events count user space only (what
 * perf_event_paranoid 2 allows); software ones count the kernel's
 * scheduling too. An event the machine or the kernel refuses (a virtual
 * machine without a PMU: ENOENT) is reported as null and named. Under
 * libweft-omp the team's threads are its PEs' threads (one per PE, the
 * same in every region: docs/omp.md), under libgomp its pool's. */
#define NPB_EVENTS 5
static const struct {
  const char* name;
  uint32_t type;
  uint64_t config;
} npb_event[NPB_EVENTS] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"llc_load_misses", PERF_TYPE_HW_CACHE,
     PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
         (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
    {"context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
};

struct npb_counters {
  int threads;
  int* fd;                     /* [thread * NPB_EVENTS + event], -1 if not open */
  int error[NPB_EVENTS];       /* errno of the first refusal, 0 if none */
  long long value[NPB_EVENTS]; /* summed over the team; -1 if a thread lacks it */
};

static inline void npb_counters_open(struct npb_counters* c, int threads) {
  c->threads = threads;
  c->fd = malloc(sizeof(int) * (size_t)threads * NPB_EVENTS);
  for (int e = 0; e < NPB_EVENTS; ++e) c->error[e] = 0, c->value[e] = -1;
  if (c->fd == NULL) {
    for (int e = 0; e < NPB_EVENTS; ++e) c->error[e] = ENOMEM;
    return;
  }
  for (int i = 0; i < threads * NPB_EVENTS; ++i) c->fd[i] = -1;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    for (int e = 0; e < NPB_EVENTS; ++e) {
      struct perf_event_attr attr;
      memset(&attr, 0, sizeof attr);
      attr.size = sizeof attr;
      attr.type = npb_event[e].type;
      attr.config = npb_event[e].config;
      attr.disabled = 1;
      attr.exclude_kernel = npb_event[e].type != PERF_TYPE_SOFTWARE;
      attr.exclude_hv = 1;
      const int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
      if (fd >= 0) {
        c->fd[t * NPB_EVENTS + e] = fd;
      } else {
        const int error = errno;
#pragma omp critical(npb_counters)
        if (c->error[e] == 0) c->error[e] = error;
      }
    }
  }
}

static inline void npb_counters_switch(struct npb_counters* c, int on) {
  if (c->fd == NULL) return;
  for (int i = 0; i < c->threads * NPB_EVENTS; ++i)
    if (c->fd[i] >= 0) ioctl(c->fd[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

static inline void npb_counters_close(struct npb_counters* c) {
  if (c->fd == NULL) return;
  for (int e = 0; e < NPB_EVENTS; ++e) {
    long long sum = 0;
    for (int t = 0; t < c->threads && sum >= 0; ++t) {
      const int fd = c->fd[t * NPB_EVENTS + e];
      uint64_t v = 0;
      if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
        sum = -1;
      else
        sum += (long long)v;
    }
    c->value[e] = sum;
  }
  for (int i = 0; i < c->threads * NPB_EVENTS; ++i)
    if (c->fd[i] >= 0) close(c->fd[i]);
  free(c->fd);
  c->fd = NULL;
}

/* The readable lines (unless --quiet): the result, and the counters with
 * those that could not be read named; with --json, the JSON object the
 * driver (study.py) reads. */
static inline void npb_report(const struct npb_args* a, const char* kernel, int threads,
                              double seconds, int verified, long long migrations,
                              const struct npb_counters* c, const char* detail) {
  if (!a->quiet) {
    printf("%s class %c: %d threads (%s), %.6f s, %s; %s\n", kernel, a->cls, threads, NPB_RUNTIME,
           seconds, verified ? "VERIFIED" : "FAILED", detail);
    printf("%s counters:", kernel);
    for (int e = 0; e < NPB_EVENTS; ++e)
      if (c->value[e] >= 0) printf(" %s=%lld", npb_event[e].name, c->value[e]);
    for (int e = 0; e < NPB_EVENTS; ++e)
      if (c->value[e] < 0)
        printf(" %s=unavailable(%s)", npb_event[e].name,
               c->error[e] ? strerror(c->error[e]) : "not read");
    printf("\n");
  }
  if (a->json) {
    printf(
        "{\"kernel\":\"%s\",\"class\":\"%c\",\"runtime\":\"%s\",\"threads\":%d,"
        "\"seconds\":%.9g,\"verified\":%s,\"migrations\":",
        kernel, a->cls, NPB_RUNTIME, threads, seconds, verified ? "true" : "false");
    if (migrations >= 0)
      printf("%lld", migrations);
    else
      printf("null");
    printf(",\"counters\":{");
    for (int e = 0; e < NPB_EVENTS; ++e) {
      printf("%s\"%s\":", e ? "," : "", npb_event[e].name);
      if (c->value[e] >= 0)
        printf("%lld", c->value[e]);
      else
        printf("null");
    }
    printf("}}\n");
  }
  fflush(stdout);
}

#endif
