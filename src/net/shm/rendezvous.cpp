// The shm transport's large messages, which the ring carries only as a
// 16-byte descriptor: the message pools (lent blocks) and cross-memory
// attach. The ring's other path for them, chunks, is ring.cpp's.
//
// Pool loans (lesson 5). Each process owns a message pool, a segment its
// peers map, where core writes its messages above the eager limit
// (transport::message_memory). Such a message goes as a descriptor
// (k_pool): the receiver's core handles it in place in the mapped pool
// (hooks.deliver_block) and its free gives the slot back (k_ack), or,
// without in-place delivery, the receiver copies it out (1 MiB per progress
// call) and acks. A lent block the receiver sends back to its owner (a
// reply in the same message, a ping-pong) goes back as a descriptor too
// (k_return): no copy either way, no system call.
//
// Cross-memory attach. Large messages not in the pool go by rendezvous: the
// sender posts {address, bytes} (k_rndv), the receiver reads the bytes
// straight from the sender's memory with process_vm_readv (one copy, like
// Open MPI's CMA single-copy path) and acks; the sender releases the buffer
// on the ack. If CMA is not permitted between every pair (probed at init) or
// disabled, or the message is below shm_options::cma_min, it goes through
// the ring in pipelined chunks instead.
//
// Either way the receiver handles one sender's records in order: a message
// being read holds that sender's later records back (drain stops), so order
// per pair holds whatever the mix of sizes.
//
// Rejected: XPMEM/KNEM (faster single copy, but not in stock kernels).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include "transport.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"

namespace weft::net::shm {

// ------------------------------------------------------------ pool loans

void pool_view::deallocate(void* start) {
  base::registered_block_restore(start);
  bool first = false, last = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --live_;
    if (owner_ != nullptr) {
      first = freed_.empty();
      freed_.push_back(remote(start));
      // Under the lock: retire() (the transport's teardown) waits for it.
      if (first) owner_->note_freed();
    }
    last = owner_ == nullptr && live_ == 0;
  }
  if (last) delete this;
}

// The own message pool: sized by shm_options::pool_bytes, less when
// /dev/shm is short, reserved (a full /dev/shm is an error, not a SIGBUS
// later), none when even 1 MiB per process does not fit.
void shm_transport::create_pool() {
  std::size_t bytes = opts_.pool_bytes;
  if (const auto free = base::os::shared_memory_free_bytes(); bytes != 0 && free) {
    const double free_bytes = double(*free);
    while (bytes >= (std::size_t(2) << 20) &&
           double(size_) * double(own_bytes_ + bytes) > free_bytes / 2)
      bytes >>= 1;
    if (double(size_) * double(own_bytes_ + bytes) > free_bytes / 2) bytes = 0;
  }
  if (bytes == 0) return;
  const std::string name = pool_segment_name(job_, rank_);
  std::snprintf(pool_name_, sizeof pool_name_, "%s", name.c_str());
  // Our own segment's name was free (or stale), so this one is stale too.
  void* m = create_segment(pool_name_, bytes, pool_linked_, [](const char* stale) {
    base::os::unlink_shared_segment(stale);
    return true;
  });
  // Core's blocks from pool_min_message on.
  const std::size_t min_message = std::max(opts_.pool_min_message, opts_.eager_max + 1);
  pool_ = new message_pool(m, bytes, min_message, min_message, [m, bytes] {
    base::os::unmap({m, bytes}, "the shm transport's message pool");
  });
}

// Maps node p's message pool, if it has one: read-write, since a block core
// holds in place carries our allocator's word in its first bytes.
void shm_transport::map_pool(peer& p) {
  const std::size_t bytes = std::size_t(p.hdr->pool_bytes);
  if (bytes == 0) return;
  const std::string name = pool_segment_name(job_, p.node);
  base::os::mapping m;
  if (const auto f = base::os::map_shared_segment(name.c_str(), bytes, bytes, true, m))
    fail_init_sys(f, "for node %d's message pool %s (%zu bytes)", p.node, name.c_str(), bytes);
  if (m.addr == nullptr)
    fail_init("node %d's message pool %s is smaller than the %zu bytes its segment says", p.node,
              name.c_str(), bytes);
  p.view = new pool_view(static_cast<unsigned char*>(m.addr), bytes, p.hdr->pool_addr, this);
  p.pool = p.view->base();
  p.pool_bytes = bytes;
}

// k_pool: a block of p's pool lent to us. In place when core takes such
// blocks and this one has room for our allocator's word before it in its
// slot (core's blocks do); else copied out, at most cma_step per progress
// call, and acked.
bool shm_transport::on_pool(peer& p, std::uint64_t at) {
  const descriptor d = read_descriptor(p, at);
  const std::uint64_t off = d.addr - p.hdr->pool_addr;
  if (p.rx != rx_mode::idle || p.pool == nullptr || d.addr < p.hdr->pool_addr ||
      off > p.pool_bytes || d.bytes > p.pool_bytes - off)
    ring_corrupt(p.node, "pool message");
  const std::size_t slot = slot_of(p.pool + off, p.pool);
  if (hooks_.deliver_block != nullptr && off - slot >= 16) {
    p.view->adopt(slot);
    ++counters_.in_place;
    publish_head_lazily(p);
    hooks_.deliver_block(p.node, const_cast<unsigned char*>(p.pool) + off, std::size_t(d.bytes));
    return true;
  }
  start_receive(p, rx_mode::pool, d.addr, std::size_t(d.bytes));
  return continue_pool(p);
}

// Copies the next piece of a message from p's pool (at most cma_step per
// call, so that a large one does not hold up the other peers: lesson 9);
// true when it is complete (acked and delivered).
bool shm_transport::continue_pool(peer& p) {
  const std::size_t n = std::min(p.rx_total - p.rx_done, cma_step);
  const std::uint64_t off = p.rx_remote - p.hdr->pool_addr;
  std::memcpy(p.rx_buf + p.rx_done, p.pool + off + p.rx_done, n);
  p.rx_done += n;
  if (p.rx_done < p.rx_total) return false;
  p.rx = rx_mode::idle;
  owe_ack(p, p.rx_remote);
  hooks_.deliver(p.node, p.rx_buf, p.rx_total);
  return true;
}

// k_return: a block of our pool that we lent to p comes back as p's message.
bool shm_transport::on_return(peer& p, std::uint64_t at) {
  const descriptor d = read_descriptor(p, at);
  auto* buf = reinterpret_cast<unsigned char*>(d.addr);
  if (pool_ == nullptr || !pool_->contains(buf) ||
      d.bytes > std::size_t(pool_->base() + pool_->bytes() - reinterpret_cast<std::byte*>(buf)))
    ring_corrupt(p.node, "returned block");
  publish_head_lazily(p);
  if (hooks_.deliver_block != nullptr) {
    pool_->keep(buf);  // the loan is core's block again
    hooks_.deliver_block(p.node, buf, std::size_t(d.bytes));
  } else {
    void* copy = hooks_.alloc(std::size_t(d.bytes));
    std::memcpy(copy, buf, std::size_t(d.bytes));
    pool_->give_back(buf);
    hooks_.deliver(p.node, copy, std::size_t(d.bytes));
  }
  return true;
}

// k_ack: p is done with a block of ours: a loan ends, or a rendezvous read.
bool shm_transport::on_ack(peer& p, std::uint64_t at) {
  void* buf = reinterpret_cast<void*>(read_descriptor(p, at).addr);
  if (pool_ != nullptr && pool_->contains(buf)) {
    pool_->give_back(buf);  // a loan ends
  } else {
    --outstanding_;  // a rendezvous read ends
    hooks_.release(buf);
  }
  return true;
}

// Core freed blocks of peers' pools that it held in place: each goes back
// to its owner as an ack.
int shm_transport::give_back_freed() {
  freed_pending_.store(false, std::memory_order_seq_cst);
  int n = 0;
  for (peer* p : others_) {
    if (p->view == nullptr) continue;
    p->view->take_freed(freed_scratch_);
    for (std::uint64_t addr : freed_scratch_) owe_ack(*p, addr);
    n += int(freed_scratch_.size());
    freed_scratch_.clear();
  }
  return n;
}

// ---------------------------------------------------- cross-memory attach

// Whether this process may read every peer's memory with process_vm_readv
// (ptrace permission: same user, Yama, containers, seccomp all decide).
void shm_transport::probe_cma() {
  bool ok = opts_.allow_cma;
  for (peer* p : others_) {
    if (!ok) break;
    std::uint64_t v = 0;
    const std::ptrdiff_t n =
        base::os::read_process_memory(p->pid, &v, p->hdr->probe_addr, sizeof v);
    ok = n == std::ptrdiff_t(sizeof v) && v == p->hdr->probe_value;
  }
  own_.load()->cma_ok = ok ? 1 : 0;
  // Under --weft:wake-fence=fence (or where membarrier is missing) core's
  // asymmetric fences are off, and so are these.
  own_.load()->membarrier_ok = opts_.allow_membarrier && base::asymmetric_fences_enabled() &&
                                       *base::register_global_membarrier() == '\0'
                                   ? 1
                                   : 0;
}

// k_rndv: p's message stays in p's memory; we read it from there.
bool shm_transport::on_rndv(peer& p, std::uint64_t at) {
  const descriptor d = read_descriptor(p, at);
  if (p.rx != rx_mode::idle) ring_corrupt(p.node);
  start_receive(p, rx_mode::cma, d.addr, std::size_t(d.bytes));
  return continue_cma(p);
}

// Reads the next piece of a rendezvous message; true when it is complete
// (acked and delivered).
bool shm_transport::continue_cma(peer& p) {
  const std::size_t n = std::min(p.rx_total - p.rx_done, cma_step);
  const std::ptrdiff_t got =
      base::os::read_process_memory(p.pid, p.rx_buf + p.rx_done, p.rx_remote + p.rx_done, n);
  if (got <= 0) {
    if (got == -EINTR) return false;
    if (got == -ESRCH) lose(p.node);
    base::fatal_sys(got == 0 ? EIO : int(-got), "process_vm_readv",
                    "for %zu bytes from node %d (process %d) in the shm transport", n, p.node,
                    int(p.pid));
  }
  p.rx_done += std::size_t(got);
  if (p.rx_done < p.rx_total) return false;
  p.rx = rx_mode::idle;
  owe_ack(p, p.rx_remote);
  hooks_.deliver(p.node, p.rx_buf, p.rx_total);
  return true;
}

}  // namespace weft::net::shm
