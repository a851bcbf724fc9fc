// Memory for the runtime and its messages.
//
// The raw allocator is a runtime choice (--weft:alloc): mimalloc, a scalable
// allocator with per-thread heaps, or the system's malloc, so that the
// difference the Charm++ SMP paper measured (seed 000, Table 1: a contended
// allocator serialises message-heavy codes) can be measured here too.
//
// On top of it, message blocks come from per-thread size-class free lists
// (block_alloc): a PE that frees a message keeps the block for its own next
// message, with no atomic operation and no shared line. A block freed on
// another thread than the one that allocated it simply joins that thread's
// lists; each list is capped, and what is beyond the cap goes back to the raw
// allocator, so producer/consumer pairs cannot hoard memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include "weft/base/export.hpp"

namespace weft::base {

enum class raw_allocator { mimalloc, system };

// Chooses the raw allocator. Main thread, before any other weft thread runs
// (weft::run does it from --weft:alloc).
WEFT_API void select_allocator(raw_allocator a);
WEFT_API raw_allocator selected_allocator();

// 16-byte aligned. Any thread; never returns null (fatal error when out of
// memory).
WEFT_API void* raw_alloc(std::size_t bytes);
WEFT_API void raw_free(void* p);
// Frees `p` with allocator `a`, whichever is selected now (memory made
// before a switch of allocator).
WEFT_API void raw_free_from(raw_allocator a, void* p);

// Size classes 128 B, 256 B, ... 128 KiB (a 64 KiB payload and its header fit
// the last); larger blocks bypass the lists, and come from registered
// memory when a transport offers some (below). None is smaller than 128 B:
// x86 cores fetch cache lines in aligned pairs (the adjacent-line
// prefetcher), so two 64 B messages side by side, one written by a sender
// while the other is read or freed by another PE, interfere as if they
// shared a line (kNeighbor at 16 B on 2 PEs: 0.92x the time with 128 B
// blocks, 12 interleaved rounds).
inline constexpr std::uint8_t block_unpooled = 0xff;
inline constexpr std::uint8_t block_registered = 0xfe;
inline constexpr std::size_t block_min = 128;
inline constexpr std::size_t block_max = 128 * 1024;

// Turns the per-thread lists on or off (--weft:msg-pool). Main thread, before
// other weft threads run.
WEFT_API void set_block_pool(bool enabled);

// Memory a transport registered once for remote access (lesson 5: message
// buffers come from pools the transport registered, so a large message
// leaves by a rendezvous from where it was written, with no copy into a
// pool and no registration per message). While one is set, blocks of at
// least min_bytes() come from it (the size above which the transport sends
// by rendezvous), and from the per-PE lists or the raw allocator when it is
// full. allocate and deallocate: any thread, never block for long (a short
// lock); allocate returns 16-byte aligned memory or null when full.
// contains: whether `p` points into memory it gave out.
class registered_memory {
 public:
  virtual ~registered_memory() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
  virtual bool contains(const void* p) const = 0;
  virtual std::size_t min_bytes() const { return block_max + 1; }
};
// A block of registered memory that another process wrote and this one
// reads in place (the shm transport hands over blocks of a peer's pool
// mapped here): `by` takes it over, so that block_free of it calls
// by->deallocate(start); the owner's word is kept in the block, and
// registered_block_restore(start) puts it back before the block returns to
// its owner. `start` is the block's first byte (what allocate returned in
// the owner's process), 16 bytes before what block_alloc gave out.
WEFT_API void registered_block_adopt(void* start, registered_memory* by);
WEFT_API void registered_block_restore(void* start);
// Sets (or, with null, removes) the memory large blocks come from. Blocks
// given out earlier go back to the memory they came from, which must stay
// usable until its last block is freed. Core calls it around the
// transport's lifetime, while no PE runs.
WEFT_API void set_registered_memory(registered_memory* m);

// A block of at least `bytes`; stores its class (to hand back to block_free)
// in `size_class`. Any thread; never returns null.
WEFT_API void* block_alloc(std::size_t bytes, std::uint8_t& size_class);
// The class of `block`, of at least `bytes`, that block_alloc gave out (a
// transport overwrites a whole received block, header included, and core
// restores its class from this).
WEFT_API std::uint8_t block_class_of(const void* block, std::size_t bytes);
// Any thread (the block joins the calling thread's lists).
WEFT_API void block_free(void* p, std::uint8_t size_class);
// Returns the calling thread's cached blocks to the raw allocator (called by
// weft threads as they end; also runs at thread exit).
WEFT_API void block_cache_release();

}  // namespace weft::base
