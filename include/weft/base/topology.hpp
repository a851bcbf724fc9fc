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
//
// One discovery per host: in a job of several processes on one host, the
// process of local rank 0 asks hwloc and writes the machine as XML to a file
// private to the user; the others load that file instead of walking /proc and
// /sys themselves (topology_share.cpp has the protocol). The machine tree is then
// the same in every process of the host; the inherited CPU set and the
// cgroup's allowed CPUs are still each process's own.
#pragma once
#include <memory>
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

  // How the processes of one job on one host share one discovery.
  struct host_share {
    std::string job_id;     // the same in every process of the job, in no other job
    int local_rank = 0;     // this process among the job's processes on this host
    int local_size = 0;     // the job's processes on this host (0: unknown)
    double timeout_s = 60;  // how long a process waits for local rank 0's file
  };

  // Makes the first get() share the discovery as `share` says: local rank 0
  // discovers and writes shared_file(), the others wait for it (a fatal error
  // naming the file after timeout_s) and load it. Returns whether get() will
  // share: not when the topology is already loaded, when local_size < 2, or
  // when hwloc's environment (HWLOC_XMLFILE, HWLOC_SYNTHETIC, ...) chooses the
  // machine. Main thread, before anything calls get().
  static bool share_per_host(const host_share& share);

  // A topology built by the steps the first get() takes (sharing as `share`
  // says, or discovered by this process if it is null), but owned by the
  // caller: for tests of the sharing.
  static std::unique_ptr<topology> load(const host_share* share);

  // The file through which the processes of job `job_id` on this host share
  // the topology: in /dev/shm (else $TMPDIR, else /tmp), named from the user,
  // the host name and the job id.
  static std::string shared_file(const std::string& job_id);

  // How this process got its topology: "discovered", "discovered and shared
  // through <file> ..." (local rank 0) or "loaded from <file> (discovered by
  // local rank 0)".
  const std::string& origin() const { return origin_; }

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
  // The part of check_bind that needs no machine: a policy name or a well
  // formed CPU list. Option parsing uses it, so that parsing does not load
  // the topology before the sharing is set up.
  static std::string check_bind_syntax(const std::string& bind);

  // The OS CPU index for each of n PEs under a policy (-1 everywhere for
  // "none"). The bind value must have passed check_bind.
  std::vector<int> place(int n, const std::string& bind) const;

  // Binds the calling thread to one OS CPU (fatal error if the OS refuses).
  // cpu < 0: no-op.
  void bind_this_thread(int os_cpu) const;

  // Multi-line, human-readable description (packages, NUMA, caches, cores,
  // hardware threads, and the inherited CPU set).
  std::string describe() const;

  // The machine as Open MPI's --report-bindings draws it, with OS CPU
  // `os_cpu` marked: a bracket per package, cores apart by '/', a
  // character per hardware thread, 'B' for the CPU and '.' for the others
  // ("[B/./.][./././.]"); no 'B' for os_cpu < 0 (not bound).
  std::string binding_map(int os_cpu) const;
  // Where OS CPU `os_cpu` is, as Open MPI names it, with hwloc's logical
  // and OS indices: "package 0[core 1[hwt 0]] (PU L#1, P#1)".
  std::string binding_place(int os_cpu) const;

  // --weft:mem (topology_memory.cpp): where the memory a thread touches
  // goes. "first-touch" (the kernel's default: the node of the CPU that
  // first touches a page), "local" (a bound thread's pages on its own
  // NUMA node only), "interleave" (round robin over the NUMA nodes of the
  // CPU set) or "bind:NODES" (only on these NUMA nodes, hwloc logical
  // indices "0-1,3"). check_mem_syntax needs no machine; check_mem names
  // nodes that do not exist.
  static std::string check_mem_syntax(const std::string& mem);
  std::string check_mem(const std::string& mem) const;
  // Applies `mem` to the calling thread (bound to `os_cpu`, or unbound if
  // < 0), for the memory it allocates from now on and the threads it
  // creates after; a fatal error naming the policy if the kernel refuses.
  void apply_mem(const std::string& mem, int os_cpu) const;
  // For the startup line: the policy and the nodes it means here, and, on
  // a machine of one NUMA node, that every policy places memory alike.
  std::string describe_mem(const std::string& mem) const;

  // "0-3,6" style text for a list of OS CPU indices.
  static std::string format_cpus(std::vector<int> cpus);

  ~topology();
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

 private:
  explicit topology(const host_share* share);
  void* hw_ = nullptr;  // hwloc_topology_t
  std::string origin_;
  int packages_ = 0, numa_nodes_ = 0, l3_caches_ = 0, cores_ = 0, pus_ = 0;
  std::vector<cpu_info> allowed_;
  std::vector<int> numa_os_;  // the kernel's number of each NUMA node, by logical index
};

// The kernel's NUMA node (its number) of the page at `address`, which must
// have been touched; -1 where the kernel does not say (topology_memory.cpp).
WEFT_API int numa_node_of(const void* address);

// The kernel's page allocation counters of one NUMA node
// (/sys/devices/system/node/nodeN/numastat, machine-wide): pages allocated
// for a process running on that node (local_node) and for one running
// elsewhere (other_node).
struct numa_counts {
  int node = -1;
  unsigned long long local = 0, other = 0;
};
// Every node's; empty where the kernel offers none.
WEFT_API std::vector<numa_counts> numa_counters();

// mimalloc's NUMA-aware arenas for --weft:mem=local (numa_arenas.cpp): one
// range of address space per NUMA node, bound to it, that mimalloc serves
// the threads of that node from first.
struct numa_arena {
  int node;
  char* start;
  std::size_t bytes;
};
// Makes them, once per process (later calls return the first's); an arena
// the system refuses is said in a warning and left out.
WEFT_API std::vector<numa_arena> make_numa_arenas(std::size_t bytes_per_node);
// Those made, if any.
WEFT_API std::vector<numa_arena> numa_arenas();

}  // namespace weft::base
