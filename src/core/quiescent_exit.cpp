// The end of a job that never calls weft::exit.
//
// Such a program used to sleep forever once its work was done, without a
// word, and whatever stdio still buffered was lost when the user killed it.
// Now, once the whole job is quiescent and nothing could ever give it work
// again, node 0 says so on stderr, naming what ran last, and ends the job
// through weft::exit(base::exit_quiescent): every node stops, flushes its
// output (finish_node) and weft::run returns 4 in every process.
// --weft:on-quiescence=wait keeps such a job waiting, for programs that wait
// for events weft cannot see (a signal, a file, a thread it trusts).
//
// Idle time only triggers a check; the decision is a proof. The check starts
// once PE 0 of node 0 has been idle for `first_wait` (its sleep limit carries
// the due time). It then runs the counting argument of quiescence detection
// (quiescence_check, global_quiescence_check): two consecutive sweeps (one
// node) or waves (several) that read the same balanced totals show an
// instant when no message was in flight and no handler ran. Timers count as
// messages in flight (weft::after), asynchronous loops too
// (pending_work_begin), main_fn until it returns, a handler until it
// returns (so does a parallel_for, an OpenMP region or a ULT waiting in it).
// Then every node inspects what the counts cannot see, and reads its counts
// again, which must not have moved (local_quiet_report). Any of these vetoes
// the end (quiet_blocker):
//  - poll_while conditions: they poll for events outside weft;
//  - a thread of the program that may still call weft: one that has called
//    into the node, or one made during the run (not among the process's
//    threads as the PEs started, not a PE, not a carrier), alive now
//    (/proc/self/task). A thread from before weft::run that never called it
//    is the only kind trusted to stay out (a library's, the sanitizer's);
//  - on_quiescence callbacks waiting: they run at quiescence and may start
//    new work (the check gives way to them and comes back later);
//  - on-quiescence=wait on any node; an attached node (libweft-omp: the
//    program's own thread is PE 0 and runs serial code between regions);
//  - weft::exit already called.
// When in doubt the job keeps running: a check that fails costs little, a
// false end kills a program that had more to do.
//
// Cost. Per message: one relaxed store of the handler id (pe_state::last_run)
// to a line the PE writes for that message anyway. Per idle period of PE 0
// of node 0: nothing until the check is due (the due time rides on the
// sleep limit the PE computes anyway). Per check: two sweeps of the node's
// counters, or two waves and an inspection across the nodes (O(nodes)
// control messages), and one listing of /proc/self/task per node; a check
// that fails doubles the wait before the next (up to `max_wait`) until PE 0
// runs something again.
#include <dirent.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>
#include "core/node.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::core {

// Two-wave counting over per-PE counters. A wave reads every PE's (sent,
// processed) pair plus the count of messages from non-PE threads. Quiescence
// holds when two consecutive waves read the very same values and sends equal
// completions: no counter moved in between, so at the moment between the
// waves every message ever sent had been handled and no handler was running
// (a handler's message counts as processed only after it returns).
bool quiescence_check(node_state& node) {
  std::vector<std::uint64_t> now;
  now.reserve(node.qd_last.size());
  std::uint64_t sent = node.external_sent.load(std::memory_order_acquire), done = 0;
  now.push_back(sent);
  for (auto& pe : node.pes) {
    std::uint64_t s = pe->sent.load(std::memory_order_acquire);
    std::uint64_t p = pe->processed.load(std::memory_order_acquire);
    now.push_back(s);
    now.push_back(p);
    sent += s;
    done += p;
  }
  const bool balanced = sent == done;
  const bool same = node.qd_last_valid && now == node.qd_last;
  node.qd_last = std::move(now);
  node.qd_last_valid = balanced;
  if (balanced && same) {
    node.qd_last_valid = false;
    return true;
  }
  return false;
}

namespace {

// How long PE 0 of node 0 stays idle before the first check, and the most
// a failed check makes it wait for the next. Long enough that a busy job
// pays nothing, short enough that a user does not wonder.
constexpr std::uint64_t first_wait_ns = 100'000'000;
constexpr std::uint64_t max_wait_ns = 1'600'000'000;
// While a check runs, PE 0 polls its progress this often.
constexpr std::uint64_t poll_ns = 1'000'000;
// Waves a check may take across nodes before it gives up (two quiet ones
// in a row end it; more mean the job is busy).
constexpr std::uint64_t max_waves = 4;

// Guest threads (carriers of the threads layer: logical threads in a PE's
// place, their team's thread 0 waiting in a handler) are weft's own: their
// kernel thread ids, sorted. Process-wide: a carrier becomes a guest of the
// running node as it starts.
std::mutex g_guests_mutex;
std::vector<int> g_guest_tids;  // guarded by g_guests_mutex

// The process's threads now (sorted); false if /proc cannot say. (Here, not
// in base/os: only this check lists threads, and a failure is an answer:
// in doubt the job keeps running.)
bool list_threads(std::vector<int>& tids) {
  tids.clear();
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return false;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(std::atoi(e->d_name));
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return true;
}

bool contains(const std::vector<int>& sorted, int tid) {
  return std::binary_search(sorted.begin(), sorted.end(), tid);
}

// A thread of the program is alive that may still call into the node.
bool program_thread_alive(node_state& node) {
  std::vector<int> now;
  if (!list_threads(now)) return true;  // cannot tell: keep waiting
  std::vector<int> pes, callers, at_start, guests;
  for (const auto& pe : node.pes) pes.push_back(pe->tid.load(std::memory_order_relaxed));
  std::sort(pes.begin(), pes.end());
  {
    std::lock_guard<std::mutex> lock(node.callers_mutex);
    callers = node.caller_tids;
    at_start = node.start_tids;
  }
  {
    std::lock_guard<std::mutex> lock(g_guests_mutex);
    guests = g_guest_tids;
  }
  for (const int tid : now) {
    if (contains(pes, tid) || contains(guests, tid)) continue;
    if (contains(callers, tid) || !contains(at_start, tid)) return true;
  }
  return false;
}

std::string describe_run(std::int64_t what, int pe) {
  const std::string on = " on PE " + std::to_string(pe);
  switch (what) {
    case run_none:
      return "nothing besides the start-up";
    case run_main:
      return "the main function" + on;
    case run_timer:
      return "a timer callback (weft::after)" + on;
    case run_qd_callback:
      return "an on_quiescence callback" + on;
    default:
      return std::string("handler '") + handler_name(handler_id(what)) + "'" + on;
  }
}

[[gnu::cold]] void end_job(node_state& node, const quiet_report& r) {
  // The program's output first, then the message after it.
  std::cout.flush();
  std::fflush(stdout);
  base::error(
      "the job is quiescent and weft::exit was not called: no message is in flight, every PE is "
      "idle, no timer or poll_while condition is pending, and no thread of the program is left "
      "that could send one. The last thing run was %s. Nothing is left to do: ending the job "
      "with exit status %d. A program that is done calls weft::exit(code) (or "
      "weft::exit_at_quiescence); one that waits for events from outside weft runs with "
      "--weft:on-quiescence=wait",
      describe_run(r.last_run, r.last_pe).c_str(), base::exit_quiescent);
  node.qe_active = false;
  weft::exit(base::exit_quiescent);
}

void check_failed(node_state& node) {
  node.qe_active = false;
  node.qe_backoff_ns = std::min(node.qe_backoff_ns * 2, max_wait_ns);
  node.qe_due_ns = base::wall_ns() + node.qe_backoff_ns;
}

// The later of two reports' last runs goes into `into`.
void merge_last(quiet_report& into, const quiet_report& r) {
  if (r.last_run == run_none) return;
  if (into.last_run == run_none || r.last_ns > into.last_ns) {
    into.last_run = r.last_run;
    into.last_pe = r.last_pe;
    into.last_ns = r.last_ns;
  }
}

}  // namespace

void note_start_threads(node_state& node) {
  std::vector<int> tids;
  if (!list_threads(tids)) tids.clear();  // then every thread counts as the program's
  std::lock_guard<std::mutex> lock(node.callers_mutex);
  node.start_tids = std::move(tids);
}

void note_caller(node_state& node) {
  const int tid = int(gettid());
  std::lock_guard<std::mutex> lock(node.callers_mutex);
  auto at = std::lower_bound(node.caller_tids.begin(), node.caller_tids.end(), tid);
  if (at == node.caller_tids.end() || *at != tid) node.caller_tids.insert(at, tid);
}

void note_guest(bool begin) {
  const int tid = int(gettid());
  std::lock_guard<std::mutex> lock(g_guests_mutex);
  auto at = std::lower_bound(g_guest_tids.begin(), g_guest_tids.end(), tid);
  const bool there = at != g_guest_tids.end() && *at == tid;
  if (begin && !there) g_guest_tids.insert(at, tid);
  if (!begin && there) g_guest_tids.erase(at);
}

// What vetoes the end is read before the counts: anything that could make
// work without moving a counter must be seen before the counts prove that
// nothing moved (a condition that sends and then ends has sent by the time
// it is gone, so the counts read after show the send).
quiet_report local_quiet_report(node_state& node) {
  quiet_report q;
  if (node.attached || node.cfg.quiescence_wait) q.blockers |= blocks_waits;
  if (node.exit_called.load(std::memory_order_acquire) || node.stop.load(std::memory_order_acquire))
    q.blockers |= blocks_ending;
  if (node.qd_requested.load(std::memory_order_acquire)) q.blockers |= blocks_callbacks;
  if (node.conditions.load(std::memory_order_acquire) != 0) q.blockers |= blocks_conditions;
  if (q.blockers == 0 && program_thread_alive(node)) q.blockers |= blocks_threads;
  local_counts(node, q.sent, q.done);
  for (const auto& pe : node.pes) {
    quiet_report one;
    one.last_run = pe->last_run.load(std::memory_order_relaxed);
    one.last_ns = pe->last_run_ns.load(std::memory_order_relaxed);
    one.last_pe = node.first_pe + pe->rank;
    merge_last(q, one);
  }
  return q;
}

std::uint64_t quiescent_check_limit_ns(const node_state& node, const pe_state& pe) {
  if (node.qe_active) return poll_ns;
  if (pe.idle_since_ns == 0) return 0;
  // A new idle period the check has not seen yet: the soonest it may be due.
  const std::uint64_t due =
      pe.idle_since_ns == node.qe_period ? node.qe_due_ns : pe.idle_since_ns + first_wait_ns;
  const std::uint64_t now = base::wall_ns();
  return due > now ? due - now : 1;
}

void maybe_end_quiescent_job(node_state& node, pe_state& pe) {
  // on_quiescence callbacks come first; the check comes back after them.
  if (node.qd_requested.load(std::memory_order_acquire) ||
      node.stop.load(std::memory_order_relaxed)) {
    node.qe_active = false;
    return;
  }
  if (!node.qe_active) {
    // No clock read on the way into an idle period: a PE that finds work
    // in its back-off never comes here with a period begun.
    if (pe.idle_since_ns == 0) return;
    if (pe.idle_since_ns != node.qe_period) {
      node.qe_period = pe.idle_since_ns;
      const std::uint64_t done = pe.processed.load(std::memory_order_relaxed);
      if (done != node.qe_mark || node.qe_backoff_ns == 0) {
        // PE 0 ran something since the last check: start afresh.
        node.qe_mark = done;
        node.qe_backoff_ns = first_wait_ns;
        node.qe_due_ns = pe.idle_since_ns + first_wait_ns;
      } else {
        // Only the transport woke it: the wait goes on as it was.
        node.qe_due_ns = std::max(node.qe_due_ns, pe.idle_since_ns + node.qe_backoff_ns);
      }
      return;
    }
    if (base::wall_ns() < node.qe_due_ns) return;
    node.qe_active = true;
    node.qe_stage = 0;
    node.qe_first_wave = node.qd_wave;
  }

  if (node.num_nodes == 1) {
    // Two sweeps, the blockers read between them (local_quiet_report).
    std::uint64_t sent = 0, done = 0;
    local_counts(node, sent, done);
    const quiet_report r = local_quiet_report(node);
    if (sent == done && r.sent == sent && r.done == done && r.blockers == 0)
      end_job(node, r);
    else
      check_failed(node);
    return;
  }

  if (node.qe_stage == 0) {
    if (global_quiescence_check(node)) {
      start_inspection(node);
      node.qe_stage = 1;
    } else if (node.qd_wave - node.qe_first_wave > max_waves) {
      check_failed(node);
    }
    return;
  }
  quiet_report all;
  std::uint64_t quiet_sent = 0, quiet_done = 0;
  if (!inspection_result(node, all, quiet_sent, quiet_done)) return;
  const quiet_report mine = local_quiet_report(node);
  all.sent += mine.sent;
  all.done += mine.done;
  all.blockers |= mine.blockers;
  merge_last(all, mine);
  // The inspection read the same totals as the quiet waves: nothing ran
  // since (the counts only grow), and no node has anything pending.
  if (all.blockers == 0 && quiet_sent == quiet_done && all.sent == quiet_sent &&
      all.done == quiet_done)
    end_job(node, all);
  else
    check_failed(node);
}

}  // namespace weft::core
