// Machine topology and thread binding, through hwloc.
//
// The process's inherited CPU set (taskset, cgroups, a batch system's
// binding) is the universe: PEs are placed only on CPUs inside it. Placement
// policies (seed 002 found the best one depends on code and machine, so it is
// a runtime choice):
//   none     no binding; the OS schedules the threads
//   compact  fill one cache domain / socket first: cores in topology order,
//            one PE per core, then the second hardware thread of each core
//   scatter  spread PEs across packages, then NUMA nodes, then shared caches,
//            then cores (round-robin at each level of the tree)
//   <list>   an explicit CPU list: OS indices "0-3,6" or hwloc logical
//            indices "L0-3"; every CPU must lie in the inherited set
// More PEs than CPUs in the set wrap around (the run is oversubscribed; the
// caller warns).
#pragma once
#include <string>
#include <vector>
#include "weft/base/export.hpp"

namespace weft::base {

// One hardware thread (hwloc PU) of the inherited CPU set.
struct cpu_info {
  int os_index = -1;       // the kernel's CPU number (what taskset shows)
  int logical_index = -1;  // hwloc logical PU index (what "L<n>" names)
  int core = -1;           // hwloc logical index of its core
  int package = -1;        // ... of its package (socket), -1 if unknown
  int numa = -1;           // ... of its NUMA node, -1 if unknown
  int l3 = -1;             // ... of its last-level cache, -1 if unknown
};

class WEFT_API topology {
 public:
  // The process-wide topology, loaded on first call (thread-safe). Reads the
  // CPU set the process has at that moment, so call it before binding any
  // thread (weft::run does).
  static const topology& get();

  // Counts over the whole machine.
  int packages() const { return packages_; }
  int numa_nodes() const { return numa_nodes_; }
  int l3_caches() const { return l3_caches_; }
  int cores() const { return cores_; }
  int hardware_threads() const { return pus_; }

  // The inherited CPU set, in hwloc logical order.
  const std::vector<cpu_info>& allowed() const { return allowed_; }
  // Number of distinct cores in the inherited set.
  int allowed_cores() const;

  // Validates a --weft:bind value; returns "" if good, else what is wrong
  // (e.g. "CPU 7 is not in this process's CPU set 0-1").
  std::string check_bind(const std::string& bind) const;

  // The OS CPU index for each of n PEs under a policy (-1 everywhere for
  // "none"). The bind value must have passed check_bind.
  std::vector<int> place(int n, const std::string& bind) const;

  // Binds the calling thread to one OS CPU (fatal error if the OS refuses).
  // cpu < 0: no-op.
  void bind_this_thread(int os_cpu) const;

  // Multi-line, human-readable description (packages, NUMA, caches, cores,
  // hardware threads, and the inherited CPU set).
  std::string describe() const;

  // "0-3,6" style text for a list of OS CPU indices.
  static std::string format_cpus(std::vector<int> cpus);

  ~topology();
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

 private:
  topology();
  void* hw_ = nullptr;  // hwloc_topology_t
  int packages_ = 0, numa_nodes_ = 0, l3_caches_ = 0, cores_ = 0, pus_ = 0;
  std::vector<cpu_info> allowed_;
};

}  // namespace weft::base
