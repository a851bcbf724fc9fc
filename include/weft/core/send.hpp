// Sending messages: to a PE, to whichever PE of a node takes it first, to
// every PE. Contexts as in weft/core/run.hpp.
#pragma once
#include "weft/base/export.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"

namespace weft {

// Delivers `m` to PE `pe` of the job. On this node: pushes the pointer on
// that PE's queue and wakes it if it sleeps; never copies, never calls the
// transport. On another node: the transport carries it (in order with the
// caller's other messages to that node). Any thread. A bad PE or an
// unregistered handler is a fatal error.
WEFT_API void send(int pe, message_ptr m);
namespace detail {
// weft::send of a message already released from its message_ptr: the layers
// above core send through it on every message, without the by-value
// message_ptr's moves and the null test after the call.
WEFT_API void send_released(int pe, message* m);
}  // namespace detail
// Delivers `m` to whichever PE of this node takes it first. Any thread.
WEFT_API void send_node(message_ptr m);
// The same on node `node` of the job. Any thread.
WEFT_API void send_to_node(int node, message_ptr m);
// Delivers a copy of `m` to every PE of the job (the caller's too), through
// a spanning tree rooted at the calling PE: the nodes form a tree of fan-out
// `broadcast_fanout` first, then inside each node each PE forwards to at
// most `broadcast_fanout` children before handling its own copy. Any
// thread.
WEFT_API void broadcast(message_ptr m);
inline constexpr int broadcast_fanout = 4;

}  // namespace weft
