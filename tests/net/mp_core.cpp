// Core messaging across processes: a program run under mpirun (see
// mp_core.cmake) with --case=NAME and the usual --weft: options. Every
// process runs the same cases; checks are made where the data is, and any
// failure is a weft fatal error naming the node, so the whole job fails.
// A case passed when every process exits 0 and node 0 prints, as its last
// line, after weft::run has returned and every check has run:
//   mp_core: <case> passed on <PEs> PEs in <processes> processes
// (the tests require both: a process that ends early with code 0 prints
// no such line).
//
// Cases:
//   pingpong    PE 0 and the last PE of the job bounce one message 2000 times
//   alltoall    every PE sends numbered messages to every PE; each receiver
//               checks per-sender order, no loss, no duplication
//   broadcast   PE 0 broadcasts numbered messages; every PE checks it got
//               each once, in order; then the last PE broadcasts too
//   nodequeue   every node sends one message to every node's node queue
//               (send_to_node); each node checks that it is the one named
//               in the message and that it got exactly one from each node
//   quiescence  a message storm, then on_quiescence on node 0: every message
//               sent must have been handled when it fires
//   large       every PE sends numbered 64 KiB messages to every other PE
//               (over shm: lent from the sender's pool and handled in
//               place); by number the receiver drops one, holds one to the
//               end (two past the run), sends one back to its sender and
//               forwards one to a third PE; contents, order and counts checked
//   exitcode    the last PE of the job calls weft::exit(7): run returns 7 in
//               every process (the program turns that into 0, and node 0
//               prints its line)
//   fatal       node 1 ends with a fatal error: the job must fail (the test
//               expects a non-zero exit and the node named)
//   hang        node 1 stops handling messages forever (the test kills it)
//   forget      PE 0 sends one message to the job's last PE, whose handler
//               prints a line and never calls weft::exit: the job is
//               quiescent, node 0 says so and weft::run returns 4 in every
//               process (the program turns that into 0, and node 0 prints
//               its line)
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#include "weft/base/error.hpp"
#include "weft/weft.hpp"

namespace {

std::string g_case;
constexpr int alltoall_count = 3000;
constexpr int broadcast_count = 500;
constexpr int pingpong_rounds = 2000;

struct num_msg {
  int src;
  int seq;
};

// ---- per-PE state, indexed by the PE's rank in its node (written by that PE
// only) ---------------------------------------------------------------------
struct alignas(64) pe_slot {
  std::vector<int> next_seq;  // alltoall: next expected seq per source PE
  int received = 0;
  int bcast_next[2] = {0, 0};  // broadcast: next expected seq per root (0, last)
};
std::vector<pe_slot> g_slots;

pe_slot& slot() {
  return g_slots[std::size_t(weft::my_rank())];
}

// ---- node 0 counters (PE 0) -------------------------------------------------
int g_done_reports = 0;

// Node 0 only: main_fn (which runs there) sets g_node0 and the job's shape,
// and case_done() marks where the case's own checks end, before its
// weft::exit(0). main prints the "passed" line only if it was marked, after
// the checks that follow weft::run.
std::atomic<bool> g_case_done{false};
bool g_node0 = false;
int g_job_pes = 0, g_job_nodes = 0;
void case_done() {
  g_case_done.store(true);
}

void report_done();
weft::handler_id h_done;

void on_done(weft::message_ptr) {
  // PE 0: one report per PE of the job.
  if (++g_done_reports == weft::num_pes()) {
    case_done();
    weft::exit(0);
  }
}

void report_done() {
  weft::send(0, weft::make_message(h_done, 0));
}

// ---- pingpong ---------------------------------------------------------------
weft::handler_id h_ping;
void on_ping(weft::message_ptr m) {
  int& n = m->as<int>();
  const int last = weft::num_pes() - 1;
  if (weft::my_pe() == 0 && n == pingpong_rounds) {
    std::printf("mp_core: pingpong: %d rounds between PE 0 and PE %d\n", n, last);
    case_done();
    weft::exit(0);
    return;
  }
  if (weft::my_pe() == 0) ++n;
  weft::send(weft::my_pe() == 0 ? last : 0, std::move(m));
}

// ---- alltoall ---------------------------------------------------------------
weft::handler_id h_a2a, h_a2a_start;
void on_a2a(weft::message_ptr m) {
  const num_msg v = m->as<num_msg>();
  pe_slot& s = slot();
  // Messages from others may come before this PE's own start message.
  if (s.next_seq.empty()) s.next_seq.assign(std::size_t(weft::num_pes()), 0);
  if (v.src < 0 || v.src >= weft::num_pes())
    weft::base::fatal("alltoall: PE %d got a message from PE %d, not a PE of the job",
                      weft::my_pe(), v.src);
  int& want = s.next_seq[std::size_t(v.src)];
  if (v.seq != want)
    weft::base::fatal("alltoall: PE %d expected message %d from PE %d, got %d (%s)", weft::my_pe(),
                      want, v.src, v.seq,
                      v.seq < want ? "duplicate or reordered" : "lost or reordered");
  ++want;
  if (++s.received == alltoall_count * weft::num_pes()) report_done();
}
void on_a2a_start(weft::message_ptr) {
  if (slot().next_seq.empty()) slot().next_seq.assign(std::size_t(weft::num_pes()), 0);
  // Interleave destinations so every pair of nodes has traffic at once.
  for (int seq = 0; seq < alltoall_count; ++seq)
    for (int k = 0; k < weft::num_pes(); ++k) {
      const int dst = (weft::my_pe() + k) % weft::num_pes();
      weft::send(dst, weft::make_message_with(h_a2a, num_msg{weft::my_pe(), seq}));
    }
}

// ---- broadcast --------------------------------------------------------------
weft::handler_id h_bcast;
void on_bcast(weft::message_ptr m) {
  const num_msg v = m->as<num_msg>();
  const int last = weft::num_pes() - 1;
  const int which = v.src == 0 ? 0 : 1;
  if (v.src != 0 && v.src != last)
    weft::base::fatal("broadcast: PE %d got a broadcast rooted at PE %d", weft::my_pe(), v.src);
  int& want = slot().bcast_next[which];
  if (v.seq != want)
    weft::base::fatal("broadcast: PE %d expected broadcast %d from root %d, got %d", weft::my_pe(),
                      want, v.src, v.seq);
  ++want;
  if (which == 0 && want == broadcast_count && weft::my_pe() == last) {
    // The second wave: rooted on the last node.
    for (int i = 0; i < broadcast_count; ++i)
      weft::broadcast(weft::make_message_with(h_bcast, num_msg{last, i}));
  }
  if (which == 1 && want == broadcast_count) report_done();
  if (last == 0 && which == 0 && want == broadcast_count) report_done();
}

// ---- nodequeue --------------------------------------------------------------
struct nodeq_msg {
  int src_node;
  int dst_node;  // the node the sender named in send_to_node
};
weft::handler_id h_nodeq;
// This node's count of messages from each node; any PE of the node may take
// one from the node queue.
constexpr int nodeq_max_nodes = 256;
std::atomic<int> g_nodeq_from[nodeq_max_nodes];
std::atomic<int> g_nodeq_got{0};
void on_nodeq(weft::message_ptr m) {
  const nodeq_msg v = m->as<nodeq_msg>();
  if (v.dst_node != weft::my_node())
    weft::base::fatal("nodequeue: node %d (PE %d) got the message node %d sent to node %d",
                      weft::my_node(), weft::my_pe(), v.src_node, v.dst_node);
  if (v.src_node < 0 || v.src_node >= weft::num_nodes() || v.src_node >= nodeq_max_nodes)
    weft::base::fatal("nodequeue: node %d got a message from node %d, not a node of the job",
                      weft::my_node(), v.src_node);
  if (g_nodeq_from[v.src_node].fetch_add(1) != 0)
    weft::base::fatal("nodequeue: node %d got node %d's message twice", weft::my_node(),
                      v.src_node);
  // One from every node (each sender counted once, above): reported once
  // complete, by whichever PE took the last one.
  if (g_nodeq_got.fetch_add(1) + 1 == weft::num_nodes()) {
    for (int r = 0; r < weft::node_size(); ++r) report_done();
  }
}
weft::handler_id h_nodeq_start;
void on_nodeq_start(weft::message_ptr) {
  if (weft::my_rank() != 0) return;
  for (int n = 0; n < weft::num_nodes(); ++n)
    weft::send_to_node(n, weft::make_message_with(h_nodeq, nodeq_msg{weft::my_node(), n}));
}

// ---- quiescence -------------------------------------------------------------
weft::handler_id h_storm, h_count_req, h_count_reply;
std::atomic<long> g_storm_handled{0};
long g_count_total = 0;
int g_count_replies = 0;
constexpr int storm_hops = 200;
void on_storm(weft::message_ptr m) {
  g_storm_handled.fetch_add(1);
  int& hops = m->as<int>();
  if (hops == 0) return;
  --hops;
  const int next = (weft::my_pe() * 7 + hops) % weft::num_pes();
  weft::send(next, std::move(m));
}
void on_count_req(weft::message_ptr) {
  // One reply per node (rank 0 answers for the node).
  if (weft::my_rank() != 0) return;
  weft::send(0, weft::make_message_with(h_count_reply, long(g_storm_handled.load())));
}
void on_count_reply(weft::message_ptr m) {
  g_count_total += m->as<long>();
  if (++g_count_replies < weft::num_nodes()) return;
  const long want = long(weft::num_pes()) * 4 * (storm_hops + 1);
  if (g_count_total != want)
    weft::base::fatal("quiescence: detected with %ld of %ld messages handled", g_count_total, want);
  std::printf("mp_core: quiescence: %ld messages handled when it was detected\n", g_count_total);
  case_done();
  weft::exit(0);
}
weft::handler_id h_storm_start;
void on_storm_start(weft::message_ptr) {
  for (int i = 0; i < 4; ++i)
    weft::send(weft::my_pe(), weft::make_message_with(h_storm, storm_hops));
}

// ---- large ------------------------------------------------------------------
constexpr int large_bytes = 64 << 10;
struct large_head {
  int src, dst, seq;
  int back;  // 1: returned to its sender; 2: forwarded by dst to a third PE
};
unsigned char large_byte(const large_head& h, std::size_t i) {
  return static_cast<unsigned char>(h.src * 31 + h.seq * 7 + int(i));
}
// The PE that the receiver of seq from src forwards it to, or -1.
int large_forward_to(int src, int dst, int seq) {
  if (seq % 4 != 3) return -1;
  const int f = (dst + 1) % weft::num_pes();
  return f == src || f == dst ? -1 : f;
}
int large_count() {
  return 200;
}
struct large_slot {
  std::vector<int> next_seq;  // by source PE
  long got = 0, want = 0;
  std::vector<weft::message_ptr> held;
};
std::vector<large_slot> g_large;
std::vector<weft::message_ptr> g_held_past_run;  // freed after weft::run returns
std::mutex g_held_mutex;
weft::handler_id h_large, h_large_start;

void large_done_check() {
  large_slot& s = g_large[std::size_t(weft::my_rank())];
  if (s.got != s.want) return;
  s.held.clear();  // gives the blocks back to their senders
  report_done();
}
void on_large(weft::message_ptr m) {
  large_slot& s = g_large[std::size_t(weft::my_rank())];
  if (m->size != large_bytes)
    weft::base::fatal("large: PE %d got %u bytes", weft::my_pe(), m->size);
  large_head h;
  std::memcpy(&h, m->data(), sizeof h);
  const auto* b = reinterpret_cast<const unsigned char*>(m->data());
  for (std::size_t i = sizeof h; i < std::size_t(large_bytes); ++i)
    if (b[i] != large_byte(h, i))
      weft::base::fatal("large: PE %d: message %d from PE %d (back=%d): byte %zu is wrong",
                        weft::my_pe(), h.seq, h.src, h.back, i);
  ++s.got;
  if (h.back == 1) {  // ours, back
    if (h.src != weft::my_pe() || h.seq % 4 != 2)
      weft::base::fatal("large: PE %d got back message %d of PE %d", weft::my_pe(), h.seq, h.src);
  } else if (h.back == 2) {  // forwarded to us
    if (large_forward_to(h.src, h.dst, h.seq) != weft::my_pe())
      weft::base::fatal("large: PE %d got a forward it should not", weft::my_pe());
  } else {
    if (h.dst != weft::my_pe())
      weft::base::fatal("large: PE %d got message for PE %d", weft::my_pe(), h.dst);
    if (s.next_seq.empty()) s.next_seq.assign(std::size_t(weft::num_pes()), 0);
    int& want = s.next_seq[std::size_t(h.src)];
    if (h.seq != want)
      weft::base::fatal("large: PE %d expected message %d from PE %d, got %d", weft::my_pe(),
                        want, h.src, h.seq);
    ++want;
    const int fwd = large_forward_to(h.src, h.dst, h.seq);
    if (h.seq % 4 == 1) {
      if (h.seq < 8) {
        std::lock_guard<std::mutex> lock(g_held_mutex);
        g_held_past_run.push_back(std::move(m));
      } else {
        s.held.push_back(std::move(m));
      }
    } else if (h.seq % 4 == 2) {
      h.back = 1;
      std::memcpy(m->data(), &h, sizeof h);
      weft::send(h.src, std::move(m));
    } else if (fwd >= 0) {
      h.back = 2;
      std::memcpy(m->data(), &h, sizeof h);
      weft::send(fwd, std::move(m));
    }
  }
  large_done_check();
}
void on_large_start(weft::message_ptr) {
  const int me = weft::my_pe(), n = weft::num_pes(), count = large_count();
  large_slot& s = g_large[std::size_t(weft::my_rank())];
  if (s.next_seq.empty()) s.next_seq.assign(std::size_t(n), 0);
  // What comes to this PE: count from every other PE, our seq % 4 == 2
  // back from each, and the forwards that name us.
  long want = 0;
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst)
      for (int seq = 0; seq < count; ++seq) {
        if (src == dst) continue;
        if (dst == me) ++want;
        if (src == me && seq % 4 == 2) ++want;
        if (large_forward_to(src, dst, seq) == me) ++want;
      }
  s.want += want;  // messages may have come before this start message
  for (int seq = 0; seq < count; ++seq)
    for (int k = 1; k < n; ++k) {
      const int dst = (me + k) % n;
      weft::message_ptr m = weft::make_message(h_large, large_bytes);
      const large_head h{me, dst, seq, 0};
      std::memcpy(m->data(), &h, sizeof h);
      auto* b = reinterpret_cast<unsigned char*>(m->data());
      for (std::size_t i = sizeof h; i < std::size_t(large_bytes); ++i) b[i] = large_byte(h, i);
      weft::send(dst, std::move(m));
    }
  large_done_check();
}

// ---- exitcode, fatal, hang --------------------------------------------------
weft::handler_id h_poke;
void on_poke(weft::message_ptr) {
  const int last = weft::num_pes() - 1;
  if (g_case == "exitcode" && weft::my_pe() == last) weft::exit(7);
  if (g_case == "fatal" && weft::my_node() == 1 && weft::my_rank() == 0) {
    usleep(200'000);  // let every node be well into its run
    weft::base::fatal("mp_core: node 1 fails on purpose");
  }
  if (g_case == "hang" && weft::my_node() == 1 && weft::my_rank() == 0) {
    std::printf("mp_core: node 1 pid %d hangs\n", int(getpid()));
    std::fflush(stdout);
    for (;;) pause();
  }
}

// ---- forget -------------------------------------------------------------------
weft::handler_id h_forget;
void on_forget(weft::message_ptr) {
  std::printf("mp_core: forget: node %d handled the last message\n", weft::my_node());
}

void register_all() {
  h_done = weft::register_handler("mp.done", on_done);
  h_ping = weft::register_handler("mp.ping", on_ping);
  h_a2a = weft::register_handler("mp.a2a", on_a2a);
  h_a2a_start = weft::register_handler("mp.a2a_start", on_a2a_start);
  h_bcast = weft::register_handler("mp.bcast", on_bcast);
  h_nodeq = weft::register_handler("mp.nodeq", on_nodeq);
  h_nodeq_start = weft::register_handler("mp.nodeq_start", on_nodeq_start);
  h_storm = weft::register_handler("mp.storm", on_storm);
  h_count_req = weft::register_handler("mp.count_req", on_count_req);
  h_count_reply = weft::register_handler("mp.count_reply", on_count_reply);
  h_storm_start = weft::register_handler("mp.storm_start", on_storm_start);
  h_poke = weft::register_handler("mp.poke", on_poke);
  h_large = weft::register_handler("mp.large", on_large);
  h_large_start = weft::register_handler("mp.large_start", on_large_start);
  h_forget = weft::register_handler("mp.forget", on_forget);
}

}  // namespace

int main(int argc, char** argv) {
  // A different build: the handler table differs (one handler more).
  if (std::getenv("MP_CORE_EXTRA_HANDLER") != nullptr &&
      std::atoi(std::getenv("OMPI_COMM_WORLD_RANK") ? std::getenv("OMPI_COMM_WORLD_RANK") : "0") ==
          1)
    weft::register_handler("mp.extra", [](weft::message_ptr) {});
  register_all();
  // A process that arrives late (startup timeout test).
  if (const char* late = std::getenv("MP_CORE_LATE_RANK"))
    if (std::getenv("OMPI_COMM_WORLD_RANK") != nullptr &&
        std::atoi(late) == std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")))
      sleep(6);
  weft::runtime_config cfg = weft::parse_options(argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--case=", 7) == 0) g_case = argv[i] + 7;
  // (--marker=... only tags the processes for kill_one.sh.)
  static const char* cases[] = {"pingpong", "alltoall", "broadcast", "nodequeue", "quiescence",
                                "large",    "exitcode", "fatal",     "hang",      "forget"};
  bool known = false;
  for (const char* c : cases) known = known || g_case == c;
  if (!known) {
    std::fprintf(stderr,
                 "mp_core: --case=NAME required; one of pingpong, alltoall, broadcast, "
                 "nodequeue, quiescence, large, exitcode, fatal, hang, forget\n");
    return 2;
  }
  g_slots.assign(std::size_t(cfg.threads), pe_slot{});
  g_large.resize(std::size_t(cfg.threads));
  int rc = weft::run(cfg, argc, argv, [](weft::args) {
    g_node0 = true;
    g_job_pes = weft::num_pes();
    g_job_nodes = weft::num_nodes();
    if (g_case == "nodequeue" && weft::num_nodes() > nodeq_max_nodes)
      weft::base::fatal("nodequeue: at most %d nodes", nodeq_max_nodes);
    if (g_case == "pingpong") {
      weft::send(0, weft::make_message_with(h_ping, 0));
    } else if (g_case == "alltoall") {
      weft::broadcast(weft::make_message(h_a2a_start, 0));
    } else if (g_case == "broadcast") {
      for (int i = 0; i < broadcast_count; ++i)
        weft::broadcast(weft::make_message_with(h_bcast, num_msg{0, i}));
    } else if (g_case == "large") {
      weft::broadcast(weft::make_message(h_large_start, 0));
    } else if (g_case == "nodequeue") {
      weft::broadcast(weft::make_message(h_nodeq_start, 0));
    } else if (g_case == "forget") {
      weft::send(weft::num_pes() - 1, weft::make_message(h_forget, 0));
    } else if (g_case == "quiescence") {
      weft::broadcast(weft::make_message(h_storm_start, 0));
      weft::on_quiescence([] { weft::broadcast(weft::make_message(h_count_req, 0)); });
    } else {
      weft::broadcast(weft::make_message(h_poke, 0));
    }
  });
  // Messages of other nodes held past the run: the transport is gone, the
  // blocks are still readable, and freeing them is safe.
  for (const weft::message_ptr& m : g_held_past_run) {
    large_head h;
    std::memcpy(&h, m->data(), sizeof h);
    if (h.seq % 4 != 1 || h.back != 0) {
      std::fprintf(stderr, "mp_core: a message held past the run changed\n");
      return 1;
    }
  }
  g_held_past_run.clear();
  g_large.clear();
  if (g_case == "exitcode") {
    if (rc != 7) {
      std::fprintf(stderr, "mp_core: exitcode: weft::run returned %d, expected 7\n", rc);
      return 1;
    }
    rc = 0;
    g_case_done.store(true);
  }
  if (g_case == "forget") {
    if (rc != 4) {
      std::fprintf(stderr, "mp_core: forget: weft::run returned %d, expected 4\n", rc);
      return 1;
    }
    rc = 0;
    g_case_done.store(true);
  }
  if (rc != 0 || !g_node0) return rc;
  // Node 0: the case must have run to its end, not merely returned 0.
  if (!g_case_done.load()) {
    std::fprintf(stderr, "mp_core: %s: weft::run returned 0 before the case finished\n",
                 g_case.c_str());
    return 1;
  }
  std::printf("mp_core: %s passed on %d PEs in %d processes\n", g_case.c_str(), g_job_pes,
              g_job_nodes);
  std::fflush(stdout);
  return 0;
}
