// The "shm" transport's knobs, private to weft_net and its tests. Production
// code reaches the backend through create_transport("shm"), which uses the
// defaults; tests build it with make_shm_transport(options) to force the
// chunked path (allow_cma = false) or the sender's overflow queue (tiny rings).
#pragma once
#include <cstddef>
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
  // Bytes of each incoming ring (one per sender), rounded up to a power of
  // two, at least 4 KiB. A process's segment holds one ring per peer.
  // 0 (the default): 32 MiB shared among the peers, from 64 KiB to 1 MiB
  // each (1 MiB up to 32 peers, 64 KiB from 512). Measured here (2
  // processes, kNeighbor non-SMP, 3 messages each way in flight): 64 KiB
  // rings left 16 KiB and 64 KiB messages waiting for room (16 and 56 us
  // per iteration); 1 MiB rings take them whole (11.5 and 36 us), and
  // 1 MiB ping-pong moves 13 GB/s instead of 9.7 (chunks of 256 KiB).
  std::size_t ring_bytes = 0;
  // Largest message copied whole through a ring; above it, rendezvous (CMA)
  // or chunks. Capped at a quarter of the receiver's ring.
  std::size_t eager_max = std::size_t(16) << 10;
  // Smallest message sent by cross-memory attach; smaller large messages go
  // in chunks through the ring. Measured here (bench/pingpong across
  // processes, 2 cores): the chunks, copied by both sides at once while the
  // ring stays in cache, move 30-45 GB/s up to 4 MiB against CMA's 10-13
  // (CMA pins the pages it reads). CMA keeps the single copy for messages
  // too large to stream through the caches.
  std::size_t cma_min = std::size_t(4) << 20;
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

std::unique_ptr<transport> make_shm_transport(const shm_options& options);
std::unique_ptr<transport> make_shm_transport();

// The name of node `rank`'s segment in job `job_id` ("/weft-<uid>-<job>-<rank>",
// the job id reduced to characters safe in a file name). Tests use it to
// check that nothing is left in /dev/shm.
std::string shm_segment_name(const std::string& job_id, int rank);

}  // namespace weft::net
