// Private to weft_net: a watch on the other processes of the job that run
// under this kernel and in this pid namespace, for the backends whose library
// does not report such a peer when it dies. Open MPI without the
// fault-tolerance extension (ULFM) reports nothing at all, and UCX's
// shared-memory endpoints are made without peer error handling
// (ucx/ucx_transport.hpp, "Failures"); both then left it to the launcher,
// and a job under a launcher that does not end it (mpirun
// --enable-recovery, or a process that dies outside the launcher's view)
// hung forever. The shm transport watches its peers itself, from its
// progress loop.
//
// A thread sleeps in poll() on the peers' pidfds (on kernels without
// pidfd_open, it looks with kill(pid, 0) every 100 ms) and turns the first
// exit into hooks.node_lost, which ends the job; no cost on the message path,
// and a node whose PEs are all busy sees the loss too. Peers on other hosts
// (another kernel or pid namespace) are not watched: their loss is the
// library's or the launcher's to report.
//
// Lifecycle: each node contributes its record (mine()) to a startup
// exchange of the backend's own, then calls start(); stop() must come before
// the backend's collective finalize, since a peer may exit as soon as every
// node has entered it.
#pragma once
#include <sys/types.h>
#include <cstdint>
#include <thread>
#include <vector>

namespace weft::net {

// pidfd_open(2): a descriptor that polls readable when `pid` exits; -1 with
// errno ENOSYS where the C library's headers lack the call (shm uses it too).
int open_pidfd(pid_t pid);

class peer_watch {
 public:
  // What a node tells the others: which kernel and pid namespace it runs in,
  // and its pid there. Fixed size and plain, for an allgather of bytes.
  struct record {
    char boot_id[40];  // /proc/sys/kernel/random/boot_id (36 characters)
    std::uint64_t pidns_dev;
    std::uint64_t pidns_ino;
    std::int64_t pid;
  };
  static record mine();

  peer_watch() = default;
  peer_watch(const peer_watch&) = delete;
  peer_watch& operator=(const peer_watch&) = delete;
  ~peer_watch() { stop(); }

  // `all`: every node's record, node order. `node_lost` (may be null: then
  // a fatal error) is called on the watch's thread; `backend` names the
  // transport in the message.
  void start(const record* all, int size, int rank, void (*node_lost)(int, const char*),
             const char* backend);
  // Ends the watch; returns once its thread has. Idempotent.
  void stop();
  // How many peers are watched (tests, stats).
  int watched() const { return int(nodes_.size()); }

 private:
  void run();
  [[noreturn]] void lose(std::size_t i);

  std::vector<int> nodes_;
  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;  // -1 where pidfd_open is not available
  int stop_fd_ = -1;         // eventfd: stop() writes it
  void (*node_lost_)(int, const char*) = nullptr;
  const char* backend_ = "";
  std::thread thread_;
};

}  // namespace weft::net
