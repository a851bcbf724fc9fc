// Private to weft (not installed): the knobs of the ucx transport that a
// benchmark or a test may turn, and the counters that show which path a
// message took. Core creates the transport by name and gets the defaults.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "weft/net/transport.hpp"

namespace weft::net {

struct ucx_options {
  // Large messages leave from a send pool registered once at init (lessons
  // 5 and 8): core writes its large messages there (message_memory), and
  // the transport copies any other into a pool block. false: no pool; each
  // large message's own buffer is registered instead (one ucp_mem_map per
  // message), the variant a benchmark compares the pool against.
  bool pooled = true;
  // Messages up to this size go as one eager active message; larger ones by
  // GET rendezvous.
  std::size_t eager_max = 16 * 1024;
  // Size of the registered send pool (pooled only). A message that finds no
  // free block is registered on its own (counted in pool_fallbacks).
  std::size_t pool_bytes = std::size_t(32) << 20;
  // A peer on another host that dies is always reported (hooks.node_lost).
  // On this host, asking UCX 1.13 for that report rules out its shared-memory
  // transports (it falls back to TCP over loopback), so by default it is not
  // asked: a thread of the transport watches the local peers' processes
  // instead (watch_local_peers) and reports one that dies.
  bool detect_local_peer_failure = false;
  // A thread polls the pidfds of the job's processes on this host (same
  // kernel and pid namespace) and reports the first that dies
  // (peer_watch.hpp). The composite turns it off: its shm watches the host.
  bool watch_local_peers = true;
  // Eager messages name their sender by UCX active-message id and carry no
  // header of weft's (ucx/ucx_transport.hpp, "Order"); false sends the 8-byte header that
  // jobs of more than 65,000 nodes need, so tests reach that path.
  bool eager_source_ids = true;
};

// What the transport did so far. Read on the thread that drives it.
struct ucx_counters {
  std::uint64_t eager = 0;                 // messages sent as one active message
  std::uint64_t eager_with_header = 0;     // of those, with the 8-byte header (source, number)
  std::uint64_t eager_received = 0;        // active messages received as whole messages
  std::uint64_t eager_at_once = 0;         // of those, to hooks.deliver from UCX's callback
                                           // (next in order, nothing of the source waiting)
  std::uint64_t rndv_in_place = 0;         // rendezvous of a message written in the send pool
  std::uint64_t rndv_pooled = 0;           // rendezvous from a send-pool block it was copied to
  std::uint64_t rndv_registered = 0;       // rendezvous from a buffer registered for it
  std::uint64_t pool_fallbacks = 0;        // of those, because the pool had no room
  std::uint64_t persistent_puts = 0;       // send_persistent into the channel's remote buffer
  std::uint64_t persistent_fallbacks = 0;  // send_persistent through send(): handshake
                                           // pending, channel busy, or message too large
};

std::unique_ptr<transport> make_ucx_transport();
std::unique_ptr<transport> make_ucx_transport(const ucx_options& options);

// The counters of a transport made by make_ucx_transport; nullptr for any
// other backend.
const ucx_counters* ucx_counters_of(const transport& t);

// The UCX lanes (transports and devices) this node uses towards `node`, as
// ucp_ep_print_info prints them; for reports and benchmarks. After init.
std::string ucx_describe_lanes(const transport& t, int node);

}  // namespace weft::net
