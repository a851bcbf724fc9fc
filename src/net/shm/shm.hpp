// The "shm" transport's knobs, private to weft_net and its tests (the
// transport itself: the other files of this folder, transport.cpp first). Production
// code reaches the backend through create_transport("shm"), which uses the
// defaults; tests build it with make_shm_transport(options) to force the
// chunked path (allow_cma = false) or the sender's overflow queue (tiny rings).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include "weft/net/transport.hpp"

namespace weft::net {

struct shm_options {
  // Large messages go by cross-memory attach (process_vm_readv, one copy)
  // when every process of the job may read every other; false forces the
  // chunked two-copy path through the rings.
  bool allow_cma = true;
  // Doorbells rung after a compiler barrier, sleepers paying a global
  // membarrier, when every process of the job could register for it and
  // core's wake fence is membarrier; false keeps full fences on both sides.
  bool allow_membarrier = true;
  // Bytes of each incoming ring (one per sender), rounded up to a power of
  // two, at least 4 KiB. A process's segment holds one ring per peer.
  // 0 (the default): 32 MiB shared among the peers, from 64 KiB to 1 MiB
  // each (1 MiB up to 32 peers, 64 KiB from 512): rings of 64 KiB left
  // messages of 16 and 64 KiB waiting for room, 1 MiB rings take them whole
  // (measured: docs/net.md, "The shm transport's defaults").
  std::size_t ring_bytes = 0;
  // Largest message copied whole through a ring; above it, rendezvous (CMA)
  // or chunks. Capped at a quarter of the receiver's ring.
  std::size_t eager_max = std::size_t(16) << 10;
  // Smallest message sent by cross-memory attach; smaller large messages go
  // in chunks through the ring. The chunks, copied by both sides at once
  // while the ring stays in cache, are faster up to 4 MiB (CMA pins the
  // pages it reads; measured: docs/net.md, "The shm transport's defaults").
  // CMA keeps the single copy for messages too large to stream through the
  // caches.
  std::size_t cma_min = std::size_t(4) << 20;
  // The message pool: a segment the peers map, where core writes messages
  // of more than eager_max bytes (transport::message_memory). Such a
  // message is lent to its receiver, whose core handles it in place and
  // gives it back when it frees it: no copy on either side. (Without
  // hooks.deliver_block the receiver copies it out instead.) 0: none.
  // Smaller when /dev/shm has less than twice the job's segments free.
  // When it is full, large messages take the paths below.
  std::size_t pool_bytes = std::size_t(32) << 20;
  // Messages from this size on are written in the pool (smaller ones in
  // core's per-PE block lists, and sent through the rings); never below
  // eager_max + 1. Measured here (kNeighbor, 2 processes of one PE, 64 KiB,
  // in place against chunks through the ring): see docs/net.md.
  std::size_t pool_min_message = 0;
  // Called at each pause of init(), barrier() and finalize() while they wait
  // for the other processes. A composite transport progresses its other
  // backend here: a process waiting only on shm would leave that backend's
  // queued sends unsent, and a peer on another host waiting for them would
  // never arrive at its own barrier (the shm+ucx stall). In init() this
  // covers the composite's host-key allgather: a node through it may still
  // hold its part for a peer (queued behind a full UCX FIFO) while it waits
  // here for its own host's processes.
  std::function<void()> while_waiting;
};

// What the shm transport sent by each path so far (read on the thread that
// drives it).
struct shm_counters {
  std::uint64_t eager = 0;     // whole in one ring record
  std::uint64_t chunked = 0;   // in pieces through the ring
  std::uint64_t cma = 0;       // read by the receiver with process_vm_readv
  std::uint64_t pooled = 0;    // lent from the message pool (sent)
  std::uint64_t in_place = 0;  // of the peers' lent blocks, held by core in place (received)
  std::uint64_t returned = 0;  // blocks held in place sent back to their owner (sent)
  // Doorbells rung after a compiler barrier, sleepers paying a global
  // membarrier (shm_options::allow_membarrier); set by init().
  bool light_doorbells = false;
};
// The counters of a transport made by make_shm_transport; null for others.
const shm_counters* shm_counters_of(const transport& t);

std::unique_ptr<transport> make_shm_transport(const shm_options& options);
std::unique_ptr<transport> make_shm_transport();

// The name of node `rank`'s segment in job `job_id` ("/weft-<uid>-<job>-<rank>",
// the job id reduced to characters safe in a file name). Tests use it to
// check that nothing is left in /dev/shm.
std::string shm_segment_name(const std::string& job_id, int rank);

}  // namespace weft::net
