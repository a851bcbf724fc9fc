// Machine topology and thread binding (see topology.hpp for the policies).
//
// The idea: hwloc is asked once, at the first topology::get(), for the machine
// tree and for the CPU set the process inherited; everything after that
// (validation, placement, description) is computed from that snapshot, so
// the object is immutable and every const member may be called from any
// thread without locking. Nothing here blocks, except the first get(), which
// loads the topology (a few milliseconds of /proc and /sys reads, or, in a
// process of local rank > 0, the wait for local rank 0's file).
//
// A machine simulated through hwloc's own environment variables
// (HWLOC_SYNTHETIC, HWLOC_XMLFILE) is not "this system": it has no binding to
// read, so its inherited set is the whole simulated machine. The tests use
// this to check placement on a multi-socket machine from any host.
//
// In a job of several processes on one host the discovery is done once for
// the host and shared through a file (topology_share.cpp). What is computed
// from the snapshot for placement -- CPU lists, compact and scatter, binding
// -- is topology_placement.cpp's; topology_internal.hpp says what the three
// files share.
#include "weft/base/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "topology_internal.hpp"
#include "weft/base/error.hpp"

namespace weft::base {

namespace topology_internal {

std::string plural(int n, const char* word) {
  std::string s = std::to_string(n) + " " + word;
  if (n != 1) s += 's';
  return s;
}

namespace {
hwloc_topology_t new_hwloc() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) fatal_errno(errno, "hwloc_topology_init");
  return t;
}
}  // namespace

hwloc_topology_t discover(unsigned long flags) {
  hwloc_topology_t t = new_hwloc();
  if (flags != 0 && hwloc_topology_set_flags(t, flags) != 0)
    fatal_errno(errno, "hwloc_topology_set_flags");
  if (hwloc_topology_load(t) != 0) fatal_errno(errno, "hwloc_topology_load");
  return t;
}

hwloc_topology_t import_xml(const std::string& xml, const std::string& file) {
  hwloc_topology_t t = new_hwloc();
  if (xml.size() > std::size_t(INT_MAX) ||
      hwloc_topology_set_xmlbuffer(t, xml.data(), int(xml.size())) != 0)
    fatal("topology: %s does not hold an hwloc XML topology that this hwloc (API %x) reads",
          file.c_str(), unsigned(HWLOC_API_VERSION));
  if (hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                      HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES) != 0)
    fatal_errno(errno, "hwloc_topology_set_flags");
  if (hwloc_topology_load(t) != 0)
    fatal_sys(errno, "hwloc_topology_load", "for the hwloc XML of %s", file.c_str());
  return t;
}

}  // namespace topology_internal

using namespace topology_internal;

namespace {

// Per-core / per-PU listing in describe() only up to this size: beyond it the
// text stops being readable and lstopo is the better tool.
constexpr int max_listed_pus = 64;

hwloc_topology_t as_hwloc(void* p) {
  return static_cast<hwloc_topology_t>(p);
}

struct bitmap_deleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using bitmap_ptr = std::unique_ptr<hwloc_bitmap_s, bitmap_deleter>;

bitmap_ptr make_bitmap() {
  bitmap_ptr b(hwloc_bitmap_alloc());
  if (!b) fatal("hwloc_bitmap_alloc failed (out of memory)");
  return b;
}

// hwloc returns -1 when a type sits at several depths (possible only for
// odd types such as groups); none of the types counted here should, but a
// count is never negative.
int count_of(hwloc_topology_t t, hwloc_obj_type_t type) {
  return std::max(0, hwloc_get_nbobjs_by_type(t, type));
}

// The cache level that plays the role of "the L3": L3 where the machine has
// one, else the outermost level it does have. Chosen once for the machine so
// that every PU's l3 index counts objects of the same level as l3_caches().
// L4 (eDRAM) is not preferred over L3 because it is a memory-side buffer,
// not the cache domain that neighbouring cores share.
std::optional<hwloc_obj_type_t> last_level_cache(hwloc_topology_t t) {
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L1CACHE})
    if (count_of(t, type) > 0) return type;
  return std::nullopt;
}

const char* cache_name(std::optional<hwloc_obj_type_t> type) {
  if (!type) return "L3 cache";
  switch (*type) {
    case HWLOC_OBJ_L2CACHE:
      return "L2 cache";
    case HWLOC_OBJ_L1CACHE:
      return "L1 cache";
    default:
      return "L3 cache";
  }
}

int logical_index_of(hwloc_obj_t obj) {
  return obj ? int(obj->logical_index) : -1;
}

// The NUMA node local to a PU. In hwloc 2, NUMA nodes hang as memory children
// off the nearest object that owns memory (package, die, group or machine),
// possibly behind a memory-side cache object; the first one found walking up
// is the PU's local node. Where an object owns several (DDR and HBM on one
// package) the first, normally the DDR node, is taken.
int numa_of(hwloc_obj_t pu) {
  for (hwloc_obj_t o = pu; o; o = o->parent) {
    if (o->memory_arity == 0) continue;
    hwloc_obj_t m = o->memory_first_child;
    while (m && m->type != HWLOC_OBJ_NUMANODE) m = m->memory_first_child;
    return logical_index_of(m);
  }
  return -1;
}

cpu_info info_of(hwloc_topology_t t, hwloc_obj_t pu, std::optional<hwloc_obj_type_t> llc) {
  cpu_info c;
  c.os_index = int(pu->os_index);
  c.logical_index = int(pu->logical_index);
  c.core = logical_index_of(hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu));
  c.package = logical_index_of(hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu));
  c.numa = numa_of(pu);
  if (llc) c.l3 = logical_index_of(hwloc_get_ancestor_obj_by_type(t, *llc, pu));
  return c;
}

}  // namespace

// ---- topology ------------------------------------------------------------

const topology& topology::get() {
  // Created on first use and never destroyed: threads (PEs, a trace writer
  // in its own static destructor) may still ask for it while the process
  // exits, and there is nothing worth releasing at exit.
  static const topology* instance = [] {
    const std::optional<host_share> share = share_for_first_get();
    return new topology(share ? &*share : nullptr);
  }();
  return *instance;
}

std::unique_ptr<topology> topology::load(const host_share* share) {
  return std::unique_ptr<topology>(new topology(share));
}

topology::topology(const host_share* share) {
  hwloc_topology_t t = nullptr;
  if (share != nullptr && sharing_applies(*share)) {
    const std::string file = shared_file(share->job_id);
    if (share->local_rank == 0) {
      t = discover_and_share(file, *share);
      const int others = share->local_size - 1;
      origin_ = "discovered and shared through " + file + " with the job's " +
                std::to_string(others) + (others == 1 ? " other process" : " other processes") +
                " on this host";
    } else {
      t = load_shared(file, *share);
      origin_ = "loaded from " + file + " (discovered by local rank 0)";
    }
  } else {
    t = discover(0);
    origin_ = "discovered";
  }
  hw_ = t;

  packages_ = count_of(t, HWLOC_OBJ_PACKAGE);
  numa_nodes_ = count_of(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numa_nodes_; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, unsigned(i));
    numa_os_.push_back(node ? int(node->os_index) : -1);
  }
  const std::optional<hwloc_obj_type_t> llc = last_level_cache(t);
  l3_caches_ = llc ? count_of(t, *llc) : 0;
  cores_ = count_of(t, HWLOC_OBJ_CORE);
  pus_ = count_of(t, HWLOC_OBJ_PU);

  // The process binding, not the calling thread's: it is what the launcher
  // (taskset, cgroups, srun) gave the process, even if some library has
  // already pinned the thread that happens to get here first.
  bitmap_ptr inherited = make_bitmap();
  if (hwloc_topology_is_thissystem(t)) {
    if (hwloc_get_cpubind(t, inherited.get(), HWLOC_CPUBIND_PROCESS) != 0)
      fatal_errno(errno, "hwloc_get_cpubind");
  } else if (hwloc_bitmap_copy(inherited.get(), hwloc_topology_get_allowed_cpuset(t)) != 0) {
    fatal("hwloc_bitmap_copy failed (out of memory)");
  }

  for (int i = 0; i < pus_; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(i));
    if (pu && hwloc_bitmap_isset(inherited.get(), pu->os_index))
      allowed_.push_back(info_of(t, pu, llc));
  }
  if (allowed_.empty()) {
    char* text = nullptr;
    hwloc_bitmap_list_asprintf(&text, inherited.get());
    fatal("none of the process's CPUs (%s) is a CPU that hwloc found on this machine",
          text ? text : "?");
  }
}

topology::~topology() {
  hwloc_topology_destroy(as_hwloc(hw_));
}

std::string topology::binding_map(int os_cpu) const {
  hwloc_topology_t t = as_hwloc(hw_);
  const std::optional<hwloc_obj_type_t> llc = last_level_cache(t);
  std::string s;
  int package = -1, core = -1;
  for (int i = 0; i < pus_; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(i));
    if (!pu) continue;
    const cpu_info c = info_of(t, pu, llc);
    if (s.empty() || c.package != package) {
      s += s.empty() ? "[" : "][";
      package = c.package;
    } else if (c.core != core || c.core < 0) {
      s += "/";
    }
    core = c.core;
    s += c.os_index == os_cpu ? 'B' : '.';
  }
  return s.empty() ? s : s + "]";
}

std::string topology::binding_place(int os_cpu) const {
  hwloc_topology_t t = as_hwloc(hw_);
  const std::optional<hwloc_obj_type_t> llc = last_level_cache(t);
  int hwt = 0, core = -2;
  for (int i = 0; i < pus_; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(i));
    if (!pu) continue;
    const cpu_info c = info_of(t, pu, llc);
    hwt = c.core == core ? hwt + 1 : 0;
    core = c.core;
    if (c.os_index != os_cpu) continue;
    return "package " + (c.package >= 0 ? std::to_string(c.package) : std::string("?")) + "[core " +
           (c.core >= 0 ? std::to_string(c.core) : std::string("?")) + "[hwt " +
           std::to_string(hwt) + "]] (PU L#" + std::to_string(c.logical_index) + ", P#" +
           std::to_string(c.os_index) + ")";
  }
  return "CPU " + std::to_string(os_cpu) + " (not in the topology)";
}

std::string topology::describe() const {
  hwloc_topology_t t = as_hwloc(hw_);
  const std::optional<hwloc_obj_type_t> llc = last_level_cache(t);
  std::string s = "machine: " + plural(packages_, "package") + ", " +
                  plural(numa_nodes_, "NUMA node") + ", " + plural(l3_caches_, cache_name(llc)) +
                  ", " + plural(cores_, "core") + ", " + plural(pus_, "hardware thread") + "\n";

  if (pus_ <= max_listed_pus) {
    // One line per core: "core 3 (NUMA 0, L3 1): CPU 3 (L6), CPU 11 (L7)",
    // CPUs as OS index with the logical index in brackets.
    std::vector<bool> in_set(std::size_t(pus_), false);
    for (const cpu_info& c : allowed_) in_set[std::size_t(c.logical_index)] = true;
    const std::string llc_short = std::string(cache_name(llc)).substr(0, 2);
    int package = -1, core = -1;
    bool line_open = false;
    auto end_line = [&] {
      if (line_open) s += "\n";
      line_open = false;
    };
    for (int i = 0; i < pus_; ++i) {
      hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(i));
      if (!pu) continue;
      const cpu_info c = info_of(t, pu, llc);
      if (i == 0 || c.package != package) {
        end_line();
        package = c.package;
        s += c.package >= 0 ? "  package " + std::to_string(c.package) + "\n"
                            : std::string("  (no package)\n");
      }
      if (!line_open || c.core != core || c.core < 0) {
        end_line();
        core = c.core;
        s += c.core >= 0 ? "    core " + std::to_string(c.core) : std::string("    (no core)");
        s += " (NUMA " + (c.numa >= 0 ? std::to_string(c.numa) : std::string("?")) + ", " +
             llc_short + " " + (c.l3 >= 0 ? std::to_string(c.l3) : std::string("?")) + "):";
        line_open = true;
      } else {
        s += ",";
      }
      s += " CPU " + std::to_string(c.os_index) + " (L" + std::to_string(c.logical_index);
      s += in_set[std::size_t(i)] ? ")" : ", not in set)";
    }
    end_line();
  } else {
    s += "  (per-core listing omitted above " + std::to_string(max_listed_pus) +
         " hardware threads; lstopo shows the tree)\n";
  }

  std::vector<int> cpus;
  for (const cpu_info& c : allowed_) cpus.push_back(c.os_index);
  s += "inherited CPU set: " + format_cpus(cpus) + " (" + plural(int(cpus.size()), "CPU") + ", " +
       plural(allowed_cores(), "core") + ")";
  if (!hwloc_topology_is_thissystem(t))
    s += "\n(simulated machine from HWLOC_SYNTHETIC or HWLOC_XMLFILE: the set is all of it)";
  return s + "\n";
}

}  // namespace weft::base
