// The "shm" transport: the processes of one host (one mpirun job) exchange
// messages through POSIX shared memory.
//
// Layout. Each process owns one segment, /weft-<uid>-<job>-<rank>, that only
// it reads from: a header (identity, doorbell, abort flag, barrier and gather
// areas) and one single-producer single-consumer byte ring per sender. A
// sender copies a small message once into the receiver's ring; the receiver
// copies it out into a buffer from hooks.alloc. No lock anywhere: every ring
// has one writer process and one reader process, and core serialises the
// calls inside a process.
//
// Ring records. A record is a 16-byte header (stamp, bytes, kind) and its
// payload padded to 16 bytes; payloads may wrap around the end of the ring.
// The receiver polls the stamp of the record at its head instead of a shared
// tail index, so a small message costs one cache-line transfer, as Open MPI's
// "fast boxes" do. A stamp is the record's position + 1; before publishing a
// record the sender zeroes the header after it, so the receiver never mistakes
// old payload bytes for a header. The receiver publishes its head in batches
// (a quarter ring, or the end of a drain), and the sender re-reads it only
// when its cached copy says the ring is full.
//
// Large messages (> eager limit) go by rendezvous with cross-memory attach:
// the sender posts {address, bytes}, the receiver reads the bytes straight
// from the sender's memory with process_vm_readv (one copy, like Open MPI's
// CMA single-copy path) and acks; the sender releases the buffer on the ack.
// If CMA is not permitted between every pair (probed at init) or disabled,
// large messages go through the ring in pipelined chunks instead. Either way
// the receiver handles one sender's records in order, so order per pair holds
// whatever the mix of sizes.
//
// Send never blocks: when the ring is full the message waits in a per-peer
// FIFO that progress() pushes later.
//
// Lifetime of the names: every segment is unlinked once all processes have
// mapped all segments (the init barrier), so /dev/shm is clean after a normal
// exit and after a crash past init; a failed init unlinks what it created.
//
// Doorbell. wait_for_incoming sleeps on a shared (not FUTEX_PRIVATE) futex in
// the own header. A sender pays the wake system call only when the receiver
// announced that it sleeps (Dekker-style: each side stores, fences, loads the
// other side's word; the same protocol as the PE wake-up in core/scheduler.cpp),
// so a wake-up is never lost and never costs a system call on the fast path.
// A sender whose queue waits for room sleeps the same way: it sets the ring's
// space_wanted word, and the receiver rings it when it publishes its head.
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
#include "shm.hpp"
#include "message_pool.hpp"
#include "peer_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>
#include "weft/base/cache.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/os.hpp"
#include "weft/base/timer.hpp"

namespace weft::net {

namespace {

constexpr std::uint64_t seg_magic = 0x746665776d687321ull;  // "!shmweft"
constexpr std::uint32_t seg_version = 4;  // 4: membarrier_ok
constexpr std::size_t gather_bytes = 4096;
constexpr std::size_t min_ring_bytes = 4096;
constexpr std::size_t max_ring_bytes = std::size_t(1) << 30;
// The default ring size (shm_options::ring_bytes = 0): this budget per
// process, shared among its peers, within these bounds.
constexpr std::size_t ring_budget_bytes = std::size_t(32) << 20;
constexpr std::size_t default_ring_min = std::size_t(64) << 10;
constexpr std::size_t default_ring_max = std::size_t(1) << 20;
// Liveness of peers is checked this often: often enough to end a job with a
// dead process within a second, rarely enough to cost nothing (one poll()).
constexpr std::uint64_t liveness_period_ns = 100'000'000;
// A rendezvous read moves at most this much per progress() call, so a large
// receive from one peer does not hold up the other peers (lesson 9); 1 MiB is
// ~100 us of copying and makes the system call cost negligible.
constexpr std::size_t cma_step = std::size_t(1) << 20;
// Records one drain takes from one ring before moving to the next peer.
constexpr int drain_batch = 256;

enum : std::uint32_t { phase_creating = 0, phase_ready = 1, phase_arrived = 2 };

enum kind : std::uint32_t {
  k_eager = 1,        // payload: the message
  k_rndv = 2,         // payload: {sender address, bytes}
  k_ack = 3,          // payload: {sender address, 0}: the rendezvous read is done
  k_chunk_first = 4,  // payload: {total bytes, 0} then the first piece
  k_chunk = 5,        // payload: the next piece
  k_pool = 6,         // payload: {sender address in its pool, bytes}: lent; ack when done
  k_return = 7,       // payload: {receiver address in its pool, bytes}: a lent block, back
};

// The head of a segment. Field groups sit on separate cache lines by who
// writes them and how often.
struct seg_header {
  // Written by the owner before phase = ready (release), then read-only.
  // phase comes first so that a reader of any version finds it.
  std::atomic<std::uint32_t> phase;
  std::uint32_t version;
  std::uint64_t magic;
  std::int32_t rank;
  std::int32_t nodes;
  std::int32_t pid;
  std::uint32_t cma_ok;  // written before phase = arrived
  // 1: the owner registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED (written
  // before phase = arrived); when all have, doorbells are rung after a
  // compiler barrier and sleepers pay a global membarrier instead.
  std::uint32_t membarrier_ok;
  std::uint32_t reserved_;
  std::uint64_t ring_bytes;
  std::uint64_t probe_addr;  // a word in the owner's memory that peers try to read by CMA
  std::uint64_t probe_value;
  std::uint64_t pool_addr;   // the owner's message pool: its address there, and bytes (0: none)
  std::uint64_t pool_bytes;
  // The futex word: 1 while the owner sleeps (or is about to) in
  // wait_for_incoming. Written by the owner and by whoever wakes it.
  alignas(base::cache_line) std::atomic<std::uint32_t> doorbell;
  // Set once by abort(), read by the peers' liveness checks.
  alignas(base::cache_line) std::atomic<std::uint32_t> aborted;
  std::atomic<std::int32_t> abort_code;
  // The job's barrier lives in rank 0's segment (sense-reversing counter).
  alignas(base::cache_line) std::atomic<std::uint32_t> bar_count;
  alignas(base::cache_line) std::atomic<std::uint32_t> bar_sense;
  // allgather: each process publishes its piece here, between two barriers.
  alignas(base::cache_line) unsigned char gather[gather_bytes];
};
static_assert(sizeof(seg_header) % base::cache_line == 0);

// The control lines of one ring: the consumer's published head on one line,
// the producer's request for a wake-up on another.
struct ring_ctl {
  alignas(base::cache_line) std::atomic<std::uint64_t> head;
  alignas(base::cache_line) std::atomic<std::uint32_t> space_wanted;
};
static_assert(sizeof(ring_ctl) == 2 * base::cache_line);

struct record {
  std::atomic<std::uint64_t> stamp;  // position + 1 once complete; 0 before
  std::uint32_t bytes;               // payload bytes (before padding)
  std::uint32_t kind;
};
static_assert(sizeof(record) == 16);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

// Bytes a record of `payload` bytes takes in a ring: its header and payload
// rounded up to whole cache lines, so that every record starts a line and a
// small one (up to 48 bytes of payload: a message with a 28-byte payload)
// stays within one line. A record straddling two lines costs the reader a
// second cache-line transfer; 48-byte records did that every other message.
// The offset of the pool slot that holds p (message_pool::slot_align).
inline std::size_t slot_of(const void* p, const void* pool) {
  const std::size_t off =
      std::size_t(static_cast<const unsigned char*>(p) - static_cast<const unsigned char*>(pool));
  return off & ~(message_pool::slot_align - 1);
}

constexpr std::size_t record_bytes(std::size_t payload) {
  return (16 + payload + base::cache_line - 1) & ~std::size_t(base::cache_line - 1);
}

std::size_t segment_bytes(int nodes, std::uint64_t ring_bytes) {
  return sizeof(seg_header) + std::size_t(nodes) * (sizeof(ring_ctl) + ring_bytes);
}
ring_ctl* ring_at(void* base, int index, std::uint64_t ring_bytes) {
  return reinterpret_cast<ring_ctl*>(static_cast<unsigned char*>(base) + sizeof(seg_header) +
                                     std::size_t(index) * (sizeof(ring_ctl) + ring_bytes));
}
unsigned char* ring_data(ring_ctl* c) {
  return reinterpret_cast<unsigned char*>(c + 1);
}

// Maps the pages of [addr, addr + bytes) into this process's page tables
// now, without changing what they hold. A mapping of the segment starts
// empty, so the first lap of a ring took a page fault every 4 KiB on each
// side: one per 64 small messages, ~50 ns a message over the first 16,000
// messages of each pair of processes (a 1 MiB ring; bench/pingpong, 8 B).
// Best effort: a kernel older than 5.14 has no MADV_POPULATE_WRITE, and
// then the pages fault in as before.
void populate(void* addr, std::size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const auto page = std::uintptr_t(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(addr) & ~(page - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(addr) + bytes;
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

void copy_in(unsigned char* data, std::uint64_t mask, std::uint64_t pos, const void* src,
             std::size_t n) {
  const std::size_t off = pos & mask;
  const std::size_t first = std::min<std::size_t>(n, mask + 1 - off);
  std::memcpy(data + off, src, first);
  if (n > first) std::memcpy(data, static_cast<const unsigned char*>(src) + first, n - first);
}
void copy_out(void* dst, const unsigned char* data, std::uint64_t mask, std::uint64_t pos,
              std::size_t n) {
  if (n == 0) return;  // dst may be null for an empty message
  const std::size_t off = pos & mask;
  const std::size_t first = std::min<std::size_t>(n, mask + 1 - off);
  std::memcpy(dst, data + off, first);
  if (n > first) std::memcpy(static_cast<unsigned char*>(dst) + first, data, n - first);
}

// The doorbell's futex: shared between the processes that map it; every
// waiter is woken.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::uint64_t ns) {
  base::os::futex_wait(*word, expected, ns, base::os::futex_scope::shared,
                       "futex(FUTEX_WAIT) on the shm transport's doorbell");
}
void futex_wake(std::atomic<std::uint32_t>* word) {
  base::os::futex_wake(*word, INT_MAX, base::os::futex_scope::shared,
                       "futex(FUTEX_WAKE) on the shm transport's doorbell");
}

// The sender's half of a doorbell's Dekker pair: a full fence, or with
// `light` (every process of the job sleeps after a global membarrier,
// shm_transport::light_doorbells_) a compiler barrier (base/fence.hpp).
inline void doorbell_fence(bool light) {
  if (light)
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    base::full_fence();
}

// Wakes the owner of `h` if it announced that it sleeps. The caller has just
// published something the sleeper would look at (a record, a head).
inline void ring_doorbell(seg_header* h, bool light) {
  doorbell_fence(light);
  if (h->doorbell.load(std::memory_order_seq_cst) != 0 &&
      h->doorbell.exchange(0, std::memory_order_seq_cst) != 0)
    futex_wake(&h->doorbell);
}


void sleep_ns(long ns) {
  timespec ts{0, ns};
  nanosleep(&ts, nullptr);
}

// A message (or an ack) waiting for room in a peer's ring.
struct pending {
  std::uint32_t kind;  // k_eager, k_rndv, k_pool, k_return or k_chunk_first
  void* buffer;
  std::size_t bytes;
  std::size_t offset;  // chunked: bytes already in the ring
};

enum class rx_mode : std::uint8_t { idle, cma, chunks, pool };

class shm_transport;

// A peer's message pool, mapped here read-write. Core holds blocks of it in
// place (hooks.deliver_block): each such block is adopted by this object
// (base::registered_block_adopt), so that core's free of it, on any thread,
// queues the give-back to the peer, which the driving thread sends as an
// ack. Like message_pool, it outlives the transport while core holds its
// blocks: retire() at teardown, unmapped with the last block.
class pool_view final : public base::registered_memory {
 public:
  pool_view(unsigned char* base, std::size_t bytes, std::uint64_t remote_base,
            shm_transport* owner)
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
  ~pool_view() override { munmap(base_, bytes_); }
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

std::string sanitise(const std::string& job) {
  std::string s = base::os::file_name_safe(job);
  if (s.empty()) s = "job";
  if (s.size() > 120) {
    // Keep names under NAME_MAX and still unique per job.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : job) h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    s = s.substr(0, 100) + "." + hex;
  }
  return s;
}

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
  // Bootstrap steps.
  void create_own();
  bool remove_stale(const char* name);
  bool try_map(peer& p);
  void setup_peer(peer& p);
  void open_peers(std::uint64_t deadline, double timeout_s);
  void probe_cma();
  void arrive(std::uint64_t deadline, double timeout_s);
  [[noreturn]] void fail_init(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void unlink_own();
  void teardown();

  // The message path.
  bool try_push(peer& p, std::uint32_t kind, const void* prefix, const void* data,
                std::size_t data_bytes);
  bool push_pending(peer& p, pending& q);
  void enqueue(peer& p, const pending& q);
  void owe_ack(peer& p, std::uint64_t addr);
  int flush(peer& p);
  int drain(peer& p);
  bool continue_cma(peer& p);
  bool continue_pool(peer& p);
  void create_pool();
  void map_pool(peer& p);
  void publish_head(peer& p);
  int give_back_freed();
  int poll_once();
  bool work_ready();

  // Liveness.
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

// ---------------------------------------------------------------- bootstrap

void shm_transport::fail_init(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (own_linked_.exchange(false)) shm_unlink(own_name_);
  if (pool_linked_.exchange(false)) shm_unlink(pool_name_);
  base::fatal("shm transport (node %d of %d): %s", rank_, size_, msg);
}

void shm_transport::unlink_own() {
  if (own_linked_.exchange(false) && shm_unlink(own_name_) == -1)
    base::fatal("shm transport: shm_unlink(%s) failed: %s", own_name_, std::strerror(errno));
  if (pool_linked_.exchange(false) && shm_unlink(pool_name_) == -1)
    base::fatal("shm transport: shm_unlink(%s) failed: %s", pool_name_, std::strerror(errno));
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
    struct statvfs vfs {};
    if (statvfs("/dev/shm", &vfs) == 0) {
      const double free_bytes = double(vfs.f_bavail) * double(vfs.f_frsize);
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

// A segment left by an earlier job with the same id whose process died during
// startup. True if it was removed; false if its owner still runs.
bool shm_transport::remove_stale(const char* name) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd == -1) return errno == ENOENT;
  struct stat st {};
  pid_t owner = 0;
  if (fstat(fd, &st) == 0 && std::size_t(st.st_size) >= sizeof(seg_header)) {
    void* m = mmap(nullptr, sizeof(seg_header), PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      auto* hdr = static_cast<seg_header*>(m);
      if (hdr->phase.load(std::memory_order_acquire) != phase_creating) owner = hdr->pid;
      munmap(m, sizeof(seg_header));
    }
  }
  close(fd);
  if (base::os::process_alive(owner)) return false;
  if (owner > 0)
    base::warn("shm transport: removing %s, left by an earlier job (process %d is gone)", name,
               int(owner));
  else
    base::warn("shm transport: removing %s, left half-made by an earlier job", name);
  return shm_unlink(name) == 0 || errno == ENOENT;
}

void shm_transport::create_own() {
  const std::string name = shm_segment_name(job_, rank_);
  std::snprintf(own_name_, sizeof own_name_, "%s", name.c_str());
  int fd = -1;
  for (int attempt = 0; attempt < 2; ++attempt) {
    fd = shm_open(own_name_, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd != -1 || errno != EEXIST) break;
    if (attempt == 0 && remove_stale(own_name_)) continue;
    base::fatal(
        "shm transport: %s already exists and its process still runs: do two processes of "
        "this job claim rank %d, or do two jobs share the job id '%s'?",
        own_name_, rank_, job_.c_str());
  }
  if (fd == -1)
    base::fatal("shm transport: shm_open(%s, O_CREAT|O_EXCL) failed: %s", own_name_,
                std::strerror(errno));
  own_linked_.store(true);
  own_bytes_ = segment_bytes(size_, ring_bytes_);
  if (ftruncate(fd, off_t(own_bytes_)) == -1) {
    int e = errno;
    close(fd);
    fail_init("ftruncate(%s, %zu) failed: %s (is /dev/shm full?)", own_name_, own_bytes_,
              std::strerror(e));
  }
  // Reserve the pages now: a tmpfs that runs out later would end the process
  // with SIGBUS on the first write to a page it cannot back.
  if (int e = posix_fallocate(fd, 0, off_t(own_bytes_)); e != 0 && e != EOPNOTSUPP) {
    close(fd);
    fail_init(
        "reserving %zu bytes for %s failed: %s (/dev/shm is too small for %d processes of "
        "this job; enlarge it, e.g. docker run --shm-size=1g)",
        own_bytes_, own_name_, std::strerror(e), size_);
  }
  void* m = mmap(nullptr, own_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    fail_init("mmap(%s, %zu bytes) failed: %s", own_name_, own_bytes_, std::strerror(e));
  own_map_ = m;
  populate(m, own_bytes_);  // every ring of it is read here
  auto* hdr = static_cast<seg_header*>(m);
  if (opts_.allow_cma) {
    // Under Yama's ptrace_scope=1 only an ancestor may read our memory; the
    // peers are siblings. Without Yama the call fails, harmlessly.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  }
  probe_word_ = 0x5eedf00d00000000ull ^ (std::uint64_t(getpid()) << 8) ^ base::cycles();
  hdr->version = seg_version;
  hdr->magic = seg_magic;
  hdr->rank = rank_;
  hdr->nodes = size_;
  hdr->pid = int(getpid());
  hdr->ring_bytes = ring_bytes_;
  hdr->probe_addr = reinterpret_cast<std::uint64_t>(&probe_word_);
  hdr->probe_value = probe_word_;
  create_pool();
  hdr->pool_addr = pool_ != nullptr ? reinterpret_cast<std::uint64_t>(pool_->base()) : 0;
  hdr->pool_bytes = pool_ != nullptr ? pool_->bytes() : 0;
  hdr->phase.store(phase_ready, std::memory_order_release);
  own_.store(hdr, std::memory_order_release);
  peer& me = peers_[std::size_t(rank_)];
  me.map = m;
  me.map_bytes = own_bytes_;
  me.hdr = hdr;
}

std::string pool_segment_name(const std::string& job_id, int rank) {
  return shm_segment_name(job_id, rank) + "-pool";
}

// The own message pool: sized by shm_options::pool_bytes, less when
// /dev/shm is short, reserved (a full /dev/shm is an error, not a SIGBUS
// later), none when even 1 MiB per process does not fit.
void shm_transport::create_pool() {
  std::size_t bytes = opts_.pool_bytes;
  struct statvfs vfs {};
  if (bytes != 0 && statvfs("/dev/shm", &vfs) == 0) {
    const double free_bytes = double(vfs.f_bavail) * double(vfs.f_frsize);
    while (bytes >= (std::size_t(2) << 20) &&
           double(size_) * double(own_bytes_ + bytes) > free_bytes / 2)
      bytes >>= 1;
    if (double(size_) * double(own_bytes_ + bytes) > free_bytes / 2) bytes = 0;
  }
  if (bytes == 0) return;
  const std::string name = pool_segment_name(job_, rank_);
  std::snprintf(pool_name_, sizeof pool_name_, "%s", name.c_str());
  int fd = shm_open(pool_name_, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd == -1 && errno == EEXIST) {
    // Our own segment's name was free (or stale), so this one is stale too.
    shm_unlink(pool_name_);
    fd = shm_open(pool_name_, O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd == -1)
    fail_init("shm_open(%s, O_CREAT|O_EXCL) failed: %s", pool_name_, std::strerror(errno));
  pool_linked_.store(true);
  if (ftruncate(fd, off_t(bytes)) == -1) {
    const int e = errno;
    close(fd);
    fail_init("ftruncate(%s, %zu) failed: %s (is /dev/shm full?)", pool_name_, bytes,
              std::strerror(e));
  }
  if (int e = posix_fallocate(fd, 0, off_t(bytes)); e != 0 && e != EOPNOTSUPP) {
    close(fd);
    fail_init(
        "reserving %zu bytes for %s failed: %s (/dev/shm is too small for %d processes of "
        "this job; enlarge it, e.g. docker run --shm-size=1g)",
        bytes, pool_name_, std::strerror(e), size_);
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    fail_init("mmap(%s, %zu bytes) failed: %s", pool_name_, bytes, std::strerror(e));
  // Core's blocks from pool_min_message on.
  const std::size_t min_message = std::max(opts_.pool_min_message, opts_.eager_max + 1);
  pool_ = new message_pool(m, bytes, min_message, min_message, [m, bytes] { munmap(m, bytes); });
}

// Maps node p's message pool, if it has one: read-write, since a block core
// holds in place carries our allocator's word in its first bytes.
void shm_transport::map_pool(peer& p) {
  const std::size_t bytes = std::size_t(p.hdr->pool_bytes);
  if (bytes == 0) return;
  const std::string name = pool_segment_name(job_, p.node);
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd == -1)
    fail_init("shm_open(%s) of node %d's message pool failed: %s", name.c_str(), p.node,
              std::strerror(errno));
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    fail_init("mmap of node %d's message pool (%zu bytes) failed: %s", p.node, bytes,
              std::strerror(e));
  p.view = new pool_view(static_cast<unsigned char*>(m), bytes, p.hdr->pool_addr, this);
  p.pool = p.view->base();
  p.pool_bytes = bytes;
}

// Maps node p's segment once it exists and has its final size.
bool shm_transport::try_map(peer& p) {
  const std::string name = shm_segment_name(job_, p.node);
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd == -1) {
    if (errno == ENOENT) return false;
    fail_init("shm_open(%s) for node %d failed: %s", name.c_str(), p.node, std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) == -1) {
    int e = errno;
    close(fd);
    fail_init("fstat(%s) failed: %s", name.c_str(), std::strerror(e));
  }
  if (std::size_t(st.st_size) < sizeof(seg_header)) {  // its owner has not sized it yet
    close(fd);
    return false;
  }
  void* m = mmap(nullptr, std::size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    fail_init("mmap(%s, %lld bytes) failed: %s", name.c_str(), static_cast<long long>(st.st_size),
              std::strerror(e));
  p.map = m;
  p.map_bytes = std::size_t(st.st_size);
  p.hdr = static_cast<seg_header*>(m);
  return true;
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
    fail_init("pidfd_open(%d) for node %d failed: %s", int(p.pid), p.node, std::strerror(errno));

  p.tx_ctl = ring_at(p.map, rank_, rb);
  populate(p.tx_ctl, sizeof(ring_ctl) + rb);  // of the peer's segment, only the ring we write
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

// Whether this process may read every peer's memory with process_vm_readv
// (ptrace permission: same user, Yama, containers, seccomp all decide).
void shm_transport::probe_cma() {
  bool ok = opts_.allow_cma;
  for (peer* p : others_) {
    if (!ok) break;
    std::uint64_t v = 0;
    iovec local{&v, sizeof v};
    iovec remote{reinterpret_cast<void*>(p->hdr->probe_addr), sizeof v};
    ssize_t n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
    ok = n == ssize_t(sizeof v) && v == p->hdr->probe_value;
  }
  own_.load()->cma_ok = ok ? 1 : 0;
  // Under --weft:wake-fence=fence (or where membarrier is missing) core's
  // asymmetric fences are off, and so are these.
  own_.load()->membarrier_ok = opts_.allow_membarrier && base::asymmetric_fences_enabled() &&
                                       *base::register_global_membarrier() == '\0'
                                   ? 1
                                   : 0;
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
  if (own_linked_.exchange(false)) shm_unlink(own_name_);
  if (pool_linked_.exchange(false)) shm_unlink(pool_name_);
  for (peer& p : peers_) {
    if (p.node == rank_) continue;
    if (p.pidfd != -1) close(p.pidfd);
    if (p.map != nullptr) munmap(p.map, p.map_bytes);
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
    munmap(own_map_, own_bytes_);
    own_map_ = nullptr;
  }
}

// ------------------------------------------------------------ message path

// Copies one record into p's ring; false (nothing written) if it does not fit.
inline bool shm_transport::try_push(peer& p, std::uint32_t kind, const void* prefix,
                                    const void* data, std::size_t data_bytes) {
  const std::size_t payload = (prefix != nullptr ? 16 : 0) + data_bytes;
  const std::uint64_t len = record_bytes(payload);
  const std::uint64_t cap = p.tx_mask + 1;
  const std::uint64_t pos = p.tx_tail;
  // + 16: the header after this record must be free too (it gets zeroed).
  if (pos + len + 16 - p.tx_head_seen > cap) {
    p.tx_head_seen = p.tx_ctl->head.load(std::memory_order_acquire);
    if (pos + len + 16 - p.tx_head_seen > cap) return false;
  }
  std::uint64_t at = pos + 16;
  if (prefix != nullptr) {
    copy_in(p.tx_data, p.tx_mask, at, prefix, 16);
    at += 16;
  }
  if (data_bytes != 0) copy_in(p.tx_data, p.tx_mask, at, data, data_bytes);
  auto* next = reinterpret_cast<record*>(p.tx_data + ((pos + len) & p.tx_mask));
  next->stamp.store(0, std::memory_order_relaxed);
  auto* r = reinterpret_cast<record*>(p.tx_data + (pos & p.tx_mask));
  r->bytes = std::uint32_t(payload);
  r->kind = kind;
  r->stamp.store(pos + 1, std::memory_order_release);
  p.tx_tail = pos + len;
  return true;
}

// Pushes as much of q as fits; true when q is fully in the ring (and its
// buffer released, or awaiting its rendezvous ack).
bool shm_transport::push_pending(peer& p, pending& q) {
  if (q.kind == k_eager) {
    if (!try_push(p, k_eager, nullptr, q.buffer, q.bytes)) return false;
    hooks_.release(q.buffer);
    return true;
  }
  if (q.kind == k_rndv) {
    const std::uint64_t desc[2] = {reinterpret_cast<std::uint64_t>(q.buffer), q.bytes};
    if (!try_push(p, q.kind, desc, nullptr, 0)) return false;
    ++outstanding_;
    return true;
  }
  if (q.kind == k_pool || q.kind == k_return) {
    // Lent, or handed back: either way core let go of it in send().
    const std::uint64_t addr = q.kind == k_pool ? reinterpret_cast<std::uint64_t>(q.buffer)
                                                : p.view->remote(q.buffer);
    const std::uint64_t desc[2] = {addr, q.bytes};
    return try_push(p, q.kind, desc, nullptr, 0);
  }
  while (q.offset < q.bytes) {
    const std::size_t n = std::min(q.bytes - q.offset, p.chunk_limit);
    const unsigned char* src = static_cast<const unsigned char*>(q.buffer) + q.offset;
    bool ok;
    if (q.offset == 0) {
      const std::uint64_t first[2] = {q.bytes, 0};
      ok = try_push(p, k_chunk_first, first, src, n);
    } else {
      ok = try_push(p, k_chunk, nullptr, src, n);
    }
    if (!ok) return false;
    q.offset += n;
  }
  hooks_.release(q.buffer);
  return true;
}

void shm_transport::enqueue(peer& p, const pending& q) {
  p.fifo.push_back(q);
  if (!p.queued) {
    p.queued = true;
    ++queued_peers_;
  }
}

void shm_transport::send(int node, void* buffer, std::size_t bytes) {
  if (node < 0 || node >= size_ || node == rank_ || !initialised_ || finalised_)
    base::fatal("shm transport: send to node %d from node %d of %d%s", node, rank_, size_,
                !initialised_ ? " before init()"
                : finalised_  ? " after finalize()"
                              : "");
  peer& p = peers_[std::size_t(node)];
  // A block of p's own pool that core held in place goes back as a
  // descriptor: no copy either way (a ping-pong of large messages).
  // Written in our pool (core's large blocks): lent to p, which reads it in
  // place or copies it out, and gives it back. Else, below cma_min the
  // chunked path wins: both sides copy at once while the data is still in
  // cache, and no ack round trip is needed.
  const bool returning = p.view != nullptr && p.view->contains(buffer);
  const bool use_cma = cma_ && bytes >= opts_.cma_min;
  const bool in_pool = bytes > p.eager_limit && pool_ != nullptr && pool_->contains(buffer);
  pending q{returning               ? k_return
            : bytes <= p.eager_limit ? k_eager
            : in_pool                ? k_pool
            : use_cma                ? k_rndv
                                     : k_chunk_first,
            buffer, bytes, 0};
  ++(q.kind == k_eager    ? counters_.eager
     : q.kind == k_pool   ? counters_.pooled
     : q.kind == k_return ? counters_.returned
     : q.kind == k_rndv   ? counters_.cma
                          : counters_.chunked);
  // Core lets go of the block now (its class and our allocator's word are
  // read by the free, before p can touch them); the loan keeps the slot.
  if (q.kind == k_pool) {
    pool_->lend(buffer);
    hooks_.release(buffer);
  } else if (q.kind == k_return) {
    p.view->hand_back(buffer);
  }
  if (!p.fifo.empty()) {
    enqueue(p, q);
    return;
  }
  const std::uint64_t tail_before = p.tx_tail;
  const bool done = push_pending(p, q);
  if (p.tx_tail != tail_before) ring_doorbell(p.hdr, light_doorbells_);
  if (!done) enqueue(p, q);
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

void shm_transport::owe_ack(peer& p, std::uint64_t addr) {
  const std::uint64_t desc[2] = {addr, 0};
  if (p.acks.empty() && try_push(p, k_ack, desc, nullptr, 0)) {
    ring_doorbell(p.hdr, light_doorbells_);
    return;
  }
  p.acks.push_back(addr);
  if (!p.queued) {
    p.queued = true;
    ++queued_peers_;
  }
}

// Pushes what waits for p's ring. Acks first: they are not ordered with the
// messages, and a peer's finalize waits for them.
int shm_transport::flush(peer& p) {
  int n = 0;
  const std::uint64_t tail_before = p.tx_tail;
  while (!p.acks.empty()) {
    const std::uint64_t desc[2] = {p.acks.front(), 0};
    if (!try_push(p, k_ack, desc, nullptr, 0)) break;
    p.acks.pop_front();
    ++n;
  }
  while (!p.fifo.empty()) {
    pending& q = p.fifo.front();
    if (!push_pending(p, q)) break;
    p.fifo.pop_front();
    ++n;
  }
  if (p.tx_tail != tail_before) {
    ring_doorbell(p.hdr, light_doorbells_);
    if (n == 0) n = 1;  // a chunked message moved on
  }
  if (p.fifo.empty() && p.acks.empty()) {
    p.queued = false;
    --queued_peers_;
  }
  return n;
}

// Makes the consumed part of p's ring available to p again, and wakes p if
// it sleeps waiting for room (Dekker pair with wait_for_incoming's
// space_wanted store).
void shm_transport::publish_head(peer& p) {
  p.rx_ctl->head.store(p.rx_head, std::memory_order_release);
  p.rx_published = p.rx_head;
  doorbell_fence(light_doorbells_);
  if (p.rx_ctl->space_wanted.load(std::memory_order_seq_cst) != 0 &&
      p.rx_ctl->space_wanted.exchange(0, std::memory_order_seq_cst) != 0)
    ring_doorbell(p.hdr, light_doorbells_);
}

// Reads the next piece of a rendezvous message; true when it is complete
// (acked and delivered).
bool shm_transport::continue_cma(peer& p) {
  const std::size_t n = std::min(p.rx_total - p.rx_done, cma_step);
  iovec local{p.rx_buf + p.rx_done, n};
  iovec remote{reinterpret_cast<void*>(p.rx_remote + p.rx_done), n};
  ssize_t got = process_vm_readv(p.pid, &local, 1, &remote, 1, 0);
  if (got <= 0) {
    if (got == -1 && errno == EINTR) return false;
    if (got == -1 && errno == ESRCH) lose(p.node);
    if (got == 0) errno = EIO;
    base::fatal("shm transport: process_vm_readv of %zu bytes from node %d (process %d) failed: %s",
                n, p.node, int(p.pid), std::strerror(errno));
  }
  p.rx_done += std::size_t(got);
  if (p.rx_done < p.rx_total) return false;
  p.rx = rx_mode::idle;
  owe_ack(p, p.rx_remote);
  hooks_.deliver(p.node, p.rx_buf, p.rx_total);
  return true;
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

// Takes what p has put in our ring, in order.
int shm_transport::drain(peer& p) {
  int n = 0;
  if (p.rx == rx_mode::cma) {
    ++n;
    if (!continue_cma(p)) return n;
  }
  if (p.rx == rx_mode::pool) {
    ++n;
    if (!continue_pool(p)) return n;
  }
  const std::uint64_t cap = p.rx_mask + 1;
  for (int i = 0; i < drain_batch; ++i) {
    const std::uint64_t h = p.rx_head;
    auto* r = reinterpret_cast<record*>(p.rx_data + (h & p.rx_mask));
    const std::uint64_t s = r->stamp.load(std::memory_order_acquire);
    if (s != h + 1) {
      if (s != 0)
        base::fatal("shm transport: ring from node %d is corrupt (stamp %llu at %llu)", p.node,
                    static_cast<unsigned long long>(s), static_cast<unsigned long long>(h));
      break;
    }
    const std::size_t bytes = r->bytes;
    const std::uint32_t kind = r->kind;
    if (bytes > cap / 4 + 16)
      base::fatal("shm transport: ring from node %d is corrupt (record of %zu bytes)", p.node,
                  bytes);
    const std::uint64_t at = h + 16;
    p.rx_head = h + record_bytes(bytes);
    ++n;
    switch (kind) {
      case k_eager: {
        void* buf = hooks_.alloc(bytes);
        copy_out(buf, p.rx_data, p.rx_mask, at, bytes);
        if (p.rx_head - p.rx_published >= cap / 4) publish_head(p);
        hooks_.deliver(p.node, buf, bytes);
        break;
      }
      case k_ack: {
        std::uint64_t desc[2];
        copy_out(desc, p.rx_data, p.rx_mask, at, sizeof desc);
        void* buf = reinterpret_cast<void*>(desc[0]);
        if (pool_ != nullptr && pool_->contains(buf)) {
          pool_->give_back(buf);  // a loan ends
        } else {
          --outstanding_;  // a rendezvous read ends
          hooks_.release(buf);
        }
        break;
      }
      case k_rndv: {
        std::uint64_t desc[2];
        copy_out(desc, p.rx_data, p.rx_mask, at, sizeof desc);
        if (p.rx != rx_mode::idle)
          base::fatal("shm transport: ring from node %d is corrupt", p.node);
        p.rx = rx_mode::cma;
        p.rx_remote = desc[0];
        p.rx_total = std::size_t(desc[1]);
        p.rx_done = 0;
        p.rx_buf = static_cast<unsigned char*>(hooks_.alloc(p.rx_total));
        if (!continue_cma(p)) {
          publish_head(p);
          return n;  // later records of p wait behind this message
        }
        break;
      }
      case k_pool: {
        std::uint64_t desc[2];
        copy_out(desc, p.rx_data, p.rx_mask, at, sizeof desc);
        const std::uint64_t off = desc[0] - p.hdr->pool_addr;
        if (p.rx != rx_mode::idle || p.pool == nullptr || desc[0] < p.hdr->pool_addr ||
            off > p.pool_bytes || desc[1] > p.pool_bytes - off)
          base::fatal("shm transport: ring from node %d is corrupt (pool message)", p.node);
        // In place when core takes such blocks and this one has room for
        // our allocator's word before it in its slot (core's blocks do).
        const std::size_t slot = slot_of(p.pool + off, p.pool);
        if (hooks_.deliver_block != nullptr && off - slot >= 16) {
          p.view->adopt(slot);
          ++counters_.in_place;
          if (p.rx_head - p.rx_published >= cap / 4) publish_head(p);
          hooks_.deliver_block(p.node, const_cast<unsigned char*>(p.pool) + off,
                               std::size_t(desc[1]));
          break;
        }
        p.rx = rx_mode::pool;
        p.rx_remote = desc[0];
        p.rx_total = std::size_t(desc[1]);
        p.rx_done = 0;
        p.rx_buf = static_cast<unsigned char*>(hooks_.alloc(p.rx_total));
        if (!continue_pool(p)) {
          publish_head(p);
          return n;  // later records of p wait behind this message
        }
        break;
      }
      case k_return: {
        std::uint64_t desc[2];
        copy_out(desc, p.rx_data, p.rx_mask, at, sizeof desc);
        auto* buf = reinterpret_cast<unsigned char*>(desc[0]);
        if (pool_ == nullptr || !pool_->contains(buf) ||
            desc[1] > std::size_t(pool_->base() + pool_->bytes() - reinterpret_cast<std::byte*>(buf)))
          base::fatal("shm transport: ring from node %d is corrupt (returned block)", p.node);
        if (p.rx_head - p.rx_published >= cap / 4) publish_head(p);
        if (hooks_.deliver_block != nullptr) {
          pool_->keep(buf);  // the loan is core's block again
          hooks_.deliver_block(p.node, buf, std::size_t(desc[1]));
        } else {
          void* copy = hooks_.alloc(std::size_t(desc[1]));
          std::memcpy(copy, buf, std::size_t(desc[1]));
          pool_->give_back(buf);
          hooks_.deliver(p.node, copy, std::size_t(desc[1]));
        }
        break;
      }
      case k_chunk_first:
      case k_chunk: {
        std::size_t piece = bytes;
        std::uint64_t from = at;
        if (kind == k_chunk_first) {
          std::uint64_t first[2];
          copy_out(first, p.rx_data, p.rx_mask, at, sizeof first);
          if (p.rx != rx_mode::idle)
            base::fatal("shm transport: ring from node %d is corrupt", p.node);
          p.rx = rx_mode::chunks;
          p.rx_total = std::size_t(first[0]);
          p.rx_done = 0;
          p.rx_buf = static_cast<unsigned char*>(hooks_.alloc(p.rx_total));
          piece -= 16;
          from += 16;
        }
        if (p.rx != rx_mode::chunks || p.rx_done + piece > p.rx_total)
          base::fatal("shm transport: ring from node %d is corrupt (stray chunk)", p.node);
        copy_out(p.rx_buf + p.rx_done, p.rx_data, p.rx_mask, from, piece);
        p.rx_done += piece;
        if (p.rx_head - p.rx_published >= cap / 4) publish_head(p);
        if (p.rx_done == p.rx_total) {
          p.rx = rx_mode::idle;
          hooks_.deliver(p.node, p.rx_buf, p.rx_total);
        }
        break;
      }
      default:
        base::fatal("shm transport: ring from node %d is corrupt (record kind %u)", p.node, kind);
    }
  }
  if (p.rx_head != p.rx_published) publish_head(p);
  return n;
}

int shm_transport::poll_once() {
  int n = 0;
  if (freed_pending_.load(std::memory_order_relaxed)) n += give_back_freed();
  if (queued_peers_ != 0)
    for (peer* p : others_)
      if (p->queued) n += flush(*p);
  for (peer* p : others_) n += drain(*p);
  return n;
}

int shm_transport::progress() {
  if (!initialised_ || finalised_) return 0;
  const int n = poll_once();
  // Even the time-stamp counter costs more than an idle poll: read it on
  // every 32nd call only.
  if (--clock_countdown_ == 0) {
    clock_countdown_ = 32;
    if (base::cycles() >= next_check_) check_liveness();
  }
  return n;
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
  if (p.hdr->aborted.load(std::memory_order_acquire) != 0)
    std::snprintf(lost_why_, sizeof lost_why_, "process %d (node %d) aborted with exit code %d",
                  int(p.pid), node, int(p.hdr->abort_code.load()));
  else
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

// True if progress() has something to do right now.
bool shm_transport::work_ready() {
  if (wake_pending_.load(std::memory_order_seq_cst) != 0) return true;
  if (freed_pending_.load(std::memory_order_seq_cst)) return true;
  for (peer* p : others_) {
    if (p->rx != rx_mode::idle) return true;
    auto* r = reinterpret_cast<record*>(p->rx_data + (p->rx_head & p->rx_mask));
    if (r->stamp.load(std::memory_order_seq_cst) != 0) return true;
    if (p->queued) {
      // Room for the largest record (a quarter ring) plus the next header.
      const std::uint64_t cap = p->tx_mask + 1;
      const std::uint64_t used = p->tx_tail - p->tx_ctl->head.load(std::memory_order_seq_cst);
      if (cap - used >= cap / 4 + 32) return true;
    }
  }
  return false;
}

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
      futex_wait(&own->doorbell, 1, std::min(end - now, liveness_period_ns));
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
    (void)w;
  }
  if (seg_header* own = own_.load(std::memory_order_acquire)) {
    own->abort_code.store(code, std::memory_order_relaxed);
    own->aborted.store(1, std::memory_order_release);
  }
  if (own_linked_.exchange(false)) shm_unlink(own_name_);
  if (pool_linked_.exchange(false)) shm_unlink(pool_name_);
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
    munmap(p->map, p->map_bytes);
    p->pidfd = -1;
    p->map = nullptr;
  }
}

}  // namespace

std::string shm_segment_name(const std::string& job_id, int rank) {
  return "/weft-" + std::to_string(getuid()) + "-" + sanitise(job_id) + "-" + std::to_string(rank);
}

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
