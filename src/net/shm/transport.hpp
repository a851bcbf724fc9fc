// The shm transport's class, its peers and the views of their message
// pools. Private to src/net/shm/: the one class is defined across the
// folder's files by role (transport.cpp the lifecycle, segment.cpp the
// segments, ring.cpp the send and drain paths, rendezvous.cpp the large
// messages), as UCX's uct/sm/mm splits its memory domain, receive side and
// send side; the header comment of transport.cpp has the design.
//
// Threads: core serialises the calls into the transport (the thread that
// holds it); wake_waiter() and abort() come from any thread, and so does a
// pool_view's deallocate (core frees a block it held in place). The fields
// that those reach are atomics or under pool_view's lock, and say so.
#pragma once
#include <poll.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>
#include "../message_pool.hpp"
#include "ring.hpp"
#include "segment.hpp"
#include "shm.hpp"
#include "weft/base/memory.hpp"
#include "weft/base/os.hpp"
#include "weft/net/transport.hpp"

namespace weft::net::shm {

// Liveness of peers is checked this often: often enough to end a job with a
// dead process within a second, rarely enough to cost nothing (one poll()).
constexpr std::uint64_t liveness_period_ns = 100'000'000;
// A rendezvous read moves at most this much per progress() call, so a large
// receive from one peer does not hold up the other peers (lesson 9); 1 MiB is
// ~100 us of copying and makes the system call cost negligible.
constexpr std::size_t cma_step = std::size_t(1) << 20;
// Records one drain takes from one ring before moving to the next peer.
constexpr int drain_batch = 256;

// A message (or an ack) waiting for room in a peer's ring.
struct pending {
  std::uint32_t kind;  // k_eager, k_rndv, k_pool, k_return or k_chunk_first
  void* buffer;
  std::size_t bytes;
  std::size_t offset;  // chunked: bytes already in the ring
};

// A large message being received from a peer (its ring waits behind it).
enum class rx_mode : std::uint8_t { idle, cma, chunks, pool };

// The offset of the pool slot that holds p (message_pool::slot_align).
inline std::size_t slot_of(const void* p, const void* pool) {
  const std::size_t off =
      std::size_t(static_cast<const unsigned char*>(p) - static_cast<const unsigned char*>(pool));
  return off & ~(message_pool::slot_align - 1);
}

class shm_transport;

// A peer's message pool, mapped here read-write. Core holds blocks of it in
// place (hooks.deliver_block): each such block is adopted by this object
// (base::registered_block_adopt), so that core's free of it, on any thread,
// queues the give-back to the peer, which the driving thread sends as an
// ack. Like message_pool, it outlives the transport while core holds its
// blocks: retire() at teardown, unmapped with the last block.
class pool_view final : public base::registered_memory {
 public:
  pool_view(unsigned char* base, std::size_t bytes, std::uint64_t remote_base, shm_transport* owner)
      : base_(base), bytes_(bytes), remote_base_(remote_base), owner_(owner) {}
  pool_view(const pool_view&) = delete;
  pool_view& operator=(const pool_view&) = delete;

  const unsigned char* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  std::uint64_t remote(const void* p) const {
    return remote_base_ + std::uint64_t(static_cast<const unsigned char*>(p) - base_);
  }
  // Never a source of new blocks: those come from our own pool.
  void* allocate(std::size_t) override { return nullptr; }
  void deallocate(void* start) override;
  bool contains(const void* p) const override {
    const auto* b = static_cast<const unsigned char*>(p);
    return b >= base_ && b < base_ + bytes_;
  }
  // The block starting at offset `slot` goes to core in place.
  void adopt(std::size_t slot) {
    base::registered_block_adopt(base_ + slot, this);
    std::lock_guard<std::mutex> lock(mutex_);
    ++live_;
  }
  // The block holding p leaves for its owner as a message (k_return).
  void hand_back(const void* p) {
    base::registered_block_restore(base_ + slot_of(p, base_));
    std::lock_guard<std::mutex> lock(mutex_);
    --live_;
  }
  // The peer's addresses of the blocks core freed since the last call.
  void take_freed(std::vector<std::uint64_t>& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    out.swap(freed_);
  }
  void retire() {
    bool now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      owner_ = nullptr;
      freed_.clear();
      now = live_ == 0;
    }
    if (now) delete this;
  }

 private:
  ~pool_view() override { base::os::unmap({base_, bytes_}, "a peer's shm message pool"); }
  unsigned char* const base_;
  const std::size_t bytes_;
  const std::uint64_t remote_base_;  // the pool's address in its owner
  std::mutex mutex_;
  std::vector<std::uint64_t> freed_;  // guarded by mutex_
  std::size_t live_ = 0;              // guarded by mutex_: blocks core holds
  shm_transport* owner_;              // guarded by mutex_; null once retired
};

// Everything this process knows about one other process. Only the thread
// that holds the transport (core serialises the calls) touches it.
struct peer {
  int node = -1;
  pid_t pid = 0;
  int pidfd = -1;
  void* map = nullptr;  // the peer's segment
  std::size_t map_bytes = 0;
  pool_view* view = nullptr;            // the peer's message pool, mapped here
  const unsigned char* pool = nullptr;  // its first byte
  std::size_t pool_bytes = 0;
  seg_header* hdr = nullptr;
  bool ready = false;

  // Sending: our ring inside the peer's segment. tail and head_seen are ours.
  ring_ctl* tx_ctl = nullptr;
  unsigned char* tx_data = nullptr;
  std::uint64_t tx_mask = 0;
  std::uint64_t tx_tail = 0;
  std::uint64_t tx_head_seen = 0;
  std::size_t eager_limit = 0;
  std::size_t chunk_limit = 0;
  std::deque<pending> fifo;        // messages, in send order
  std::deque<std::uint64_t> acks;  // rendezvous acks owed (not ordered with messages)
  bool queued = false;             // fifo or acks non-empty

  // Receiving: the peer's ring inside our segment.
  ring_ctl* rx_ctl = nullptr;
  unsigned char* rx_data = nullptr;
  std::uint64_t rx_mask = 0;
  std::uint64_t rx_head = 0;
  std::uint64_t rx_published = 0;
  // A large message being received (the ring waits behind it).
  rx_mode rx = rx_mode::idle;
  unsigned char* rx_buf = nullptr;
  std::size_t rx_total = 0;
  std::size_t rx_done = 0;
  std::uint64_t rx_remote = 0;
};

class shm_transport final : public transport {
 public:
  explicit shm_transport(const shm_options& o) : opts_(o) {}
  ~shm_transport() override { teardown(); }

  const char* name() const override { return "shm"; }
  int node_rank() const override { return rank_; }
  int num_nodes() const override { return size_; }

  void init(const launch_info& launch, const hooks& h, double startup_timeout_s) override;
  void send(int node, void* buffer, std::size_t bytes) override;
  int progress() override;
  void wait_for_incoming(std::uint64_t timeout_ns) override;
  bool can_wait() const override { return true; }
  void wake_waiter() override;
  // pool_view: core freed a block of a peer's pool (any thread).
  void note_freed() {
    freed_pending_.store(true, std::memory_order_seq_cst);
    wake_waiter();
  }
  base::registered_memory* message_memory() override { return pool_; }
  const shm_counters& counters() const { return counters_; }
  void allgather(const void* mine, std::size_t bytes, void* all) override;
  void barrier() override;
  [[noreturn]] void abort(int code, const char* why) override;
  void finalize() override;

 private:
  // Bootstrap steps (transport.cpp, segment.cpp).
  void create_own();
  void* create_segment(const char* name, std::size_t bytes, std::atomic<bool>& linked,
                       bool (*replace_stale)(const char* name));
  bool try_map(peer& p);
  void setup_peer(peer& p);
  void open_peers(std::uint64_t deadline, double timeout_s);
  void probe_cma();
  void arrive(std::uint64_t deadline, double timeout_s);
  // Ends the job from init(), the own names unlinked first. fail_init_sys:
  // for the failed call `f`, `fmt` saying what it was for ("for ...").
  [[noreturn]] void fail_init(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  [[noreturn]] void fail_init_sys(base::os::sys_failure f, const char* fmt, ...)
      __attribute__((format(printf, 3, 4)));
  void unlink_names() noexcept;
  void unlink_own();
  void teardown();

  // The send path (ring.cpp).
  bool try_push(peer& p, std::uint32_t kind, const descriptor* prefix, const void* data,
                std::size_t data_bytes);
  bool push_pending(peer& p, pending& q);
  void enqueue(peer& p, const pending& q);
  void owe_ack(peer& p, std::uint64_t addr);
  int flush(peer& p);

  // The receive path (ring.cpp): drain takes p's records in order, one
  // handler per kind. A handler returns false when p's later records must
  // wait behind the message it started (a rendezvous or a pool copy).
  int drain(peer& p);
  // `cap`: the bytes of p's ring (drain's, kept in a register).
  bool on_eager(peer& p, std::uint64_t at, std::size_t bytes, std::uint64_t cap);
  bool on_chunk(peer& p, std::uint32_t kind, std::uint64_t at, std::size_t bytes,
                std::uint64_t cap);
  void publish_head(peer& p);
  // A quarter of p's ring (of `cap` bytes) consumed: the sender gets the
  // room now, before we deliver.
  void publish_head_lazily(peer& p, std::uint64_t cap) {
    if (p.rx_head - p.rx_published >= cap / 4) publish_head(p);
  }
  void publish_head_lazily(peer& p) { publish_head_lazily(p, p.rx_mask + 1); }
  descriptor read_descriptor(const peer& p, std::uint64_t at) const {
    descriptor d;
    copy_out(&d, p.rx_data, p.rx_mask, at, sizeof d);
    return d;
  }
  // p's next message is large: `total` bytes into a buffer from hooks.alloc.
  void start_receive(peer& p, rx_mode mode, std::uint64_t remote, std::size_t total);
  int poll_once();
  bool work_ready();

  // Rendezvous: cross-memory attach and the message pools (rendezvous.cpp).
  bool on_rndv(peer& p, std::uint64_t at);
  bool on_pool(peer& p, std::uint64_t at);
  bool on_return(peer& p, std::uint64_t at);
  bool on_ack(peer& p, std::uint64_t at);
  bool continue_cma(peer& p);
  bool continue_pool(peer& p);
  void create_pool();
  void map_pool(peer& p);
  int give_back_freed();

  // Liveness and collectives (transport.cpp).
  int find_lost();
  void check_liveness();
  [[noreturn]] void lose(int node);
  void barrier_impl();
  static void backoff(unsigned& spins);
  // A pause in init(), barrier() or finalize(): the caller's while_waiting, then backoff.
  void wait_step(unsigned& spins) {
    if (opts_.while_waiting) opts_.while_waiting();
    backoff(spins);
  }

  shm_options opts_;
  hooks hooks_{};
  int rank_ = 0;
  int size_ = 1;
  std::string job_;
  bool initialised_ = false;
  bool finalised_ = false;
  bool cma_ = false;
  bool light_doorbells_ = false;  // every process registered the global membarrier

  // The own segment. own_ is read by wake_waiter() and abort() from any
  // thread, hence atomic; it stays mapped until the destructor.
  std::atomic<seg_header*> own_{nullptr};
  void* own_map_ = nullptr;
  std::size_t own_bytes_ = 0;
  std::uint64_t ring_bytes_ = 0;
  char own_name_[256] = {};
  std::atomic<bool> own_linked_{false};  // the name still exists: unlink on failure
  // The message pool (lesson 5): a segment of our own that the peers map,
  // where core writes its large messages (message_memory). A message sent
  // from it goes as a descriptor; the receiver copies it out -- the one
  // copy -- and acks. Retired at teardown; unmapped with its last block.
  message_pool* pool_ = nullptr;
  char pool_name_[256] = {};
  shm_counters counters_;
  std::atomic<bool> pool_linked_{false};

  std::vector<peer> peers_;      // indexed by node; peers_[rank_] unused
  std::vector<peer*> others_;    // every peer but this node, for the hot loops
  std::vector<pollfd> pollfds_;  // pidfds of others_, same order
  int queued_peers_ = 0;         // peers with a non-empty fifo or acks
  std::size_t outstanding_ = 0;  // rendezvous (CMA) sends not yet acked
  // A pool_view has freed blocks to give back (set on any thread).
  std::atomic<bool> freed_pending_{false};
  std::vector<std::uint64_t> freed_scratch_;

  std::uint64_t next_check_ = 0;  // cycles() of the next liveness check
  unsigned clock_countdown_ = 1;  // progress() calls until it reads the clock
  std::uint64_t check_cycles_ = 0;
  std::uint32_t bar_sense_ = 0;
  std::atomic<std::uint32_t> wake_pending_{0};  // wake_waiter() before or during a wait
  std::uint64_t probe_word_ = 0;
  char lost_why_[256] = {};
};

}  // namespace weft::net::shm
