// A tiny weft program for the program-level tests (tests/cli/CMakeLists.txt):
// its first non-weft argument selects what main_fn does, so each test checks
// one exit code and one message of a real process.
//   (none)      a message around all PEs, then exit(0)
//   exit7       weft::exit(7)
//   quiescence  a few messages, then exit_at_quiescence(5)
//   stats       a few messages on every PE, then exit(0)
//   badpe       send to PE 10000 (fatal, exit 3)
//   badhandler  a message for handler id 9999 (fatal, exit 3)
//   throw       a handler throws std::runtime_error("boom") (fatal, exit 3)
//   throwmain   main_fn throws std::runtime_error("main boom") (fatal, exit 3)
//   hang        never exits (run with --weft:on-quiescence=wait: for
//               --weft:timeout, exit 124)
//   forget      a message to the last PE, whose handler prints a line (not
//               flushed) and never calls weft::exit: the job ends quiescent
//               (exit 4, weft's message naming 'probe.forget'); the probe
//               then leaves with _Exit, so the line shows only if weft
//               flushed it
//   arena       each PE mallocs a block and prints which NUMA node's mimalloc
//               arena it is in (--weft:mem=local) and the range's policy
//   mempolicy   each PE prints its memory policy and the NUMA node of a page
//               it touched (--weft:mem), then exit at quiescence
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>
#include <weft/base/topology.hpp>
#include <weft/weft.hpp>

namespace {

weft::handler_id h_ring, h_bounce, h_throw, h_noop, h_forget, h_mempolicy, h_arena;

struct hop {
  int remaining;
  int exit_code;  // < 0: do not exit at the end of the ring
};

// Passes the message to the next PE until `remaining` reaches 0.
void ring(weft::message_ptr m) {
  hop& h = m->as<hop>();
  if (h.remaining-- == 0) {
    if (h.exit_code >= 0) weft::exit(h.exit_code);
    return;
  }
  weft::send((weft::my_pe() + 1) % weft::num_pes(), std::move(m));
}

// Sends `remaining` more messages to the next PE, one at a time.
void bounce(weft::message_ptr m) {
  hop& h = m->as<hop>();
  if (h.remaining-- <= 0) return;
  weft::send((weft::my_pe() + 1) % weft::num_pes(), std::move(m));
}

void thrower(weft::message_ptr) {
  throw std::runtime_error("boom");
}

void noop(weft::message_ptr) {}

// The job's last handler: it waits until every other PE is idle, so it is
// the last thing that runs, prints a line into stdio's buffer, and returns.
void forget(weft::message_ptr) {
  weft::detail::end_idle_period();  // this PE may still count as idle until its turn ends
  while (weft::detail::idle_pes() < weft::node_size() - 1) sched_yield();
  std::printf("probe: forget: the last handler ran on PE %d\n", weft::my_pe());
}

// --weft:mem: the calling PE's memory policy as the kernel reports it, and
// the NUMA node of a page it has just touched (get_mempolicy(2)).
void mempolicy(weft::message_ptr) {
  int mode = -1;
  unsigned long mask[16] = {};
  if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 8 * sizeof(unsigned long), nullptr, 0) != 0)
    mode = -1;
  static const char* names[] = {"default", "preferred", "bind", "interleave", "local"};
  std::vector<char> page(1 << 20, 1);
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0ul, page.data() + 4096,
              3ul /* F_NODE|F_ADDR */) != 0)
    node = -1;
  std::printf("probe: PE %d mempolicy=%s nodes=0x%lx page_node=%d\n", weft::my_pe(),
              mode >= 0 && mode <= 4 ? names[mode] : "unknown", mask[0], node);
}

// --weft:mem=local: the program's heap (malloc, mimalloc's) comes from the
// arena of the PE's NUMA node, whose range is bound to that node.
void arena(weft::message_ptr) {
  void* block = std::malloc(1 << 20);
  static_cast<char*>(block)[4096] = 1;
  int in = -1;
  for (const weft::base::numa_arena& a : weft::base::numa_arenas())
    if (static_cast<char*>(block) >= a.start && static_cast<char*>(block) < a.start + a.bytes)
      in = a.node;
  int mode = -1;
  unsigned long mask[16] = {};
  if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 8 * sizeof(unsigned long),
              static_cast<char*>(block) + 4096, 2ul /* F_ADDR */) != 0)
    mode = -1;
  std::printf("probe: PE %d arenas=%zu block_in_arena_of_node=%d range_policy=%s nodes=0x%lx\n",
              weft::my_pe(), weft::base::numa_arenas().size(), in,
              mode == 1   ? "preferred"
              : mode == 0 ? "default"
                          : "other",
              mask[0]);
  std::free(block);
}

void program(weft::args a) {
  const std::string what = a.argc > 1 ? a.argv[1] : "";
  const int n = weft::num_pes();
  if (what.empty()) {
    weft::send(0, weft::make_message_with(h_ring, hop{n, 0}));
  } else if (what == "exit7") {
    weft::exit(7);
  } else if (what == "quiescence") {
    for (int pe = 0; pe < n; ++pe)
      weft::send(pe, weft::make_message_with(h_bounce, hop{3 * n, -1}));
    weft::exit_at_quiescence(5);
  } else if (what == "stats") {
    // Every PE handles messages, then the ring ends the run.
    for (int pe = 0; pe < n; ++pe)
      for (int i = 0; i < 4; ++i) weft::send(pe, weft::make_message(h_noop, 8));
    weft::send(0, weft::make_message_with(h_ring, hop{2 * n, 0}));
  } else if (what == "badpe") {
    weft::send(10000, weft::make_message(h_noop, 8));
  } else if (what == "badhandler") {
    weft::send(0, weft::make_message(9999, 8));
  } else if (what == "throw") {
    weft::send(n - 1, weft::make_message(h_throw, 8));
  } else if (what == "throwmain") {
    throw std::runtime_error("main boom");
  } else if (what == "hang") {
    // Nothing to do and no exit: with --weft:on-quiescence=wait only
    // --weft:timeout ends this run.
  } else if (what == "arena") {
    for (int pe = 0; pe < n; ++pe) weft::send(pe, weft::make_message(h_arena, 8));
    weft::exit_at_quiescence(0);
  } else if (what == "mempolicy") {
    for (int pe = 0; pe < n; ++pe) weft::send(pe, weft::make_message(h_mempolicy, 8));
    weft::exit_at_quiescence(0);
  } else if (what == "forget") {
    weft::send(n - 1, weft::make_message(h_forget, 8));
  } else {
    std::fprintf(stderr, "probe: unknown action '%s'\n", what.c_str());
    weft::exit(99);
  }
}

}  // namespace

int main(int argc, char** argv) {
  h_ring = weft::register_handler("probe.ring", ring);
  h_bounce = weft::register_handler("probe.bounce", bounce);
  h_throw = weft::register_handler("probe.throw", thrower);
  h_noop = weft::register_handler("probe.noop", noop);
  h_forget = weft::register_handler("probe.forget", forget);
  h_mempolicy = weft::register_handler("probe.mempolicy", mempolicy);
  h_arena = weft::register_handler("probe.arena", arena);
  const int code = weft::run(argc, argv, program);
  if (argc > 1 && std::strcmp(argv[1], "forget") == 0) std::_Exit(code);  // no flush of ours
  std::printf("probe: weft::run returned %d\n", code);
  return code;
}
