// omp-test task_detach: detachable tasks (task detach(event),
// omp_fulfill_event).
//
// A detached task is complete only once its body has ended and its event has
// been fulfilled. Each fulfiller sets a flag just before omp_fulfill_event;
// whatever waits for the task must see the flag set:
//  - taskwait, taskgroup end (the detached task a grandchild): thread 0
//    creates the task and waits while thread 1 fulfills it;
//  - barrier (explicit, and the implicit one ending a region): the depend(in)
//    successor of a detached task fulfilled by thread 1 (before it reaches
//    the barrier), which becomes ready only at the fulfill, must be done
//    after the barrier. (Not tested: a fulfill from a thread outside the team
//    while the team waits in a barrier; libgomp 12 then never wakes the
//    barrier, a hang.)
//  - depend: the successor (depend(in: x)) of a detached depend(out: x) task,
//    fulfilled by thread 1, or by a sibling task (possibly before the
//    detached tasks' bodies have run: allowed, a task then completes when
//    its body ends);
//  - a task fulfilling its own event in its body (deferred, and undeferred
//    with if(0)); many detached tasks fulfilled in reverse creation order by
//    one fulfiller task, each releasing its own successor.
// The event handle seen in the task's body is the one the construct stored
// in the creator's variable.
//
// Thread 0 hands the event to thread 1 through an OpenMP lock that thread 0
// holds until the event is known: waiting for a lock is a scheduling point,
// where spinning on a flag is not (libweft-omp may run both threads on one
// core, as fibers, when thread 1 starts late; a spin would then starve
// thread 0). The thread-fulfilled cases need a team of two threads or more
// and are skipped in a team of one. Task counts stay small: libgomp runs a
// task undeferred once more than 64 x (team size) tasks are queued, and an
// undeferred detached task waits for its event right there, before a later
// fulfiller is created.
#include <omp.h>

#include <cstdint>
#include <vector>

#include "check.h"

namespace {

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

// An event handed from thread 0 to thread 1 of a team: thread 0 calls
// hold() before a barrier, then give(ev); thread 1 calls fulfill_later()
// after that barrier.
class Handoff {
 public:
  Handoff() { omp_init_lock(&lock_); }
  ~Handoff() { omp_destroy_lock(&lock_); }
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;

  void hold() { omp_set_lock(&lock_); }
  void give(omp_event_handle_t ev) {
    event_ = ev;
    omp_unset_lock(&lock_);
  }
  // Fulfills the event after a while, setting *flag first.
  void fulfill_later(int* flag) {
    omp_set_lock(&lock_);  // until thread 0 has given the event
    const omp_event_handle_t ev = event_;
    omp_unset_lock(&lock_);
    pause(50000);  // whoever waits for the task must still be waiting
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    omp_fulfill_event(ev);
  }

 private:
  omp_lock_t lock_;
  omp_event_handle_t event_{};
};

int any_skipped = 0;  // a thread-fulfilled case was skipped: team of one

// Whether the team can run the thread-fulfilled cases; notes a skip.
bool team_of_two_or_more(int* skipped) {
  if (omp_get_num_threads() >= 2) return true;
  *skipped = 1;
  any_skipped = 1;
  return false;
}

void test_taskwait() {
  int skipped = 0;
  Handoff handoff;
  int flag = 0, body_ran = 0, seen_flag = -1, seen_body = -1, same_event = -1;
  std::uintptr_t body_event = 0;
#pragma omp parallel
  {
    probe_here();
    const bool run = team_of_two_or_more(&skipped);
    if (run && omp_get_thread_num() == 0) handoff.hold();
#pragma omp barrier
    if (run && omp_get_thread_num() == 0) {
      omp_event_handle_t ev;
#pragma omp task detach(ev) shared(body_ran, body_event)
      {
        __atomic_store_n(&body_event, static_cast<std::uintptr_t>(ev), __ATOMIC_RELAXED);
        __atomic_store_n(&body_ran, 1, __ATOMIC_RELAXED);
      }
      handoff.give(ev);
#pragma omp taskwait
      seen_flag = __atomic_load_n(&flag, __ATOMIC_ACQUIRE);
      seen_body = __atomic_load_n(&body_ran, __ATOMIC_RELAXED);
      same_event = static_cast<std::uintptr_t>(ev) == body_event;
    } else if (run && omp_get_thread_num() == 1) {
      handoff.fulfill_later(&flag);
    }
  }
  if (skipped) return;
  CHECK_EQ(seen_flag, 1, "taskwait after a detached task: passed before omp_fulfill_event");
  CHECK_EQ(seen_body, 1, "taskwait after a detached task: its body had not run");
  CHECK_EQ(same_event, 1, "detach(ev): the handle in the body is the creator's");
}

void test_taskgroup() {
  int skipped = 0;
  Handoff handoff;
  int flag = 0, seen_flag = -1;
  omp_event_handle_t grandchild_event{};
#pragma omp parallel
  {
    probe_here();
    const bool run = team_of_two_or_more(&skipped);
    if (run && omp_get_thread_num() == 0) handoff.hold();
#pragma omp barrier
    if (run && omp_get_thread_num() == 0) {
#pragma omp taskgroup
      {
        // A grandchild: the taskgroup waits for descendants.
#pragma omp task shared(grandchild_event)
        {
          omp_event_handle_t ev;
#pragma omp task detach(ev)
          pause(1000);
          grandchild_event = ev;
        }
#pragma omp taskwait
        handoff.give(grandchild_event);  // its creator is done, not the grandchild
      }
      seen_flag = __atomic_load_n(&flag, __ATOMIC_ACQUIRE);
    } else if (run && omp_get_thread_num() == 1) {
      handoff.fulfill_later(&flag);
    }
  }
  if (skipped) return;
  CHECK_EQ(seen_flag, 1, "end of taskgroup with a detached grandchild: passed before the fulfill");
}

void test_barrier() {
  int skipped = 0;
  Handoff handoff_barrier, handoff_end;
  int x = 0, y = 0, flag_barrier = 0, flag_end = 0, succ_barrier = -1, succ_end = -1;
  int bad_after_barrier = 0;
#pragma omp parallel shared(x, y)
  {
    probe_here();
    const bool run = team_of_two_or_more(&skipped);
    if (run && omp_get_thread_num() == 0) {
      handoff_barrier.hold();
      handoff_end.hold();
    }
#pragma omp barrier
    if (run && omp_get_thread_num() == 0) {
      omp_event_handle_t ev;
#pragma omp task detach(ev) depend(out : x) shared(x)
      x = 1;
#pragma omp task depend(in : x) shared(succ_barrier, flag_barrier)
      __atomic_store_n(&succ_barrier, __atomic_load_n(&flag_barrier, __ATOMIC_ACQUIRE),
                       __ATOMIC_RELEASE);
      handoff_barrier.give(ev);
    } else if (run && omp_get_thread_num() == 1) {
      handoff_barrier.fulfill_later(&flag_barrier);
    }
    // The successor becomes ready only at the fulfill: the barrier must wait
    // for the detached task, then for it.
#pragma omp barrier
    if (run && __atomic_load_n(&succ_barrier, __ATOMIC_ACQUIRE) != 1) {
      __atomic_store_n(&bad_after_barrier, 1, __ATOMIC_RELAXED);
    }
    if (run && omp_get_thread_num() == 0) {
      omp_event_handle_t ev_end;
#pragma omp task detach(ev_end) depend(out : y) shared(y)
      y = 1;
#pragma omp task depend(in : y) shared(succ_end, flag_end)
      __atomic_store_n(&succ_end, __atomic_load_n(&flag_end, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
      handoff_end.give(ev_end);
    } else if (run && omp_get_thread_num() == 1) {
      handoff_end.fulfill_later(&flag_end);
    }
  }  // the region's implicit barrier
  if (skipped) return;
  CHECK_EQ(bad_after_barrier, 0,
           "barrier after a detached task: its depend successor not done after the barrier, "
           "or started before the fulfill");
  CHECK_EQ(succ_end, 1,
           "end of a parallel region with a detached task: its depend successor "
           "(-1: not run, 0: started before the fulfill)");
}

void test_depend() {
  // Fulfilled by thread 1.
  int skipped = 0;
  Handoff handoff;
  int x = 0, flag = 0, succ_flag = -1, succ_x = -1;
#pragma omp parallel shared(x)
  {
    probe_here();
    const bool run = team_of_two_or_more(&skipped);
    if (run && omp_get_thread_num() == 0) handoff.hold();
#pragma omp barrier
    if (run && omp_get_thread_num() == 0) {
      omp_event_handle_t ev;
#pragma omp task detach(ev) depend(out : x) shared(x)
      x = 1;
#pragma omp task depend(in : x) shared(x, flag, succ_flag, succ_x)
      {
        succ_flag = __atomic_load_n(&flag, __ATOMIC_ACQUIRE);
        succ_x = x;
      }
      handoff.give(ev);
    } else if (run && omp_get_thread_num() == 1) {
      handoff.fulfill_later(&flag);
    }
  }
  if (!skipped) {
    CHECK_EQ(succ_flag, 1, "depend(in) successor of a detached task: started before the fulfill");
    CHECK_EQ(succ_x, 1, "depend(in) successor of a detached task: value of x");
  }

  // Fulfilled by a sibling task, with no order against the detached tasks'
  // bodies; a chain of two detached tasks before the successor.
  int y = 0, flag_a = 0, flag_b = 0, seen_a = -1, seen_b = -1, seen_y = -1;
#pragma omp parallel shared(y)
  {
    probe_here();
#pragma omp single
    {
      omp_event_handle_t ev_a, ev_b;
#pragma omp task detach(ev_a) depend(out : y) shared(y)
      {
        pause(2000);
        y = 10;
      }
#pragma omp task detach(ev_b) depend(inout : y) shared(y)
      y += 5;
#pragma omp task depend(in : y) shared(y, seen_a, seen_b, seen_y)
      {
        seen_a = __atomic_load_n(&flag_a, __ATOMIC_ACQUIRE);
        seen_b = __atomic_load_n(&flag_b, __ATOMIC_ACQUIRE);
        seen_y = y;
      }
      // Fulfilled in reverse order: b first.
#pragma omp task shared(flag_a, flag_b)
      {
        pause(5000);
        __atomic_store_n(&flag_b, 1, __ATOMIC_RELEASE);
        omp_fulfill_event(ev_b);
        pause(5000);
        __atomic_store_n(&flag_a, 1, __ATOMIC_RELEASE);
        omp_fulfill_event(ev_a);
      }
    }
  }
  CHECK_EQ(seen_a, 1, "depend successor of two detached tasks: started before the first's fulfill");
  CHECK_EQ(seen_b, 1, "depend successor of two detached tasks: started before the second's fulfill");
  CHECK_EQ(seen_y, 15, "depend chain through two detached tasks: value seen by the successor");
}

void test_own_body() {
  constexpr int kTasks = 40;
  std::vector<int> ran(kTasks, 0), succ_saw(kTasks, -1);
  [[maybe_unused]] char slot[kTasks] = {};  // dependence addresses only
  int undeferred_done = 0, undeferred_seen = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      for (int i = 0; i < kTasks; ++i) {
        omp_event_handle_t ev;
#pragma omp task detach(ev) depend(out : slot[i]) shared(ran)
        {
          if (i % 8 == 0) pause(2000);
          __atomic_store_n(&ran[i], 1, __ATOMIC_RELAXED);
          omp_fulfill_event(ev);
        }
#pragma omp task depend(in : slot[i]) shared(ran, succ_saw)
        succ_saw[i] = __atomic_load_n(&ran[i], __ATOMIC_RELAXED);
      }
      volatile int no = 0;
      omp_event_handle_t ev_undeferred;
#pragma omp task detach(ev_undeferred) if (no) shared(undeferred_done)
      {
        pause(2000);
        __atomic_store_n(&undeferred_done, 1, __ATOMIC_RELAXED);
        omp_fulfill_event(ev_undeferred);
      }
      undeferred_seen = __atomic_load_n(&undeferred_done, __ATOMIC_RELAXED);
#pragma omp taskwait
    }
  }
  check_counts(ran.data(), kTasks, 1, "detached tasks fulfilling their own event: bodies run");
  check_counts(succ_saw.data(), kTasks, 1,
               "successors of self-fulfilling detached tasks: body done when they ran");
  CHECK_EQ(undeferred_seen, 1, "task detach if(0) fulfilling itself: done when the construct returns");
}

void test_reverse_fulfill() {
  constexpr int kTasks = 30;  // with successors and the fulfiller: 61 tasks at most queued
  std::vector<int> body_ran(kTasks, 0), fulfilled(kTasks, 0), succ_fulfilled(kTasks, -1),
      succ_body(kTasks, -1);
  std::vector<omp_event_handle_t> events(kTasks);
  [[maybe_unused]] char slot[kTasks] = {};  // dependence addresses only
  int all_fulfilled_at_taskwait = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      for (int i = 0; i < kTasks; ++i) {
        omp_event_handle_t ev;
#pragma omp task detach(ev) depend(out : slot[i]) shared(body_ran)
        {
          if (i % 7 == 0) pause(1000);
          __atomic_store_n(&body_ran[i], 1, __ATOMIC_RELEASE);
        }
        events[i] = ev;
#pragma omp task depend(in : slot[i]) shared(body_ran, fulfilled, succ_fulfilled, succ_body)
        {
          succ_fulfilled[i] = __atomic_load_n(&fulfilled[i], __ATOMIC_ACQUIRE);
          succ_body[i] = __atomic_load_n(&body_ran[i], __ATOMIC_ACQUIRE);
        }
      }
      // Whether the bodies ran before is up to the scheduling: both are valid.
#pragma omp task shared(events, fulfilled)
      {
        pause(20000);
        for (int i = kTasks - 1; i >= 0; --i) {
          __atomic_store_n(&fulfilled[i], 1, __ATOMIC_RELEASE);
          omp_fulfill_event(events[i]);
        }
      }
#pragma omp taskwait
      int all = 1;
      for (int i = 0; i < kTasks; ++i) {
        if (!__atomic_load_n(&fulfilled[i], __ATOMIC_ACQUIRE)) all = 0;
      }
      all_fulfilled_at_taskwait = all;
    }
  }
  check_counts(body_ran.data(), kTasks, 1, "detached tasks fulfilled in reverse: bodies run");
  check_counts(succ_fulfilled.data(), kTasks, 1,
               "successors of detached tasks fulfilled in reverse: started before the fulfill");
  check_counts(succ_body.data(), kTasks, 1,
               "successors of detached tasks fulfilled in reverse: started before the body");
  CHECK_EQ(all_fulfilled_at_taskwait, 1,
           "taskwait after detached tasks fulfilled in reverse: passed before all fulfills");
}

}  // namespace

int main() {
  test_begin("task_detach");
  test_taskwait();
  test_taskgroup();
  test_barrier();
  test_depend();
  test_own_body();
  test_reverse_fulfill();
  if (any_skipped) printf("omp-test task_detach: team of one: thread-fulfilled cases skipped\n");
  return test_end();
}
