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
// the host and shared through a file ("one discovery per host" below).
#include "weft/base/topology.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include "weft/base/error.hpp"
#include "weft/base/os.hpp"

namespace weft::base {

namespace {

// Largest CPU number a list may name. Linux caps NR_CPUS at 8192 today; the
// margin is for the future, and the cap keeps a typo such as "0-99999999"
// from expanding into a huge vector before it is rejected.
constexpr long max_cpu_number = 1 << 20;

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

std::string plural(int n, const char* word) {
  std::string s = std::to_string(n) + " " + word;
  if (n != 1) s += 's';
  return s;
}

// ---- CPU lists -----------------------------------------------------------

// A CPU list as written, before it is checked against the machine: inclusive
// ranges of OS indices, or of hwloc logical indices when the list starts
// with 'L'.
struct cpu_list {
  bool logical = false;
  std::vector<std::pair<int, int>> ranges;
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Reads digits at text[pos..]; nullopt if there are none or the number is
// absurdly large (then *too_large is set).
std::optional<int> read_number(const std::string& text, std::size_t& pos, bool* too_large) {
  const std::size_t start = pos;
  long value = 0;
  while (pos < text.size() && is_digit(text[pos])) {
    value = value * 10 + (text[pos] - '0');
    if (value > max_cpu_number) {
      *too_large = true;
      return std::nullopt;
    }
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return int(value);
}

// Parses "0-3,6" or "L0-3,L6" (the 'L' on later items and after '-' is
// optional in a logical list, and forbidden in an OS list, where it would be
// ambiguous which numbering the writer meant). Returns "" or the problem.
std::string parse_cpu_list(const std::string& text, cpu_list& out) {
  out = {};
  if (text.empty() || text == "L") return "empty CPU list";
  out.logical = text[0] == 'L';
  std::size_t begin = 0;
  while (true) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    if (item.empty()) return "empty item in CPU list '" + text + "'";

    std::size_t pos = 0;
    bool too_large = false;
    auto number = [&]() -> std::optional<int> {
      if (out.logical && pos < item.size() && item[pos] == 'L') ++pos;
      return read_number(item, pos, &too_large);
    };
    const std::optional<int> first = number();
    std::optional<int> last = first;
    if (first && pos < item.size() && item[pos] == '-') {
      ++pos;
      last = number();
    }
    if (too_large) return "'" + item + "' names a CPU beyond " + std::to_string(max_cpu_number);
    if (!out.logical && item[0] == 'L')
      return "'" + item +
             "' is a logical index in a list of OS indices (a logical list "
             "starts with L, e.g. L0-3)";
    if (!first || !last || pos != item.size()) return "'" + item + "' is not a CPU number or range";
    if (*first > *last) return "'" + item + "' is not a CPU range (it runs backwards)";
    out.ranges.emplace_back(*first, *last);

    if (end == text.size()) break;
    begin = end + 1;
  }
  return "";
}

// Resolves a parsed list against the inherited set: the OS index of each
// listed CPU in list order, or the problem in *error.
std::vector<int> resolve_cpu_list(const cpu_list& list, const std::vector<cpu_info>& allowed,
                                  int machine_pus, std::string* error) {
  // Index -> OS index of every CPU in the inherited set, in the list's numbering.
  std::map<int, int> in_set;
  std::vector<int> set_names;
  for (const cpu_info& c : allowed) {
    const int name = list.logical ? c.logical_index : c.os_index;
    in_set.emplace(name, c.os_index);
    set_names.push_back(name);
  }
  const std::string prefix = list.logical ? "L" : "";
  const std::string set_text = prefix + topology::format_cpus(set_names);

  std::vector<int> cpus;
  std::vector<int> seen;
  for (auto [first, last] : list.ranges) {
    // Ranges are walked one CPU at a time, but a range that is larger than
    // the set necessarily leaves it after at most set-size steps.
    for (int i = first; i <= last; ++i) {
      if (list.logical && i >= machine_pus) {
        *error = "there is no CPU L" + std::to_string(i) + " (this machine has " +
                 plural(machine_pus, "hardware thread") + ", L0-" +
                 std::to_string(machine_pus - 1) + ")";
        return {};
      }
      auto it = in_set.find(i);
      if (it == in_set.end()) {
        *error =
            "CPU " + prefix + std::to_string(i) + " is not in this process's CPU set " + set_text;
        return {};
      }
      cpus.push_back(it->second);
      seen.push_back(i);
    }
  }
  // A duplicate would put two PEs on one CPU while another CPU of the list
  // stays idle: almost certainly a typo, so it is refused rather than
  // silently oversubscribing.
  std::sort(seen.begin(), seen.end());
  auto dup = std::adjacent_find(seen.begin(), seen.end());
  if (dup != seen.end()) {
    *error = "CPU " + prefix + std::to_string(*dup) + " is listed more than once";
    return {};
  }
  return cpus;
}

// ---- placement -----------------------------------------------------------

// One core of the inherited set with where it sits in the tree and the OS
// indices of its PUs (in logical order) that are in the set.
struct core_slot {
  int package, numa, l3;
  std::vector<int> pus;
};

// Cores of the inherited set in logical order. A PU whose core hwloc does not
// know counts as a core of its own.
std::vector<core_slot> cores_of(const std::vector<cpu_info>& allowed) {
  std::vector<core_slot> cores;
  std::map<int, std::size_t> slot_of_core;
  for (const cpu_info& c : allowed) {
    if (c.core >= 0) {
      auto [it, fresh] = slot_of_core.emplace(c.core, cores.size());
      if (!fresh) {
        cores[it->second].pus.push_back(c.os_index);
        continue;
      }
    }
    cores.push_back({c.package, c.numa, c.l3, {c.os_index}});
  }
  return cores;
}

// Scatter order of cores[idx...]: group by the tree level `level` (0 package,
// 1 NUMA node, 2 L3; 3 = the cores themselves), order each group recursively
// and deal the groups out round-robin, so consecutive entries differ at the
// highest level possible. Groups are taken in order of first appearance,
// i.e. logical order. Grouping by the key at each level, rather than walking
// hwloc's tree, gives the same order whether NUMA nodes contain L3s (AMD
// NPS) or L3s contain NUMA nodes (Intel SNC).
std::vector<std::size_t> scatter_order(const std::vector<core_slot>& cores,
                                       const std::vector<std::size_t>& idx, int level) {
  if (level == 3 || idx.size() <= 1) return idx;
  auto key = [&](std::size_t i) {
    const core_slot& c = cores[i];
    return level == 0 ? c.package : level == 1 ? c.numa : c.l3;
  };
  std::vector<int> keys;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i : idx) {
    auto it = std::find(keys.begin(), keys.end(), key(i));
    if (it == keys.end()) {
      keys.push_back(key(i));
      groups.emplace_back();
      it = keys.end() - 1;
    }
    groups[std::size_t(it - keys.begin())].push_back(i);
  }
  for (auto& g : groups) g = scatter_order(cores, g, level + 1);

  std::vector<std::size_t> out;
  for (std::size_t round = 0; out.size() < idx.size(); ++round)
    for (const auto& g : groups)
      if (round < g.size()) out.push_back(g[round]);
  return out;
}

// The CPUs of the set in placement order: the first PU of each core in
// `core_order`, then the second PU of each, and so on, so that hyperthread
// siblings are used only once every core has a PE.
std::vector<int> by_rounds(const std::vector<core_slot>& cores,
                           const std::vector<std::size_t>& core_order) {
  std::vector<int> out;
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t i : core_order)
      if (round < cores[i].pus.size()) {
        out.push_back(cores[i].pus[round]);
        any = true;
      }
    if (!any) return out;
  }
}

// ---- one discovery per host ------------------------------------------------
//
// Walking /proc and /sys costs every process the same few milliseconds and
// the same system calls, and all processes of a host find the same machine;
// so in a job of several processes on one host only local rank 0 asks hwloc,
// and the others read its result from a file:
//
//   <dir>/weft-topo-<uid>-<host>@<job>.xml, mode 0600, holding
//   "weft-topology 1 <writer pid> <n>\n", then n bytes of hwloc XML (with
//   hwloc's final NUL), then one byte per process that has loaded it.
//
// <dir> is /dev/shm (memory, and where the shm transport's segments live),
// else $TMPDIR, else /tmp. The host name is in the name because processes in
// separate UTS namespaces (tests/net/two_hosts.sh) may share one /dev/shm and
// one job id while each sees its own "host" with its own local rank 0.
//
// Local rank 0 discovers with HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED, so the
// file holds the whole machine whatever cgroup the writer runs in, writes a
// temporary name and renames it (a reader never sees half a file). Every
// process, the writer included, then builds its topology from that XML with
// IS_THISSYSTEM (binding calls reach the OS) and THISSYSTEM_ALLOWED_RESOURCES
// (the cgroup's allowed CPUs are this process's own, as if it had discovered
// itself); the inherited CPU set is read from the process as before.
//
// Removal: a reader appends one byte after loading; O_APPEND makes the byte
// positions distinct, so exactly one reader sees the count reach
// local_size - 1, and that one removes the file. The writer removes it at
// normal exit, after waiting (at most the timeout) for readers still to
// come. A job that dies before every reader came leaves the file; the next
// local rank 0 of the same user on that host removes files whose writer is
// gone, and readers never take such a file for their own job's.

constexpr const char* share_magic = "weft-topology";
constexpr int share_version = 1;

// Keeps what goes into a file name to letters, digits, '.', '_' and '-':
// '@' and '/' then separate and end the name's fields unambiguously.
std::string sanitise(const std::string& s) {
  return os::file_name_safe(s);
}

std::string this_host() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return sanitise(name);
}

std::string share_dir() {
  struct stat st {};
  if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK | X_OK) == 0)
    return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && *tmp != '\0') return tmp;
  return "/tmp";
}

// Files of this user and host start so; the job id follows.
std::string share_prefix() {
  return "weft-topo-" + std::to_string(geteuid()) + "-" + this_host() + "@";
}

// The environment variables through which hwloc is told to describe another
// machine than the one it runs on (or to discover it otherwise): with one of
// them set, each process keeps doing exactly what hwloc's environment says.
bool hwloc_environment_chooses_machine() {
  for (const char* v : {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_FSROOT", "HWLOC_CPUID_PATH",
                        "HWLOC_COMPONENTS"}) {
    const char* value = std::getenv(v);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

bool sharing_applies(const topology::host_share& share) {
  return share.local_size >= 2 && !hwloc_environment_chooses_machine();
}

using os::process_alive;

using steady = std::chrono::steady_clock;

steady::time_point deadline_after(double seconds) {
  const double s = std::clamp(seconds, 0.001, 1e6);
  return steady::now() +
         std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

// Polling with a back-off from 1 to 10 ms: the file comes within the time
// local rank 0 takes to start and discover, typically a few milliseconds.
void nap(std::chrono::microseconds& d) {
  std::this_thread::sleep_for(d);
  d = std::min<std::chrono::microseconds>(d * 2, std::chrono::milliseconds(10));
}

hwloc_topology_t new_hwloc() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) fatal_errno(errno, "hwloc_topology_init");
  return t;
}

hwloc_topology_t discover(unsigned long flags) {
  hwloc_topology_t t = new_hwloc();
  if (flags != 0 && hwloc_topology_set_flags(t, flags) != 0)
    fatal_errno(errno, "hwloc_topology_set_flags");
  if (hwloc_topology_load(t) != 0) fatal_errno(errno, "hwloc_topology_load");
  return t;
}

// This machine from XML that local rank 0 exported (`xml` ends with its NUL).
hwloc_topology_t import_xml(const std::string& xml, const std::string& file) {
  hwloc_topology_t t = new_hwloc();
  if (xml.size() > std::size_t(INT_MAX) ||
      hwloc_topology_set_xmlbuffer(t, xml.data(), int(xml.size())) != 0)
    fatal("topology: %s does not hold an hwloc XML topology that this hwloc (API %x) reads",
          file.c_str(), unsigned(HWLOC_API_VERSION));
  if (hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                      HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES) != 0)
    fatal_errno(errno, "hwloc_topology_set_flags");
  if (hwloc_topology_load(t) != 0) {
    const int e = errno;
    fatal("topology: loading the hwloc XML of %s failed: %s (errno %d)", file.c_str(),
          std::strerror(e), e);
  }
  return t;
}

// The header line; its length is where the XML starts.
std::string share_header(pid_t writer, std::size_t xml_bytes) {
  return std::string(share_magic) + " " + std::to_string(share_version) + " " +
         std::to_string(writer) + " " + std::to_string(xml_bytes) + "\n";
}

struct share_content {
  pid_t writer = 0;
  std::size_t xml_offset = 0;  // the header's length
  std::string xml;             // with its final NUL
};

// Reads the header and the XML of an open share file; nullopt, with the
// problem in *why, if it is not a whole one of this format.
std::optional<share_content> read_share(int fd, std::string* why) {
  char head[128] = {};
  const ssize_t got = pread(fd, head, sizeof head - 1, 0);
  const char* nl =
      got > 0 ? static_cast<const char*>(std::memchr(head, '\n', std::size_t(got))) : nullptr;
  int version = 0;
  long writer = 0;
  unsigned long long bytes = 0;
  char magic[32] = {};
  if (nl == nullptr ||
      std::sscanf(head, "%31s %d %ld %llu", magic, &version, &writer, &bytes) != 4 ||
      std::strcmp(magic, share_magic) != 0 || version != share_version || writer <= 0 ||
      bytes == 0 || bytes > (1ull << 30)) {
    *why = "its first line is not '" + std::string(share_magic) + " " +
           std::to_string(share_version) + " <pid> <bytes>'";
    return std::nullopt;
  }
  share_content c;
  c.writer = pid_t(writer);
  c.xml_offset = std::size_t(nl - head) + 1;
  c.xml.resize(std::size_t(bytes));
  std::size_t done = 0;
  while (done < c.xml.size()) {
    const ssize_t n =
        pread(fd, c.xml.data() + done, c.xml.size() - done, off_t(c.xml_offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = "it is shorter than its header says";
      return std::nullopt;
    }
    done += std::size_t(n);
  }
  if (c.xml.back() != '\0') {
    *why = "its XML does not end where its header says";
    return std::nullopt;
  }
  return c;
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Removes files of this user and host left by a writer that is gone: a job
// that died before all its processes had loaded the file, or a temporary
// file of a writer killed while writing. Quietly: they are caches, nothing
// of value is lost.
void remove_stale_shares(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = share_prefix();
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string path = dir + "/" + name;
    pid_t writer = 0;
    if (const std::size_t tmp = name.rfind(".tmp."); tmp != std::string::npos) {
      writer = pid_t(std::atol(name.c_str() + tmp + 5));
    } else {
      // Only the writer's pid is read: a file of another weft version (whose
      // XML part may differ) is removed too once its writer is gone, and one
      // without a pid is left alone.
      const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) continue;
      char head[64] = {};
      char magic[32] = {};
      int version = 0;
      long pid = 0;
      struct stat st {};
      const bool ours = fstat(fd, &st) == 0 && st.st_uid == geteuid();
      const bool parsed = pread(fd, head, sizeof head - 1, 0) > 0 &&
                          std::sscanf(head, "%31s %d %ld", magic, &version, &pid) == 3 &&
                          std::strcmp(magic, share_magic) == 0;
      close(fd);
      if (!ours || !parsed) continue;
      writer = pid_t(pid);
    }
    if (writer > 0 && !process_alive(writer)) unlink(path.c_str());
  }
  closedir(d);
}

// Files this process wrote, removed at its normal exit. Never freed: the
// exit handler runs while static objects are being destroyed.
struct written_share {
  std::string path;
  struct stat id;
  double timeout_s;
  pid_t writer;  // a forked child that exits leaves the file to its parent
};
std::mutex g_written_mutex;
std::vector<written_share>* g_written = nullptr;

void remove_written_shares() {
  std::lock_guard<std::mutex> lock(g_written_mutex);
  if (g_written == nullptr) return;
  for (const written_share& w : *g_written) {
    if (w.writer != getpid()) continue;
    // Readers may still be on their way (a program that exits right after
    // reading its options): give them the time they would wait themselves.
    const steady::time_point deadline = deadline_after(w.timeout_s);
    std::chrono::microseconds d(1000);
    struct stat st {};
    while (stat(w.path.c_str(), &st) == 0 && same_file(st, w.id)) {
      if (steady::now() >= deadline) {
        unlink(w.path.c_str());
        break;
      }
      nap(d);
    }
  }
  g_written->clear();
}

void remember_written(const std::string& path, const struct stat& id, double timeout_s) {
  std::lock_guard<std::mutex> lock(g_written_mutex);
  if (g_written == nullptr) {
    g_written = new std::vector<written_share>;
    std::atexit(remove_written_shares);
  }
  g_written->push_back({path, id, timeout_s, getpid()});
}

// Local rank 0: discovers the whole machine, publishes it at `file` and
// builds this process's topology from it like every other process does.
hwloc_topology_t discover_and_share(const std::string& file, const topology::host_share& share) {
  remove_stale_shares(file.substr(0, file.rfind('/')));

  hwloc_topology_t whole = discover(HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  char* buf = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(whole, &buf, &len, 0) != 0 || buf == nullptr || len <= 0)
    fatal_errno(errno, "hwloc_topology_export_xmlbuffer");
  std::string xml(buf, std::size_t(len));
  hwloc_free_xmlbuffer(whole, buf);
  hwloc_topology_destroy(whole);
  if (xml.back() != '\0') xml.push_back('\0');

  const std::string data = share_header(getpid(), xml.size()) + xml;
  const std::string tmp = file + ".tmp." + std::to_string(getpid());
  unlink(tmp.c_str());  // left by a dead process that had our pid
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    fatal("topology: cannot create %s to share the topology with this host's processes: %s",
          tmp.c_str(), std::strerror(e));
  }
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      close(fd);
      unlink(tmp.c_str());
      fatal("topology: writing %s failed: %s", tmp.c_str(), std::strerror(e));
    }
    done += std::size_t(n);
  }
  struct stat id {};
  if (fstat(fd, &id) != 0) fatal_errno(errno, "fstat (topology file)");
  close(fd);
  if (rename(tmp.c_str(), file.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    fatal("topology: renaming %s to %s failed: %s", tmp.c_str(), file.c_str(), std::strerror(e));
  }
  remember_written(file, id, share.timeout_s);
  return import_xml(xml, file);
}

// Any other local rank: waits for local rank 0's file, loads it, counts
// itself in, and removes the file if it is the last to come.
hwloc_topology_t load_shared(const std::string& file, const topology::host_share& share) {
  const steady::time_point deadline = deadline_after(share.timeout_s);
  std::chrono::microseconds d(1000);
  std::string stale;  // what was wrong with the file found last, if anything
  for (;;) {
    const int fd = open(file.c_str(), O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) {
      const int e = errno;
      fatal("topology: cannot open %s, the topology shared by local rank 0: %s", file.c_str(),
            std::strerror(e));
    }
    if (fd >= 0) {
      struct stat st {};
      if (fstat(fd, &st) != 0) fatal_errno(errno, "fstat (topology file)");
      // Only a file this user made for itself: one planted by anybody else
      // would decide where our threads run.
      if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
        fatal(
            "topology: %s is not a regular file of user %d with mode 0600; refusing to load it "
            "(remove it)",
            file.c_str(), int(geteuid()));
      std::string why;
      std::optional<share_content> c = read_share(fd, &why);
      if (c && process_alive(c->writer)) {
        hwloc_topology_t t = import_xml(c->xml, file);
        // Counted only once loaded: until then the file must stay.
        if (write(fd, "+", 1) == 1) {
          const off_t end = lseek(fd, 0, SEEK_CUR);
          const off_t loaded = end - off_t(c->xml_offset + c->xml.size());
          struct stat now {};
          if (loaded >= share.local_size - 1 && stat(file.c_str(), &now) == 0 && same_file(now, st))
            unlink(file.c_str());
        }
        // (A failed append leaves the removal to the writer's exit.)
        close(fd);
        return t;
      }
      // Left by an earlier job with this id (whose local rank 0 died, or
      // which ran another weft version): ours will replace it.
      if (c)
        stale = " (the file there was left by process " + std::to_string(c->writer) +
                ", which is gone)";
      else
        stale = " (the file there is not a topology file of this weft version: " + why + ")";
      close(fd);
    }
    if (steady::now() >= deadline) {
      fatal(
          "topology: %s did not appear within %g s (--weft:startup-timeout)%s: local rank 0 of "
          "this job on this host discovers the machine and shares it there; did it start?",
          file.c_str(), share.timeout_s, stale.c_str());
    }
    nap(d);
  }
}

// The topology that the first get() shares, if any (share_per_host).
std::mutex g_share_mutex;
std::optional<topology::host_share> g_share;
bool g_get_started = false;

}  // namespace

// ---- topology ------------------------------------------------------------

const topology& topology::get() {
  // Created on first use and never destroyed: threads (PEs, a trace writer
  // in its own static destructor) may still ask for it while the process
  // exits, and there is nothing worth releasing at exit.
  static const topology* instance = [] {
    std::optional<host_share> share;
    {
      std::lock_guard<std::mutex> lock(g_share_mutex);
      g_get_started = true;
      share = g_share;
    }
    return new topology(share ? &*share : nullptr);
  }();
  return *instance;
}

bool topology::share_per_host(const host_share& share) {
  std::lock_guard<std::mutex> lock(g_share_mutex);
  if (g_get_started) return false;
  if (!sharing_applies(share)) {
    g_share.reset();
    return false;
  }
  g_share = share;
  return true;
}

std::unique_ptr<topology> topology::load(const host_share* share) {
  return std::unique_ptr<topology>(new topology(share));
}

std::string topology::shared_file(const std::string& job_id) {
  std::string job = sanitise(job_id.empty() ? std::string("nojob") : job_id);
  // NAME_MAX is 255: a very long job id is replaced by its hash (FNV-1a).
  if (job.size() > 120) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : job_id) h = (h ^ c) * 0x100000001b3ull;
    char hex[24];
    std::snprintf(hex, sizeof hex, "h%016llx", static_cast<unsigned long long>(h));
    job = hex;
  }
  return share_dir() + "/" + share_prefix() + job + ".xml";
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

int topology::allowed_cores() const {
  return int(cores_of(allowed_).size());
}

std::string topology::check_bind_syntax(const std::string& bind) {
  if (bind == "none" || bind == "compact" || bind == "scatter") return "";
  cpu_list list;
  return parse_cpu_list(bind, list);
}

std::string topology::check_bind(const std::string& bind) const {
  if (bind == "none" || bind == "compact" || bind == "scatter") return "";
  cpu_list list;
  std::string error = parse_cpu_list(bind, list);
  if (error.empty()) resolve_cpu_list(list, allowed_, pus_, &error);
  return error;
}

std::vector<int> topology::place(int n, const std::string& bind) const {
  if (n <= 0) return {};
  if (bind == "none") return std::vector<int>(std::size_t(n), -1);

  std::vector<int> order;
  if (bind == "compact" || bind == "scatter") {
    const std::vector<core_slot> cores = cores_of(allowed_);
    std::vector<std::size_t> core_order(cores.size());
    for (std::size_t i = 0; i < cores.size(); ++i) core_order[i] = i;
    if (bind == "scatter") core_order = scatter_order(cores, core_order, 0);
    order = by_rounds(cores, core_order);
  } else {
    cpu_list list;
    std::string error = parse_cpu_list(bind, list);
    if (error.empty()) order = resolve_cpu_list(list, allowed_, pus_, &error);
    if (!error.empty())
      fatal("topology::place: bind value '%s' was not validated: %s", bind.c_str(), error.c_str());
  }

  // More PEs than CPUs: wrap around (the caller has warned).
  std::vector<int> cpus(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < cpus.size(); ++i) cpus[i] = order[i % order.size()];
  return cpus;
}

void topology::bind_this_thread(int os_cpu) const {
  if (os_cpu < 0) return;
  // pthread_setaffinity_np rather than hwloc_set_cpubind: one system call on
  // the calling thread that touches no shared hwloc state, which is what a PE
  // thread starting up wants. A dynamically sized set, because CPU numbers
  // may exceed CPU_SETSIZE (1024) on large machines.
  cpu_set_t* set = CPU_ALLOC(os_cpu + 1);
  if (!set) fatal("CPU_ALLOC(%d) failed (out of memory)", os_cpu + 1);
  const std::size_t size = CPU_ALLOC_SIZE(os_cpu + 1);
  CPU_ZERO_S(size, set);
  CPU_SET_S(std::size_t(os_cpu), size, set);
  const int rc = pthread_setaffinity_np(pthread_self(), size, set);
  CPU_FREE(set);
  if (rc != 0) {
    char what[64];
    std::snprintf(what, sizeof what, "binding a thread to CPU %d", os_cpu);
    fatal_errno(rc, what);
  }
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

std::string topology::format_cpus(std::vector<int> cpus) {
  // Negative entries mean "unbound" in a placement and name no CPU.
  cpus.erase(std::remove_if(cpus.begin(), cpus.end(), [](int c) { return c < 0; }), cpus.end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string s;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace weft::base
