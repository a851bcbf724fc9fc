// Helpers for the benchmarks that run as several processes ("nodes") under
// mpirun: which transport the job uses, and how many round trips a
// measurement of a given size makes. Header-only, beside harness.hpp.
#pragma once
#include <algorithm>
#include <string>
#include "weft/core/config.hpp"
#include "weft/net/transport.hpp"

namespace weft::bench {

// The transport a job runs over, for the "transport" field of the JSON rows.
// --weft:transport=auto is resolved by the rule --weft:help documents for it
// (local for one process, shm when every process is on one host, else mpi).
inline std::string transport_label(const runtime_config& c) {
  if (c.transport != "auto") return c.transport;
  const net::launch_info l = net::launch_from_environment();
  if (l.size <= 1) return "local";
  return l.local_size == l.size ? "shm" : "mpi";
}

// True when the launcher started several processes (known before weft::run,
// so a program can relax checks that only a one-process run needs).
inline bool launched_as_several_processes() {
  return net::launch_from_environment().size > 1;
}

// Round trips for one measurement of `bytes`: `iters` for small messages,
// fewer for large ones (about 64 MiB moved per measurement), at least 20.
// The same rule as bench/mpi_pingpong, so both move the same amount of data.
inline long round_trips(long iters, long bytes) {
  const long by_volume = (64l << 20) / std::max(1l, 2 * bytes);
  return std::max(20l, std::min(iters, by_volume));
}

}  // namespace weft::bench
