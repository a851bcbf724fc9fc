// What base's three topology files share (private to src/base; the public
// face is weft/base/topology.hpp):
//   topology.cpp            discovery through hwloc and the snapshot taken
//                           from it (counts, the inherited set, describe())
//   topology_placement.cpp  CPU lists, the PE map (compact, scatter, a list)
//                           and binding a thread to its CPU
//   topology_memory.cpp     --weft:mem: a thread's memory policy
//   topology_share.cpp      one discovery per host: the file through which
//                           local rank 0 shares the machine with the others
// The split follows the design in topology.cpp's head: hwloc is asked once,
// and everything after that is computed from the snapshot, so placement
// needs nothing of hwloc, and the shared file only moves hwloc's XML.
#pragma once
#include <hwloc.h>
#include <optional>
#include <string>
#include "weft/base/topology.hpp"

namespace weft::base::topology_internal {

// ---- topology.cpp
// A fresh hwloc topology of this system, loaded with `flags`.
hwloc_topology_t discover(unsigned long flags);
// This machine from XML that local rank 0 exported (`xml` ends with its
// NUL); `file` names where it came from, for the messages.
hwloc_topology_t import_xml(const std::string& xml, const std::string& file);
// "1 core", "2 cores".
std::string plural(int n, const char* word);

// ---- topology_share.cpp
// Whether a job's processes on this host share one discovery.
bool sharing_applies(const topology::host_share& share);
// Local rank 0: discovers the whole machine, publishes it at `file` and
// builds this process's topology from it like every other process does.
hwloc_topology_t discover_and_share(const std::string& file, const topology::host_share& share);
// Any other local rank: waits for local rank 0's file, loads it, counts
// itself in, and removes the file if it is the last to come.
hwloc_topology_t load_shared(const std::string& file, const topology::host_share& share);
// What share_per_host set, for the first get(); from then on share_per_host
// refuses (the topology is taken).
std::optional<topology::host_share> share_for_first_get();

}  // namespace weft::base::topology_internal
