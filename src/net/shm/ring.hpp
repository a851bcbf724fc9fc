// The shm transport's ring records and doorbells: what a sender writes into
// a receiver's ring, how the receiver knows it is complete, and how a sender
// wakes a receiver that sleeps. Private to src/net/shm/; inline, since every
// message goes through them (ring.cpp sends and drains them).
//
// Ring records. A record is a 16-byte header (stamp, bytes, kind) and its
// payload padded to whole cache lines; payloads may wrap around the end of
// the ring. The receiver polls the stamp of the record at its head instead of
// a shared tail index, so a small message costs one cache-line transfer, as
// Open MPI's "fast boxes" do. A stamp is the record's position + 1; before
// publishing a record the sender zeroes the header after it, so the receiver
// never mistakes old payload bytes for a header. The receiver publishes its
// head in batches (a quarter ring, or the end of a drain), and the sender
// re-reads it only when its cached copy says the ring is full.
//
// Doorbell. wait_for_incoming sleeps on a shared (not FUTEX_PRIVATE) futex in
// the own header. A sender pays the wake system call only when the receiver
// announced that it sleeps (Dekker-style: each side stores, fences, loads the
// other side's word; the same protocol as the PE wake-up in
// core/scheduler.cpp), so a wake-up is never lost and never costs a system
// call on the fast path. A sender whose queue waits for room sleeps the same
// way: it sets the ring's space_wanted word, and the receiver rings it when it
// publishes its head.
#pragma once
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include "segment.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/os.hpp"

namespace weft::net::shm {

// The record kinds, and what their payloads hold.
enum kind : std::uint32_t {
  k_eager = 1,        // payload: the message
  k_rndv = 2,         // payload: {sender address, bytes}
  k_ack = 3,          // payload: {sender address, 0}: the rendezvous read is done
  k_chunk_first = 4,  // payload: {total bytes, 0} then the first piece
  k_chunk = 5,        // payload: the next piece
  k_pool = 6,         // payload: {sender address in its pool, bytes}: lent; ack when done
  k_return = 7,       // payload: {receiver address in its pool, bytes}: a lent block, back
};

struct record {
  std::atomic<std::uint64_t> stamp;  // position + 1 once complete; 0 before
  std::uint32_t bytes;               // payload bytes (before padding)
  std::uint32_t kind;
};
static_assert(sizeof(record) == 16);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

// The 16 bytes that open the payload of every kind but k_eager and k_chunk:
// an address and a byte count (k_chunk_first: the total bytes and 0).
struct descriptor {
  std::uint64_t addr;
  std::uint64_t bytes;
};
static_assert(sizeof(descriptor) == 16);

// Bytes a record of `payload` bytes takes in a ring: its header and payload
// rounded up to whole cache lines, so that every record starts a line and a
// small one (up to 48 bytes of payload: a message with a 28-byte payload)
// stays within one line. A record straddling two lines costs the reader a
// second cache-line transfer; 48-byte records did that every other message.
constexpr std::size_t record_bytes(std::size_t payload) {
  return (16 + payload + base::cache_line - 1) & ~std::size_t(base::cache_line - 1);
}

// n bytes into / out of a ring of mask + 1 bytes at position pos, wrapping.
inline void copy_in(unsigned char* data, std::uint64_t mask, std::uint64_t pos, const void* src,
                    std::size_t n) {
  const std::size_t off = pos & mask;
  const std::size_t first = std::min<std::size_t>(n, mask + 1 - off);
  std::memcpy(data + off, src, first);
  if (n > first) std::memcpy(data, static_cast<const unsigned char*>(src) + first, n - first);
}
inline void copy_out(void* dst, const unsigned char* data, std::uint64_t mask, std::uint64_t pos,
                     std::size_t n) {
  if (n == 0) return;  // dst may be null for an empty message
  const std::size_t off = pos & mask;
  const std::size_t first = std::min<std::size_t>(n, mask + 1 - off);
  std::memcpy(dst, data + off, first);
  if (n > first) std::memcpy(static_cast<unsigned char*>(dst) + first, data, n - first);
}

// Ends the job: the ring from `node` holds what no sender writes. `fmt`
// (printf, may be null) says what, in the parentheses after the message.
// The one exit of every check of the receive path.
[[noreturn]] [[gnu::cold]] void ring_corrupt(int node, const char* fmt = nullptr, ...)
    __attribute__((format(printf, 2, 3)));

// ---------------------------------------------------------------- doorbell

// The doorbell's futex: shared between the processes that map it; every
// waiter is woken.
inline void doorbell_sleep(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                           std::uint64_t ns) {
  base::os::futex_wait(*word, expected, ns, base::os::futex_scope::shared,
                       "futex(FUTEX_WAIT) on the shm transport's doorbell");
}
inline void doorbell_wake(std::atomic<std::uint32_t>* word) {
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
    doorbell_wake(&h->doorbell);
}

}  // namespace weft::net::shm
