// Messages: a fixed header and a payload in one runtime-owned block.
//
// Ownership moves with the message: a message_ptr is unique, send() consumes
// it, and a handler receives it and may keep, forward or drop it (dropping
// frees the block). Inside a node only the pointer travels (lesson 1): the
// receiver reads the very bytes the sender wrote.
//
// Blocks come from the calling PE's size-class free lists (base/memory.hpp),
// so steady-state messaging does no malloc and touches no shared line.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include "weft/base/export.hpp"
#include "weft/base/mpsc_queue.hpp"

namespace weft {

using handler_id = std::uint32_t;

// Header flag bits.
namespace message_flags {
inline constexpr std::uint16_t broadcast = 1u << 0;  // forwarded down the spanning tree
inline constexpr std::uint16_t node = 1u << 1;       // any PE of the node may take it
inline constexpr std::uint16_t control = 1u << 2;    // between nodes: runtime control, no handler
// --weft:trace-sample: the sender left this message out of the trace, so
// its receiver records no handler_begin/handler_end for it (entries stay).
inline constexpr std::uint16_t untraced = 1u << 3;
}  // namespace message_flags

struct alignas(16) message {
  // Node-local fields first: a message crossing the network leaves them
  // behind (wire_offset below). The receiver rebuilds them.
  base::queue_link link;   // queue hook; owned by a queue while the message is queued
  std::uint32_t size = 0;  // payload bytes (on the wire: the transport's length)
  // From here on the header travels with the payload.
  std::uint16_t flags = 0;      // message_flags
  std::uint8_t size_class = 0;  // block class for the allocator (rewritten by the receiver)
  std::uint8_t reserved_ = 0;
  handler_id handler = 0;     // registered handler that consumes it
  std::int32_t src_pe = -1;   // sending PE (-1: a thread that is not a PE)
  std::int32_t priority = 0;  // larger runs first among what waits at a PE (send only)
  // Broadcast: the PE at the root of the tree. A message to one PE of
  // another node carries that PE here while it crosses the network.
  std::int32_t bcast_root = -1;

  std::byte* data() noexcept { return reinterpret_cast<std::byte*>(this + 1); }
  const std::byte* data() const noexcept { return reinterpret_cast<const std::byte*>(this + 1); }
  // The payload viewed as a T (T must fit and be trivially copyable).
  template <class T>
  T& as() noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    return *std::launder(reinterpret_cast<T*>(data()));
  }
};
static_assert(sizeof(message) == 32, "the header is 32 bytes; payload starts 16-byte aligned");

// Between nodes a message travels from `flags` on: the queue link and the
// payload size (the transport carries the length) stay behind, so the
// header costs 20 bytes on the wire, not 32. Small messages are what
// latency is made of, and 12 bytes decide whether a message with an 8-byte
// payload fits in one cache line of a shared-memory FIFO (UCX's mm
// transports hold at most 28 bytes of user data in their first line).
inline constexpr std::size_t wire_offset = offsetof(message, flags);
static_assert(wire_offset == 12);

struct message_deleter {
  WEFT_API void operator()(message* m) const noexcept;
};
using message_ptr = std::unique_ptr<message, message_deleter>;

// A message for `handler` with `payload_bytes` of (uninitialised) payload.
// Any thread; never fails (out of memory is fatal).
WEFT_API message_ptr make_message(handler_id handler, std::size_t payload_bytes);

// A message carrying a copy of `value` (trivially copyable). A name of its
// own, not an overload of make_message: make_message(h, 64) must never mean
// "a message holding the int 64".
template <class T>
message_ptr make_message_with(handler_id handler, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>, "payload must be trivially copyable");
  message_ptr m = make_message(handler, sizeof(T));
  std::memcpy(m->data(), &value, sizeof(T));
  return m;
}

// A copy of header and payload (what a broadcast does for each child).
WEFT_API message_ptr copy_message(const message& m);

}  // namespace weft
