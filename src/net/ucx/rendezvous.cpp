// The ucx transport's large messages (> eager_max): a GET rendezvous from
// registered memory (lessons 5 and 8).
//
// Design:
//  - The send pool is memory this process maps and registers once at init
//    (ucx_transport::map_send_pool), and offers core for its large message
//    blocks (transport::message_memory): a message written there leaves as
//    it is, a descriptor {address, size, cookie} naming it; the receiver
//    GETs into hooks.alloc's buffer (itself in its own pool, when core has
//    room there) and acks; the ack releases the message.
//  - A message from elsewhere (the pool was full when it was made, or its
//    buffer is not core's) is copied into a block of the pool first, and the
//    ack frees the block. A copy is preferred to registering the caller's
//    buffer because registration is a system call and page pinning on RDMA
//    hardware, paid per message; the per-message variant is kept
//    (ucx_options::pooled = false, and when the pool has no room) so a
//    benchmark can compare the two.
//  - The pool is ours (mmap), not UCX's (UCP_MEM_MAP_ALLOCATE), because
//    blocks core still holds when the transport ends must stay valid until
//    they are freed (message_pool).
//  - The message keeps its place in the stream (see Order): the receiver
//    reserves its window entry when the descriptor arrives and marks it
//    ready when the GET completes, so a GET in flight holds back only its
//    own source. The descriptor says whether it follows its predecessor
//    directly, and the receiver checks that it does.
//  - The GET is issued after ucp_worker_progress returns (deferred_work
//    start_get), never from the callback that brought the descriptor.
#include <cstring>
#include "ucx_transport.hpp"

namespace weft::net::ucx {

// ------------------------------------------------------------------ sending

void ucx_transport::send_rendezvous(int node, std::uint64_t seq, void* buffer, std::size_t bytes) {
  std::uint32_t cookie;
  if (!free_cookies_.empty()) {
    cookie = free_cookies_.back();
    free_cookies_.pop_back();
  } else {
    cookie = std::uint32_t(rendezvous_sends_.size());
    rendezvous_sends_.emplace_back();
  }
  rendezvous_sends_live_++;
  rendezvous_send r;
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
    rendezvous_sends_[cookie] = r;
    send_control(node, am_rndv, h);
    return;
  }
  void* copy = pool_memh_ != nullptr ? pool_->allocate(bytes) : nullptr;
  if (copy != nullptr) {
    counters_.rndv_pooled++;
    std::memcpy(copy, buffer, bytes);
    r.pool_copy = copy;
    h.addr = reinterpret_cast<std::uintptr_t>(copy);
    rendezvous_sends_[cookie] = r;
    // The caller's buffer is free now; handed back from progress(), which is
    // where core expects releases.
    deferred_work w{deferred_work::release_buffer};
    w.buffer = buffer;
    deferred_.push_back(std::move(w));
    send_control(node, am_rndv, h);
    return;
  }
  counters_.rndv_registered++;
  if (pool_memh_ != nullptr) counters_.pool_fallbacks++;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = buffer;
  mp.length = bytes;
  fatal_unless_ok(ucp_mem_map(context_, &mp, &r.memh), "ucp_mem_map (rendezvous send buffer)",
                  node);
  r.caller = buffer;
  h.addr = reinterpret_cast<std::uintptr_t>(buffer);
  rendezvous_sends_[cookie] = r;
  std::vector<std::byte> rkey = pack_rkey(r.memh, node);
  send_control(node, am_rndv, h, rkey.data(), rkey.size());
}

// The receiver's ack (deferred from receive_rendezvous_ack): the source is
// free.
void ucx_transport::finish_rendezvous_send(int node, std::uint64_t cookie) {
  if (cookie >= rendezvous_sends_.size() || !rendezvous_sends_[cookie].live ||
      rendezvous_sends_[cookie].node != node)
    base::fatal("ucx transport (node %d): rendezvous ack %llu from node %d matches no send", rank_,
                static_cast<unsigned long long>(cookie), node);
  rendezvous_send& r = rendezvous_sends_[cookie];
  if (r.pool_copy != nullptr) {
    pool_->deallocate(r.pool_copy);
  } else {
    if (r.memh != nullptr)
      fatal_unless_ok(ucp_mem_unmap(context_, r.memh), "ucp_mem_unmap (rendezvous send buffer)",
                      node);
    hooks_.release(r.caller);
  }
  r = rendezvous_send{};
  free_cookies_.push_back(std::uint32_t(cookie));
  rendezvous_sends_live_--;
}

void ucx_transport::receive_rendezvous_ack(int src, const am_header& h, const std::byte*,
                                           std::size_t) {
  deferred_.push_back(deferred_work{deferred_work::rendezvous_acked, src, h});
}

// ---------------------------------------------------------------- receiving

// The descriptor: its window entry reserved (pending until the GET is in),
// its GET deferred to after ucp_worker_progress.
void ucx_transport::receive_rendezvous(int src, const am_header& h, const std::byte* data,
                                       std::size_t length) {
  reorder_window& w = windows_[std::size_t(src)];
  if ((h.flags & am_flag_in_order) != 0 && h.seq != w.next_new)
    base::fatal(
        "ucx transport (node %d): rendezvous message %llu from node %d arrived when %llu was "
        "due: UCX handled the endpoint's active messages out of order (weft's ucx transport "
        "relies on their order; UCX_TLS chooses other transports)",
        rank_, static_cast<unsigned long long>(h.seq), src,
        static_cast<unsigned long long>(w.next_new));
  note_seen(src, h.seq);
  void* buf = alloc_receive_buffer(h.size);
  place_in_window(src, h.seq, buf, h.size, false);
  deferred_work get{deferred_work::start_get, src, h};
  get.data.assign(data, data + length);
  get.buffer = buf;
  deferred_.push_back(std::move(get));
}

// From the sender's send pool (its rkey known since init), or from a buffer
// it registered for this message (its rkey in the descriptor's data).
void ucx_transport::start_get(deferred_work& w) {
  peer& pr = peers_[std::size_t(w.node)];
  ucp_rkey_h rkey = pr.pool_rkey;
  request* r = new_request(request_kind::rendezvous_get, w.node);
  r->hdr = w.hdr;
  r->buffer = w.buffer;
  if (!w.data.empty()) {
    fatal_unless_ok(ucp_ep_rkey_unpack(pr.ep, w.data.data(), &r->rkey),
                    "ucp_ep_rkey_unpack (rendezvous)", w.node);
    rkey = r->rkey;
  } else if (rkey == nullptr) {
    base::fatal("ucx transport (node %d): node %d sent from its send pool, but published none",
                rank_, w.node);
  }
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &on_request_done;
  p.user_data = r;
  track_request(r, ucp_get_nbx(pr.ep, w.buffer, w.hdr.size, w.hdr.addr, rkey, &p), "ucp_get_nbx");
}

// The GET is in: the message is ready in its window entry, and the sender
// may free its source.
void ucx_transport::complete_get(request* r) {
  if (r->rkey != nullptr) ucp_rkey_destroy(r->rkey);
  mark_ready(r->node, r->hdr.seq);
  am_header h;
  h.cookie = r->hdr.cookie;
  send_control(r->node, am_ack, h);
}

}  // namespace weft::net::ucx
