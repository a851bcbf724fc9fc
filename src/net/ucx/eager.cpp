// The ucx transport's small messages (<= eager_max): sent as one active
// message, received into the reorder window or straight to core, and the
// records of the UCX requests every role shares. This is the hot path of
// the transport: send(), progress() and the eager receive callback, with
// the helpers they use defined here beside them (ucx_transport.hpp, "Why
// one class over several files").
//
// Design:
//  - One active message, forced eager, with no header of weft's: the AM id
//    says the sender (am_count + source node; UCX ids go to 65535, so jobs
//    of more nodes send a source and a sequence number in an 8-byte header
//    instead, as after a channel note: see Order in ucx_transport.hpp).
//    UCX's shared-memory transports hold 28 bytes of user data in the first
//    cache line of a FIFO element; core's 20-byte wire header plus an 8-byte
//    payload fits there only without a header of ours (docs/net.md has the
//    measurement). The receive callback copies the bytes into hooks.alloc's
//    buffer.
//  - A send UCX completes inside the call (a short or bcopy send, the usual
//    case) gives its buffer back to core at once, as shm's sends do, and its
//    request record straight back to the free list, instead of a trip
//    through the completion list and handle_callback_work().
//  - An eager message that is next in order from its source, with nothing
//    of that source waiting before it, arriving inside progress(), goes to
//    hooks.deliver from the callback, sparing it the window and
//    deliver_ready (docs/net.md has what they cost). Only out-of-order
//    arrivals (behind a rendezvous or a channel note) wait in the window.
//  - Active messages are sent eagerly always: large messages have their own
//    rendezvous (rendezvous.cpp), and an eager message is whole when its
//    handler runs. A UCX rendezvous arriving anyway is a fatal error.
#include <cstring>
#include "ucx_transport.hpp"

namespace weft::net::ucx {

namespace {

// The receive callback copies every eager message out of UCX's buffer,
// most of them 16 to 64 bytes (a weft message with a small payload): in
// 16-byte pieces, overlapping, without a call into libc's memcpy (most of
// the copy's instructions at these sizes; docs/net.md).
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

ucs_status_t set_am_handler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb,
                            void* arg) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                  UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = id;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.cb = cb;
  hp.arg = arg;
  return ucp_worker_set_am_recv_handler(worker, &hp);
}

}  // namespace

// ------------------------------------------------------------ the handlers

// Every kind's handler, one per id; those of the eager ids per source when
// the ids suffice. Set before any peer can reach this worker (the fence in
// publish_and_connect). Here, not in ucx_transport.cpp, so that the eager
// callbacks are compiled with the receive path they call.
void ucx_transport::register_am_handlers() {
  using t = ucx_transport;
  // In am_id order (protocol.hpp).
  static_assert(am_count == 8, "a handler for every am_id");
  static constexpr ucp_am_recv_callback_t handlers[am_count] = {
      &on_eager_with_header,
      &on_control<am_rndv, &t::receive_rendezvous>,
      &on_control<am_ack, &t::receive_rendezvous_ack>,
      &on_control<am_chan_open, &t::receive_channel_open>,
      &on_control<am_chan_ready, &t::receive_channel_ready>,
      &on_control<am_chan_note, &t::receive_channel_note>,
      &on_control<am_chan_credit, &t::receive_channel_credit>,
      &on_control<am_coll, &t::receive_allgather_part>};
  for (unsigned id = 0; id < am_count; ++id)
    fatal_unless_ok(set_am_handler(worker_, id, handlers[id], this),
                    "ucp_worker_set_am_recv_handler");
  eager_by_id_ = opt_.eager_source_ids && std::size_t(am_count) + std::size_t(size_) <= am_id_limit;
  if (eager_by_id_)
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      fatal_unless_ok(
          set_am_handler(worker_, am_count + unsigned(p), &on_eager_from, &peers_[std::size_t(p)]),
          "ucp_worker_set_am_recv_handler");
    }
}

ucs_status_t ucx_transport::on_eager_from(void* arg, const void* header, std::size_t header_length,
                                          void* data, std::size_t length,
                                          const ucp_am_recv_param_t* param) {
  (void)header;
  auto* p = static_cast<peer*>(arg);
  p->self->receive_eager_from(p->node, header_length, data, length, param);
  return UCS_OK;
}

ucs_status_t ucx_transport::on_eager_with_header(void* arg, const void* header,
                                                 std::size_t header_length, void* data,
                                                 std::size_t length,
                                                 const ucp_am_recv_param_t* param) {
  static_cast<ucx_transport*>(arg)->receive_eager_with_header(header, header_length, data, length,
                                                              param);
  return UCS_OK;
}

// ----------------------------------------------------------------- requests

request* ucx_transport::new_request(request_kind kind, int node) {
  request* r;
  if (!free_requests_.empty()) {
    r = free_requests_.back();
    free_requests_.pop_back();
  } else {
    requests_.push_back(std::make_unique<request>());
    r = requests_.back().get();
    r->self = this;
  }
  r->kind = kind;
  r->node = node;
  r->status = UCS_OK;
  r->hdr = am_header{};
  r->hdr.src = std::uint32_t(rank_);
  r->buffer = nullptr;
  r->rkey = nullptr;
  r->data.clear();
  return r;
}

// new_request for a message send: only the fields a message_send
// request's completion reads (complete_request, on_request_done), without
// the header and data a control message or a GET needs.
request* ucx_transport::new_message_request(int node, void* buffer) {
  if (free_requests_.empty()) {
    request* r = new_request(request_kind::message_send, node);
    r->buffer = buffer;
    return r;
  }
  request* r = free_requests_.back();
  free_requests_.pop_back();
  r->kind = request_kind::message_send;
  r->node = node;
  r->status = UCS_OK;
  r->buffer = buffer;
  r->rkey = nullptr;
  return r;
}

void ucx_transport::track_request(request* r, ucs_status_ptr_t status, const char* call) {
  if (status == nullptr) {
    completed_.push_back(r);  // completed at once; finished in progress()
  } else if (UCS_PTR_IS_ERR(status)) {
    r->status = UCS_PTR_STATUS(status);
    if (!closing_) {
      if (peer_failure(r->status)) report_lost(r->node, call, r->status);
      fatal_unless_ok(r->status, call, r->node);
    }
    completed_.push_back(r);
  } else {
    requests_in_flight_++;
  }
}

// Eager always (see the head comment).
ucp_request_param_t ucx_transport::eager_send_params(request* r) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &on_request_done;
  p.user_data = r;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  return p;
}

void ucx_transport::send_active_message(request* r, unsigned id, const void* data, std::size_t n) {
  ucp_request_param_t p = eager_send_params(r);
  const void* header = &r->hdr;
  std::size_t header_bytes = sizeof(am_header);
  // (Eager messages without a header go by send_eager_by_id.)
  if (id == am_eager) {
    counters_.eager_with_header++;
    r->eager = eager_header{r->hdr.src, std::uint32_t(r->hdr.seq)};
    header = &r->eager;
    header_bytes = sizeof(eager_header);
  }
  track_request(
      r, ucp_am_send_nbx(peers_[std::size_t(r->node)].ep, id, header, header_bytes, data, n, &p),
      "ucp_am_send_nbx");
}

void ucx_transport::send_control(int node, unsigned id, am_header h, const void* data,
                                 std::size_t n) {
  request* r = new_request(request_kind::control_send, node);
  h.src = std::uint32_t(rank_);
  r->hdr = h;
  if (n > 0) {
    auto* b = static_cast<const std::byte*>(data);
    r->data.assign(b, b + n);
  }
  send_active_message(r, id, r->data.data(), n);
}

// ------------------------------------------------------------------ sending

// The common send (see Order): no header, and UCX usually completes it
// inside the call; then the buffer and the request record go back at once
// (see the head comment). inline: send() is its one caller, and a call
// between them costs ~12 instructions per message (callgrind), which the
// one-file transport did not pay (its functions had internal linkage, so
// the compiler inlined a function called once).
inline void ucx_transport::send_eager_by_id(int node, void* buffer, std::size_t bytes) {
  request* r = new_message_request(node, buffer);
  ucp_request_param_t p = eager_send_params(r);
  ucs_status_ptr_t status = ucp_am_send_nbx(
      peers_[std::size_t(node)].ep, am_count + unsigned(rank_), nullptr, 0, buffer, bytes, &p);
  if (status == nullptr) {
    free_request(r);
    hooks_.release(buffer);
    return;
  }
  track_request(r, status, "ucp_am_send_nbx");
}

void ucx_transport::send(int node, void* buffer, std::size_t bytes) {
  require_other_node(node, "send");
  std::uint64_t seq = next_seq_out_[std::size_t(node)]++;
  if (bytes > opt_.eager_max) {
    send_rendezvous(node, seq, buffer, bytes);
    return;
  }
  counters_.eager++;
  if (eager_by_id_ && notes_due_[std::size_t(node)] == 0) {
    send_eager_by_id(node, buffer, bytes);
    return;
  }
  request* r = new_request(request_kind::message_send, node);
  r->hdr.seq = seq;
  r->hdr.size = bytes;
  r->buffer = buffer;
  send_active_message(r, am_eager, buffer, bytes);
}

// ---------------------------------------------------------------- receiving

void* ucx_transport::alloc_receive_buffer(std::size_t bytes) {
  void* p = hooks_.alloc(bytes);
  if (p == nullptr && bytes > 0)
    base::fatal("ucx transport (node %d): hooks.alloc(%zu) returned no buffer", rank_, bytes);
  return p;
}

// Either the header or UCX's rendezvous flag (receive_eager_from).
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

void ucx_transport::receive_eager_from(int src, std::size_t header_length, void* data,
                                       std::size_t length, const ucp_am_recv_param_t* param) {
  // One test for both ways an eager message can be malformed.
  if ((header_length | (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) != 0) [[unlikely]]
    reject_eager(src, header_length);
  const std::uint64_t seq = windows_[std::size_t(src)].next_new++;
  void* buf = alloc_receive_buffer(length);
  copy_small(buf, data, length);
  accept_eager(src, seq, buf, length);
}

void ucx_transport::receive_eager_with_header(const void* header, std::size_t header_length,
                                              void* data, std::size_t length,
                                              const ucp_am_recv_param_t* param) {
  if (header_length != sizeof(eager_header))
    base::fatal("ucx transport (node %d): active message %u with a %zu-byte header, expected %zu",
                rank_, unsigned(am_eager), header_length, sizeof(eager_header));
  eager_header e;
  std::memcpy(&e, header, sizeof e);
  const int src = int(e.src);
  if (e.src >= std::uint32_t(size_) || src == rank_)
    base::fatal("ucx transport (node %d): active message %u names source node %u", rank_,
                unsigned(am_eager), e.src);
  // The full number: the next one to deliver plus how far ahead this one is.
  const std::uint64_t next = windows_[std::size_t(src)].next_seq;
  const std::uint64_t seq = next + std::uint32_t(e.seq - std::uint32_t(next));
  note_seen(src, seq);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0)
    base::fatal(
        "ucx transport (node %d): UCX rendezvous for active message %u from node %d, "
        "but weft sends every active message eagerly",
        rank_, unsigned(am_eager), src);
  void* buf = alloc_receive_buffer(length);
  if (length > 0) std::memcpy(buf, data, length);
  accept_eager(src, seq, buf, length);
}

am_header ucx_transport::read_control_header(unsigned id, const void* header,
                                             std::size_t header_length,
                                             const ucp_am_recv_param_t* param) const {
  if (header_length != sizeof(am_header))
    base::fatal("ucx transport (node %d): active message %u with a %zu-byte header, expected %zu",
                rank_, id, header_length, sizeof(am_header));
  am_header h;
  std::memcpy(&h, header, sizeof h);
  if (h.src >= std::uint32_t(size_) || int(h.src) == rank_)
    base::fatal("ucx transport (node %d): active message %u names source node %u", rank_, id,
                h.src);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0)
    base::fatal(
        "ucx transport (node %d): UCX rendezvous for active message %u from node %d, "
        "but weft sends every active message eagerly",
        rank_, id, int(h.src));
  return h;
}

// ------------------------------------------------------- the reorder window

void ucx_transport::place_in_window(int src, std::uint64_t seq, void* buffer, std::size_t bytes,
                                    bool ready) {
  reorder_window& w = windows_[std::size_t(src)];
  // A window this deep means a lost or corrupt sequence number, not traffic.
  if (seq < w.next_seq || seq - w.next_seq > (std::uint64_t(1) << 28))
    base::fatal("ucx transport (node %d): message %llu from node %d, expected %llu or later", rank_,
                static_cast<unsigned long long>(seq), src,
                static_cast<unsigned long long>(w.next_seq));
  std::size_t i = std::size_t(seq - w.next_seq);
  if (i >= w.entries.size()) w.entries.resize(i + 1);
  reorder_window::entry& e = w.entries[i];
  if (e.state != reorder_window::empty)
    base::fatal("ucx transport (node %d): message %llu from node %d arrived twice", rank_,
                static_cast<unsigned long long>(seq), src);
  e.buffer = buffer;
  e.bytes = bytes;
  e.state = ready ? reorder_window::ready : reorder_window::pending;
  if (ready) ready_count_++;
}

void ucx_transport::mark_ready(int src, std::uint64_t seq) {
  reorder_window& w = windows_[std::size_t(src)];
  w.entries[std::size_t(seq - w.next_seq)].state = reorder_window::ready;
  ready_count_++;
}

void ucx_transport::accept_eager(int src, std::uint64_t seq, void* buffer, std::size_t bytes) {
  counters_.eager_received++;
  reorder_window& w = windows_[std::size_t(src)];
  // The next in order with nothing of that source waiting before it, inside
  // progress(): to core at once, not through the window (deliver_ready).
  if (seq == w.next_seq && w.entries.empty() && in_progress_) {
    w.next_seq++;
    counters_.eager_at_once++;
    hooks_.deliver(src, buffer, bytes);
    return;
  }
  place_in_window(src, seq, buffer, bytes, true);
}

int ucx_transport::deliver_ready() {
  // A fast node may send before a slow one's init has returned; core cannot
  // take messages before that, so they wait in the window.
  if (ready_count_ == 0 || !initialized_) return 0;
  int n = 0;
  for (int src = 0; src < size_; ++src) {
    reorder_window& w = windows_[std::size_t(src)];
    while (!w.entries.empty() && w.entries.front().state == reorder_window::ready) {
      reorder_window::entry e = w.entries.front();
      w.entries.pop_front();
      w.next_seq++;
      ready_count_--;
      hooks_.deliver(src, e.buffer, e.bytes);
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
  if (!deferred_.empty() || !completed_.empty()) n += handle_callback_work();
  if (ready_count_ != 0) n += deliver_ready();
  return n;
}

}  // namespace weft::net::ucx
