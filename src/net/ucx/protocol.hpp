// Private to the ucx transport: what its active messages are on the wire,
// their ids and headers. The rules they follow (order, who numbers what) are
// in ucx_transport.hpp; each kind's sender and receiver are in the file of
// its role (eager.cpp, rendezvous.cpp, channels.cpp, collective.cpp).
//
// One header layout for every control message keeps their handlers alike;
// 40 bytes is far below any UCX transport's header limit (checked at init).
// Eager messages, the hot kind, carry no header of weft's at all or an
// 8-byte one (eager_header): the first cache line of a UCX shared-memory
// FIFO element holds 28 bytes of user data, and a small weft message fills
// them (docs/net.md, "The ucx transport's message path").
#pragma once
#include <cstdint>

namespace weft::net::ucx {

enum am_id : unsigned {
  am_eager,        // a whole message, with an eager_header (see Order)
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

// The header of every active message but the eager ones.
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
// source, or sent while a channel note is outstanding (see Order). The size
// is the message's length; the sequence number is its low 32 bits, checked
// against the receiver's count.
struct eager_header {
  std::uint32_t src = 0;
  std::uint32_t seq = 0;
};

}  // namespace weft::net::ucx
