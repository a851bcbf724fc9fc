// The shm transport's segments: what a process's segment holds and where,
// and how the transport names them. Private to src/net/shm/.
//
// Each process owns one segment, /weft-<uid>-<job>-<rank>, that only it
// reads from: a header (identity, doorbell, abort flag, barrier and gather
// areas) and one single-producer single-consumer byte ring per sender, each
// behind its two control lines. A process with a message pool owns a second
// segment, the same name with "-pool", that the peers map too
// (rendezvous.cpp). Both are made by shm_transport::create_segment
// (segment.cpp), the one sequence of base::os::create_shared_segment, stale
// names and cleanup on failure.
//
// Field groups sit on separate cache lines by who writes them and how often:
// a line written by the owner on every message must not be the line a peer
// polls.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include "weft/base/cache.hpp"

namespace weft::net::shm {

constexpr std::uint64_t seg_magic = 0x746665776d687321ull;  // "!shmweft"
constexpr std::uint32_t seg_version = 4;                    // 4: membarrier_ok
constexpr std::size_t gather_bytes = 4096;
constexpr std::size_t min_ring_bytes = 4096;
constexpr std::size_t max_ring_bytes = std::size_t(1) << 30;
// The default ring size (shm_options::ring_bytes = 0): this budget per
// process, shared among its peers, within these bounds.
constexpr std::size_t ring_budget_bytes = std::size_t(32) << 20;
constexpr std::size_t default_ring_min = std::size_t(64) << 10;
constexpr std::size_t default_ring_max = std::size_t(1) << 20;

// A segment's life during init(): made, then complete (peers may map it and
// read its header), then its owner has mapped every other (the init barrier).
enum : std::uint32_t { phase_creating = 0, phase_ready = 1, phase_arrived = 2 };

// The head of a segment.
struct seg_header {
  // Written by the owner before phase = ready (release), then read-only.
  // phase comes first so that a reader of any version finds it.
  std::atomic<std::uint32_t> phase;
  std::uint32_t version;
  std::uint64_t magic;
  std::int32_t rank;
  std::int32_t nodes;
  std::int32_t pid;
  std::uint32_t cma_ok;  // written before phase = arrived
  // 1: the owner registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED (written
  // before phase = arrived); when all have, doorbells are rung after a
  // compiler barrier and sleepers pay a global membarrier instead.
  std::uint32_t membarrier_ok;
  std::uint32_t reserved_;
  std::uint64_t ring_bytes;
  std::uint64_t probe_addr;  // a word in the owner's memory that peers try to read by CMA
  std::uint64_t probe_value;
  std::uint64_t pool_addr;  // the owner's message pool: its address there, and bytes (0: none)
  std::uint64_t pool_bytes;
  // The futex word: 1 while the owner sleeps (or is about to) in
  // wait_for_incoming. Written by the owner and by whoever wakes it.
  alignas(base::cache_line) std::atomic<std::uint32_t> doorbell;
  // Set once by abort(), read by the peers' liveness checks.
  alignas(base::cache_line) std::atomic<std::uint32_t> aborted;
  std::atomic<std::int32_t> abort_code;
  // The job's barrier lives in rank 0's segment (sense-reversing counter).
  alignas(base::cache_line) std::atomic<std::uint32_t> bar_count;
  alignas(base::cache_line) std::atomic<std::uint32_t> bar_sense;
  // allgather: each process publishes its piece here, between two barriers.
  alignas(base::cache_line) unsigned char gather[gather_bytes];
};
static_assert(sizeof(seg_header) % base::cache_line == 0);

// The control lines of one ring: the consumer's published head on one line,
// the producer's request for a wake-up on another.
struct ring_ctl {
  alignas(base::cache_line) std::atomic<std::uint64_t> head;
  alignas(base::cache_line) std::atomic<std::uint32_t> space_wanted;
};
static_assert(sizeof(ring_ctl) == 2 * base::cache_line);

inline std::size_t segment_bytes(int nodes, std::uint64_t ring_bytes) {
  return sizeof(seg_header) + std::size_t(nodes) * (sizeof(ring_ctl) + ring_bytes);
}
// The control lines of the ring that node `index` writes, in the segment at
// `base`; its bytes follow them.
inline ring_ctl* ring_at(void* base, int index, std::uint64_t ring_bytes) {
  return reinterpret_cast<ring_ctl*>(static_cast<unsigned char*>(base) + sizeof(seg_header) +
                                     std::size_t(index) * (sizeof(ring_ctl) + ring_bytes));
}
inline unsigned char* ring_data(ring_ctl* c) {
  return reinterpret_cast<unsigned char*>(c + 1);
}

// The name of node `rank`'s message pool (its segment's name and "-pool").
std::string pool_segment_name(const std::string& job_id, int rank);

// Removes the segment `name` if an earlier job with the same id left it (its
// process died during startup). True if it is gone; false if its owner still
// runs.
bool remove_stale(const char* name);

}  // namespace weft::net::shm
