// The "ucx" transport: nodes talk through UCX's UCP layer and find each other
// through the launcher's PMIx server (mpirun, srun --mpi=pmix).
//
// Design:
//  - Bootstrap. PMIx gives rank and size; every node puts its UCP worker
//    address and the rkey of its send pool, one PMIx fence collects them, and
//    every node creates endpoints to all others. PMIx is not used while the
//    job runs (a fence is a trip through the launcher's daemons): allgather
//    and barrier are active messages.
//  - Order. Every message has a place in the stream from its sender to its
//    receiver: its sequence number, counted by both ends. A rendezvous
//    message completes after later small ones, so the receiver keeps a
//    window per source whose head it delivers in order; a GET in flight
//    holds back only its own source (lesson 9). Active messages on one
//    endpoint are handled in the order they were sent (they share the
//    endpoint's one AM lane, in-order on every UCX transport, and forced
//    eager; UCP's tag matching rests on the same order), so an eager
//    message needs no number on the wire: it is the one after the newest
//    the receiver has seen from that sender. The one message whose
//    announcement is sent late is a persistent channel's (its note waits
//    for the PUT's flush); while a note is outstanding towards a node, the
//    messages that follow it carry their numbers (an 8-byte eager header).
//    Rendezvous descriptors carry their number anyway and say whether they
//    follow their predecessor directly; the receiver checks that they do,
//    and a mismatch is a fatal error naming both numbers: were UCX ever to
//    reorder, the job stops instead of delivering out of order.
//  - Small messages (<= eager_max): one active message, forced eager, with
//    no header of weft's: the AM id says the sender (am_count + source
//    node; UCX ids go to 65535, so jobs of more nodes send a source and a
//    sequence number in an 8-byte header instead, as after a channel note). UCX's shared-memory
//    transports hold 28 bytes of user data in the first cache line of a
//    FIFO element; core's 20-byte wire header plus an 8-byte payload fits
//    there only without a header of ours (measured: 28 bytes ~300 ns
//    one-way, 32 bytes ~450 ns on the reference machine). The receive
//    callback copies the bytes into hooks.alloc's buffer.
//  - Large messages: GET rendezvous from registered memory (lessons 5 and
//    8). The send pool is memory this process maps and registers once at
//    init, and offers core for its large message blocks
//    (transport::message_memory): a message written there leaves as it is,
//    a descriptor {address, size, cookie} naming it; the receiver GETs into
//    hooks.alloc's buffer (itself in its own pool, when core has room there)
//    and acks; the ack releases the message. A message from elsewhere (the
//    pool was full when it was made, or its buffer is not core's) is copied
//    into a slot of the pool first, and the ack frees the slot. A copy is
//    preferred to registering the caller's buffer because registration is a
//    system call and page pinning on RDMA hardware, paid per message; the
//    per-message variant is kept (ucx_options::pooled = false, and when the
//    pool has no room) so a benchmark can compare the two. The pool is ours
//    (mmap), not UCX's (UCP_MEM_MAP_ALLOCATE), because blocks core still
//    holds when the transport ends must stay valid until they are freed.
//  - Persistent channels: the receiver registers a buffer of max_bytes once
//    (handshake); a send is then a PUT into it, an endpoint flush (a PUT's
//    completion is only local; the flush makes it visible remotely), and a
//    small notification; the receiver copies out and returns a credit.
//  - Failures. Endpoints to other hosts ask UCX to report a dead peer
//    (hooks.node_lost). On this host they do not by default: in UCX 1.13
//    that request rules out the shared-memory transports; the peer watch
//    (peer_watch.hpp: a thread on the local peers' pidfds) reports a dead
//    local process instead (ucx_options).
//  - Transports are UCX's choice (UCX_TLS). Over TCP alone UCX emulates the
//    GET with active messages, which is slower than sending the bytes
//    eagerly; the rendezvous is built for RDMA and shared memory.
//  - Callbacks from ucp_worker_progress only record (copy bytes, mark slots,
//    queue actions); UCX calls and core's hooks other than alloc and
//    deliver run after ucp_worker_progress returns, so no callback re-enters
//    UCX. An eager message that is next in order from its source, arriving
//    inside progress(), goes to hooks.deliver from the callback: the window
//    and deliver_ready cost ~10 ns of an 8-byte message's ~200. deliver only
//    queues the message for a PE; the one UCX call it can make,
//    wake_waiter, is for a PE asleep in the transport, and none is while
//    progress() runs (that PE holds the transport while it sleeps).
#include "ucx.hpp"
#include "peer_watch.hpp"

#include <pmix.h>
#include <poll.h>
#include <sys/mman.h>
#include <ucp/api/ucp.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>
#include "message_pool.hpp"
#include "weft/base/error.hpp"

namespace weft::net {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

enum am_id : unsigned {
  am_eager,        // a whole message
  am_rndv,         // rendezvous descriptor; data: packed rkey (empty: the send pool's)
  am_ack,          // rendezvous GET done: the sender may free the source
  am_chan_open,    // persistent channel handshake, sender -> receiver
  am_chan_ready,   // receiver -> sender: buffer address; data: packed rkey
  am_chan_note,    // a message was PUT into the channel buffer
  am_chan_credit,  // the channel buffer is free again
  am_coll,         // one node's part of an allgather
  am_count
  // am_count + s: an eager message from node s, with no header (see Order)
};

// UCP's active message ids are 16 bits.
constexpr unsigned am_id_limit = 1u << 16;

// The header of every active message. One layout for all kinds keeps the
// handlers simple; 40 bytes is far below any transport's header limit (the
// limit is checked at init).
struct am_header {
  std::uint64_t seq = 0;     // eager, rndv, chan_note: position in the stream src -> dst
  std::uint64_t size = 0;    // message bytes; chan_open/ready: the channel's max_bytes
  std::uint64_t addr = 0;    // rndv, chan_ready: address in the sender's memory
  std::uint64_t cookie = 0;  // rndv/ack: sender's token; chan_*: channel; coll: round
  std::uint32_t src = 0;
  std::uint32_t flags = 0;  // am_flag_*
};

// am_header::flags of a rendezvous descriptor: its message follows the
// previous one of the stream at once (no channel note was outstanding), so
// its number must be the one after the newest the receiver has seen.
constexpr std::uint32_t am_flag_in_order = 1;

// The header of an eager message in a job too large for an AM id per
// source (see Order). The size is the message's length; the sequence
// number is its low 32 bits, checked against the receiver's count.
struct eager_header {
  std::uint32_t src = 0;
  std::uint32_t seq = 0;
};

// A UCX operation this transport waits for. Owns the header (UCP 1.13 reads
// it until the send completes) and any bytes sent with it.
enum class op_kind : std::uint8_t { send_msg, send_ctrl, get, flush_put };

struct op {
  class ucx_transport* self = nullptr;
  op_kind kind = op_kind::send_ctrl;
  int node = -1;
  ucs_status_t status = UCS_OK;
  am_header hdr;
  eager_header eager;           // what an eager message sends of hdr
  void* buffer = nullptr;       // send_msg, flush_put: the caller's; get: destination
  ucp_rkey_h rkey = nullptr;    // get: an rkey unpacked for this message only
  std::vector<std::byte> data;  // bytes sent after the header
};

// Work found inside a UCX callback, done once ucp_worker_progress returns.
struct action {
  enum kind_t : std::uint8_t {
    issue_get,     // rendezvous descriptor arrived
    ack_in,        // a peer finished its GET from us
    open_chan_in,  // a peer opens a channel to this node
    chan_ready,    // our channel's remote buffer is known
    send_credit,   // we copied a channel message out
    release_buf,   // a caller's buffer is no longer needed
  } kind;
  int node = -1;
  am_header hdr;
  std::vector<std::byte> data;
  void* buffer = nullptr;

  explicit action(kind_t k, int n = -1, const am_header& h = {}) : kind(k), node(n), hdr(h) {}
};

// One source's reorder window: slot i holds message next_seq + i.
struct inbound {
  enum state_t : std::uint8_t { empty, pending, ready };
  struct slot {
    void* buffer = nullptr;
    std::uint64_t bytes = 0;
    state_t state = empty;
  };
  std::uint64_t next_seq = 0;  // the window's head: the next to deliver
  std::uint64_t next_new = 0;  // one past the newest number seen: an eager message's
  std::deque<slot> window;
};

// A rendezvous send waiting for its ack.
struct rndv_out {
  bool live = false;
  int node = -1;
  void* slot = nullptr;      // the pool slot the message was copied into
  ucp_mem_h memh = nullptr;  // registered for this message only
  void* caller = nullptr;    // released on the ack when not copied to the pool (in place:
                             // from the pool as it is, or registered for this message)
};


// A channel this node sends on.
struct chan_out {
  int node = -1;
  std::size_t max_bytes = 0;
  bool ready = false;  // handshake done: remote address and rkey known
  bool busy = false;   // a message is in the remote buffer (until the credit)
  std::uint64_t remote_addr = 0;
  ucp_rkey_h rkey = nullptr;
};

// A channel buffer this node owns for a sender.
struct chan_in {
  void* buffer = nullptr;
  std::size_t max_bytes = 0;
  ucp_mem_h memh = nullptr;
};

struct coll_round {
  std::vector<std::vector<std::byte>> parts;
  std::vector<bool> got;
  int count = 0;
};

// What the endpoint error handler needs; one per peer, never moved.
struct peer {
  class ucx_transport* self = nullptr;
  int node = -1;
  ucp_ep_h ep = nullptr;
  ucp_rkey_h pool_rkey = nullptr;  // the peer's send pool, for our GETs
};

// A PMIx operation completed on PMIx's own thread.
struct pmix_wait {
  std::atomic<bool> done{false};
  std::atomic<int> status{PMIX_SUCCESS};
  pmix_info_t info[1];
  std::size_t ninfo = 0;
};

void pmix_op_done(pmix_status_t status, void* cbdata) {
  auto* w = static_cast<pmix_wait*>(cbdata);
  w->status.store(status);
  w->done.store(true, std::memory_order_release);
}

void pmix_value_done(pmix_status_t status, pmix_value_t* kv, void* cbdata) {
  (void)kv;  // owned by PMIx in the callback
  pmix_op_done(status, cbdata);
}

// The receive callback copies every eager message out of UCX's buffer,
// most of them 16 to 64 bytes (a weft message with a small payload): in
// 16-byte pieces, overlapping, without a call into libc's memcpy (~30
// instructions of its ~50 per message at these sizes, callgrind).
inline void copy_small(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  if (n >= 16 && n <= 64) {
    std::memcpy(d, s, 16);
    std::memcpy(d + n - 16, s + n - 16, 16);
    if (n > 32) {
      std::memcpy(d + 16, s + 16, 16);
      std::memcpy(d + n - 32, s + n - 32, 16);
    }
    return;
  }
  if (n > 0) std::memcpy(d, s, n);
}

const char* key_addr = "weft.ucx.addr";
const char* key_pool = "weft.ucx.pool";

class ucx_transport final : public transport {
 public:
  explicit ucx_transport(const ucx_options& options) : opt_(options) {}
  ~ucx_transport() override = default;

  const char* name() const override { return "ucx"; }
  void init(const launch_info& launch, const hooks& h, double startup_timeout_s) override;
  int node_rank() const override { return rank_; }
  int num_nodes() const override { return size_; }
  void send(int node, void* buffer, std::size_t bytes) override;
  int progress() override;
  int create_persistent(int node, std::size_t max_bytes) override;
  void send_persistent(int channel, void* buffer, std::size_t bytes) override;
  void wait_for_incoming(std::uint64_t timeout_ns) override;
  bool can_wait() const override { return true; }
  bool pause_between_polls() const override { return false; }
  void wake_waiter() override;
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    allgather_within(mine, bytes, all, 0, "allgather");
  }
  void barrier() override { allgather_within(nullptr, 0, nullptr, 0, "barrier"); }
  [[noreturn]] void abort(int code, const char* why) override;
  void finalize() override;

  const ucx_counters& counters() const { return counters_; }
  base::registered_memory* message_memory() override {
    return pool_memh_ != nullptr ? pool_ : nullptr;
  }
  std::string describe_lanes(int node) const;

  // UCX callbacks.
  template <unsigned Id>
  static ucs_status_t on_am(void* arg, const void* header, std::size_t header_length, void* data,
                            std::size_t length, const ucp_am_recv_param_t* param) {
    static_cast<ucx_transport*>(arg)->handle_am(Id, header, header_length, data, length, param);
    return UCS_OK;
  }
  // An eager message from the peer `arg` (id am_count + its node).
  static ucs_status_t on_eager_from(void* arg, const void* header, std::size_t header_length,
                                    void* data, std::size_t length,
                                    const ucp_am_recv_param_t* param) {
    auto* p = static_cast<peer*>(arg);
    p->self->handle_eager_from(p->node, header, header_length, data, length, param);
    return UCS_OK;
  }
  static void on_op_done(void* request, ucs_status_t status, void* user_data) {
    auto* o = static_cast<op*>(user_data);
    o->status = status;
    ucp_request_free(request);
    o->self->in_flight_--;
    o->self->done_.push_back(o);
  }
  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* p = static_cast<peer*>(arg);
    p->self->lost(p->node, "connection failed", status);
  }

 private:
  // --- bootstrap
  void pmix_identity(const launch_info& launch);
  void create_worker();
  void exchange_and_connect(double timeout_s);
  void pmix_put(const char* key, const void* bytes, std::size_t n);
  std::vector<std::byte> pmix_get(int node, const char* key);
  bool pmix_fence(bool collect, double timeout_s, bool progress_ucx);
  [[noreturn]] void name_missing_peers(double timeout_s);

  // --- sending
  op* new_op(op_kind kind, int node);
  op* new_send_op(int node, void* buffer);
  void send_eager_by_id(int node, void* buffer, std::size_t bytes);
  void recycle(op* o);
  void track(op* o, ucs_status_ptr_t r, const char* call);
  static ucp_request_param_t am_params(op* o);
  void am_send(op* o, unsigned id, const void* data, std::size_t n);
  void send_ctrl(int node, unsigned id, am_header h, const void* data = nullptr, std::size_t n = 0);
  void send_rndv(int node, std::uint64_t seq, void* buffer, std::size_t bytes);
  std::vector<std::byte> pack_rkey(ucp_mem_h memh, int node);

  // --- receiving
  void handle_am(unsigned id, const void* header, std::size_t header_length, void* data,
                 std::size_t length, const ucp_am_recv_param_t* param);
  void handle_eager_from(int src, const void* header, std::size_t header_length, void* data,
                         std::size_t length, const ucp_am_recv_param_t* param);
  [[noreturn]] void reject_eager(int src, std::size_t header_length) const;
  void seen(int src, std::uint64_t seq) {
    inbound& in = in_[std::size_t(src)];
    if (seq >= in.next_new) in.next_new = seq + 1;
  }
  void* alloc_for(std::size_t bytes);
  void place(int src, std::uint64_t seq, void* buffer, std::size_t bytes, bool ready);
  void place_eager(int src, std::uint64_t seq, void* buffer, std::size_t bytes);
  void mark_ready(int src, std::uint64_t seq);
  void run(action& a);
  void finish(op* o);
  int drain();
  int deliver_ready();
  bool has_work() const { return ready_count_ > 0 || !actions_.empty() || !done_.empty(); }

  // --- waiting and teardown
  void idle(std::uint64_t timeout_ns);
  template <class Done, class Late>
  void progress_until(Done done, double timeout_s, Late on_timeout);
  template <class Done>
  void progress_until(Done done) {
    progress_until(done, 0, [] {});
  }
  void allgather_within(const void* mine, std::size_t bytes, void* all, double timeout_s,
                        const char* what);
  bool sends_settled() const;
  void close_endpoints();

  void check(ucs_status_t s, const char* call, int node = -1) const {
    if (s == UCS_OK) return;
    if (node >= 0)
      base::fatal("ucx transport (node %d): %s towards node %d: %s", rank_, call, node,
                  ucs_status_string(s));
    base::fatal("ucx transport (node %d): %s: %s", rank_, call, ucs_status_string(s));
  }
  void check_node(int node, const char* call) const {
    if (node < 0 || node >= size_ || node == rank_)
      base::fatal("ucx transport: %s to node %d from node %d: expected another node in 0..%d", call,
                  node, rank_, size_ - 1);
  }
  // The statuses that mean the peer (or the way to it) is gone, as opposed
  // to a misuse or a local shortage.
  static bool peer_failure(ucs_status_t s) {
    return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT ||
           s == UCS_ERR_UNREACHABLE || s == UCS_ERR_REJECTED || s == UCS_ERR_NOT_CONNECTED ||
           s == UCS_ERR_IO_ERROR || s == UCS_ERR_CANCELED;
  }
  void lost(int node, const char* what, ucs_status_t s) {
    if (closing_) return;  // peers leave at different moments during teardown
    char why[256];
    std::snprintf(why, sizeof why, "ucx transport: %s: %s", what, ucs_status_string(s));
    if (hooks_.node_lost != nullptr) hooks_.node_lost(node, why);
    base::fatal("node %d lost (seen from node %d): %s", node, rank_, why);
  }

  ucx_options opt_;
  hooks hooks_;
  int rank_ = 0, size_ = 1;
  bool use_pmix_ = false, initialized_ = false, finalized_ = false, closing_ = false;
  bool eager_by_id_ = false;  // eager messages name their source by AM id (see Order)
  pmix_proc_t pmix_me_{};

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  // wake_waiter() may come from any thread: these two are its only state.
  std::atomic<ucp_worker_h> signal_worker_{nullptr};
  std::atomic<bool> wake_{false};

  std::vector<peer> peers_;              // sized once at init: the error handler holds pointers
  std::vector<bool> local_;              // peers on this host
  std::vector<std::uint64_t> next_out_;  // next sequence number per destination
  std::vector<std::uint32_t> notes_due_;  // per destination: channel notes not yet sent
  std::vector<inbound> in_;
  std::size_t ready_count_ = 0;  // ready slots not yet delivered, over all sources

  ucp_mem_h pool_memh_ = nullptr;
  message_pool* pool_ = nullptr;  // retired at finalize; see message_pool
  std::vector<rndv_out> rndv_;
  std::vector<std::uint32_t> rndv_free_;
  std::size_t rndv_live_ = 0;

  std::vector<chan_out> chans_;
  std::vector<std::unordered_map<std::uint64_t, chan_in>> chans_in_;  // by source

  std::uint64_t coll_round_ = 0;
  std::map<std::uint64_t, coll_round> colls_;

  std::vector<std::unique_ptr<op>> ops_;  // every op ever made
  std::vector<op*> free_ops_;
  std::size_t in_flight_ = 0;  // ops whose UCX request has not completed
  std::vector<op*> done_, done_now_;
  // Inside progress()'s ucp_worker_progress: handle_eager_from may hand an
  // in-order message to hooks.deliver from the callback (see Callbacks).
  bool in_progress_ = false;
  std::vector<action> actions_, actions_now_;

  ucx_counters counters_;

  // The processes of this host, which UCX does not report (see Failures);
  // stopped before finalize's collectives, after which peers may leave.
  peer_watch watch_;
};

// ---------------------------------------------------------------- bootstrap

void ucx_transport::init(const launch_info& launch, const hooks& h, double startup_timeout_s) {
  if (initialized_) base::fatal("ucx transport: init called twice");
  if (h.alloc == nullptr || h.deliver == nullptr || h.release == nullptr)
    base::fatal("ucx transport: init needs the alloc, deliver and release hooks");
  hooks_ = h;
  // Without a launcher there is no PMIx server to ask: a one-node job.
  use_pmix_ = launch.launcher != "none";
  if (use_pmix_) pmix_identity(launch);
  create_worker();
  peers_.resize(std::size_t(size_));
  for (int p = 0; p < size_; ++p) peers_[std::size_t(p)] = peer{this, p, nullptr, nullptr};
  // One AM id per source for eager messages, when the ids suffice; the
  // handlers are set before any peer can reach this worker (the fence in
  // exchange_and_connect).
  eager_by_id_ =
      opt_.eager_source_ids && std::size_t(am_count) + std::size_t(size_) <= am_id_limit;
  if (eager_by_id_)
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
      hp.id = am_count + unsigned(p);
      hp.flags = UCP_AM_FLAG_WHOLE_MSG;
      hp.cb = &on_eager_from;
      hp.arg = &peers_[std::size_t(p)];
      check(ucp_worker_set_am_recv_handler(worker_, &hp), "ucp_worker_set_am_recv_handler");
    }
  next_out_.assign(std::size_t(size_), 0);
  notes_due_.assign(std::size_t(size_), 0);
  in_.resize(std::size_t(size_));
  chans_in_.resize(std::size_t(size_));
  if (size_ > 1) {
    exchange_and_connect(startup_timeout_s);
    // Endpoints connect lazily; a round of messages proves every pair can
    // talk before init returns. It carries the peer watch's records.
    const peer_watch::record mine = peer_watch::mine();
    std::vector<peer_watch::record> all(static_cast<std::size_t>(size_));
    allgather_within(&mine, sizeof mine, all.data(), startup_timeout_s, "startup barrier");
    if (opt_.watch_local_peers) watch_.start(all.data(), size_, rank_, hooks_.node_lost, "ucx");
  }
  initialized_ = true;
}

void ucx_transport::pmix_identity(const launch_info& launch) {
  pmix_status_t rc = PMIx_Init(&pmix_me_, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    base::fatal(
        "ucx transport: PMIx_Init: %s: this process was started by %s, but the ucx transport "
        "needs a PMIx server (Open MPI's mpirun, or srun --mpi=pmix)",
        PMIx_Error_string(rc), launch.launcher.c_str());
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, pmix_me_.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* v = nullptr;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS || v == nullptr || v->type != PMIX_UINT32)
    base::fatal("ucx transport: PMIx_Get(%s): %s", PMIX_JOB_SIZE, PMIx_Error_string(rc));
  rank_ = int(pmix_me_.rank);
  size_ = int(v->data.uint32);
  PMIX_VALUE_RELEASE(v);
  // Which peers share this host: PEER error handling costs them shared memory
  // (see ucx_options::detect_local_peer_failure). Unknown: all are remote.
  local_.assign(std::size_t(size_), false);
  v = nullptr;
  rc = PMIx_Get(&job, PMIX_LOCAL_PEERS, nullptr, 0, &v);
  if (rc == PMIX_SUCCESS && v != nullptr && v->type == PMIX_STRING && v->data.string != nullptr) {
    for (const char* at = v->data.string; *at != '\0';) {
      char* end = nullptr;
      long r = std::strtol(at, &end, 10);
      if (end == at) break;
      if (r >= 0 && r < size_) local_[std::size_t(r)] = true;
      at = *end == ',' ? end + 1 : end;
    }
  }
  if (v != nullptr) PMIX_VALUE_RELEASE(v);
  // A PMIx-only launcher may not export the job size (launch.size is then a
  // guess): only the rank is compared.
  if (launch.rank != rank_ || (launch.launcher != "pmix" && launch.size != size_))
    base::fatal(
        "ucx transport: PMIx says this process is rank %d of %d, but the launcher's environment "
        "(%s) says rank %d of %d",
        rank_, size_, launch.launcher.c_str(), launch.rank, launch.size);
}

void ucx_transport::create_worker() {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = std::size_t(size_);
  params.mt_workers_shared = 0;
  ucs_status_t s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(s, "ucp_init");

  // Serialized, not single: core calls from one thread at a time, but not
  // always the same one (a comm thread, or whichever PE holds the lock).
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  check(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create");
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  check(ucp_worker_query(worker_, &wa), "ucp_worker_query");
  if (wa.max_am_header < sizeof(am_header))
    base::fatal("ucx transport: UCX allows %zu-byte active message headers, weft needs %zu",
                std::size_t(wa.max_am_header), sizeof(am_header));
  if (wa.thread_mode == UCS_THREAD_MODE_SINGLE)
    base::warn(
        "ucx transport: UCX gave a single-thread worker; calls from several threads "
        "(one at a time) rely on this UCX build not checking the caller");

  static constexpr ucp_am_recv_callback_t handlers[am_count] = {
      &on_am<am_eager>,      &on_am<am_rndv>,      &on_am<am_ack>,         &on_am<am_chan_open>,
      &on_am<am_chan_ready>, &on_am<am_chan_note>, &on_am<am_chan_credit>, &on_am<am_coll>};
  for (unsigned id = 0; id < am_count; ++id) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = handlers[id];
    hp.arg = this;
    check(ucp_worker_set_am_recv_handler(worker_, &hp), "ucp_worker_set_am_recv_handler");
  }
  check(ucp_worker_get_efd(worker_, &efd_), "ucp_worker_get_efd");
  signal_worker_.store(worker_, std::memory_order_release);

  if (opt_.pooled && opt_.pool_bytes > 0 && size_ > 1) {
    const std::size_t bytes = opt_.pool_bytes;
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
      base::fatal("ucx transport (node %d): cannot map a %zu-byte send pool: %s", rank_, bytes,
                  std::strerror(errno));
    // Core's blocks from the rendezvous size on: they leave in place.
    pool_ = new message_pool(mem, bytes, opt_.eager_max + 1, opt_.eager_max + 1,
                             [mem, bytes] { ::munmap(mem, bytes); });
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = pool_->base();
    mp.length = pool_->bytes();
    check(ucp_mem_map(context_, &mp, &pool_memh_), "ucp_mem_map (send pool)");
  }
}

void ucx_transport::pmix_put(const char* key, const void* bytes, std::size_t n) {
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_BYTE_OBJECT;
  v.data.bo.bytes = static_cast<char*>(const_cast<void*>(bytes));
  v.data.bo.size = n;
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);  // copies the value
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Put(%s): %s", rank_, key, PMIx_Error_string(rc));
}

std::vector<std::byte> ucx_transport::pmix_get(int node, const char* key) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, pmix_me_.nspace, pmix_rank_t(node));
  pmix_value_t* v = nullptr;
  pmix_status_t rc = PMIx_Get(&p, key, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS || v == nullptr || v->type != PMIX_BYTE_OBJECT)
    base::fatal("ucx transport (node %d): PMIx_Get(%s) of node %d: %s", rank_, key, node,
                rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "not a byte object");
  auto* b = reinterpret_cast<const std::byte*>(v->data.bo.bytes);
  std::vector<std::byte> out(b, b + v->data.bo.size);
  PMIX_VALUE_RELEASE(v);
  return out;
}

// A fence that waits at most timeout_s (<= 0: no limit) whatever the PMIx
// server does with PMIX_TIMEOUT (Open MPI 4.1's does not promise to honour
// it): the non-blocking fence is awaited here. On a time-out the wait record
// is left to PMIx, which may still call back.
bool ucx_transport::pmix_fence(bool collect, double timeout_s, bool progress_ucx) {
  auto* w = new pmix_wait;
  if (collect) {
    PMIX_INFO_CONSTRUCT(&w->info[0]);
    bool yes = true;
    PMIx_Info_load(&w->info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    w->ninfo = 1;
  }
  pmix_status_t rc =
      PMIx_Fence_nb(nullptr, 0, w->ninfo ? w->info : nullptr, w->ninfo, &pmix_op_done, w);
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Fence_nb: %s", rank_, PMIx_Error_string(rc));
  auto t0 = clock_type::now();
  while (!w->done.load(std::memory_order_acquire)) {
    if (timeout_s > 0 && seconds_since(t0) > timeout_s) return false;
    if (progress_ucx) {
      if (progress() == 0) idle(200'000);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  rc = w->status.load();
  if (w->ninfo) PMIX_INFO_DESTRUCT(&w->info[0]);
  delete w;
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Fence: %s", rank_, PMIx_Error_string(rc));
  return true;
}

// The fence timed out: ask the server for each peer's address with a short
// wait; the peers whose data cannot be had are the ones that did not arrive.
void ucx_transport::name_missing_peers(double timeout_s) {
  std::vector<pmix_wait*> waits(std::size_t(size_), nullptr);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    auto* w = new pmix_wait;  // left to PMIx: it may call back after we exit
    PMIX_INFO_CONSTRUCT(&w->info[0]);
    int secs = 2;
    PMIx_Info_load(&w->info[0], PMIX_TIMEOUT, &secs, PMIX_INT);
    w->ninfo = 1;
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, pmix_me_.nspace, pmix_rank_t(p));
    if (PMIx_Get_nb(&proc, key_addr, w->info, 1, &pmix_value_done, w) == PMIX_SUCCESS)
      waits[std::size_t(p)] = w;
  }
  auto t0 = clock_type::now();
  while (seconds_since(t0) < 3) {
    bool all = true;
    for (pmix_wait* w : waits)
      if (w != nullptr && !w->done.load(std::memory_order_acquire)) all = false;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string missing;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    pmix_wait* w = waits[std::size_t(p)];
    if (w == nullptr || !w->done.load(std::memory_order_acquire) ||
        w->status.load() != PMIX_SUCCESS)
      missing += (missing.empty() ? "" : ", ") + std::to_string(p);
  }
  if (missing.empty())
    base::fatal(
        "ucx transport (node %d): the bootstrap PMIx fence did not complete within %.0f s "
        "(--weft startup timeout), although every node published its address",
        rank_, timeout_s);
  base::fatal(
      "ucx transport (node %d): node(s) %s did not arrive within %.0f s (startup timeout): "
      "no UCX address published through PMIx",
      rank_, missing.c_str(), timeout_s);
}

void ucx_transport::exchange_and_connect(double timeout_s) {
  ucp_address_t* address = nullptr;
  std::size_t address_len = 0;
  check(ucp_worker_get_address(worker_, &address, &address_len), "ucp_worker_get_address");
  pmix_put(key_addr, address, address_len);
  ucp_worker_release_address(worker_, address);

  // The pool record: its base address, then its packed rkey (no rkey: this
  // node sends every large message from a buffer registered for it).
  std::vector<std::byte> pool(8);
  std::uint64_t base = reinterpret_cast<std::uintptr_t>(pool_ != nullptr ? pool_->base() : nullptr);
  std::memcpy(pool.data(), &base, 8);
  if (pool_memh_ != nullptr) {
    std::vector<std::byte> rkey = pack_rkey(pool_memh_, -1);
    pool.insert(pool.end(), rkey.begin(), rkey.end());
  }
  pmix_put(key_pool, pool.data(), pool.size());
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Commit: %s", rank_, PMIx_Error_string(rc));
  if (!pmix_fence(true, timeout_s, false)) name_missing_peers(timeout_s);

  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    peer& pr = peers_[std::size_t(p)];
    std::vector<std::byte> addr = pmix_get(p, key_addr);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(addr.data());
    // Peer mode: a peer that dies is reported (node_lost) instead of hanging
    // us; not on this host by default (see ucx_options).
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    if (!local_[std::size_t(p)] || opt_.detect_local_peer_failure) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &on_ep_error;
      ep.err_handler.arg = &pr;
    }
    check(ucp_ep_create(worker_, &ep, &pr.ep), "ucp_ep_create", p);
    std::vector<std::byte> rec = pmix_get(p, key_pool);
    if (rec.size() > 8)
      check(ucp_ep_rkey_unpack(pr.ep, rec.data() + 8, &pr.pool_rkey),
            "ucp_ep_rkey_unpack (send pool)", p);
  }
}

std::vector<std::byte> ucx_transport::pack_rkey(ucp_mem_h memh, int node) {
  void* buf = nullptr;
  std::size_t n = 0;
  check(ucp_rkey_pack(context_, memh, &buf, &n), "ucp_rkey_pack", node);
  auto* b = static_cast<const std::byte*>(buf);
  std::vector<std::byte> out(b, b + n);
  ucp_rkey_buffer_release(buf);
  return out;
}

// ------------------------------------------------------------------ sending

op* ucx_transport::new_op(op_kind kind, int node) {
  op* o;
  if (!free_ops_.empty()) {
    o = free_ops_.back();
    free_ops_.pop_back();
  } else {
    ops_.push_back(std::make_unique<op>());
    o = ops_.back().get();
    o->self = this;
  }
  o->kind = kind;
  o->node = node;
  o->status = UCS_OK;
  o->hdr = am_header{};
  o->hdr.src = std::uint32_t(rank_);
  o->buffer = nullptr;
  o->rkey = nullptr;
  o->data.clear();
  return o;
}

// new_op for a message send: only the fields a send_msg op's completion
// reads (finish, on_op_done), without the header and data a control
// message or a GET needs.
op* ucx_transport::new_send_op(int node, void* buffer) {
  if (free_ops_.empty()) {
    op* o = new_op(op_kind::send_msg, node);
    o->buffer = buffer;
    return o;
  }
  op* o = free_ops_.back();
  free_ops_.pop_back();
  o->kind = op_kind::send_msg;
  o->node = node;
  o->status = UCS_OK;
  o->buffer = buffer;
  o->rkey = nullptr;
  return o;
}

void ucx_transport::recycle(op* o) {
  free_ops_.push_back(o);
}

void ucx_transport::track(op* o, ucs_status_ptr_t r, const char* call) {
  if (r == nullptr) {
    done_.push_back(o);  // completed at once; finished in progress()
  } else if (UCS_PTR_IS_ERR(r)) {
    o->status = UCS_PTR_STATUS(r);
    if (!closing_) {
      if (peer_failure(o->status)) lost(o->node, call, o->status);
      check(o->status, call, o->node);
    }
    done_.push_back(o);
  } else {
    in_flight_++;
  }
}

// Eager always: large messages have their own rendezvous (below), and an
// eager message is whole when its handler runs.
ucp_request_param_t ucx_transport::am_params(op* o) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &on_op_done;
  p.user_data = o;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  return p;
}

void ucx_transport::am_send(op* o, unsigned id, const void* data, std::size_t n) {
  ucp_request_param_t p = am_params(o);
  const void* header = &o->hdr;
  std::size_t header_bytes = sizeof(am_header);
  // (Eager messages without a header go by send_eager_by_id.)
  if (id == am_eager) {
    counters_.eager_with_header++;
    o->eager = eager_header{o->hdr.src, std::uint32_t(o->hdr.seq)};
    header = &o->eager;
    header_bytes = sizeof(eager_header);
  }
  track(o, ucp_am_send_nbx(peers_[std::size_t(o->node)].ep, id, header, header_bytes, data, n, &p),
        "ucp_am_send_nbx");
}

void ucx_transport::send_ctrl(int node, unsigned id, am_header h, const void* data, std::size_t n) {
  op* o = new_op(op_kind::send_ctrl, node);
  h.src = std::uint32_t(rank_);
  o->hdr = h;
  if (n > 0) {
    auto* b = static_cast<const std::byte*>(data);
    o->data.assign(b, b + n);
  }
  am_send(o, id, o->data.data(), n);
}

void ucx_transport::send(int node, void* buffer, std::size_t bytes) {
  check_node(node, "send");
  std::uint64_t seq = next_out_[std::size_t(node)]++;
  if (bytes > opt_.eager_max) {
    send_rndv(node, seq, buffer, bytes);
    return;
  }
  counters_.eager++;
  if (eager_by_id_ && notes_due_[std::size_t(node)] == 0) {
    send_eager_by_id(node, buffer, bytes);
    return;
  }
  op* o = new_op(op_kind::send_msg, node);
  o->hdr.seq = seq;
  o->hdr.size = bytes;
  o->buffer = buffer;
  am_send(o, am_eager, buffer, bytes);
}

// The common send (see Order): no header, and UCX usually completes it
// inside the call (a short or bcopy send). Then the buffer goes back to
// core at once, as shm's sends do, and the op straight back to the free
// list: every message used to take a trip through done_ and drain()
// (~150 instructions per message, callgrind, bench/pingpong at 8 B).
void ucx_transport::send_eager_by_id(int node, void* buffer, std::size_t bytes) {
  op* o = new_send_op(node, buffer);
  ucp_request_param_t p = am_params(o);
  ucs_status_ptr_t r = ucp_am_send_nbx(peers_[std::size_t(node)].ep, am_count + unsigned(rank_),
                                       nullptr, 0, buffer, bytes, &p);
  if (r == nullptr) {
    recycle(o);
    hooks_.release(buffer);
    return;
  }
  track(o, r, "ucp_am_send_nbx");
}

void ucx_transport::send_rndv(int node, std::uint64_t seq, void* buffer, std::size_t bytes) {
  std::uint32_t cookie;
  if (!rndv_free_.empty()) {
    cookie = rndv_free_.back();
    rndv_free_.pop_back();
  } else {
    cookie = std::uint32_t(rndv_.size());
    rndv_.emplace_back();
  }
  rndv_live_++;
  rndv_out r;
  r.live = true;
  r.node = node;
  am_header h;
  h.seq = seq;
  h.size = bytes;
  h.cookie = cookie;
  if (notes_due_[std::size_t(node)] == 0) h.flags = am_flag_in_order;
  if (pool_memh_ != nullptr && pool_->contains(buffer)) {
    // Written in the pool: it leaves as it is; the ack releases it.
    counters_.rndv_in_place++;
    r.caller = buffer;
    h.addr = reinterpret_cast<std::uintptr_t>(buffer);
    rndv_[cookie] = r;
    send_ctrl(node, am_rndv, h);
    return;
  }
  void* slot = pool_memh_ != nullptr ? pool_->allocate(bytes) : nullptr;
  if (slot != nullptr) {
    counters_.rndv_pooled++;
    std::memcpy(slot, buffer, bytes);
    r.slot = slot;
    h.addr = reinterpret_cast<std::uintptr_t>(slot);
    rndv_[cookie] = r;
    // The caller's buffer is free now; handed back from progress(), which is
    // where core expects releases.
    action a{action::release_buf};
    a.buffer = buffer;
    actions_.push_back(std::move(a));
    send_ctrl(node, am_rndv, h);
    return;
  }
  counters_.rndv_registered++;
  if (pool_memh_ != nullptr) counters_.pool_fallbacks++;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = buffer;
  mp.length = bytes;
  check(ucp_mem_map(context_, &mp, &r.memh), "ucp_mem_map (rendezvous send buffer)", node);
  r.caller = buffer;
  h.addr = reinterpret_cast<std::uintptr_t>(buffer);
  rndv_[cookie] = r;
  std::vector<std::byte> rkey = pack_rkey(r.memh, node);
  send_ctrl(node, am_rndv, h, rkey.data(), rkey.size());
}

int ucx_transport::create_persistent(int node, std::size_t max_bytes) {
  check_node(node, "create_persistent");
  chan_out c;
  c.node = node;
  c.max_bytes = max_bytes;
  chans_.push_back(c);
  am_header h;
  h.size = max_bytes;
  h.cookie = chans_.size() - 1;
  send_ctrl(node, am_chan_open, h);
  return int(chans_.size() - 1);
}

void ucx_transport::send_persistent(int channel, void* buffer, std::size_t bytes) {
  if (channel < 0 || std::size_t(channel) >= chans_.size())
    base::fatal("ucx transport: send_persistent on channel %d: node %d has channels 0..%zd",
                channel, rank_, std::ptrdiff_t(chans_.size()) - 1);
  chan_out& c = chans_[std::size_t(channel)];
  // Not yet usable, or in use: the ordinary path keeps the message moving and
  // the sequence number keeps it in order.
  if (!c.ready || c.busy || bytes > c.max_bytes || bytes == 0) {
    counters_.persistent_fallbacks++;
    send(c.node, buffer, bytes);
    return;
  }
  counters_.persistent_puts++;
  c.busy = true;
  ucp_ep_h ep = peers_[std::size_t(c.node)].ep;
  ucp_request_param_t none{};
  ucs_status_ptr_t r = ucp_put_nbx(ep, buffer, bytes, c.remote_addr, c.rkey, &none);
  if (UCS_PTR_IS_ERR(r))
    check(UCS_PTR_STATUS(r), "ucp_put_nbx (persistent channel)", c.node);
  else if (r != nullptr)
    ucp_request_free(r);  // UCX frees it on completion; the flush below covers it
  op* o = new_op(op_kind::flush_put, c.node);
  o->hdr.seq = next_out_[std::size_t(c.node)]++;
  notes_due_[std::size_t(c.node)]++;  // until finish() sends the note
  o->hdr.size = bytes;
  o->hdr.cookie = std::uint64_t(channel);
  o->buffer = buffer;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &on_op_done;
  p.user_data = o;
  track(o, ucp_ep_flush_nbx(ep, &p), "ucp_ep_flush_nbx (persistent channel)");
}

// ---------------------------------------------------------------- receiving

void* ucx_transport::alloc_for(std::size_t bytes) {
  void* p = hooks_.alloc(bytes);
  if (p == nullptr && bytes > 0)
    base::fatal("ucx transport (node %d): hooks.alloc(%zu) returned no buffer", rank_, bytes);
  return p;
}

void ucx_transport::place(int src, std::uint64_t seq, void* buffer, std::size_t bytes, bool ready) {
  inbound& in = in_[std::size_t(src)];
  // A window this deep means a lost or corrupt sequence number, not traffic.
  if (seq < in.next_seq || seq - in.next_seq > (std::uint64_t(1) << 28))
    base::fatal("ucx transport (node %d): message %llu from node %d, expected %llu or later", rank_,
                static_cast<unsigned long long>(seq), src,
                static_cast<unsigned long long>(in.next_seq));
  std::size_t i = std::size_t(seq - in.next_seq);
  if (i >= in.window.size()) in.window.resize(i + 1);
  inbound::slot& s = in.window[i];
  if (s.state != inbound::empty)
    base::fatal("ucx transport (node %d): message %llu from node %d arrived twice", rank_,
                static_cast<unsigned long long>(seq), src);
  s.buffer = buffer;
  s.bytes = bytes;
  s.state = ready ? inbound::ready : inbound::pending;
  if (ready) ready_count_++;
}

void ucx_transport::mark_ready(int src, std::uint64_t seq) {
  inbound& in = in_[std::size_t(src)];
  in.window[std::size_t(seq - in.next_seq)].state = inbound::ready;
  ready_count_++;
}

// Either the header or UCX's rendezvous flag (handle_eager_from).
void ucx_transport::reject_eager(int src, std::size_t header_length) const {
  if (header_length != 0)
    base::fatal(
        "ucx transport (node %d): eager message from node %d with a %zu-byte header, expected "
        "none",
        rank_, src, header_length);
  base::fatal(
      "ucx transport (node %d): UCX rendezvous for an eager message from node %d, but weft "
      "sends every active message eagerly",
      rank_, src);
}

void ucx_transport::handle_eager_from(int src, const void* header, std::size_t header_length,
                                      void* data, std::size_t length,
                                      const ucp_am_recv_param_t* param) {
  (void)header;
  // One test for both ways an eager message can be malformed.
  if ((header_length | (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) != 0) [[unlikely]]
    reject_eager(src, header_length);
  const std::uint64_t seq = in_[std::size_t(src)].next_new++;
  void* buf = alloc_for(length);
  copy_small(buf, data, length);
  place_eager(src, seq, buf, length);
}

void ucx_transport::place_eager(int src, std::uint64_t seq, void* buffer, std::size_t bytes) {
  counters_.eager_received++;
  inbound& in = in_[std::size_t(src)];
  // The next in order with nothing of that source waiting before it, inside
  // progress(): to core at once, not through the window (deliver_ready).
  if (seq == in.next_seq && in.window.empty() && in_progress_) {
    in.next_seq++;
    counters_.eager_at_once++;
    hooks_.deliver(src, buffer, bytes);
    return;
  }
  place(src, seq, buffer, bytes, true);
}

void ucx_transport::handle_am(unsigned id, const void* header, std::size_t header_length,
                              void* data, std::size_t length, const ucp_am_recv_param_t* param) {
  const std::size_t expected = id == am_eager ? sizeof(eager_header) : sizeof(am_header);
  if (header_length != expected)
    base::fatal("ucx transport (node %d): active message %u with a %zu-byte header, expected %zu",
                rank_, id, header_length, expected);
  am_header h;
  std::uint32_t eager_seq = 0;
  if (id == am_eager) {
    eager_header e;
    std::memcpy(&e, header, sizeof e);
    h.src = e.src;
    h.size = length;
    eager_seq = e.seq;
  } else {
    std::memcpy(&h, header, sizeof h);
  }
  int src = int(h.src);
  if (h.src >= std::uint32_t(size_) || src == rank_)
    base::fatal("ucx transport (node %d): active message %u names source node %u", rank_, id,
                h.src);
  if (id == am_eager) {
    // The full number: the next one to deliver plus how far ahead this one is.
    const std::uint64_t next = in_[std::size_t(src)].next_seq;
    h.seq = next + std::uint32_t(eager_seq - std::uint32_t(next));
  }
  if (id == am_rndv && (h.flags & am_flag_in_order) != 0 &&
      h.seq != in_[std::size_t(src)].next_new)
    base::fatal(
        "ucx transport (node %d): rendezvous message %llu from node %d arrived when %llu was "
        "due: UCX handled the endpoint's active messages out of order (weft's ucx transport "
        "relies on their order; UCX_TLS chooses other transports)",
        rank_, static_cast<unsigned long long>(h.seq), src,
        static_cast<unsigned long long>(in_[std::size_t(src)].next_new));
  if (id == am_eager || id == am_rndv || id == am_chan_note) seen(src, h.seq);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0)
    base::fatal(
        "ucx transport (node %d): UCX rendezvous for active message %u from node %d, "
        "but weft sends every active message eagerly",
        rank_, id, src);
  auto* bytes = static_cast<const std::byte*>(data);
  switch (id) {
    case am_eager: {
      void* buf = alloc_for(length);
      if (length > 0) std::memcpy(buf, data, length);
      place_eager(src, h.seq, buf, length);
      break;
    }
    case am_rndv: {
      void* buf = alloc_for(h.size);
      place(src, h.seq, buf, h.size, false);
      action a{action::issue_get, src, h};
      a.data.assign(bytes, bytes + length);
      a.buffer = buf;
      actions_.push_back(std::move(a));
      break;
    }
    case am_ack:
    case am_chan_open:
    case am_chan_ready: {
      action a{id == am_ack         ? action::ack_in
               : id == am_chan_open ? action::open_chan_in
                                    : action::chan_ready,
               src, h};
      if (length > 0) a.data.assign(bytes, bytes + length);
      actions_.push_back(std::move(a));
      break;
    }
    case am_chan_note: {
      auto& chans = chans_in_[std::size_t(src)];
      auto it = chans.find(h.cookie);
      if (it == chans.end() || h.size > it->second.max_bytes)
        base::fatal(
            "ucx transport (node %d): node %d wrote %llu bytes into unknown or smaller "
            "channel %llu",
            rank_, src, static_cast<unsigned long long>(h.size),
            static_cast<unsigned long long>(h.cookie));
      void* buf = alloc_for(h.size);
      std::memcpy(buf, it->second.buffer, h.size);
      place(src, h.seq, buf, h.size, true);
      actions_.push_back(action{action::send_credit, src, h});
      break;
    }
    case am_chan_credit: {
      if (h.cookie >= chans_.size() || chans_[h.cookie].node != src)
        base::fatal("ucx transport (node %d): credit from node %d for channel %llu", rank_, src,
                    static_cast<unsigned long long>(h.cookie));
      chans_[h.cookie].busy = false;
      break;
    }
    case am_coll: {
      coll_round& r = colls_[h.cookie];
      if (r.parts.empty()) {
        r.parts.resize(std::size_t(size_));
        r.got.assign(std::size_t(size_), false);
      }
      if (r.got[std::size_t(src)])
        base::fatal("ucx transport (node %d): two parts from node %d in collective round %llu",
                    rank_, src, static_cast<unsigned long long>(h.cookie));
      r.got[std::size_t(src)] = true;
      r.parts[std::size_t(src)].assign(bytes, bytes + length);
      r.count++;
      break;
    }
    default:
      base::fatal("ucx transport (node %d): unknown active message %u", rank_, id);
  }
}

void ucx_transport::run(action& a) {
  switch (a.kind) {
    case action::issue_get: {
      peer& pr = peers_[std::size_t(a.node)];
      ucp_rkey_h rkey = pr.pool_rkey;
      op* o = new_op(op_kind::get, a.node);
      o->hdr = a.hdr;
      o->buffer = a.buffer;
      if (!a.data.empty()) {
        check(ucp_ep_rkey_unpack(pr.ep, a.data.data(), &o->rkey), "ucp_ep_rkey_unpack (rendezvous)",
              a.node);
        rkey = o->rkey;
      } else if (rkey == nullptr) {
        base::fatal("ucx transport (node %d): node %d sent from its send pool, but published none",
                    rank_, a.node);
      }
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.send = &on_op_done;
      p.user_data = o;
      track(o, ucp_get_nbx(pr.ep, a.buffer, a.hdr.size, a.hdr.addr, rkey, &p), "ucp_get_nbx");
      break;
    }
    case action::ack_in: {
      if (a.hdr.cookie >= rndv_.size() || !rndv_[a.hdr.cookie].live ||
          rndv_[a.hdr.cookie].node != a.node)
        base::fatal("ucx transport (node %d): rendezvous ack %llu from node %d matches no send",
                    rank_, static_cast<unsigned long long>(a.hdr.cookie), a.node);
      rndv_out& r = rndv_[a.hdr.cookie];
      if (r.slot != nullptr) {
        pool_->deallocate(r.slot);
      } else {
        if (r.memh != nullptr)
          check(ucp_mem_unmap(context_, r.memh), "ucp_mem_unmap (rendezvous send buffer)",
                a.node);
        hooks_.release(r.caller);
      }
      r = rndv_out{};
      rndv_free_.push_back(std::uint32_t(a.hdr.cookie));
      rndv_live_--;
      break;
    }
    case action::open_chan_in: {
      auto& chans = chans_in_[std::size_t(a.node)];
      if (chans.count(a.hdr.cookie) != 0)
        base::fatal("ucx transport (node %d): node %d opened channel %llu twice", rank_, a.node,
                    static_cast<unsigned long long>(a.hdr.cookie));
      chan_in c;
      c.max_bytes = a.hdr.size;
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
      mp.address = nullptr;
      mp.length = std::max<std::size_t>(c.max_bytes, 64);
      mp.flags = UCP_MEM_MAP_ALLOCATE;
      check(ucp_mem_map(context_, &mp, &c.memh), "ucp_mem_map (persistent channel buffer)", a.node);
      ucp_mem_attr_t ma{};
      ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
      check(ucp_mem_query(c.memh, &ma), "ucp_mem_query (persistent channel buffer)", a.node);
      c.buffer = ma.address;
      chans.emplace(a.hdr.cookie, c);
      std::vector<std::byte> rkey = pack_rkey(c.memh, a.node);
      am_header h;
      h.size = c.max_bytes;
      h.addr = reinterpret_cast<std::uintptr_t>(c.buffer);
      h.cookie = a.hdr.cookie;
      send_ctrl(a.node, am_chan_ready, h, rkey.data(), rkey.size());
      break;
    }
    case action::chan_ready: {
      if (a.hdr.cookie >= chans_.size() || chans_[a.hdr.cookie].node != a.node ||
          chans_[a.hdr.cookie].ready)
        base::fatal("ucx transport (node %d): node %d answered for unknown channel %llu", rank_,
                    a.node, static_cast<unsigned long long>(a.hdr.cookie));
      chan_out& c = chans_[a.hdr.cookie];
      check(ucp_ep_rkey_unpack(peers_[std::size_t(a.node)].ep, a.data.data(), &c.rkey),
            "ucp_ep_rkey_unpack (persistent channel)", a.node);
      c.remote_addr = a.hdr.addr;
      c.ready = true;
      break;
    }
    case action::send_credit: {
      am_header h;
      h.cookie = a.hdr.cookie;
      send_ctrl(a.node, am_chan_credit, h);
      break;
    }
    case action::release_buf:
      hooks_.release(a.buffer);
      break;
  }
}

void ucx_transport::finish(op* o) {
  if (o->status != UCS_OK) {
    if (o->rkey != nullptr) ucp_rkey_destroy(o->rkey);
    // During teardown a peer that already left cancels what was still queued.
    if (!closing_) {
      const char* what = o->kind == op_kind::get         ? "rendezvous GET"
                         : o->kind == op_kind::flush_put ? "persistent-channel PUT"
                                                         : "active message";
      if (peer_failure(o->status)) lost(o->node, what, o->status);
      check(o->status, what, o->node);
    }
    recycle(o);
    return;
  }
  switch (o->kind) {
    case op_kind::send_msg:
      hooks_.release(o->buffer);
      break;
    case op_kind::send_ctrl:
      break;
    case op_kind::get: {
      if (o->rkey != nullptr) ucp_rkey_destroy(o->rkey);
      mark_ready(o->node, o->hdr.seq);
      am_header h;
      h.cookie = o->hdr.cookie;
      send_ctrl(o->node, am_ack, h);
      break;
    }
    case op_kind::flush_put:
      // The PUT is visible at the receiver now; only then may the
      // notification overtake nothing.
      hooks_.release(o->buffer);
      send_ctrl(o->node, am_chan_note, o->hdr);
      notes_due_[std::size_t(o->node)]--;
      break;
  }
  recycle(o);
}

int ucx_transport::drain() {
  int n = 0;
  while (!actions_.empty() || !done_.empty()) {
    actions_now_.clear();
    actions_now_.swap(actions_);
    for (action& a : actions_now_) run(a);
    n += int(actions_now_.size());
    done_now_.clear();
    done_now_.swap(done_);
    for (op* o : done_now_) finish(o);
    n += int(done_now_.size());
  }
  return n;
}

int ucx_transport::deliver_ready() {
  // A fast node may send before a slow one's init has returned; core cannot
  // take messages before that, so they wait in the window.
  if (ready_count_ == 0 || !initialized_) return 0;
  int n = 0;
  for (int src = 0; src < size_; ++src) {
    inbound& in = in_[std::size_t(src)];
    while (!in.window.empty() && in.window.front().state == inbound::ready) {
      inbound::slot s = in.window.front();
      in.window.pop_front();
      in.next_seq++;
      ready_count_--;
      hooks_.deliver(src, s.buffer, s.bytes);
      n++;
    }
  }
  return n;
}

int ucx_transport::progress() {
  // A message delivered from a callback counts in what
  // ucp_worker_progress returns (the events it handled).
  in_progress_ = initialized_ && !closing_;
  int n = int(ucp_worker_progress(worker_));
  in_progress_ = false;
  // Both are out of line and usually have nothing to do: this function
  // is every polling round of a PE that waits for the network.
  if (!actions_.empty() || !done_.empty()) n += drain();
  if (ready_count_ != 0) n += deliver_ready();
  return n;
}

// ------------------------------------------------------- waiting, collectives

void ucx_transport::idle(std::uint64_t timeout_ns) {
  if (has_work()) return;
  ucs_status_t s = ucp_worker_arm(worker_);
  if (s == UCS_ERR_BUSY) return;  // events arrived meanwhile: progress first
  check(s, "ucp_worker_arm");
  pollfd pfd{efd_, POLLIN, 0};
  timespec ts{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  int r = ::ppoll(&pfd, 1, &ts, nullptr);
  if (r < 0 && errno != EINTR) base::fatal_errno(errno, "ucx transport: ppoll on the UCX event fd");
}

void ucx_transport::wait_for_incoming(std::uint64_t timeout_ns) {
  if (wake_.exchange(false, std::memory_order_acq_rel)) return;
  if (has_work()) return;
  if (ucp_worker_progress(worker_) != 0) return;  // the caller's progress() takes it
  ucs_status_t s = ucp_worker_arm(worker_);
  if (s == UCS_ERR_BUSY) return;
  check(s, "ucp_worker_arm");
  // A wake_waiter() between the first check and the arm may have had its
  // signal drained by the arm; its flag is still set.
  if (wake_.exchange(false, std::memory_order_acq_rel)) return;
  pollfd pfd{efd_, POLLIN, 0};
  timespec ts{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  int r = ::ppoll(&pfd, 1, &ts, nullptr);
  if (r < 0 && errno != EINTR) base::fatal_errno(errno, "ucx transport: ppoll on the UCX event fd");
  // The flag stays set if a wake came during the wait: the next wait then
  // returns at once, a spurious wake-up instead of a lost one.
}

void ucx_transport::wake_waiter() {
  wake_.store(true, std::memory_order_release);
  // ucp_worker_signal is documented safe from any thread in any thread mode.
  if (ucp_worker_h w = signal_worker_.load(std::memory_order_acquire)) ucp_worker_signal(w);
}

template <class Done, class Late>
void ucx_transport::progress_until(Done done, double timeout_s, Late on_timeout) {
  auto t0 = clock_type::now();
  while (!done()) {
    if (progress() == 0) idle(1'000'000);
    if (timeout_s > 0 && seconds_since(t0) > timeout_s) on_timeout();
  }
}

void ucx_transport::allgather_within(const void* mine, std::size_t bytes, void* all,
                                     double timeout_s, const char* what) {
  if (bytes > 0)
    std::memcpy(static_cast<std::byte*>(all) + std::size_t(rank_) * bytes, mine, bytes);
  if (size_ == 1) return;
  std::uint64_t round = coll_round_++;
  am_header h;
  h.size = bytes;
  h.cookie = round;
  for (int p = 0; p < size_; ++p)
    if (p != rank_) send_ctrl(p, am_coll, h, mine, bytes);
  auto arrived = [&] {
    auto it = colls_.find(round);
    return it != colls_.end() && it->second.count == size_ - 1;
  };
  progress_until(arrived, timeout_s, [&] {
    auto it = colls_.find(round);
    std::string missing;
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && (it == colls_.end() || !it->second.got[std::size_t(p)]))
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
    base::fatal("ucx transport (node %d): %s: no message from node(s) %s within %.0f s", rank_,
                what, missing.c_str(), timeout_s);
  });
  coll_round& r = colls_[round];
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const auto& part = r.parts[std::size_t(p)];
    if (part.size() != bytes)
      base::fatal("ucx transport (node %d): %s: node %d passed %zu bytes, this node %zu", rank_,
                  what, p, part.size(), bytes);
    if (bytes > 0)
      std::memcpy(static_cast<std::byte*>(all) + std::size_t(p) * bytes, part.data(), bytes);
  }
  colls_.erase(round);
}

[[noreturn]] void ucx_transport::abort(int code, const char* why) {
  std::fflush(stdout);
  std::fprintf(stderr, "weft: fatal: %s\n", why != nullptr ? why : "(no reason given)");
  std::fflush(stderr);
  if (use_pmix_) PMIx_Abort(code, why, nullptr, 0);
  std::_Exit(code);
}

// --------------------------------------------------------------- teardown

bool ucx_transport::sends_settled() const {
  if (in_flight_ != 0 || rndv_live_ != 0 || !done_.empty() || !actions_.empty()) return false;
  for (const chan_out& c : chans_)
    if (!c.ready || c.busy) return false;
  return true;
}

void ucx_transport::close_endpoints() {
  std::vector<ucs_status_ptr_t> pending;
  for (peer& p : peers_) {
    if (p.ep == nullptr) continue;
    ucp_request_param_t prm{};  // no FORCE flag: flush what is queued, then close
    ucs_status_ptr_t r = ucp_ep_close_nbx(p.ep, &prm);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) pending.push_back(r);
    p.ep = nullptr;
  }
  auto t0 = clock_type::now();
  while (!pending.empty()) {
    ucp_worker_progress(worker_);
    for (std::size_t i = 0; i < pending.size();) {
      if (ucp_request_check_status(pending[i]) != UCS_INPROGRESS) {
        ucp_request_free(pending[i]);
        pending[i] = pending.back();
        pending.pop_back();
      } else {
        ++i;
      }
    }
    if (seconds_since(t0) > 30) {
      base::warn("ucx transport (node %d): %zu endpoint(s) did not close within 30 s", rank_,
                 pending.size());
      break;
    }
  }
}

void ucx_transport::finalize() {
  if (!initialized_ || finalized_) return;
  finalized_ = true;
  watch_.stop();
  if (size_ > 1) {
    // 1. Everything this node sent has left: buffers released, rendezvous
    //    acks in, channels settled.
    progress_until([&] { return sends_settled(); });
    // 2. Everything sent to this node is delivered: the counts each node sent
    //    to each other node, against what arrived here.
    std::vector<std::uint64_t> all(std::size_t(size_) * std::size_t(size_));
    allgather_within(next_out_.data(), next_out_.size() * sizeof(std::uint64_t), all.data(), 0,
                     "finalize");
    progress_until([&] {
      for (int src = 0; src < size_; ++src)
        if (src != rank_ && in_[std::size_t(src)].next_seq !=
                                all[std::size_t(src) * std::size_t(size_) + std::size_t(rank_)])
          return false;
      return true;
    });
    barrier();
    progress_until([&] { return in_flight_ == 0 && done_.empty() && actions_.empty(); });
    // 3. Leave. Errors from peers that close first are expected from here on,
    //    and a peer must not drop its worker while another still flushes
    //    towards it: a fence before and after the endpoints close, progressing
    //    UCX while waiting.
    closing_ = true;
    if (use_pmix_ && !pmix_fence(false, 60, true))
      base::warn(
          "ucx transport (node %d): finalize: the PMIx fence before closing did not "
          "complete within 60 s; closing anyway",
          rank_);
    for (peer& p : peers_)
      if (p.pool_rkey != nullptr) ucp_rkey_destroy(std::exchange(p.pool_rkey, nullptr));
    for (chan_out& c : chans_)
      if (c.rkey != nullptr) ucp_rkey_destroy(std::exchange(c.rkey, nullptr));
    close_endpoints();
    if (use_pmix_ && !pmix_fence(false, 60, true))
      base::warn(
          "ucx transport (node %d): finalize: the PMIx fence after closing did not "
          "complete within 60 s",
          rank_);
    drain();
  }
  for (auto& chans : chans_in_)
    for (auto& [id, c] : chans) ucp_mem_unmap(context_, c.memh);
  chans_in_.clear();
  if (pool_memh_ != nullptr) ucp_mem_unmap(context_, std::exchange(pool_memh_, nullptr));
  if (pool_ != nullptr) std::exchange(pool_, nullptr)->retire();
  signal_worker_.store(nullptr, std::memory_order_release);
  ucp_worker_destroy(std::exchange(worker_, nullptr));
  ucp_cleanup(std::exchange(context_, nullptr));
  if (use_pmix_) PMIx_Finalize(nullptr, 0);
}

std::string ucx_transport::describe_lanes(int node) const {
  if (node < 0 || node >= size_ || peers_.empty() || peers_[std::size_t(node)].ep == nullptr)
    return {};
  char* text = nullptr;
  std::size_t len = 0;
  FILE* f = ::open_memstream(&text, &len);
  if (f == nullptr) return {};
  ucp_ep_print_info(peers_[std::size_t(node)].ep, f);
  std::fclose(f);
  std::string out(text, len);
  std::free(text);
  return out;
}

}  // namespace

std::unique_ptr<transport> make_ucx_transport(const ucx_options& options) {
  return std::make_unique<ucx_transport>(options);
}

std::unique_ptr<transport> make_ucx_transport() {
  return make_ucx_transport(ucx_options{});
}

const ucx_counters* ucx_counters_of(const transport& t) {
  auto* u = dynamic_cast<const ucx_transport*>(&t);
  return u != nullptr ? &u->counters() : nullptr;
}

std::string ucx_describe_lanes(const transport& t, int node) {
  auto* u = dynamic_cast<const ucx_transport*>(&t);
  return u != nullptr ? u->describe_lanes(node) : std::string();
}

}  // namespace weft::net
