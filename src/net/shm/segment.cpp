// The shm transport's segments: their names, the one way this transport
// makes one (create_segment, for the own segment and the message pool),
// mapping a peer's, and unlinking the names. segment.hpp has the layout;
// base/os the system calls.
//
// Lifetime of the names: every segment is unlinked once all processes have
// mapped all segments (the init barrier), so /dev/shm is clean after a normal
// exit and after a crash past init; a failed init unlinks what it created
// (own_linked_, pool_linked_: set while a name exists). A name left by an
// earlier job of the same id whose process died during startup is removed
// (remove_stale); one whose process still runs is a clear error: two
// processes claim one rank, or two jobs one id.
//
// Rejected: System V segments (their ids outlive the job unless removed,
// with no name a user can find in /dev/shm); one segment for the whole job
// (someone must size it for everyone before anyone may start).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include "transport.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::net {

namespace {
std::string sanitise(const std::string& job) {
  std::string s = base::os::file_name_safe(job);
  if (s.empty()) s = "job";
  if (s.size() > 120) {
    // Keep names under NAME_MAX and still unique per job.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : job) h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    s = s.substr(0, 100) + "." + hex;
  }
  return s;
}
}  // namespace

std::string shm_segment_name(const std::string& job_id, int rank) {
  return "/weft-" + std::to_string(getuid()) + "-" + sanitise(job_id) + "-" + std::to_string(rank);
}

namespace shm {

std::string pool_segment_name(const std::string& job_id, int rank) {
  return shm_segment_name(job_id, rank) + "-pool";
}

bool remove_stale(const char* name) {
  base::os::mapping m;
  pid_t owner = 0;
  if (const auto f =
          base::os::map_shared_segment(name, sizeof(seg_header), sizeof(seg_header), false, m)) {
    if (std::strcmp(f.call, "shm_open") == 0) return f.err == ENOENT;
  } else if (m.addr != nullptr) {
    auto* hdr = static_cast<seg_header*>(m.addr);
    if (hdr->phase.load(std::memory_order_acquire) != phase_creating) owner = hdr->pid;
    base::os::unmap(m, "an earlier job's shm segment");
  }
  if (base::os::process_alive(owner)) return false;
  if (owner > 0)
    base::warn("shm transport: removing %s, left by an earlier job (process %d is gone)", name,
               int(owner));
  else
    base::warn("shm transport: removing %s, left half-made by an earlier job", name);
  const int err = base::os::unlink_shared_segment(name);
  return err == 0 || err == ENOENT;
}

// Creates the segment `name` of `bytes` bytes and maps it
// (base::os::create_shared_segment: every page reserved now). A name that
// exists was left by an earlier job of the same id: `replace_stale` removes
// it (true) or says that its owner still runs (false: fatal). `linked` is
// set while the name exists, for the cleanup of a failed init.
void* shm_transport::create_segment(const char* name, std::size_t bytes, std::atomic<bool>& linked,
                                    bool (*replace_stale)(const char* name)) {
  base::os::mapping m;
  auto f = base::os::create_shared_segment(name, bytes, m);
  if (f.err == EEXIST) {
    if (!replace_stale(name))
      base::fatal(
          "shm transport: %s already exists and its process still runs: do two processes of "
          "this job claim rank %d, or do two jobs share the job id '%s'?",
          name, rank_, job_.c_str());
    f = base::os::create_shared_segment(name, bytes, m);
  }
  if (f) {
    char hint[160] = "";
    if (std::strcmp(f.call, "ftruncate") == 0)
      std::snprintf(hint, sizeof hint, " (is /dev/shm full?)");
    else if (std::strcmp(f.call, "posix_fallocate") == 0)
      std::snprintf(hint, sizeof hint,
                    " (/dev/shm is too small for %d processes of this job; enlarge it, e.g. "
                    "docker run --shm-size=1g)",
                    size_);
    fail_init_sys(f, "for the segment %s of %zu bytes%s", name, bytes, hint);
  }
  linked.store(true);
  return m.addr;
}

void shm_transport::create_own() {
  const std::string name = shm_segment_name(job_, rank_);
  std::snprintf(own_name_, sizeof own_name_, "%s", name.c_str());
  own_bytes_ = segment_bytes(size_, ring_bytes_);
  void* m = create_segment(own_name_, own_bytes_, own_linked_, remove_stale);
  own_map_ = m;
  // A mapping starts empty: without this, the first lap of a ring took a
  // page fault every 4 KiB on each side (docs/net.md, "The shm ring's first
  // lap"). Every ring of our segment is read here.
  base::os::prefault(m, own_bytes_);
  auto* hdr = static_cast<seg_header*>(m);
  // Under Yama's ptrace_scope=1 only an ancestor may read our memory; the
  // peers are siblings.
  if (opts_.allow_cma) base::os::allow_memory_reads_by_any_process();
  probe_word_ = 0x5eedf00d00000000ull ^ (std::uint64_t(getpid()) << 8) ^ base::cycles();
  hdr->version = seg_version;
  hdr->magic = seg_magic;
  hdr->rank = rank_;
  hdr->nodes = size_;
  hdr->pid = int(getpid());
  hdr->ring_bytes = ring_bytes_;
  hdr->probe_addr = reinterpret_cast<std::uint64_t>(&probe_word_);
  hdr->probe_value = probe_word_;
  create_pool();
  hdr->pool_addr = pool_ != nullptr ? reinterpret_cast<std::uint64_t>(pool_->base()) : 0;
  hdr->pool_bytes = pool_ != nullptr ? pool_->bytes() : 0;
  hdr->phase.store(phase_ready, std::memory_order_release);
  own_.store(hdr, std::memory_order_release);
  peer& me = peers_[std::size_t(rank_)];
  me.map = m;
  me.map_bytes = own_bytes_;
  me.hdr = hdr;
}

// Maps node p's segment once it exists and has its final size.
bool shm_transport::try_map(peer& p) {
  const std::string name = shm_segment_name(job_, p.node);
  base::os::mapping m;
  if (const auto f = base::os::map_shared_segment(name.c_str(), sizeof(seg_header), 0, true, m)) {
    if (std::strcmp(f.call, "shm_open") == 0 && f.err == ENOENT) return false;  // not made yet
    fail_init_sys(f, "for node %d's segment %s", p.node, name.c_str());
  }
  if (m.addr == nullptr) return false;  // its owner has not sized it yet
  p.map = m.addr;
  p.map_bytes = m.bytes;
  p.hdr = static_cast<seg_header*>(m.addr);
  return true;
}

// The names, if they still exist; errors ignored (a failure path).
void shm_transport::unlink_names() noexcept {
  if (own_linked_.exchange(false)) base::os::unlink_shared_segment(own_name_);
  if (pool_linked_.exchange(false)) base::os::unlink_shared_segment(pool_name_);
}

// The names, once every process has mapped every segment.
void shm_transport::unlink_own() {
  if (own_linked_.exchange(false))
    if (const int err = base::os::unlink_shared_segment(own_name_))
      base::fatal_sys(err, "shm_unlink", "for the shm transport's segment %s", own_name_);
  if (pool_linked_.exchange(false))
    if (const int err = base::os::unlink_shared_segment(pool_name_))
      base::fatal_sys(err, "shm_unlink", "for the shm transport's message pool %s", pool_name_);
}

}  // namespace shm
}  // namespace weft::net
