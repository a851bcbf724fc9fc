/* omp-test affinity: OMP_PLACES, OMP_PROC_BIND and the affinity routines
 * (OpenMP 5.0, 3.2.23-3.2.35), what libgomp and libweft-omp must agree on,
 * without hwloc: the places of the process's CPU set (sched_getaffinity),
 * grouped by /sys's core and package numbers for "cores".
 *
 * ARGS --expect=KIND says what the environment (the test's ENV) asks for:
 *  none          no variable: no places, omp_proc_bind_false, place -1; the
 *                format routines and their fields; then this program runs
 *                itself with explicit OMP_PLACES lists built from its CPU
 *                set (--child=...), GOMP_CPU_AFFINITY's too, and with
 *                malformed values;
 *  threads       OMP_PLACES=threads: a place per CPU, bind true;
 *  cores         OMP_PLACES=cores: a place per core;
 *  spread_close  OMP_PROC_BIND=spread,close (places: threads): spread
 *                outside, close in a region, partitions per spread.
 * Where weft's PEs cannot be where OpenMP's rules put a thread (more
 * threads than CPUs here), libweft-omp keeps the thread on its PE and says
 * so: places are checked to be in range, not equal to libgomp's. */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

enum { max_cpus = 1024 };
static int cpus[max_cpus], ncpus;

/* The CPU set the process started with: its parent's (libgomp binds the
 * initial thread to place 0 before main runs, so the process's own
 * threads no longer show it), or the list a parent of this program passes
 * its children (--cpus=a,b,...). */
static void read_cpus(const char* list) {
  if (list != NULL) {
    for (char* end; *list != '\0' && ncpus < max_cpus; list = *end == ',' ? end + 1 : end) {
      cpus[ncpus++] = (int)strtol(list, &end, 10);
      if (end == list) break;
    }
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(getppid(), sizeof set, &set) != 0) return;
  for (int c = 0; c < CPU_SETSIZE && ncpus < max_cpus; ++c)
    if (CPU_ISSET(c, &set)) cpus[ncpus++] = c;
}

static long sys_number(int cpu, const char* what) {
  char path[128];
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
  FILE* f = fopen(path, "r");
  long v = -1;
  if (f != NULL) {
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

/* Distinct (package, core) pairs among the process's CPUs; -1: unknown. */
static int count_cores(void) {
  long keys[max_cpus];
  int n = 0;
  for (int i = 0; i < ncpus; ++i) {
    long core = sys_number(cpus[i], "core_id"), pkg = sys_number(cpus[i], "physical_package_id");
    if (core < 0 || pkg < 0) return -1;
    long key = pkg * 1000000 + core;
    int seen = 0;
    for (int j = 0; j < n; ++j) seen |= keys[j] == key;
    if (!seen) keys[n++] = key;
  }
  return n;
}

/* Every place's CPUs are CPUs of the process, none twice in a place. */
static int total_place_cpus(void) {
  int total = 0;
  for (int p = 0; p < omp_get_num_places(); ++p) {
    int n = omp_get_place_num_procs(p), ids[max_cpus];
    if (!check_range(n, 1, ncpus, "omp_get_place_num_procs(%d)", p)) continue;
    omp_get_place_proc_ids(p, ids);
    for (int i = 0; i < n; ++i) {
      int in = 0;
      for (int j = 0; j < ncpus; ++j) in |= ids[i] == cpus[j];
      check_true(in, "place %d's CPU %d is in the process's CPU set", p, ids[i]);
    }
    total += n;
  }
  CHECK_EQ(omp_get_place_num_procs(omp_get_num_places()), 0, "procs of a place past the end");
  CHECK_EQ(omp_get_place_num_procs(-1), 0, "procs of place -1");
  return total;
}

/* Inside a region: every thread's place is in range and its partition a
 * run of places in range with the count the routine says. */
static void check_team(int expect_bind_inside, int spread_partition) {
  int places = omp_get_num_places();
#pragma omp parallel
  {
    probe_here();
    int place = omp_get_place_num();
    if (places == 0)
      CHECK_EQ(place, -1, "omp_get_place_num without places (thread %d)", omp_get_thread_num());
    else
      check_range(place, 0, places - 1, "omp_get_place_num (thread %d)", omp_get_thread_num());
    CHECK_EQ(omp_get_proc_bind(), expect_bind_inside, "omp_get_proc_bind in a region");
    int len = omp_get_partition_num_places(), nums[max_cpus];
    check_range(len, places == 0 ? 0 : 1, places, "omp_get_partition_num_places");
    if (len > 0 && len <= places) {
      omp_get_partition_place_nums(nums);
      for (int i = 0; i < len; ++i) {
        check_range(nums[i], 0, places - 1, "partition place %d", i);
        if (i > 0) CHECK_EQ(nums[i], nums[i - 1] + 1, "partition places are consecutive");
      }
    }
    /* spread: T threads split P places; each gets P/T or P/T + 1, or one
     * place when T > P. */
    if (spread_partition && places > 0) {
      int t = omp_get_num_threads();
      int lo = t > places ? 1 : places / t, hi = t > places ? 1 : (places + t - 1) / t;
      check_range(len, lo, hi, "spread partition of thread %d of %d over %d places",
                  omp_get_thread_num(), t, places);
    } else if (places > 0) {
      CHECK_EQ(len, places, "a close/true team's partition is every place");
    }
  }
}

static void check_capture(void) {
  char buf[256], host[256] = {0};
  gethostname(host, sizeof host - 1);
  char fmt[64];
  size_t n = omp_get_affinity_format(fmt, sizeof fmt);
  CHECK_EQ(n, strlen("level %L thread %i affinity %A"), "default affinity format's length");
  check_true(strcmp(fmt, "level %L thread %i affinity %A") == 0, "default format is libgomp's");
  CHECK_EQ(omp_get_affinity_format(fmt, 4), n, "omp_get_affinity_format returns the full length");
  check_true(strcmp(fmt, "lev") == 0, "omp_get_affinity_format truncates");

  n = omp_capture_affinity(buf, sizeof buf, "%L|%n|%N|%a|%t|%T|%0.3n|%.3n|%3n|%%|%{thread_num}");
  const char* want = "0|0|1|-1|0|1|000|  0|0  |%|0";
  check_true(strcmp(buf, want) == 0, "capture outside a region: '%s', expected '%s'", buf, want);
  CHECK_EQ(n, strlen(want), "omp_capture_affinity's length");
  CHECK_EQ(omp_capture_affinity(buf, 3, "%{nesting_level}%{num_threads}xyz"), 5,
           "omp_capture_affinity returns the full length");
  check_true(strcmp(buf, "01") == 0, "omp_capture_affinity truncates: '%s'", buf);

  char want_host[300];
  snprintf(want_host, sizeof want_host, "%s %d", host, (int)getpid());
  omp_capture_affinity(buf, sizeof buf, "%H %{process_id}");
  check_true(strcmp(buf, want_host) == 0, "%%H %%P: '%s', expected '%s'", buf, want_host);
  omp_capture_affinity(buf, sizeof buf, "%i");
  check_true(buf[0] != '\0', "%%i is not empty");
  omp_capture_affinity(buf, sizeof buf, "%A");
  check_true(buf[0] >= '0' && buf[0] <= '9', "%%A is a CPU list: '%s'", buf);

#pragma omp parallel num_threads(2)
  {
    char b[128], w[128];
    omp_capture_affinity(b, sizeof b, "%L %n %N %a %{ancestor_tnum} %{team_num} %{num_teams}");
    snprintf(w, sizeof w, "1 %d %d 0 0 0 1", omp_get_thread_num(), omp_get_num_threads());
    check_true(strcmp(b, w) == 0, "capture in a region: '%s', expected '%s'", b, w);
  }

  omp_set_affinity_format("T%0.4{thread_num}/%N");
  n = omp_get_affinity_format(fmt, sizeof fmt);
  check_true(strcmp(fmt, "T%0.4{thread_num}/%N") == 0, "omp_set_affinity_format: '%s'", fmt);
  omp_capture_affinity(buf, sizeof buf, NULL);
  check_true(strcmp(buf, "T0000/1") == 0, "a null format is affinity-format-var: '%s'", buf);
  omp_display_affinity(NULL); /* on stderr */
  omp_display_affinity("display %n");
  omp_set_affinity_format("level %L thread %i affinity %A");
}

/* This program again, with `var`=places (OMP_PLACES or GOMP_CPU_AFFINITY)
 * and OMP_PROC_BIND=bind; its --child=KIND checks. */
static void run_child_var(const char* var, const char* places, const char* bind, const char* kind) {
  char arg[64], list[8 * max_cpus] = "--cpus=";
  snprintf(arg, sizeof arg, "--child=%s", kind);
  for (int i = 0; i < ncpus; ++i)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", cpus[i]);
  pid_t pid = fork();
  if (pid == 0) {
    /* The process's CPU set, not that of the thread that forked (bound to
     * its place, or to its PE's CPU). */
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < ncpus; ++i) CPU_SET(cpus[i], &set);
    sched_setaffinity(0, sizeof set, &set);
    if (places != NULL) setenv(var, places, 1);
    if (bind != NULL) setenv("OMP_PROC_BIND", bind, 1);
    char* argv[] = {(char*)"affinity", arg, list, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  check_true(WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "%s=%s OMP_PROC_BIND=%s (%s) exit status %d", var, places ? places : "",
             bind ? bind : "", kind, status);
}

static void run_child(const char* places, const char* bind, const char* kind) {
  run_child_var("OMP_PLACES", places, bind, kind);
}

static int child(const char* kind) {
  char name[64];
  snprintf(name, sizeof name, "affinity.%s", kind);
  test_begin(strdup(name));
  int places = omp_get_num_places();
  int ids[max_cpus];
  if (strcmp(kind, "reversed") == 0) { /* {last},{first} */
    CHECK_EQ(places, 2, "places of {%d},{%d}", cpus[ncpus - 1], cpus[0]);
    omp_get_place_proc_ids(0, ids);
    CHECK_EQ(ids[0], cpus[ncpus - 1], "place 0");
    omp_get_place_proc_ids(1, ids);
    CHECK_EQ(ids[0], cpus[0], "place 1");
    CHECK_EQ(omp_get_proc_bind(), omp_proc_bind_true, "OMP_PLACES alone: bind true");
  } else if (strcmp(kind, "interval") == 0) { /* {c0:n} */
    CHECK_EQ(places, 1, "places");
    CHECK_EQ(omp_get_place_num_procs(0), ncpus, "CPUs of {c0:n}");
  } else if (strcmp(kind, "stride") == 0) { /* {c0}:n:1 */
    CHECK_EQ(places, ncpus, "places");
    for (int p = 0; p < places && p < ncpus; ++p) {
      omp_get_place_proc_ids(p, ids);
      CHECK_EQ(ids[0], cpus[p], "place %d", p);
    }
  } else if (strcmp(kind, "exclude") == 0) { /* {c0:n,!c0} */
    CHECK_EQ(places, 1, "places");
    CHECK_EQ(omp_get_place_num_procs(0), ncpus - 1, "CPUs of {c0:n,!c0}");
  } else if (strcmp(kind, "remove_place") == 0) { /* {c0},{c1},!{c0} */
    CHECK_EQ(places, 1, "places");
    omp_get_place_proc_ids(0, ids);
    CHECK_EQ(ids[0], cpus[1], "the place left");
  } else if (strcmp(kind, "none") == 0) { /* malformed, or OMP_PROC_BIND=false */
    CHECK_EQ(places, 0, "places");
    CHECK_EQ(omp_get_proc_bind(), omp_proc_bind_false, "bind");
  }
  check_team(places > 0 ? omp_proc_bind_true : omp_proc_bind_false, 0);
  return test_end();
}

/* --print: each thread's place and partition in a region of the default
 * size (tests/omp/affinity_side_by_side.cmake compares the lines of both
 * runtimes). */
static int print_places(void) {
  enum { most = 64 };
  int place[most], off[most], len[most], bind[most], n = 0;
#pragma omp parallel
  {
    int t = omp_get_thread_num(), nums[max_cpus] = {0};
    if (t < most) {
      place[t] = omp_get_place_num();
      len[t] = omp_get_partition_num_places();
      omp_get_partition_place_nums(nums);
      off[t] = nums[0];
      bind[t] = omp_get_proc_bind();
    }
    if (t == 0) n = omp_get_num_threads();
  }
  printf("places %d bind %d\n", omp_get_num_places(), omp_get_proc_bind());
  for (int t = 0; t < n && t < most; ++t)
    printf("thread %d place %d partition %d+%d bind %d\n", t, place[t], off[t], len[t], bind[t]);
  return 0;
}

int main(int argc, char** argv) {
  const char* expect = "none";
  const char* kind = NULL;
  const char* list = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--child=", 8) == 0) kind = argv[i] + 8;
    if (strncmp(argv[i], "--cpus=", 7) == 0) list = argv[i] + 7;
    if (strncmp(argv[i], "--expect=", 9) == 0) expect = argv[i] + 9;
    if (strcmp(argv[i], "--print") == 0) return print_places();
  }
  read_cpus(list);
  if (kind != NULL) return child(kind);
  test_begin("affinity");
  int places = omp_get_num_places();
  if (strcmp(expect, "none") == 0) {
    CHECK_EQ(places, 0, "no OMP_PLACES: omp_get_num_places");
    CHECK_EQ(omp_get_proc_bind(), omp_proc_bind_false, "no OMP_PROC_BIND: bind-var");
    CHECK_EQ(omp_get_place_num(), -1, "no places: omp_get_place_num");
    CHECK_EQ(omp_get_partition_num_places(), 0, "no places: partition");
    check_team(omp_proc_bind_false, 0);
    check_capture();
    omp_display_env(0); /* on stderr */
    char list[64];
    if (ncpus >= 2) {
      snprintf(list, sizeof list, "{%d},{%d}", cpus[ncpus - 1], cpus[0]);
      run_child(list, NULL, "reversed");
      snprintf(list, sizeof list, "{%d},{%d},!{%d}", cpus[0], cpus[1], cpus[0]);
      run_child(list, NULL, "remove_place");
      snprintf(list, sizeof list, "%d %d", cpus[ncpus - 1], cpus[0]);
      run_child_var("GOMP_CPU_AFFINITY", list, NULL, "reversed");
    }
    if (cpus[ncpus - 1] - cpus[0] == ncpus - 1) { /* consecutive numbers */
      snprintf(list, sizeof list, "{%d:%d}", cpus[0], ncpus);
      run_child(list, NULL, "interval");
      snprintf(list, sizeof list, "{%d}:%d:1", cpus[0], ncpus);
      run_child(list, NULL, "stride");
      if (ncpus >= 2) {
        snprintf(list, sizeof list, "{%d:%d,!%d}", cpus[0], ncpus, cpus[0]);
        run_child(list, NULL, "exclude");
      }
    }
    snprintf(list, sizeof list, "{%d", cpus[0]);
    run_child(list, NULL, "none");
    run_child("bogus", NULL, "none");
    run_child("threads", "false", "none");
    run_child(NULL, "bogus", "none");
    run_child_var("GOMP_CPU_AFFINITY", "bogus", NULL, "none");
  } else if (strcmp(expect, "threads") == 0 || strcmp(expect, "cores") == 0) {
    int want = strcmp(expect, "threads") == 0 ? ncpus : count_cores();
    if (want > 0) CHECK_EQ(places, want, "OMP_PLACES=%s: omp_get_num_places", expect);
    CHECK_EQ(total_place_cpus(), ncpus, "every CPU of the process in one place");
    CHECK_EQ(omp_get_proc_bind(), omp_proc_bind_true, "OMP_PLACES alone: bind-var true");
    check_range(omp_get_place_num(), 0, places - 1, "the initial thread's place");
    CHECK_EQ(omp_get_partition_num_places(), places, "the initial thread's partition");
    check_team(omp_proc_bind_true, 0);
    check_range(omp_get_place_num(), 0, places - 1, "the initial thread's place after a region");
  } else if (strcmp(expect, "spread_close") == 0) {
    CHECK_EQ(places, ncpus, "OMP_PROC_BIND without OMP_PLACES: a place per CPU");
    CHECK_EQ(omp_get_proc_bind(), omp_proc_bind_spread, "bind-var: the list's first");
    check_true(omp_get_max_active_levels() > 1, "a list of policies allows nesting");
    check_team(omp_proc_bind_close, 1);
    /* proc_bind(close) in a region whose bind-var is not false */
#pragma omp parallel proc_bind(close) num_threads(2)
    CHECK_EQ(omp_get_partition_num_places(), places, "proc_bind(close): the whole partition");
  } else {
    check_true(0, "unknown --expect=%s", expect);
  }
  return test_end();
}
