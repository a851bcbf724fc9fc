// --weft:commap=CPU under mpirun: the comm thread of every process is bound
// to that CPU, and nothing else is. Run with --weft:bind=none, so that no
// PE is bound, and --expect=CPU (the commap given) or --expect=none (no
// commap: the control).
//
// First the comm threads carry traffic: PE 0 and the last PE of the job (on
// another node) bounce a numbered message, checked at every hop. Then each
// node looks at its own threads (/proc/self/task, sched_getaffinity):
//  - --expect=CPU: exactly one thread is bound to one CPU, that CPU, and it
//    last ran there (/proc/.../stat); with comm=hybrid a PE may have moved
//    the traffic before the comm thread bound itself, so a node looks again
//    (a bounded number of times) until it has;
//  - --expect=none: no thread is bound to a single CPU.
// weft::config().commap must say the same. Any failure is a weft fatal
// error naming the node, so the whole job fails; exit 0 means passed.
#include <dirent.h>
#include <sched.h>
#include <sys/types.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "weft/base/error.hpp"
#include "weft/weft.hpp"

namespace {

int g_expect = -1;  // the CPU, or -1: none
constexpr int pingpong_rounds = 500;
constexpr int max_looks = 4000;  // 5 ms apart: 20 s at most

struct thread_view {
  int single_expected = 0;  // threads bound to exactly the expected CPU
  int single_any = 0;       // threads bound to exactly one CPU, any
  int ran_elsewhere = 0;    // of the first kind, last seen on another CPU
  int threads = 0;
};

// The CPU a thread last ran on: field 39 of /proc/self/task/TID/stat.
int last_cpu(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/stat");
  std::string line;
  std::getline(in, line);
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));  // from field 3 (state) on
  std::string field;
  for (int f = 3; f <= 39 && rest >> field; ++f)
    if (f == 39) return std::atoi(field.c_str());
  return -1;
}

thread_view look() {
  thread_view v;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) weft::base::fatal("mp_commap: cannot open /proc/self/task");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const pid_t tid = pid_t(std::atoi(e->d_name));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(tid, sizeof set, &set) != 0) continue;  // the thread ended
    ++v.threads;
    if (CPU_COUNT(&set) != 1) continue;
    ++v.single_any;
    if (g_expect >= 0 && CPU_ISSET(g_expect, &set)) {
      ++v.single_expected;
      if (last_cpu(e->d_name) != g_expect) ++v.ran_elsewhere;
    }
  }
  ::closedir(d);
  return v;
}

struct report {
  int node;
  int single_expected;
  int single_any;
  int ran_elsewhere;
  int threads;
  int looks;
  int config_commap;
};

weft::handler_id h_ping, h_look, h_report;
int g_reports = 0;  // PE 0

void look_and_report(int looks) {
  const thread_view v = look();
  if (g_expect >= 0 && v.single_expected == 0 && looks < max_looks) {
    // comm=hybrid: the comm thread may not have started yet.
    weft::after(std::chrono::milliseconds(5), [looks] { look_and_report(looks + 1); });
    return;
  }
  weft::send(0, weft::make_message_with(
                    h_report, report{weft::my_node(), v.single_expected, v.single_any,
                                     v.ran_elsewhere, v.threads, looks, weft::config().commap}));
}

void on_look(weft::message_ptr) {
  look_and_report(1);
}

void on_report(weft::message_ptr m) {
  const report r = m->as<report>();
  std::printf("mp_commap: node %d: %d threads, %d bound to one CPU, %d to CPU %d (%d looks)\n",
              r.node, r.threads, r.single_any, r.single_expected, g_expect, r.looks);
  std::fflush(stdout);
  if (g_expect >= 0) {
    if (r.single_expected != 1 || r.single_any != 1)
      weft::base::fatal(
          "mp_commap: node %d: %d threads bound to CPU %d alone and %d to one CPU; expected "
          "exactly one, the comm thread",
          r.node, r.single_expected, g_expect, r.single_any);
    if (r.ran_elsewhere != 0)
      weft::base::fatal("mp_commap: node %d: the thread bound to CPU %d last ran elsewhere",
                        r.node, g_expect);
  } else if (r.single_any != 0) {
    weft::base::fatal("mp_commap: node %d: %d threads bound to one CPU without --weft:commap",
                      r.node, r.single_any);
  }
  if (r.config_commap != g_expect)
    weft::base::fatal("mp_commap: node %d: weft::config().commap is %d, expected %d", r.node,
                      r.config_commap, g_expect);
  if (++g_reports == weft::num_nodes()) {
    std::printf("mp_commap: passed in %d processes\n", weft::num_nodes());
    std::fflush(stdout);
    weft::exit(0);
  }
}

struct ball {
  int round;
  int from;
};

void on_ping(weft::message_ptr m) {
  ball& b = m->as<ball>();
  const int last = weft::num_pes() - 1;
  const int me = weft::my_pe();
  if (b.from != (me == 0 ? last : 0))
    weft::base::fatal("mp_commap: PE %d got the ball from PE %d", me, b.from);
  if (me == 0 && ++b.round == pingpong_rounds) {
    // The traffic went through: now every node looks at its threads.
    for (int n = 0; n < weft::num_nodes(); ++n)
      weft::send(n * weft::node_size(), weft::make_message(h_look, 0));
    return;
  }
  b.from = me;
  weft::send(me == 0 ? last : 0, std::move(m));
}

}  // namespace

int main(int argc, char** argv) {
  bool given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--expect=", 0) == 0) {
      const std::string v = a.substr(9);
      g_expect = v == "none" ? -1 : std::atoi(v.c_str());
      given = true;
    }
  }
  if (!given) {
    std::fprintf(stderr, "usage: mp_commap --expect=CPU|none [--weft:...]\n");
    return 2;
  }
  h_ping = weft::register_handler("mp_commap.ping", on_ping);
  h_look = weft::register_handler("mp_commap.look", on_look);
  h_report = weft::register_handler("mp_commap.report", on_report);
  const int rc = weft::run(argc, argv, [](weft::args) {
    if (weft::num_nodes() < 2) weft::base::fatal("mp_commap needs a job of 2 or more processes");
    weft::send(weft::num_pes() - 1, weft::make_message_with(h_ping, ball{0, 0}));
  });
  return rc;
}
