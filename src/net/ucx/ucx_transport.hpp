// Private to the ucx transport: its class and the state it keeps. The
// "ucx" transport: nodes talk through UCX's UCP layer and find each other
// through the launcher's PMIx server (mpirun, srun --mpi=pmix).
//
// The files, one role each (as UCX splits its own transports):
//   pmix_bootstrap.{hpp,cpp}  rank, size and the address exchange through PMIx
//   protocol.hpp              the active messages' ids and headers
//   eager.cpp                 small messages: sent, received, put in order
//                             (the reorder window), delivered; the hot path
//   rendezvous.cpp            large messages: the send pool, the GET, the ack
//   channels.cpp              persistent channels: PUT into a buffer the
//                             receiver registered once
//   collective.cpp            allgather and barrier as active messages
//   ucx_transport.cpp         the class: init, waiting, the work deferred
//                             from UCX's callbacks, teardown
//
// Design:
//  - Bootstrap. PMIx gives rank and size; every node puts its UCP worker
//    address and the rkey of its send pool, one PMIx fence collects them, and
//    every node creates endpoints to all others (pmix_bootstrap.hpp).
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
//  - Small messages (eager.cpp), large messages (rendezvous.cpp), persistent
//    channels (channels.cpp): each file's head comment.
//  - Failures. Endpoints to other hosts ask UCX to report a dead peer
//    (hooks.node_lost). On this host they do not by default: in UCX 1.13
//    that request rules out the shared-memory transports; the peer watch
//    (peer_watch.hpp: a thread on the local peers' pidfds) reports a dead
//    local process instead (ucx_options).
//  - Transports are UCX's choice (UCX_TLS). Over TCP alone UCX emulates the
//    GET with active messages, which is slower than sending the bytes
//    eagerly; the rendezvous is built for RDMA and shared memory.
//  - Callbacks from ucp_worker_progress only record (copy bytes, mark window
//    entries, queue deferred_work); UCX calls and core's hooks other than
//    alloc and deliver run after ucp_worker_progress returns, so no callback
//    re-enters UCX. An eager message that is next in order from its source,
//    arriving inside progress(), goes to hooks.deliver from the callback
//    (eager.cpp). deliver only queues the message for a PE; the one UCX
//    call it can make, wake_waiter, is for a PE asleep in the transport, and
//    none is while progress() runs (that PE holds the transport while it
//    sleeps).
//
// Why one class over several files rather than a class per role: the roles
// share the endpoints, the sequence numbers and the request records, and
// the eager path must reach them without an indirect call; the split is by
// file, each defining the members of its role. The hot members (send,
// progress, the eager receive callback) and the small helpers they use are
// defined together in eager.cpp, so the compiler sees them in one
// translation unit as it did when the transport was one file.
#pragma once
#include <ucp/api/ucp.h>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include "../message_pool.hpp"
#include "../peer_watch.hpp"
#include "pmix_bootstrap.hpp"
#include "protocol.hpp"
#include "ucx.hpp"
#include "weft/base/error.hpp"

namespace weft::net::ucx {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The PMIx keys this transport publishes at init.
inline constexpr const char* key_worker_address = "weft.ucx.addr";
inline constexpr const char* key_send_pool = "weft.ucx.pool";

// What a UCX request of this transport's is for: what its completion does
// (ucx_transport::complete_request).
enum class request_kind : std::uint8_t {
  message_send,    // an eager message: its buffer goes back to core
  control_send,    // a control message: nothing
  rendezvous_get,  // a GET of a large message: it is ready; ack the sender
  channel_flush,   // a persistent channel's PUT is visible: send the note
};

// weft's record of a UCX request it waits for (the request's user data).
// Owns the header (UCP 1.13 reads it until the send completes) and any
// bytes sent with it. Recycled through a free list, never freed while the
// transport lives.
struct request {
  class ucx_transport* self = nullptr;
  request_kind kind = request_kind::control_send;
  int node = -1;
  ucs_status_t status = UCS_OK;
  am_header hdr;
  eager_header eager;           // what an eager message sends of hdr
  void* buffer = nullptr;       // message_send, channel_flush: the caller's; get: destination
  ucp_rkey_h rkey = nullptr;    // rendezvous_get: an rkey unpacked for this message only
  std::vector<std::byte> data;  // bytes sent after the header
};

// Work found inside a UCX callback, done once ucp_worker_progress returns
// (see Callbacks): each kind is one member function of the transport.
struct deferred_work {
  enum kind_t : std::uint8_t {
    start_get,         // rendezvous descriptor arrived: GET the message
    rendezvous_acked,  // a peer finished its GET from us: free the source
    open_channel,      // a peer opens a channel to this node: register its buffer
    channel_ready,     // our channel's remote buffer is known
    return_credit,     // we copied a channel message out: the buffer is free
    release_buffer,    // a caller's buffer is no longer needed
  } kind;
  int node = -1;
  am_header hdr;
  std::vector<std::byte> data;
  void* buffer = nullptr;

  explicit deferred_work(kind_t k, int n = -1, const am_header& h = {})
      : kind(k), node(n), hdr(h) {}
};

// One source's reorder window: entry i holds message next_seq + i.
struct reorder_window {
  enum entry_state : std::uint8_t { empty, pending, ready };  // pending: its GET is in flight
  struct entry {
    void* buffer = nullptr;
    std::uint64_t bytes = 0;
    entry_state state = empty;
  };
  std::uint64_t next_seq = 0;  // the window's head: the next to deliver
  std::uint64_t next_new = 0;  // one past the newest number seen: an eager message's
  std::deque<entry> entries;
};

// A rendezvous send waiting for its ack.
struct rendezvous_send {
  bool live = false;
  int node = -1;
  void* pool_copy = nullptr;  // the send-pool block the message was copied into
  ucp_mem_h memh = nullptr;   // registered for this message only
  void* caller = nullptr;     // released on the ack when not copied to the pool (in place:
                              // from the pool as it is, or registered for this message)
};

// A channel this node sends on.
struct outgoing_channel {
  int node = -1;
  std::size_t max_bytes = 0;
  bool ready = false;  // handshake done: remote address and rkey known
  bool busy = false;   // a message is in the remote buffer (until the credit)
  std::uint64_t remote_addr = 0;
  ucp_rkey_h rkey = nullptr;
};

// A channel buffer this node owns for a sender.
struct incoming_channel {
  void* buffer = nullptr;
  std::size_t max_bytes = 0;
  ucp_mem_h memh = nullptr;
};

// The parts of one allgather that arrived.
struct allgather_round {
  std::vector<std::vector<std::byte>> parts;
  std::vector<bool> got;
  int count = 0;
};

// What the endpoint error handler and the per-source eager handler need;
// one per peer, never moved.
struct peer {
  class ucx_transport* self = nullptr;
  int node = -1;
  ucp_ep_h ep = nullptr;
  ucp_rkey_h pool_rkey = nullptr;  // the peer's send pool, for our GETs
};

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

  // --- UCX callbacks
  // A control message (every id below am_count but am_eager): its header
  // read and checked (read_control_header), then handed to Handle.
  using control_handler = void (ucx_transport::*)(int src, const am_header& h,
                                                  const std::byte* data, std::size_t length);
  template <unsigned Id, control_handler Handle>
  static ucs_status_t on_control(void* arg, const void* header, std::size_t header_length,
                                 void* data, std::size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<ucx_transport*>(arg);
    const am_header h = self->read_control_header(Id, header, header_length, param);
    (self->*Handle)(int(h.src), h, static_cast<const std::byte*>(data), length);
    return UCS_OK;
  }
  // An eager message with an eager_header (id am_eager); eager.cpp.
  static ucs_status_t on_eager_with_header(void* arg, const void* header, std::size_t header_length,
                                           void* data, std::size_t length,
                                           const ucp_am_recv_param_t* param);
  // An eager message from the peer `arg` (id am_count + its node); eager.cpp.
  static ucs_status_t on_eager_from(void* arg, const void* header, std::size_t header_length,
                                    void* data, std::size_t length,
                                    const ucp_am_recv_param_t* param);
  static void on_request_done(void* ucx_request, ucs_status_t status, void* user_data) {
    auto* r = static_cast<request*>(user_data);
    r->status = status;
    ucp_request_free(ucx_request);
    r->self->requests_in_flight_--;
    r->self->completed_.push_back(r);
  }
  static void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* p = static_cast<peer*>(arg);
    p->self->report_lost(p->node, "connection failed", status);
  }

 private:
  // --- setting up (ucx_transport.cpp)
  void create_worker();
  void map_send_pool();
  void register_am_handlers();  // eager.cpp: where the handlers' bodies are
  void publish_and_connect(double timeout_s);
  std::vector<std::byte> pack_rkey(ucp_mem_h memh, int node);

  // --- requests (eager.cpp: the eager path is their hot user)
  request* new_request(request_kind kind, int node);
  request* new_message_request(int node, void* buffer);
  void free_request(request* r) { free_requests_.push_back(r); }
  void track_request(request* r, ucs_status_ptr_t status, const char* call);
  static ucp_request_param_t eager_send_params(request* r);
  void send_active_message(request* r, unsigned id, const void* data, std::size_t n);
  void send_control(int node, unsigned id, am_header h, const void* data = nullptr,
                    std::size_t n = 0);
  void complete_request(request* r);  // ucx_transport.cpp

  // --- eager messages and the reorder window (eager.cpp)
  void send_eager_by_id(int node, void* buffer, std::size_t bytes);
  void receive_eager_from(int src, std::size_t header_length, void* data, std::size_t length,
                          const ucp_am_recv_param_t* param);
  void receive_eager_with_header(const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t* param);
  [[noreturn]] void reject_eager(int src, std::size_t header_length) const;
  void note_seen(int src, std::uint64_t seq) {
    reorder_window& w = windows_[std::size_t(src)];
    if (seq >= w.next_new) w.next_new = seq + 1;
  }
  void* alloc_receive_buffer(std::size_t bytes);
  void place_in_window(int src, std::uint64_t seq, void* buffer, std::size_t bytes, bool ready);
  void accept_eager(int src, std::uint64_t seq, void* buffer, std::size_t bytes);
  void mark_ready(int src, std::uint64_t seq);
  int deliver_ready();

  // --- control messages: the header every handler reads (eager.cpp)
  am_header read_control_header(unsigned id, const void* header, std::size_t header_length,
                                const ucp_am_recv_param_t* param) const;

  // --- rendezvous (rendezvous.cpp)
  void send_rendezvous(int node, std::uint64_t seq, void* buffer, std::size_t bytes);
  void receive_rendezvous(int src, const am_header& h, const std::byte* data, std::size_t length);
  void receive_rendezvous_ack(int src, const am_header& h, const std::byte* data,
                              std::size_t length);
  void start_get(deferred_work& w);
  void complete_get(request* r);
  void finish_rendezvous_send(int node, std::uint64_t cookie);

  // --- persistent channels (channels.cpp)
  void receive_channel_open(int src, const am_header& h, const std::byte* data, std::size_t length);
  void receive_channel_ready(int src, const am_header& h, const std::byte* data,
                             std::size_t length);
  void receive_channel_note(int src, const am_header& h, const std::byte* data, std::size_t length);
  void receive_channel_credit(int src, const am_header& h, const std::byte* data,
                              std::size_t length);
  void open_incoming_channel(const deferred_work& w);
  void connect_outgoing_channel(const deferred_work& w);
  void send_channel_credit(int node, std::uint64_t channel);
  void complete_channel_flush(request* r);

  // --- collectives (collective.cpp)
  void allgather_within(const void* mine, std::size_t bytes, void* all, double timeout_s,
                        const char* what);
  void receive_allgather_part(int src, const am_header& h, const std::byte* data,
                              std::size_t length);

  // --- the work deferred from callbacks, waiting, teardown (ucx_transport.cpp)
  void perform(deferred_work& w);
  int handle_callback_work();
  bool has_work() const { return ready_count_ > 0 || !deferred_.empty() || !completed_.empty(); }
  void wait_for_events(std::uint64_t timeout_ns);
  // Sleeps on the armed worker fd for at most timeout_ns.
  void sleep_on_event_fd(std::uint64_t timeout_ns);
  template <class Done, class Late>
  void progress_until(Done done, double timeout_s, Late on_timeout) {
    auto t0 = clock_type::now();
    while (!done()) {
      if (progress() == 0) wait_for_events(1'000'000);
      if (timeout_s > 0 && seconds_since(t0) > timeout_s) on_timeout();
    }
  }
  template <class Done>
  void progress_until(Done done) {
    progress_until(done, 0, [] {});
  }
  bool sends_settled() const;
  void close_endpoints();

  // A UCX call's failed status ends the job, naming the call and the node.
  void fatal_unless_ok(ucs_status_t s, const char* call, int node = -1) const {
    if (s == UCS_OK) return;
    if (node >= 0)
      base::fatal("ucx transport (node %d): %s towards node %d: %s", rank_, call, node,
                  ucs_status_string(s));
    base::fatal("ucx transport (node %d): %s: %s", rank_, call, ucs_status_string(s));
  }
  void require_other_node(int node, const char* call) const {
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
  void report_lost(int node, const char* what, ucs_status_t s);

  ucx_options opt_;
  hooks hooks_;
  int rank_ = 0, size_ = 1;
  bool use_pmix_ = false, initialized_ = false, finalized_ = false, closing_ = false;
  bool eager_by_id_ = false;  // eager messages name their source by AM id (see Order)
  pmix_bootstrap pmix_;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  // wake_waiter() may come from any thread: these two are its only state.
  std::atomic<ucp_worker_h> signal_worker_{nullptr};
  std::atomic<bool> wake_requested_{false};

  std::vector<peer> peers_;                  // sized once at init: the handlers hold pointers
  std::vector<std::uint64_t> next_seq_out_;  // next sequence number per destination
  std::vector<std::uint32_t> notes_due_;     // per destination: channel notes not yet sent
  std::vector<reorder_window> windows_;      // per source
  std::size_t ready_count_ = 0;  // ready window entries not yet delivered, over all sources

  ucp_mem_h pool_memh_ = nullptr;
  message_pool* pool_ = nullptr;                   // retired at finalize; see message_pool
  std::vector<rendezvous_send> rendezvous_sends_;  // by cookie
  std::vector<std::uint32_t> free_cookies_;
  std::size_t rendezvous_sends_live_ = 0;

  std::vector<outgoing_channel> outgoing_channels_;  // by channel id
  std::vector<std::unordered_map<std::uint64_t, incoming_channel>> incoming_channels_;  // by source

  std::uint64_t next_allgather_round_ = 0;
  std::map<std::uint64_t, allgather_round> allgather_rounds_;

  std::vector<std::unique_ptr<request>> requests_;  // every request record ever made
  std::vector<request*> free_requests_;
  std::size_t requests_in_flight_ = 0;  // records whose UCX request has not completed
  std::vector<request*> completed_, completed_now_;
  // Inside progress()'s ucp_worker_progress: receive_eager_from may hand an
  // in-order message to hooks.deliver from the callback (see Callbacks).
  bool in_progress_ = false;
  std::vector<deferred_work> deferred_, deferred_now_;

  ucx_counters counters_;

  // The processes of this host, which UCX does not report (see Failures);
  // stopped before finalize's collectives, after which peers may leave.
  peer_watch watch_;
};

}  // namespace weft::net::ucx
