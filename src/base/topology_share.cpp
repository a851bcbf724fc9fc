// One discovery per host: the file through which local rank 0 of a job's
// processes on one host shares the machine it discovered with the others.
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
//
// The file's system calls (open, pread, write, rename, unlink, opendir) stay
// here rather than in base/os: they are this file format's own protocol
// (the O_APPEND count of readers, the writer's pid in the header); process
// liveness and name sanitising, which others use too, come from base/os.
#include "weft/base/topology.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <hwloc.h>
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
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include "topology_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/base/os.hpp"

namespace weft::base {
namespace topology_internal {
namespace {

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
  struct stat st{};
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

// A failed read, for the message that says why a file is not taken.
std::string read_failed(int err) {
  return "pread failed: " + std::string(errno_text(err).c_str()) + " (errno " +
         std::to_string(err) + ")";
}

// Reads the header and the XML of an open share file; nullopt, with the
// problem in *why, if it is not a whole one of this format.
std::optional<share_content> read_share(int fd, std::string* why) {
  char head[128] = {};
  const ssize_t got = pread(fd, head, sizeof head - 1, 0);
  if (got < 0) {
    *why = read_failed(errno);
    return std::nullopt;
  }
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
      *why = n < 0 ? read_failed(errno) : "it is shorter than its header says";
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
      struct stat st{};
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
    struct stat st{};
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

// The topology that the first get() shares, if any (share_per_host).
std::mutex g_share_mutex;
std::optional<topology::host_share> g_share;
bool g_get_started = false;

}  // namespace

bool sharing_applies(const topology::host_share& share) {
  return share.local_size >= 2 && !hwloc_environment_chooses_machine();
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
  if (fd < 0)
    fatal_sys(errno, "open", "for %s, to share the topology with this host's processes",
              tmp.c_str());
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      close(fd);
      unlink(tmp.c_str());
      fatal_sys(e, "write", "for %s, the topology shared with this host's processes", tmp.c_str());
    }
    done += std::size_t(n);
  }
  struct stat id{};
  if (fstat(fd, &id) != 0) fatal_sys(errno, "fstat", "for %s, the shared topology", tmp.c_str());
  close(fd);
  if (rename(tmp.c_str(), file.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    fatal_sys(e, "rename", "of %s to %s, the shared topology", tmp.c_str(), file.c_str());
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
    if (fd < 0 && errno != ENOENT)
      fatal_sys(errno, "open", "for %s, the topology shared by local rank 0", file.c_str());
    if (fd >= 0) {
      struct stat st{};
      if (fstat(fd, &st) != 0)
        fatal_sys(errno, "fstat", "for %s, the topology shared by local rank 0", file.c_str());
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
          struct stat now{};
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

std::optional<topology::host_share> share_for_first_get() {
  std::lock_guard<std::mutex> lock(g_share_mutex);
  g_get_started = true;
  return g_share;
}

}  // namespace topology_internal

using namespace topology_internal;

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

}  // namespace weft::base
