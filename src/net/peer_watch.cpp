#include "peer_watch.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include "weft/base/error.hpp"
#include "weft/base/os.hpp"

namespace weft::net {

// pidfd_open, eventfd and poll stay here rather than in base/os: only the
// peer watch uses them (base/os holds what several layers share).
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return int(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// An id that cannot be read stays empty (0): start() then watches nothing.
peer_watch::record peer_watch::mine() {
  record r{};
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (std::fgets(r.boot_id, sizeof r.boot_id, f) == nullptr) r.boot_id[0] = '\0';
    std::fclose(f);
  }
  r.boot_id[std::strcspn(r.boot_id, "\r\n")] = '\0';
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) == 0) {
    r.pidns_dev = std::uint64_t(st.st_dev);
    r.pidns_ino = std::uint64_t(st.st_ino);
  }
  r.pid = std::int64_t(::getpid());
  return r;
}

void peer_watch::start(const record* all, int size, int rank, void (*node_lost)(int, const char*),
                       const char* backend) {
  stop();
  node_lost_ = node_lost;
  backend_ = backend;
  const record& me = all[rank];
  // Without both ids a pid names no process for certain: watch nothing.
  if (me.boot_id[0] == '\0' || me.pidns_ino == 0) return;
  for (int n = 0; n < size; ++n) {
    const record& r = all[n];
    if (n == rank || std::strncmp(r.boot_id, me.boot_id, sizeof r.boot_id) != 0 ||
        r.pidns_dev != me.pidns_dev || r.pidns_ino != me.pidns_ino)
      continue;
    nodes_.push_back(n);
    pids_.push_back(pid_t(r.pid));
    int fd = open_pidfd(pid_t(r.pid));
    // Gone already (it cannot have finished: the backend's init is not
    // over). Any other failure: look with kill() instead.
    if (fd == -1 && errno == ESRCH) lose(nodes_.size() - 1);
    pidfds_.push_back(fd);
  }
  if (nodes_.empty()) return;
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ == -1) base::fatal_errno(errno, "eventfd() for the peer watch");
  // The thread takes no signal meant for the process.
  sigset_t all_signals, old;
  sigfillset(&all_signals);
  WEFT_CHECK_RC(pthread_sigmask(SIG_SETMASK, &all_signals, &old));
  thread_ = std::thread([this] { run(); });
  WEFT_CHECK_RC(pthread_sigmask(SIG_SETMASK, &old, nullptr));
}

void peer_watch::stop() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    // Unwritten, the join below would wait for ever.
    if (::write(stop_fd_, &one, sizeof one) != ssize_t(sizeof one))
      base::fatal_sys(errno, "write", "to the peer watch's stop eventfd (fd %d)", stop_fd_);
    thread_.join();
  }
  // A failed close of a descriptor of ours loses nothing: not checked.
  for (int fd : pidfds_)
    if (fd != -1) ::close(fd);
  if (stop_fd_ != -1) ::close(stop_fd_);
  stop_fd_ = -1;
  nodes_.clear();
  pids_.clear();
  pidfds_.clear();
}

void peer_watch::run() {
  pthread_setname_np(pthread_self(), "weft-peerwatch");
  std::vector<pollfd> fds;
  fds.push_back(pollfd{stop_fd_, POLLIN, 0});
  bool polling_pids = false;
  for (int fd : pidfds_) {
    fds.push_back(pollfd{fd, POLLIN, 0});  // poll() skips a negative fd
    polling_pids = polling_pids || fd == -1;
  }
  for (;;) {
    const int rc = ::poll(fds.data(), nfds_t(fds.size()), polling_pids ? 100 : -1);
    if (rc == -1 && errno != EINTR) base::fatal_errno(errno, "poll() on the peers' pidfds");
    if (rc > 0 && fds[0].revents != 0) return;  // stop()
    for (std::size_t i = 0; i < pidfds_.size(); ++i) {
      if (pidfds_[i] != -1 ? fds[i + 1].revents != 0 : !base::os::process_alive(pids_[i]))
        lose(i);
    }
  }
}

void peer_watch::lose(std::size_t i) {
  char why[160];
  std::snprintf(why, sizeof why, "process %d (node %d) exited or was killed (%s transport)",
                int(pids_[i]), nodes_[i], backend_);
  if (node_lost_ != nullptr) node_lost_(nodes_[i], why);
  base::fatal("node %d lost: %s", nodes_[i], why);
}

}  // namespace weft::net
