/* Background load for the OpenMP test programs (C and C++).
 *
 * load_begin() reads OMPTEST_LOAD=k and forks k processes that spin on the
 * CPUs the program may use until load_end() kills them (or the program
 * dies: each asks the kernel for SIGKILL when its parent goes). The
 * programs that wait on each other (members spinning on flags, members
 * sharing a core with a carrier thread) are then run the way a loaded
 * 2-core CI machine runs them at its worst: every thread of the program
 * loses its core at any moment. Like check.h it uses nothing of the OpenMP
 * runtime under test.
 */
#ifndef WEFT_TESTS_OMP_LOAD_H
#define WEFT_TESTS_OMP_LOAD_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

enum { LOAD_MAX = 16 };
static pid_t load_pids[LOAD_MAX];
static int load_count;

static inline void load_begin(void) {
  const char* text = getenv("OMPTEST_LOAD");
  if (text == NULL || text[0] == '\0') return;
  int k = atoi(text);
  if (k < 0 || k > LOAD_MAX) {
    printf("OMPTEST_LOAD=%s: expected 0..%d spinning processes\n", text, LOAD_MAX);
    exit(2);
  }
  fflush(stdout);
  for (int i = 0; i < k; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("OMPTEST_LOAD: fork");
      exit(2);
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
    load_pids[load_count++] = pid;
  }
}

static inline void load_end(void) {
  for (int i = 0; i < load_count; ++i) {
    kill(load_pids[i], SIGKILL);
    waitpid(load_pids[i], NULL, 0);
  }
  load_count = 0;
}

#endif /* WEFT_TESTS_OMP_LOAD_H */
