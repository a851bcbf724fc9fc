// Between nodes: starting the transport, handing it messages, taking
// messages from it, and the few control messages nodes exchange (exit,
// quiescence waves).
//
// A message for another node waits in that node's outbox (a lock-free MPSC
// queue) until the thread driving the transport sends it: the comm thread
// (comm=thread), any PE between messages (comm=workers), or both
// (comm=hybrid: PEs help only when idle). The transport is called by one
// thread at a time (comm_busy), so backends need no locks of their own.
//
// On the wire a message is its header from `flags` on (the queue link and
// the size stay behind: message.hpp, wire_offset) and its payload. The header's
// bcast_root field, unused by a message sent to one PE, carries the
// destination PE; a broadcast keeps its root there and enters each node at
// the root's local rank; a node-queue message (flag node) enters the node
// queue. A control message (flag control) is handled by whoever drives the
// transport and is never counted for quiescence.
#include <sched.h>
#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include "core/handler_table.hpp"
#include "core/node.hpp"
#include "weft/base/error.hpp"
#include "weft/base/memory.hpp"
#include "weft/base/timer.hpp"
#include "weft/base/topology.hpp"
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace weft::core {

const char* to_string(comm_mode m) {
  switch (m) {
    case comm_mode::none:
      return "none";
    case comm_mode::thread:
      return "thread";
    case comm_mode::workers:
      return "workers";
    case comm_mode::hybrid:
      return "hybrid";
  }
  return "?";
}

comm_policy comm_policy_of(comm_mode m, bool transport_waits) {
  comm_policy p;
  p.pes_drive = m == comm_mode::workers;
  p.idle_pes_poll = m == comm_mode::workers || m == comm_mode::hybrid;
  p.comm_thread = m == comm_mode::thread || m == comm_mode::hybrid;
  p.idle_pe_waits_in_it = m == comm_mode::workers && transport_waits;
  return p;
}

namespace {

// The node the transport's hooks deliver to: set before init, cleared after
// finalize (hooks are plain function pointers).
node_state* g_net_node = nullptr;

enum control_kind : handler_id {
  ctl_exit = 1,
  ctl_qd_probe = 2,
  ctl_qd_reply = 3,
  ctl_qd_inspect = 4,        // the end-of-job check (quiescent_exit.cpp): body a wave number
  ctl_qd_inspect_reply = 5,  // inspect_reply_body
  ctl_last = ctl_qd_inspect_reply
};

struct qd_reply_body {
  std::uint64_t wave;
  std::uint64_t sent;
  std::uint64_t done;
};

// A node's quiet_report, as it travels.
struct inspect_reply_body {
  std::uint64_t wave;
  std::uint64_t sent;
  std::uint64_t done;
  std::int64_t last_run;
  std::uint64_t last_ns;
  std::uint32_t blockers;
  std::int32_t last_pe;
};

message* make_control(control_kind kind, const void* body, std::size_t bytes) {
  message_ptr m = make_message(kind, bytes);
  m->flags = message_flags::control;
  m->src_pe = -1;
  if (bytes != 0) std::memcpy(m->data(), body, bytes);
  return m.release();
}

// What a message looks like to the transport: its header from `flags` on,
// then the payload (message.hpp, wire_offset). Receive buffers are message
// blocks handed out at the same offset.
inline void* wire_begin(message* m) {
  return reinterpret_cast<std::byte*>(m) + wire_offset;
}
inline std::size_t wire_bytes(const message* m) {
  return sizeof(message) - wire_offset + m->size;
}
inline message* message_of_wire(void* buffer) {
  return reinterpret_cast<message*>(static_cast<std::byte*>(buffer) - wire_offset);
}

// The block's class waits in the first byte of the message's link, which
// the transport never writes (it fills from wire_offset on): deliver_from
// reads it there instead of working it out again (block_class_of).
void* hook_alloc(std::size_t bytes) {
  std::uint8_t cls = 0;
  auto* block = static_cast<std::byte*>(base::block_alloc(bytes + wire_offset, cls));
  std::memcpy(block, &cls, sizeof cls);
  return block + wire_offset;
}

void hook_release(void* buffer) {
  release_message(message_of_wire(buffer));
}

[[noreturn]] void hook_node_lost(int node, const char* why) {
  base::fatal("lost node %d: %s; ending the job", node, why);
}

void handle_control(node_state& node, int src, message* m) {
  static constexpr std::size_t body_bytes[] = {0,
                                               sizeof(int),
                                               sizeof(std::uint64_t),
                                               sizeof(qd_reply_body),
                                               sizeof(std::uint64_t),
                                               sizeof(inspect_reply_body)};
  static_assert(std::size(body_bytes) == ctl_last + 1);
  if (m->handler == 0 || m->handler > ctl_last || m->size != body_bytes[m->handler])
    base::fatal(
        "node %d sent control message kind %u of %u bytes, which this build does not "
        "know (different builds?)",
        src, m->handler, m->size);
  switch (m->handler) {
    case ctl_exit: {
      int code = 0;
      std::memcpy(&code, m->data(), sizeof code);
      record_exit(node, code);
      stop_pes(node);
      break;
    }
    case ctl_qd_probe: {
      // The job is ending: the prober stops too.
      if (node.stop.load(std::memory_order_relaxed)) break;
      qd_reply_body r{};
      std::memcpy(&r.wave, m->data(), sizeof r.wave);
      local_counts(node, r.sent, r.done);
      send_remote(node, src, make_control(ctl_qd_reply, &r, sizeof r));
      break;
    }
    case ctl_qd_reply: {
      qd_reply_body r{};
      std::memcpy(&r, m->data(), sizeof r);
      std::lock_guard<std::mutex> lock(node.qd_wave_mutex);
      if (node.qd_wave_open && r.wave == node.qd_wave) {
        node.qd_wave_sent += r.sent;
        node.qd_wave_done += r.done;
        ++node.qd_replies;
      }
      break;
    }
    case ctl_qd_inspect: {
      if (node.stop.load(std::memory_order_relaxed)) break;
      const quiet_report q = local_quiet_report(node);
      inspect_reply_body r{};
      std::memcpy(&r.wave, m->data(), sizeof r.wave);
      r.sent = q.sent;
      r.done = q.done;
      r.last_run = q.last_run;
      r.last_ns = q.last_ns;
      r.blockers = q.blockers;
      r.last_pe = q.last_pe;
      send_remote(node, src, make_control(ctl_qd_inspect_reply, &r, sizeof r));
      break;
    }
    case ctl_qd_inspect_reply: {
      inspect_reply_body r{};
      std::memcpy(&r, m->data(), sizeof r);
      std::lock_guard<std::mutex> lock(node.qd_wave_mutex);
      if (node.qi_open && r.wave == node.qi_wave) {
        node.qi_sent += r.sent;
        node.qi_done += r.done;
        node.qi_blockers |= r.blockers;
        if (r.last_run != run_none && (node.qi_last_pe < 0 || r.last_ns > node.qi_last_ns)) {
          node.qi_last_run = r.last_run;
          node.qi_last_pe = r.last_pe;
          node.qi_last_ns = r.last_ns;
        }
        ++node.qi_replies;
      }
      break;
    }
    default:
      break;
  }
  release_message(m);
}

// A message from the network, in a block of our allocator (hook_deliver)
// or in registered memory the transport left it in (hook_deliver_block).
void deliver_from(int src, void* buffer, std::size_t bytes, bool in_place) {
  node_state& node = *g_net_node;
  message* m = message_of_wire(buffer);
  if (bytes < sizeof(message) - wire_offset)
    base::fatal(
        "node %d sent a message of %zu bytes, shorter than a message header (%zu bytes on the "
        "wire): the nodes disagree about the message layout (different builds?)",
        src, bytes, sizeof(message) - wire_offset);
  // The fields that stayed behind, and the block's class, which is the one
  // our allocator chose.
  m->size = std::uint32_t(bytes - (sizeof(message) - wire_offset));
  if (in_place) {
    m->size_class = base::block_registered;
  } else {
    std::uint8_t cls;
    std::memcpy(&cls, static_cast<const void*>(m), sizeof cls);  // hook_alloc left it there
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizer builds (make test) check every transport's buffers.
    if (cls != base::block_class_of(m, bytes + wire_offset))
      base::fatal("node %d: a delivered buffer of %zu bytes did not come from hooks.alloc", src,
                  bytes);
#endif
    m->size_class = cls;
  }
  new (&m->link) base::queue_link;
  if (m->flags & message_flags::control) {
    handle_control(node, src, m);
    return;
  }
  // After the run has stopped, messages still arriving are dropped, as those
  // still queued at exit are (exit ends the run by design).
  if (node.stop.load(std::memory_order_relaxed)) {
    release_message(m);
    return;
  }
  if (m->handler >= node.num_handlers)
    base::fatal("node %d sent a message for handler id %u, which this node never registered", src,
                m->handler);
  if (m->flags & message_flags::node) {
    enqueue_node(node, m);
    return;
  }
  const int per = int(node.pes.size());
  if (m->flags & message_flags::broadcast) {
    if (m->bcast_root < 0 || m->bcast_root >= node.total_pes)
      base::fatal("node %d sent a broadcast rooted at PE %d, which is not a PE of the job (0..%d)",
                  src, m->bcast_root, node.total_pes - 1);
    deliver_from_network(node, m->bcast_root % per, m);
    return;
  }
  // On this node (no division, unlike node_of_pe).
  const int local = m->bcast_root - node.first_pe;
  if (unsigned(local) >= node.pes.size())
    base::fatal("node %d sent a message for PE %d, which is not on this node (PEs %d..%d)", src,
                m->bcast_root, node.first_pe, node.first_pe + int(node.pes.size()) - 1);
  // Through the MPSC queue even with spsc-pairs: deliveries from different
  // PEs driving the transport must not be reordered among rings.
  deliver_from_network(node, local, m);
}

void hook_deliver(int src, void* buffer, std::size_t bytes) {
  deliver_from(src, buffer, bytes, false);
}

void hook_deliver_block(int src, void* buffer, std::size_t bytes) {
  deliver_from(src, buffer, bytes, true);
}

// Hands every queued outgoing message to the transport. Caller holds
// comm_busy.
// At most this many per call: a PE flooding one node must not keep the
// driving thread from receiving.
constexpr int drain_batch = 256;

[[gnu::noinline]] int drain_some_outboxes(node_state& node) {
  int did = 0;
  for (int n = 0; n < node.num_nodes && did < drain_batch; ++n) {
    while (did < drain_batch) {
      base::queue_link* l = node.outboxes[std::size_t(n)].queue.pop();
      if (l == nullptr) break;
      auto* m = reinterpret_cast<message*>(l);
      node.outbox_count.fetch_sub(1, std::memory_order_relaxed);
      node.transport->send(n, wire_begin(m), wire_bytes(m));
      ++did;
    }
  }
  return did;
}

// The check inline, the loop out of line: the loop's register saves cost
// ~20 instructions on each of the two calls per message that find nothing.
inline int drain_outboxes(node_state& node) {
  if (node.outbox_count.load(std::memory_order_acquire) == 0) return 0;
  return drain_some_outboxes(node);
}

inline bool outboxes_empty(const node_state& node) {
  return node.outbox_count.load(std::memory_order_acquire) == 0;
}

void wake_comm_thread(node_state& node) {
  if (node.comm_sleeping.load(std::memory_order_seq_cst) != 0 &&
      node.comm_sleeping.exchange(0, std::memory_order_seq_cst) != 0) {
    if (node.transport_waits)
      node.transport->wake_waiter();
    else
      futex_wake(&node.comm_sleeping);
  }
}

// The comm thread: drives the transport until told to stop; backs off like
// a PE (spin, yield, then sleep: in the transport when it can wait for
// incoming messages, else on a futex with a short timeout, since the network
// cannot wake it).
void comm_thread_main(node_state& node) {
  base::block_cache_release();
  if (node.cfg.commap >= 0) base::topology::get().bind_this_thread(node.cfg.commap);
  trace::begin_track(trace::track_kind::comm, -1, -1);
  std::uint64_t idle_since = 0;
  while (!node.comm_stop.load(std::memory_order_acquire)) {
    int did = 0;
    if (!node.comm_busy.load(std::memory_order_relaxed) &&
        !node.comm_busy.exchange(true, std::memory_order_acquire)) {
      const std::uint64_t t0 = trace::on() ? base::cycles() : 0;
      did += drain_outboxes(node);
      did += node.transport->progress();
      node.comm_busy.store(false, std::memory_order_release);
      if (trace::on() && did != 0) [[unlikely]]
        trace::detail::record_progress(t0, std::uint32_t(did));
    }
    if (did != 0) {
      idle_since = 0;
      continue;
    }
    const std::uint64_t now = base::wall_ns();
    if (idle_since == 0) idle_since = now;
    const std::uint64_t idle = now - idle_since;
    if (idle < std::uint64_t(node.cfg.idle_spin_us) * 1000) {
      for (int i = 0; i < 32; ++i) base::cpu_relax();
      continue;
    }
    if (idle < std::uint64_t(node.cfg.idle_spin_us + node.cfg.idle_yield_us) * 1000) {
      sched_yield();
      continue;
    }
    // The wait is a transport call like any other: it happens only while
    // this thread holds the transport (PEs of a hybrid node then find it
    // busy and go on; a send wakes this thread instead).
    if (node.comm_busy.load(std::memory_order_relaxed) ||
        node.comm_busy.exchange(true, std::memory_order_acquire)) {
      sched_yield();
      continue;
    }
    node.comm_sleeping.store(1, std::memory_order_seq_cst);
    base::full_fence();
    if (outboxes_empty(node) && !node.comm_stop.load(std::memory_order_seq_cst)) {
      if (node.transport_waits)
        node.transport->wait_for_incoming(10'000'000);
      else
        futex_wait(&node.comm_sleeping, 1, 100'000);
    }
    node.comm_sleeping.store(0, std::memory_order_seq_cst);
    node.comm_busy.store(false, std::memory_order_release);
  }
  trace::end_track();
  base::block_cache_release();
}

std::thread g_comm_thread;

// FNV-1a over the handler names in registration order, and over the
// layers' own tables (the objects layer's entry methods): two builds whose
// tables differ would run the wrong code for a message.
std::uint64_t handler_table_hash() {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (const auto& e : handlers().entries) {
    for (const char* c = e.name; c != nullptr && *c != '\0'; ++c) mix(std::uint8_t(*c));
    mix(0xff);
  }
  for (const auto& l : handlers().layers)
    if (l.fingerprint) mix(l.fingerprint());
  return h;
}

struct node_card {
  std::uint64_t magic;
  std::uint64_t handler_hash;
  std::uint32_t handlers;
  std::uint32_t threads;
  std::uint32_t header_bytes;
  std::uint32_t pid;
};
constexpr std::uint64_t card_magic = 0x7765667432ull;  // "weft2": the wire layout of wire_offset

// Several processes on one host share its CPUs: with compact or scatter
// binding, process r of the host takes the r-th slice of the placement of
// all the host's PEs (PE 0 of every process on CPU 0 would put them all on
// one core). The oversubscription rule then counts the whole host's PEs.
// An explicit CPU list is taken as given, in every process.
void place_among_local_processes(node_state& node, const net::launch_info& launch) {
  runtime_config& cfg = node.cfg;
  if (launch.local_size <= 1) return;
  const int per = cfg.threads, all = per * launch.local_size;
  const int cpus = int(base::topology::get().allowed().size());
  node.host_pes = all;
  if (cfg.bind == "compact" || cfg.bind == "scatter") {
    std::vector<int> host = base::topology::get().place(all, cfg.bind);
    for (int i = 0; i < per; ++i)
      cfg.pe_cpus[std::size_t(i)] = host[std::size_t(launch.local_rank * per + i)];
  }
  if (all > cpus && !cfg.oversubscribed) {
    cfg.oversubscribed = true;
    if (!cfg.idle_spin_given) cfg.idle_spin_us = 0;
  }
}

std::string resolve_transport(const runtime_config& cfg, const net::launch_info& launch) {
  if (cfg.transport != "auto") return cfg.transport;
  // (local_size 0: the launcher does not say; the job may span hosts.)
  if (launch.size <= 1) return "local";
  if (launch.local_size == launch.size) return "shm";
  // Across hosts: shm inside each, mpi between. Every process must choose
  // alike, and no launcher tells each process the other hosts' counts, so
  // this holds even if every host runs one process (the composite then
  // makes no shm backend and passes everything to mpi).
  return "shm+mpi";
}

}  // namespace

void enqueue_node(node_state& node, message* m) {
  {
    std::lock_guard<std::mutex> lock(node.node_mutex);
    node.node_queue.push_back(m);
    node.node_queue_size.fetch_add(1, std::memory_order_seq_cst);
  }
  if (node.sleepers.load(std::memory_order_seq_cst) > 0) wake_one_sleeper(node);
}

void send_remote(node_state& node, int dst, message* m) {
  // After net_stop took the transport for good (a program thread sending
  // while the run ends), the message is dropped, as those still queued at
  // exit are.
  if (node.net_closed.load(std::memory_order_acquire)) {
    release_message(m);
    return;
  }
  // comm=workers, transport free, nothing of ours queued for that node:
  // straight to the transport (order is kept: an empty outbox means every
  // earlier message to that node has been handed over).
  if (node.policy.pes_drive && !node.comm_busy.load(std::memory_order_relaxed) &&
      !node.comm_busy.exchange(true, std::memory_order_acquire)) {
    outbox& box = node.outboxes[std::size_t(dst)];
    const bool direct = !node.net_closed.load(std::memory_order_relaxed) && box.queue.empty();
    if (direct) {
      node.transport->send(dst, wire_begin(m), wire_bytes(m));
      drain_outboxes(node);
    }
    node.comm_busy.store(false, std::memory_order_release);
    if (direct) return;
  }
  node.outboxes[std::size_t(dst)].queue.push(&m->link);
  node.outbox_count.fetch_add(1, std::memory_order_seq_cst);
  if (node.policy.pes_drive) {
    // A PE asleep in the transport holds it: ring it instead.
    if (node.transport_sleeping.load(std::memory_order_seq_cst) != 0)
      node.transport->wake_waiter();
    else
      try_progress(node);
  } else {
    wake_comm_thread(node);
  }
}

bool take_transport(node_state& node) {
  if (node.comm_busy.load(std::memory_order_relaxed) ||
      node.comm_busy.exchange(true, std::memory_order_acquire))
    return false;
  // net_stop sets net_closed while it holds the transport: once taken, it
  // stays open until given back.
  if (node.net_closed.load(std::memory_order_relaxed)) {
    node.comm_busy.store(false, std::memory_order_release);
    return false;
  }
  return true;
}

int progress_held(node_state& node) {
  const std::uint64_t t0 = trace::on() ? base::cycles() : 0;
  int did = drain_outboxes(node);
  did += node.transport->progress();
  if (trace::on() && did != 0) [[unlikely]]
    trace::detail::record_progress(t0, std::uint32_t(did));
  return did;
}

void give_transport(node_state& node) {
  node.comm_busy.store(false, std::memory_order_release);
}

int try_progress(node_state& node) {
  if (!take_transport(node)) return 0;
  const int did = progress_held(node);
  give_transport(node);
  return did;
}

void send_exit(node_state& node, int code) {
  for (int n = 0; n < node.num_nodes; ++n)
    if (n != node.node_id) send_remote(node, n, make_control(ctl_exit, &code, sizeof code));
}

void local_counts(node_state& node, std::uint64_t& sent, std::uint64_t& done) {
  sent = node.external_sent.load(std::memory_order_acquire);
  done = 0;
  for (auto& pe : node.pes) {
    sent += pe->sent.load(std::memory_order_acquire);
    done += pe->processed.load(std::memory_order_acquire);
  }
}

// Mattern's four-counter method over the nodes: a wave collects every
// node's (sent, handled) counts; the counts only grow, so two consecutive
// waves with equal, balanced totals mean nothing was in flight or running in
// between. Called by PE 0 of node 0 at most every 20 us.
bool global_quiescence_check(node_state& node) {
  std::uint64_t wave = 0;
  {
    std::lock_guard<std::mutex> lock(node.qd_wave_mutex);
    if (node.qd_wave_open) {
      if (node.qd_replies < node.num_nodes - 1) return false;
      node.qd_wave_open = false;
      std::uint64_t s = 0, d = 0;
      local_counts(node, s, d);
      // This node is read last: anything it received meanwhile is in its counts.
      const std::uint64_t sent = node.qd_wave_sent + s, done = node.qd_wave_done + d;
      const bool quiet = sent == done && sent == node.qd_prev_sent && done == node.qd_prev_done;
      node.qd_prev_sent = sent == done ? sent : ~0ull;
      node.qd_prev_done = done;
      if (quiet) {
        node.qd_prev_sent = ~0ull;
        node.qd_quiet_sent = sent;
        node.qd_quiet_done = done;
        return true;
      }
    }
    // Start the next wave.
    wave = ++node.qd_wave;
    node.qd_wave_open = true;
    node.qd_replies = 0;
    node.qd_wave_sent = node.qd_wave_done = 0;
  }
  // Outside the lock: sending may drive the transport, which may deliver a
  // reply that takes the lock.
  for (int n = 0; n < node.num_nodes; ++n)
    if (n != node.node_id) send_remote(node, n, make_control(ctl_qd_probe, &wave, sizeof wave));
  return false;
}

void start_inspection(node_state& node) {
  std::uint64_t wave = 0;
  {
    std::lock_guard<std::mutex> lock(node.qd_wave_mutex);
    wave = ++node.qi_wave;
    node.qi_open = true;
    node.qi_replies = 0;
    node.qi_sent = node.qi_done = 0;
    node.qi_blockers = 0;
    node.qi_last_run = run_none;
    node.qi_last_pe = -1;
    node.qi_last_ns = 0;
  }
  for (int n = 0; n < node.num_nodes; ++n)
    if (n != node.node_id) send_remote(node, n, make_control(ctl_qd_inspect, &wave, sizeof wave));
}

bool inspection_result(node_state& node, quiet_report& out, std::uint64_t& quiet_sent,
                       std::uint64_t& quiet_done) {
  std::lock_guard<std::mutex> lock(node.qd_wave_mutex);
  if (!node.qi_open || node.qi_replies < node.num_nodes - 1) return false;
  node.qi_open = false;
  out.sent = node.qi_sent;
  out.done = node.qi_done;
  out.blockers = node.qi_blockers;
  out.last_run = node.qi_last_run;
  out.last_pe = node.qi_last_pe;
  out.last_ns = node.qi_last_ns;
  quiet_sent = node.qd_quiet_sent;
  quiet_done = node.qd_quiet_done;
  return true;
}

void net_start(node_state& node) {
  const runtime_config& cfg = node.cfg;
  net::launch_info launch = net::launch_from_environment();
  const std::string name = resolve_transport(cfg, launch);
  // One process over a network transport (no launcher, or a launcher that
  // started one) has no comm thread either. PMIx may leave the job's size
  // to the transport to ask: there a size of 1 is only a guess.
  const bool one_process = name == "local" || (launch.size == 1 && launch.launcher != "pmix");
  if (one_process && !cfg.comm.empty())
    base::usage_error(
        "--weft:comm=%s: a comm mode applies only to runs of several processes; "
        "this run is one process",
        cfg.comm.c_str());
  if (one_process && cfg.commap >= 0)
    base::usage_error(
        "--weft:commap=%d: a comm thread exists only in runs of several processes; "
        "this run is one process",
        cfg.commap);
  node.transport = net::create_transport(name);
  // weft::config().transport names what auto chose.
  node.cfg.transport = name;
  // Errors during the bootstrap already name the process (a local run is
  // node 0 of a job of its own, whatever the launcher says).
  if (launch.size > 1 && name != "local") base::set_message_origin(launch.rank);
  g_net_node = &node;
  net::hooks h;
  h.alloc = hook_alloc;
  h.deliver = hook_deliver;
  h.deliver_block = hook_deliver_block;
  h.release = hook_release;
  h.node_lost = hook_node_lost;
  // An attached node (libweft-omp: a plain OpenMP program) runs each
  // process of a launched job as a node of its own by default (team.cpp):
  // OpenMP is per process. That is no surprise worth a warning, so the
  // local transport is told it runs alone; the placement below still
  // shares the host's CPUs among the processes.
  net::launch_info told = launch;
  if (node.attached && name == "local") told.size = 1, told.rank = 0;
  node.transport->init(told, h, cfg.startup_timeout_s);
  node.node_id = node.transport->node_rank();
  node.num_nodes = node.transport->num_nodes();
  node.first_pe = node.node_id * int(node.pes.size());
  node.total_pes = node.num_nodes * int(node.pes.size());
  if (node.num_nodes == 1) {
    node.comm = comm_mode::none;
    node.policy = comm_policy{};
    // --weft:transport=local under a launcher that started several
    // processes: each is a job of its own, but they share the host's CPUs
    // as a job's processes would (else every PE 0 is bound to CPU 0).
    if (name == "local") place_among_local_processes(node, launch);
    return;
  }
  base::set_message_origin(node.node_id);
  // Before the first collective: messages of nodes that are already past it
  // may arrive while it runs, and answering them needs the outboxes.
  node.outboxes = std::make_unique<outbox[]>(std::size_t(node.num_nodes));

  // Every node must run the same build with the same PE count: compare
  // cards before any message flows.
  node_card mine{card_magic,
                 handler_table_hash(),
                 std::uint32_t(handlers().entries.size()),
                 std::uint32_t(node.pes.size()),
                 std::uint32_t(sizeof(message)),
                 std::uint32_t(::getpid())};
  std::vector<node_card> cards(std::size_t(node.num_nodes));
  node.transport->allgather(&mine, sizeof mine, cards.data());
  for (int n = 0; n < node.num_nodes; ++n) {
    const node_card& c = cards[std::size_t(n)];
    if (c.magic != card_magic || c.header_bytes != mine.header_bytes)
      base::usage_error(
          "node %d (pid %u) runs a different version of weft than node %d: every "
          "process of a job must run the same program build",
          n, c.pid, node.node_id);
    if (c.handlers != mine.handlers || c.handler_hash != mine.handler_hash)
      base::usage_error(
          "node %d (pid %u) has a different handler table (%u handlers, hash %016llx) than node "
          "%d (%u handlers, hash %016llx): every process of a job must run the same program "
          "build",
          n, c.pid, c.handlers, static_cast<unsigned long long>(c.handler_hash), node.node_id,
          mine.handlers, static_cast<unsigned long long>(mine.handler_hash));
    if (c.threads != mine.threads)
      base::usage_error(
          "node %d runs %u PEs but node %d runs %u: every node of a job must have "
          "the same --weft:threads",
          n, c.threads, node.node_id, mine.threads);
  }

  place_among_local_processes(node, launch);
  if (cfg.comm == "thread")
    node.comm = comm_mode::thread;
  else if (cfg.comm == "workers")
    node.comm = comm_mode::workers;
  else if (cfg.comm == "hybrid")
    node.comm = comm_mode::hybrid;
  else
    // A dedicated comm thread only when it gets a CPU of its own; else it
    // would take turns with the PEs it serves.
    node.comm =
        node.pes.size() > 1 && int(node.pes.size()) < int(base::topology::get().allowed().size())
            ? comm_mode::thread
            : comm_mode::workers;
  if (cfg.commap >= 0 && node.comm == comm_mode::workers)
    base::usage_error("--weft:commap=%d: comm=workers has no comm thread to bind", cfg.commap);
  node.transport_waits = node.transport->can_wait();
  node.policy = comm_policy_of(node.comm, node.transport_waits);
  node.transport_pauses = node.transport->pause_between_polls();
  // Large messages are written where the transport can send them from
  // without a copy (lesson 5). No PE runs yet.
  base::set_registered_memory(node.transport->message_memory());
}

void net_start_threads(node_state& node) {
  if (node.policy.comm_thread) g_comm_thread = std::thread(comm_thread_main, std::ref(node));
}

void net_stop(node_state& node) {
  if (g_comm_thread.joinable()) {
    node.comm_stop.store(true, std::memory_order_seq_cst);
    wake_comm_thread(node);
    if (node.transport_waits) node.transport->wake_waiter();
    g_comm_thread.join();
  }
  // Take the transport for good: a program thread may still be inside
  // weft::send (it gives the transport back, or drops its message, once
  // net_closed is set).
  while (node.comm_busy.exchange(true, std::memory_order_acquire)) sched_yield();
  node.net_closed.store(true, std::memory_order_release);
  if (node.num_nodes > 1) {
    // What is still queued (the exit notices among it) goes out; finalize
    // then sends what the transport holds and meets the other nodes.
    while (!outboxes_empty(node)) {
      drain_outboxes(node);
      node.transport->progress();
    }
  }
  // No PE runs any more; blocks already given out return to the transport's
  // memory when freed, which outlives finalize for them.
  base::set_registered_memory(nullptr);
  node.transport->finalize();
  node.comm_busy.store(false, std::memory_order_release);
  g_net_node = nullptr;
  base::set_message_origin(-1);
}

}  // namespace weft::core
