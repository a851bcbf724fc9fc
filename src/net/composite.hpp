// Private to weft_net and its tests: the composite transports "shm+mpi" and
// "shm+ucx" (shm between the processes of one host, mpi or ucx between
// hosts), a test knob to split one machine into several "hosts", and the
// counters that show which path the messages took.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "weft/net/transport.hpp"

namespace weft::net {

struct composite_options {
  // This process's host key, which decides who shares shared memory with it.
  // Empty (production): read from the system (hostname, boot id, the
  // /dev/shm mount, pid namespace, user). Tests set it to split the
  // processes of one machine into several "hosts".
  std::string host_key;
};

// What the composite did so far: messages and bytes sent through each path
// (send and send_persistent; collectives are not counted) and received from
// each. Read on the thread that drives the transport, or after finalize.
struct composite_counters {
  std::uint64_t shm_sent = 0, shm_sent_bytes = 0;
  std::uint64_t inter_sent = 0, inter_sent_bytes = 0;
  std::uint64_t shm_delivered = 0, inter_delivered = 0;
};

// The composite over the inter-host backend `inter` ("mpi" or "ucx"); a
// backend this build lacks is a usage error naming it.
std::unique_ptr<transport> make_composite_transport(const std::string& inter);
std::unique_ptr<transport> make_composite_transport(const std::string& inter,
                                                    const composite_options& options);

// The counters of a composite transport; nullptr for any other backend.
const composite_counters* composite_counters_of(const transport& t);
// The nodes that share this node's host (this one included), in node order,
// after init; empty for any other backend.
std::vector<int> composite_host_group(const transport& t);

}  // namespace weft::net
