// Helpers for the benchmarks that run as several processes ("nodes") under
// mpirun: starting such a run, and how many round trips a measurement of a
// given size makes. Header-only, beside harness.hpp. (The transport a job
// runs over is weft::config().transport once the node runs.)
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/net/transport.hpp"

namespace weft::bench {

// True when the launcher started several processes (known before weft::run,
// so a program can relax checks that only a one-process run needs).
inline bool launched_as_several_processes() {
  return net::launch_from_environment().size > 1;
}

// weft::run for a benchmark that needs 2 or more processes: a run of one
// (no launcher, or --weft:transport=local under one) is refused with exit 2
// and a line saying how to start it; else `start` runs on PE 0.
inline int run_across_processes(const char* name, const runtime_config& cfg, int argc, char** argv,
                                std::function<void()> start) {
  static const char* program;
  program = name;
  auto refuse = [] {
    std::fprintf(stderr,
                 "error: %s needs a job of 2 or more processes (run it as mpirun -n 2 ...); this "
                 "run is one process\n",
                 program);
  };
  if (!launched_as_several_processes()) {
    refuse();
    return 2;
  }
  return weft::run(cfg, argc, argv, [refuse, start = std::move(start)](weft::args) {
    if (weft::num_nodes() < 2) {
      refuse();
      weft::exit(2);
      return;
    }
    start();
  });
}

// The two rows a ping-pong gives per size, each starting with `ident`:
// one-way latency (ns) and bandwidth (bytes / one-way time, MB/s), medians
// and ranges over the measurements. weft's pingpong and mpi_pingpong
// (bench/pingpong/weft.cpp, mpi.cpp) write the same rows, so the report
// compares them field by field.
inline void latency_bandwidth_rows(reporter& out, const std::vector<field>& ident, long bytes,
                                   const std::vector<double>& oneway_ns) {
  std::vector<double> mbps;
  for (double ns : oneway_ns) mbps.push_back(double(bytes) / ns * 1e3);  // bytes/ns -> MB/s
  const summary lat = summarize(oneway_ns), bw = summarize(mbps);
  for (const auto& [metric, s] : {std::pair{"oneway_ns", lat}, std::pair{"bandwidth_MBps", bw}}) {
    std::vector<field> f = ident;
    f.insert(f.end(), {{"metric", metric}, {"value", s.median}, {"min", s.min}, {"max", s.max}});
    out.row(std::move(f));
  }
}

// Round trips for one measurement of `bytes`: `iters` for small messages,
// fewer for large ones (about 64 MiB moved per measurement), at least 20.
// The same rule as mpi_pingpong (bench/pingpong/mpi.cpp), so both move the same amount of data.
inline long round_trips(long iters, long bytes) {
  const long by_volume = (64l << 20) / std::max(1l, 2 * bytes);
  return std::max(20l, std::min(iters, by_volume));
}

// --touch for the runs across processes: whether each message's payload is
// written whole by its sender and read whole by its receiver. Without it a
// transport that lends its buffers (shm hands a large message over in
// place and takes it back as a descriptor) moves no data at all, and its
// "bandwidth" would be a descriptor's round trip; plain MPI copies either
// way. Exits 2 on anything but true or false.
inline bool touch_arg(const cli& c, bool fallback) {
  const std::string v = arg(c, "touch", fallback ? "true" : "false");
  if (v == "true") return true;
  if (v == "false") return false;
  std::fprintf(stderr, "error: --touch=%s: expected true or false\n", v.c_str());
  std::exit(2);
}

// The sender's side of --touch: every byte gets `fill`.
inline void fill_payload(void* data, std::size_t bytes, unsigned char fill) {
  std::memset(data, fill, bytes);
}

// The receiver's side: reads every byte; false if one differs from the
// first (a message that arrived torn or stale).
inline bool payload_is_whole(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  unsigned char diff = 0;
  for (std::size_t i = 1; i < bytes; ++i) diff |= static_cast<unsigned char>(p[i] ^ p[0]);
  return diff == 0;
}

// --touch in a weft program that hands a message on: reads the payload that
// came in (a torn one ends the program, naming it and the PE) and writes
// the payload that goes out with the next `fill`.
inline void touch_message(const char* program, message& m, unsigned char& fill) {
  if (m.size == 0) return;
  if (!payload_is_whole(m.data(), m.size)) {
    std::fprintf(stderr, "%s: PE %d received a torn %u-byte payload\n", program, my_pe(),
                 unsigned(m.size));
    std::exit(1);
  }
  fill_payload(m.data(), m.size, ++fill);
}

}  // namespace weft::bench
