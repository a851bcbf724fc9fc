// The ucx transport's persistent channels (transport::create_persistent):
// a sender that sends to the same node again and again writes straight into
// a buffer the receiver registered once.
//
// Design:
//  - Handshake: the sender's am_chan_open names the channel and its
//    max_bytes; the receiver registers a buffer of that size (UCX allocates
//    it: nothing outside the transport holds it) and answers am_chan_ready
//    with its address and rkey.
//  - A send is then a PUT into that buffer, an endpoint flush (a PUT's
//    completion is only local; the flush makes it visible remotely), and a
//    small notification (am_chan_note) sent once the flush completes; the
//    receiver copies the message out, delivers it in its place in the
//    stream, and returns a credit (am_chan_credit): one message in the
//    buffer at a time.
//  - The note is the one announcement sent after messages that follow it
//    (see Order in ucx_transport.hpp): while one is due towards a node,
//    eager messages to it carry their numbers (notes_due_).
//  - Until the handshake is done, while the buffer holds a message, or for
//    a message larger than max_bytes, send_persistent goes through send():
//    the sequence number keeps it in order (counted in
//    ucx_counters::persistent_fallbacks).
#include <algorithm>
#include <cstring>
#include "ucx_transport.hpp"

namespace weft::net::ucx {

// ------------------------------------------------------------------ sending

int ucx_transport::create_persistent(int node, std::size_t max_bytes) {
  require_other_node(node, "create_persistent");
  outgoing_channel c;
  c.node = node;
  c.max_bytes = max_bytes;
  outgoing_channels_.push_back(c);
  am_header h;
  h.size = max_bytes;
  h.cookie = outgoing_channels_.size() - 1;
  send_control(node, am_chan_open, h);
  return int(outgoing_channels_.size() - 1);
}

void ucx_transport::send_persistent(int channel, void* buffer, std::size_t bytes) {
  if (channel < 0 || std::size_t(channel) >= outgoing_channels_.size())
    base::fatal("ucx transport: send_persistent on channel %d: node %d has channels 0..%zd",
                channel, rank_, std::ptrdiff_t(outgoing_channels_.size()) - 1);
  outgoing_channel& c = outgoing_channels_[std::size_t(channel)];
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
  ucs_status_ptr_t put = ucp_put_nbx(ep, buffer, bytes, c.remote_addr, c.rkey, &none);
  if (UCS_PTR_IS_ERR(put))
    fatal_unless_ok(UCS_PTR_STATUS(put), "ucp_put_nbx (persistent channel)", c.node);
  else if (put != nullptr)
    ucp_request_free(put);  // UCX frees it on completion; the flush below covers it
  request* r = new_request(request_kind::channel_flush, c.node);
  r->hdr.seq = next_seq_out_[std::size_t(c.node)]++;
  notes_due_[std::size_t(c.node)]++;  // until complete_channel_flush sends the note
  r->hdr.size = bytes;
  r->hdr.cookie = std::uint64_t(channel);
  r->buffer = buffer;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &on_request_done;
  p.user_data = r;
  track_request(r, ucp_ep_flush_nbx(ep, &p), "ucp_ep_flush_nbx (persistent channel)");
}

// The PUT is visible at the receiver now; only then may the note go, and
// it overtakes nothing.
void ucx_transport::complete_channel_flush(request* r) {
  hooks_.release(r->buffer);
  send_control(r->node, am_chan_note, r->hdr);
  notes_due_[std::size_t(r->node)]--;
}

void ucx_transport::receive_channel_ready(int src, const am_header& h, const std::byte* data,
                                          std::size_t length) {
  deferred_work w{deferred_work::channel_ready, src, h};
  if (length > 0) w.data.assign(data, data + length);
  deferred_.push_back(std::move(w));
}

// The receiver's buffer address and rkey: the channel is ready for PUTs.
void ucx_transport::connect_outgoing_channel(const deferred_work& w) {
  if (w.hdr.cookie >= outgoing_channels_.size() ||
      outgoing_channels_[w.hdr.cookie].node != w.node || outgoing_channels_[w.hdr.cookie].ready)
    base::fatal("ucx transport (node %d): node %d answered for unknown channel %llu", rank_, w.node,
                static_cast<unsigned long long>(w.hdr.cookie));
  outgoing_channel& c = outgoing_channels_[w.hdr.cookie];
  fatal_unless_ok(ucp_ep_rkey_unpack(peers_[std::size_t(w.node)].ep, w.data.data(), &c.rkey),
                  "ucp_ep_rkey_unpack (persistent channel)", w.node);
  c.remote_addr = w.hdr.addr;
  c.ready = true;
}

void ucx_transport::receive_channel_credit(int src, const am_header& h, const std::byte*,
                                           std::size_t) {
  if (h.cookie >= outgoing_channels_.size() || outgoing_channels_[h.cookie].node != src)
    base::fatal("ucx transport (node %d): credit from node %d for channel %llu", rank_, src,
                static_cast<unsigned long long>(h.cookie));
  outgoing_channels_[h.cookie].busy = false;
}

// ---------------------------------------------------------------- receiving

void ucx_transport::receive_channel_open(int src, const am_header& h, const std::byte*,
                                         std::size_t) {
  deferred_.push_back(deferred_work{deferred_work::open_channel, src, h});
}

// A buffer of the channel's max_bytes, registered once; its address and
// rkey go back to the sender.
void ucx_transport::open_incoming_channel(const deferred_work& w) {
  auto& channels = incoming_channels_[std::size_t(w.node)];
  if (channels.count(w.hdr.cookie) != 0)
    base::fatal("ucx transport (node %d): node %d opened channel %llu twice", rank_, w.node,
                static_cast<unsigned long long>(w.hdr.cookie));
  incoming_channel c;
  c.max_bytes = w.hdr.size;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                  UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = nullptr;
  mp.length = std::max<std::size_t>(c.max_bytes, 64);
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  fatal_unless_ok(ucp_mem_map(context_, &mp, &c.memh), "ucp_mem_map (persistent channel buffer)",
                  w.node);
  ucp_mem_attr_t ma{};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  fatal_unless_ok(ucp_mem_query(c.memh, &ma), "ucp_mem_query (persistent channel buffer)", w.node);
  c.buffer = ma.address;
  channels.emplace(w.hdr.cookie, c);
  std::vector<std::byte> rkey = pack_rkey(c.memh, w.node);
  am_header h;
  h.size = c.max_bytes;
  h.addr = reinterpret_cast<std::uintptr_t>(c.buffer);
  h.cookie = w.hdr.cookie;
  send_control(w.node, am_chan_ready, h, rkey.data(), rkey.size());
}

// A message is in the channel's buffer: copied out into its place in the
// stream, and the buffer given back (the credit, after progress).
void ucx_transport::receive_channel_note(int src, const am_header& h, const std::byte*,
                                         std::size_t) {
  note_seen(src, h.seq);
  auto& channels = incoming_channels_[std::size_t(src)];
  auto it = channels.find(h.cookie);
  if (it == channels.end() || h.size > it->second.max_bytes)
    base::fatal(
        "ucx transport (node %d): node %d wrote %llu bytes into unknown or smaller "
        "channel %llu",
        rank_, src, static_cast<unsigned long long>(h.size),
        static_cast<unsigned long long>(h.cookie));
  void* buf = alloc_receive_buffer(h.size);
  std::memcpy(buf, it->second.buffer, h.size);
  place_in_window(src, h.seq, buf, h.size, true);
  deferred_.push_back(deferred_work{deferred_work::return_credit, src, h});
}

void ucx_transport::send_channel_credit(int node, std::uint64_t channel) {
  am_header h;
  h.cookie = channel;
  send_control(node, am_chan_credit, h);
}

}  // namespace weft::net::ucx
