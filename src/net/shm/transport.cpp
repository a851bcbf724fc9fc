// The "shm" transport: the processes of one host (one mpirun job) exchange
// messages through POSIX shared memory. This file holds its lifecycle
// (init, the startup barrier, finalize, abort), the liveness of the peers,
// the collectives and the doorbell's sleeping side; the other roles have a
// file each, as UCX's uct/sm/mm splits its memory domain, receive side and
// send side, single copy apart:
//   segment.{hpp,cpp}  the segments: layout, names, create_segment, mapping,
//                      unlinking
//   ring.{hpp,cpp}     the ring records and doorbells; the send path and
//                      drain, one handler per record kind
//   rendezvous.cpp     large messages: pool loans and cross-memory attach
//   transport.hpp      the class, its peers, the views of their pools
// Measured figures behind the defaults: docs/net.md.
//
// Layout. Each process owns one segment that only it reads from: a header
// and one single-producer single-consumer byte ring per sender. A sender
// copies a small message once into the receiver's ring; the receiver copies
// it out into a buffer from hooks.alloc. No lock anywhere: every ring has
// one writer process and one reader process, and core serialises the calls
// inside a process. Large messages go as descriptors: lent from the
// sender's message pool, or read by cross-memory attach, or else in chunks
// through the ring (rendezvous.cpp).
//
// Failure. Each process holds a pidfd per peer and polls them (one system
// call) at most every 100 ms from progress() and from every wait, plus the
// peers' abort flags; a dead peer becomes hooks.node_lost. pidfds see a
// zombie as gone and cannot be fooled by a reused pid, unlike kill(pid, 0),
// which remains the fallback on kernels older than 5.3.
//
// Rejected: XPMEM/KNEM (faster single copy, but not in stock kernels); one
// shared ring per receiver (needs an atomic per send and lets one sender
// starve the others); delivering while init() waits for the last peers (core
// may not be ready for messages before init returns).
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include "../peer_watch.hpp"
#include "transport.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/os.hpp"
#include "weft/base/timer.hpp"

namespace weft::net {
namespace shm {

namespace {
void sleep_ns(long ns) {
  timespec ts{0, ns};
  nanosleep(&ts, nullptr);
}
}  // namespace

// ---------------------------------------------------------------- bootstrap

void shm_transport::fail_init(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  unlink_names();
  base::fatal("shm transport (node %d of %d): %s", rank_, size_, msg);
}

void shm_transport::fail_init_sys(base::os::sys_failure f, const char* fmt, ...) {
  char purpose[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(purpose, sizeof purpose, fmt, ap);
  va_end(ap);
  unlink_names();
  base::fatal_sys(f.err, f.call, "%s (shm transport, node %d of %d)", purpose, rank_, size_);
}

void shm_transport::init(const launch_info& launch, const hooks& h, double startup_timeout_s) {
  if (initialised_) base::fatal("shm transport: init() called twice");
  // local_size 0: the launcher does not say (Slurm): trust the user's
  // choice; a process on another host then fails to arrive, named.
  if (launch.local_size != 0 && launch.local_size != launch.size)
    base::usage_error(
        "--weft:transport=shm joins the processes of one host, but this job (launched by %s) "
        "has %d processes of which %d run on this host; use --weft:transport=mpi or "
        "--weft:transport=ucx for a job that spans hosts",
        launch.launcher.c_str(), launch.size, launch.local_size);
  if (h.alloc == nullptr || h.deliver == nullptr || h.release == nullptr)
    base::fatal("shm transport: init() without alloc, deliver and release hooks");
  rank_ = launch.rank;
  size_ = launch.size;
  job_ = launch.job_id;
  hooks_ = h;
  check_cycles_ = std::uint64_t(double(liveness_period_ns) / base::ns_per_cycle());
  const double timeout_s = std::clamp(startup_timeout_s, 0.001, 1e6);
  const std::uint64_t deadline = base::wall_ns() + std::uint64_t(timeout_s * 1e9);

  std::size_t rb = opts_.ring_bytes;
  if (rb == 0) {
    // The largest power of two within the budget share (rounding up would
    // exceed the budget), and smaller while the job's segments would take
    // more than half of what /dev/shm has free (a container's /dev/shm is
    // often 64 MiB).
    const std::size_t share = ring_budget_bytes / std::size_t(std::max(1, size_ - 1));
    rb = default_ring_max;
    while (rb > default_ring_min && rb > share) rb >>= 1;
    if (const auto free = base::os::shared_memory_free_bytes()) {
      const double free_bytes = double(*free);
      while (rb > default_ring_min &&
             double(size_) * double(segment_bytes(size_, rb)) > free_bytes / 2)
        rb >>= 1;
    }
  }
  rb = std::clamp(rb, min_ring_bytes, max_ring_bytes);
  ring_bytes_ = min_ring_bytes;
  while (ring_bytes_ < rb) ring_bytes_ <<= 1;

  peers_.resize(std::size_t(size_));
  for (int i = 0; i < size_; ++i) peers_[std::size_t(i)].node = i;
  create_own();
  open_peers(deadline, timeout_s);
  probe_cma();
  arrive(deadline, timeout_s);
  initialised_ = true;
  // Every process has mapped every segment: the names are no longer needed,
  // and without them nothing is left in /dev/shm however this job ends.
  unlink_own();
  next_check_ = base::cycles() + check_cycles_;
}

void shm_transport::setup_peer(peer& p) {
  seg_header* h = p.hdr;
  const std::string name = shm_segment_name(job_, p.node);
  const std::uint64_t rb = h->ring_bytes;
  if (h->magic != seg_magic || h->version != seg_version)
    fail_init("%s is not a weft shm segment of this version (%u); mixed weft builds in one job?",
              name.c_str(), seg_version);
  if (h->rank != p.node || h->nodes != size_ || rb < min_ring_bytes || rb > max_ring_bytes ||
      (rb & (rb - 1)) != 0 || p.map_bytes != segment_bytes(size_, rb))
    fail_init("%s belongs to another job (rank %d of %d): two jobs share the job id '%s'?",
              name.c_str(), h->rank, h->nodes, job_.c_str());
  p.pid = h->pid;
  p.pidfd = open_pidfd(p.pid);
  if (p.pidfd == -1 && errno == ESRCH)
    fail_init("node %d (process %d) exited during startup", p.node, int(p.pid));
  if (p.pidfd == -1 && errno != ENOSYS)
    fail_init_sys({"pidfd_open", errno}, "for node %d (process %d)", p.node, int(p.pid));

  p.tx_ctl = ring_at(p.map, rank_, rb);
  // Of the peer's segment, only the ring we write (segment.cpp, create_own).
  base::os::prefault(p.tx_ctl, sizeof(ring_ctl) + rb);
  p.tx_data = ring_data(p.tx_ctl);
  p.tx_mask = rb - 1;
  // A record may take at most a quarter of the ring, so that the lazily
  // published head never starves the sender (see publish_head).
  p.eager_limit = std::min<std::size_t>(opts_.eager_max, rb / 4);
  p.chunk_limit = rb / 4 - 16;
  p.rx_ctl = ring_at(own_map_, p.node, ring_bytes_);
  p.rx_data = ring_data(p.rx_ctl);
  p.rx_mask = ring_bytes_ - 1;
  map_pool(p);
  p.ready = true;
}

void shm_transport::open_peers(std::uint64_t deadline, double timeout_s) {
  int missing = size_ - 1;
  while (missing > 0) {
    for (peer& p : peers_) {
      if (p.node == rank_ || p.ready) continue;
      if (p.map == nullptr && !try_map(p)) continue;
      if (p.hdr->phase.load(std::memory_order_acquire) < phase_ready) continue;
      setup_peer(p);
      --missing;
    }
    if (missing == 0) break;
    if (base::wall_ns() > deadline) {
      std::string absent, unready;
      for (peer& p : peers_) {
        if (p.node == rank_ || p.ready) continue;
        std::string& list = p.map == nullptr ? absent : unready;
        list += (list.empty() ? "" : ", ") + std::to_string(p.node);
      }
      fail_init(
          "%d process(es) did not arrive within %g s (--weft:startup-timeout): node(s) %s%s%s",
          missing, timeout_s, absent.empty() ? unready.c_str() : absent.c_str(),
          !absent.empty() && !unready.empty() ? "; not ready: node(s) " : "",
          !absent.empty() && !unready.empty() ? unready.c_str() : "");
    }
    if (opts_.while_waiting) opts_.while_waiting();
    sleep_ns(200'000);
  }
  for (peer& p : peers_)
    if (p.node != rank_) {
      others_.push_back(&p);
      pollfds_.push_back(pollfd{p.pidfd, POLLIN, 0});
    }
}

// The init barrier: every process waits until every other has mapped every
// segment and probed CMA. Flags per process (not the counter barrier) so that
// a timeout can name who is missing.
void shm_transport::arrive(std::uint64_t deadline, double timeout_s) {
  own_.load()->phase.store(phase_arrived, std::memory_order_release);
  unsigned spins = 0;
  for (;;) {
    bool all = true;
    for (peer* p : others_)
      if (p->hdr->phase.load(std::memory_order_acquire) < phase_arrived) all = false;
    if (all) break;
    // No poll_once() here: a peer that is through may already send, but
    // nothing is delivered before init() returns (core may not be ready),
    // and its sends wait in its queue if our ring fills.
    if (int lost = find_lost(); lost >= 0)
      fail_init("node %d (process %d) ended during startup", lost,
                int(peers_[std::size_t(lost)].pid));
    if (base::wall_ns() > deadline) {
      std::string list;
      for (peer* p : others_)
        if (p->hdr->phase.load(std::memory_order_acquire) < phase_arrived)
          list += (list.empty() ? "" : ", ") + std::to_string(p->node);
      fail_init("node(s) %s did not finish startup within %g s (--weft:startup-timeout)",
                list.c_str(), timeout_s);
    }
    wait_step(spins);
  }
  cma_ = own_.load()->cma_ok != 0;
  for (peer* p : others_) cma_ = cma_ && p->hdr->cma_ok != 0;
  light_doorbells_ = own_.load()->membarrier_ok != 0;
  for (peer* p : others_) light_doorbells_ = light_doorbells_ && p->hdr->membarrier_ok != 0;
  counters_.light_doorbells = light_doorbells_;
}

void shm_transport::teardown() {
  unlink_names();
  for (peer& p : peers_) {
    if (p.node == rank_) continue;
    if (p.pidfd != -1) close(p.pidfd);
    if (p.map != nullptr) base::os::unmap({p.map, p.map_bytes}, "a peer's shm segment");
    // Blocks core still holds in place keep the peer's pool mapped.
    if (p.view != nullptr) std::exchange(p.view, nullptr)->retire();
    p.pidfd = -1;
    p.map = nullptr;
    p.pool = nullptr;
  }
  // Blocks core still holds keep the pool mapped until they are freed.
  if (pool_ != nullptr) std::exchange(pool_, nullptr)->retire();
  if (own_map_ != nullptr) {
    own_.store(nullptr);
    base::os::unmap({own_map_, own_bytes_}, "the shm transport's own segment");
    own_map_ = nullptr;
  }
}

// ---------------------------------------------------------------- liveness

// A peer that has exited (its pidfd is readable, or it is gone) or aborted;
// -1 if all live. When several are gone, one that did not abort is named
// first: the others most likely ended because they saw it go.
int shm_transport::find_lost() {
  int aborted = -1, gone = -1;
  for (peer* p : others_)
    if (aborted < 0 && p->hdr->aborted.load(std::memory_order_acquire) != 0) aborted = p->node;
  if (!pollfds_.empty() && pollfds_.front().fd != -1) {
    // poll() stays here: the pidfds are peer_watch's (open_pidfd), not a base/os primitive.
    int rc = ::poll(pollfds_.data(), nfds_t(pollfds_.size()), 0);
    if (rc == -1 && errno != EINTR) base::fatal_errno(errno, "poll() on the peers' pidfds");
    for (std::size_t i = 0; rc > 0 && i < pollfds_.size(); ++i)
      if (pollfds_[i].revents != 0 &&
          others_[i]->hdr->aborted.load(std::memory_order_acquire) == 0) {
        gone = others_[i]->node;
        break;
      }
  } else {
    for (peer* p : others_)  // kernels without pidfd_open
      if (!base::os::process_alive(p->pid) &&
          p->hdr->aborted.load(std::memory_order_acquire) == 0) {
        gone = p->node;
        break;
      }
  }
  return gone >= 0 ? gone : aborted;
}

void shm_transport::check_liveness() {
  next_check_ = base::cycles() + check_cycles_;
  if (int lost = find_lost(); lost >= 0) lose(lost);
}

void shm_transport::lose(int node) {
  const peer& p = peers_[std::size_t(node)];
  if (p.hdr->aborted.load(std::memory_order_acquire) != 0) {
    // A peer that aborted (MPI_Abort, a fatal error) ended the job with its
    // code: every process ends with that one, so that the job's status is
    // the same whichever process its launcher sees end first.
    const int code = int(p.hdr->abort_code.load());
    std::snprintf(lost_why_, sizeof lost_why_,
                  "process %d (node %d) aborted with exit code %d; ending the job", int(p.pid),
                  node, code);
    abort(code != 0 ? code : 3, lost_why_);
  } else
    std::snprintf(lost_why_, sizeof lost_why_,
                  "process %d (node %d) exited or was killed (shm transport)", int(p.pid), node);
  if (hooks_.node_lost != nullptr) hooks_.node_lost(node, lost_why_);
  base::fatal("node %d lost: %s", node, lost_why_);
}

void shm_transport::backoff(unsigned& spins) {
  if (++spins < 64)
    base::cpu_relax();
  else
    sched_yield();
}

// ----------------------------------------------------------- collectives

void shm_transport::barrier_impl() {
  seg_header* h0 = peers_[0].hdr;
  bar_sense_ ^= 1;
  if (h0->bar_count.fetch_add(1, std::memory_order_acq_rel) == std::uint32_t(size_ - 1)) {
    h0->bar_count.store(0, std::memory_order_relaxed);
    h0->bar_sense.store(bar_sense_, std::memory_order_release);
    return;
  }
  unsigned spins = 0;
  while (h0->bar_sense.load(std::memory_order_acquire) != bar_sense_) {
    poll_once();
    if (base::cycles() >= next_check_) {
      next_check_ = base::cycles() + check_cycles_;
      const int lost = find_lost();
      // A peer that left the barrier may exit at once: lost only if the
      // barrier is still closed after its death was seen.
      if (lost >= 0 && h0->bar_sense.load(std::memory_order_acquire) != bar_sense_) lose(lost);
    }
    wait_step(spins);
  }
}

void shm_transport::barrier() {
  if (!initialised_ || finalised_) base::fatal("shm transport: barrier() outside init..finalize");
  barrier_impl();
}

void shm_transport::allgather(const void* mine, std::size_t bytes, void* all) {
  if (!initialised_ || finalised_) base::fatal("shm transport: allgather() outside init..finalize");
  seg_header* own = own_.load(std::memory_order_relaxed);
  const auto* src = static_cast<const unsigned char*>(mine);
  auto* dst = static_cast<unsigned char*>(all);
  // In pieces of the gather area: write, barrier, read everyone's, barrier
  // (so nobody overwrites a piece before all have read it).
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(gather_bytes, bytes - off);
    if (n != 0) std::memcpy(own->gather, src + off, n);
    barrier_impl();
    for (int i = 0; i < size_; ++i)
      if (n != 0)
        std::memcpy(dst + std::size_t(i) * bytes + off,
                    i == rank_ ? src + off : peers_[std::size_t(i)].hdr->gather, n);
    barrier_impl();
    off += n;
  } while (off < bytes);
}

// ------------------------------------------------------ sleeping, waking

void shm_transport::wait_for_incoming(std::uint64_t timeout_ns) {
  seg_header* own = own_.load(std::memory_order_relaxed);
  if (!initialised_ || finalised_ || own == nullptr || timeout_ns == 0) return;
  if (wake_pending_.exchange(0, std::memory_order_seq_cst) != 0) return;
  own->doorbell.store(1, std::memory_order_seq_cst);
  // Receivers whose ring is too full for our queue ring us when they make room.
  if (queued_peers_ != 0)
    for (peer* p : others_)
      if (p->queued) p->tx_ctl->space_wanted.store(1, std::memory_order_seq_cst);
  // Pairs with the fence of ring_doorbell and publish_head in the waker.
  if (light_doorbells_)
    base::global_heavy_fence();
  else
    base::full_fence();
  if (!work_ready()) {
    const std::uint64_t start = base::wall_ns();
    const std::uint64_t end = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    for (;;) {
      const std::uint64_t now = base::wall_ns();
      if (now >= end) break;
      // In slices, so that a dead peer is noticed even in a long wait.
      doorbell_sleep(&own->doorbell, 1, std::min(end - now, liveness_period_ns));
      if (own->doorbell.load(std::memory_order_seq_cst) == 0) break;
      check_liveness();
    }
  }
  own->doorbell.store(0, std::memory_order_seq_cst);
  wake_pending_.store(0, std::memory_order_seq_cst);
}

void shm_transport::wake_waiter() {
  wake_pending_.store(1, std::memory_order_seq_cst);
  if (seg_header* own = own_.load(std::memory_order_acquire)) ring_doorbell(own, light_doorbells_);
}

// -------------------------------------------------------- end of the job

void shm_transport::abort(int code, const char* why) {
  // base::fatal's format ("weft: node N: fatal: ...") with our exit code; one
  // write, no allocation: any thread may be here, in any state.
  char buf[1536];
  int n = size_ > 1
              ? std::snprintf(buf, sizeof buf, "weft: node %d: fatal: %s\n", rank_,
                              why != nullptr ? why : "abort")
              : std::snprintf(buf, sizeof buf, "weft: fatal: %s\n", why != nullptr ? why : "abort");
  if (n > 0) {
    std::size_t len = std::size_t(n);
    if (len >= sizeof buf) {  // truncated: keep the line ending
      len = sizeof buf - 1;
      buf[len - 1] = '\n';
    }
    std::fflush(stdout);
    ssize_t w = ::write(STDERR_FILENO, buf, len);
    (void)w;  // a failed write to stderr has nowhere to be reported
  }
  if (seg_header* own = own_.load(std::memory_order_acquire)) {
    own->abort_code.store(code, std::memory_order_relaxed);
    own->aborted.store(1, std::memory_order_release);
  }
  unlink_names();
  std::_Exit(code);
}

void shm_transport::finalize() {
  if (!initialised_ || finalised_) return;
  // Our sends first: every buffer released, every rendezvous acked. Peers
  // keep progressing (in their run or their own finalize), so this ends;
  // a dead peer ends it through the liveness check.
  unsigned spins = 0;
  while (queued_peers_ != 0 || outstanding_ != 0) {
    if (progress() == 0) wait_step(spins);
  }
  barrier_impl();
  // Everything sent to us is now in our rings (senders finished their
  // pushes before the barrier, and nothing waits for our acks): take it.
  while (poll_once() != 0) {
  }
  finalised_ = true;
  for (peer* p : others_) {
    if (p->pidfd != -1) close(p->pidfd);
    base::os::unmap({p->map, p->map_bytes}, "a peer's shm segment");
    p->pidfd = -1;
    p->map = nullptr;
  }
}

}  // namespace shm

using shm::shm_transport;

const shm_counters* shm_counters_of(const transport& t) {
  auto* s = dynamic_cast<const shm_transport*>(&t);
  return s != nullptr ? &s->counters() : nullptr;
}

std::unique_ptr<transport> make_shm_transport(const shm_options& options) {
  return std::make_unique<shm_transport>(options);
}

std::unique_ptr<transport> make_shm_transport() {
  return make_shm_transport(shm_options{});
}

}  // namespace weft::net
