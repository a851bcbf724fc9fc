// --weft:mem=local and mimalloc's NUMA-aware arenas (issue 29). mimalloc is
// weft's allocator and, through Debian's libmimalloc, which exports malloc,
// the program's too. Given arenas that say which NUMA node they are on,
// mimalloc takes a thread's segments from the arena of the node the thread
// runs on before any other (and before the OS), so memory freed by a thread
// of one node and reused by a thread of another does not carry its pages
// across. Each arena is address space only (no page is touched here), its
// range bound to its node with mbind(MPOL_PREFERRED): the pages come from
// that node as they are first touched, from another one only when it is
// full. Past an arena's size mimalloc goes to the OS, where the thread's
// own policy (apply_mem) still places the pages.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mimalloc.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>
#include "weft/base/error.hpp"
#include "weft/base/topology.hpp"

namespace weft::base {

namespace {

std::mutex g_mutex;
std::vector<numa_arena> g_arenas;  // guarded; never unmapped: mimalloc keeps them
bool g_made = false;               // guarded

constexpr int mpol_preferred = 1;
constexpr std::size_t align = std::size_t(64) << 20;

}  // namespace

std::vector<numa_arena> make_numa_arenas(std::size_t bytes_per_node) {
  std::lock_guard lock(g_mutex);
  if (g_made) return g_arenas;
  g_made = true;
  std::vector<int> nodes;
  for (const numa_counts& c : numa_counters()) nodes.push_back(c.node);
  if (nodes.empty()) nodes.push_back(0);  // no sysfs: one node, 0
  for (int node : nodes) {
    // Committed as far as mimalloc knows (it never changes the range's
    // mapping, which would drop the binding); MAP_NORESERVE: no page nor
    // swap is taken until touched.
    // mimalloc finds a block's segment by masking its address: an arena
    // starts on a segment boundary (32 MiB in mimalloc 2; `align` is more).
    void* mapped = ::mmap(nullptr, bytes_per_node + align, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* p = MAP_FAILED;
    if (mapped != MAP_FAILED) {
      const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(mapped);
      const std::uintptr_t start = (at + align - 1) & ~std::uintptr_t(align - 1);
      if (start > at) ::munmap(mapped, start - at);
      const std::size_t tail = align - (start - at);
      if (tail > 0) ::munmap(reinterpret_cast<void*>(start + bytes_per_node), tail);
      p = reinterpret_cast<void*>(start);
    }
    if (p == MAP_FAILED) {
      warn(
          "--weft:mem=local: no mimalloc arena for NUMA node %d (mmap of %zu MiB: %s); its "
          "threads' memory comes from the OS, placed by their policy",
          node, bytes_per_node >> 20, std::strerror(errno));
      continue;
    }
    unsigned long mask[16] = {};
    if (node >= 0 && node < int(sizeof mask * 8))
      mask[std::size_t(node) / 64] |= 1ul << (node % 64);
    if (syscall(SYS_mbind, p, bytes_per_node, mpol_preferred, mask, sizeof mask * 8 + 1, 0u) != 0) {
      warn("--weft:mem=local: mbind of the arena of NUMA node %d failed (%s): left unused", node,
           std::strerror(errno));
      ::munmap(p, bytes_per_node);
      continue;
    }
    if (!mi_manage_os_memory(p, bytes_per_node, /*is_committed=*/true, /*is_large=*/false,
                             /*is_zero=*/true, node)) {
      warn("--weft:mem=local: mimalloc did not take the arena of NUMA node %d: left unused", node);
      ::munmap(p, bytes_per_node);
      continue;
    }
    g_arenas.push_back(numa_arena{node, static_cast<char*>(p), bytes_per_node});
  }
  return g_arenas;
}

std::vector<numa_arena> numa_arenas() {
  std::lock_guard lock(g_mutex);
  return g_arenas;
}

}  // namespace weft::base
