// --weft:mem: where the memory of weft's threads goes (issue 29; paper 002
// shows the best choice differs by code and machine, so it is a run-time
// choice). The policy is the kernel's per-thread memory policy
// (set_mempolicy(2)), set by each PE thread as it starts and by the thread
// that starts the node: what a PE allocates and touches afterwards -- its
// message pools, its runtime structures, the program's data its handlers
// and OpenMP threads allocate -- follows it, and so do the threads it
// creates (the policy is inherited by clone). Like binding
// (topology_placement.cpp), it is one system call per thread on numbers
// taken from the snapshot, asking nothing of hwloc.
#include "weft/base/topology.hpp"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "topology_internal.hpp"
#include "weft/base/error.hpp"

namespace weft::base {

using topology_internal::plural;

namespace {

// The kernel's modes (linux/mempolicy.h), without a libnuma dependency.
constexpr int mpol_default = 0, mpol_bind = 2, mpol_interleave = 3, mpol_local = 4;

// NUMA node numbers of "0-1,3"; empty with `error` set on bad syntax.
std::vector<int> parse_nodes(const std::string& list, std::string& error) {
  std::vector<int> out;
  std::size_t i = 0;
  while (i < list.size()) {
    char* end = nullptr;
    const long lo = std::strtol(list.c_str() + i, &end, 10);
    if (end == list.c_str() + i || lo < 0 || lo > 4095) {
      error = "'" + list + "' is not a list of NUMA nodes (e.g. 0-1,3)";
      return {};
    }
    long hi = lo;
    i = std::size_t(end - list.c_str());
    if (i < list.size() && list[i] == '-') {
      hi = std::strtol(list.c_str() + i + 1, &end, 10);
      if (end == list.c_str() + i + 1 || hi < lo || hi > 4095) {
        error = "'" + list + "' is not a list of NUMA nodes (e.g. 0-1,3)";
        return {};
      }
      i = std::size_t(end - list.c_str());
    }
    for (long n = lo; n <= hi; ++n) out.push_back(int(n));
    if (i < list.size() && list[i] != ',') {
      error = "'" + list + "' is not a list of NUMA nodes (e.g. 0-1,3)";
      return {};
    }
    if (i < list.size()) ++i;
  }
  if (out.empty()) error = "bind: names no NUMA node (e.g. bind:0-1)";
  return out;
}

void set_policy(int mode, const std::vector<int>& os_nodes, const std::string& mem) {
  std::vector<unsigned long> mask;
  for (int n : os_nodes) {
    const std::size_t word = std::size_t(n) / (8 * sizeof(unsigned long));
    if (mask.size() <= word) mask.resize(word + 1, 0);
    mask[word] |= 1ul << (std::size_t(n) % (8 * sizeof(unsigned long)));
  }
  const unsigned long maxnode = mask.size() * 8 * sizeof(unsigned long) + 1;
  if (syscall(SYS_set_mempolicy, mode, mask.empty() ? nullptr : mask.data(),
              mask.empty() ? 0ul : maxnode) != 0) {
    const std::string what = "applying --weft:mem=" + mem + " (set_mempolicy)";
    fatal_errno(errno, what.c_str());
  }
}

}  // namespace

std::string topology::check_mem_syntax(const std::string& mem) {
  if (mem == "first-touch" || mem == "local" || mem == "interleave") return "";
  if (mem.rfind("bind:", 0) == 0) {
    std::string error;
    parse_nodes(mem.substr(5), error);
    return error;
  }
  return "is not first-touch, local, interleave or bind:NODES (NUMA nodes, e.g. bind:0-1)";
}

std::string topology::check_mem(const std::string& mem) const {
  if (std::string e = check_mem_syntax(mem); !e.empty()) return e;
  if (mem.rfind("bind:", 0) != 0) return "";
  std::string error;
  for (int n : parse_nodes(mem.substr(5), error))
    if (n >= numa_nodes_)
      return "NUMA node " + std::to_string(n) + " does not exist (this machine has " +
             plural(numa_nodes_, "NUMA node") + ": 0-" + std::to_string(numa_nodes_ - 1) + ")";
  return "";
}

void topology::apply_mem(const std::string& mem, int os_cpu) const {
  if (mem == "first-touch") {
    set_policy(mpol_default, {}, mem);
  } else if (mem == "local") {
    // A bound thread: its node and no other; an unbound one: wherever it
    // runs when it allocates.
    int node = -1;
    for (const cpu_info& c : allowed_)
      if (c.os_index == os_cpu && c.numa >= 0) node = numa_os_[std::size_t(c.numa)];
    if (node >= 0)
      set_policy(mpol_bind, {node}, mem);
    else
      set_policy(mpol_local, {}, mem);
  } else if (mem == "interleave") {
    std::vector<int> nodes;
    for (const cpu_info& c : allowed_)
      if (c.numa >= 0) {
        const int os = numa_os_[std::size_t(c.numa)];
        bool seen = false;
        for (int n : nodes) seen |= n == os;
        if (!seen) nodes.push_back(os);
      }
    if (nodes.empty()) nodes.push_back(0);
    set_policy(mpol_interleave, nodes, mem);
  } else {
    std::string error;
    std::vector<int> nodes;
    for (int n : parse_nodes(mem.substr(5), error)) nodes.push_back(numa_os_[std::size_t(n)]);
    set_policy(mpol_bind, nodes, mem);
  }
}

int numa_node_of(const void* address) {
  int node = -1;
  constexpr unsigned long f_node = 1, f_addr = 2;  // MPOL_F_NODE | MPOL_F_ADDR
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0ul, address, f_node | f_addr) != 0) return -1;
  return node;
}

std::vector<numa_counts> numa_counters() {
  std::vector<numa_counts> out;
  DIR* dir = ::opendir("/sys/devices/system/node");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    int n = -1;
    if (std::sscanf(e->d_name, "node%d", &n) != 1 || n < 0) continue;
    const std::string file = std::string("/sys/devices/system/node/") + e->d_name + "/numastat";
    std::FILE* f = std::fopen(file.c_str(), "r");
    if (f == nullptr) continue;
    numa_counts c;
    c.node = n;
    char key[64];
    unsigned long long value = 0;
    while (std::fscanf(f, "%63s %llu", key, &value) == 2) {
      if (std::string(key) == "local_node") c.local = value;
      if (std::string(key) == "other_node") c.other = value;
    }
    std::fclose(f);
    out.push_back(c);
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const numa_counts& x, const numa_counts& y) { return x.node < y.node; });
  return out;
}

std::string topology::describe_mem(const std::string& mem) const {
  std::string s = "mem=" + mem;
  if (const std::size_t n = numa_arenas().size(); n > 0)
    s +=
        " (" + std::to_string(n) + " mimalloc arena" + (n == 1 ? "" : "s") + ", one per NUMA node)";
  if (numa_nodes_ <= 1) s += " (one NUMA node: every policy places memory alike)";
  return s;
}

}  // namespace weft::base
