// base/os.hpp: the OS primitives, behind one error convention.
#include "weft/base/os.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <ctime>
#include "weft/base/error.hpp"

namespace weft::base::os {

namespace {

static_assert(sizeof(std::atomic<std::uint32_t>) == 4 && sizeof(std::atomic<int>) == 4,
              "a futex word is 4 bytes");

int futex_op(int op, futex_scope scope) {
  return scope == futex_scope::this_process ? (op | FUTEX_PRIVATE_FLAG) : op;
}

void wait_on(void* word, std::uint32_t expected, std::uint64_t timeout_ns, futex_scope scope,
             const char* what) {
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeout_ns != 0) {
    ts.tv_sec = time_t(timeout_ns / 1'000'000'000u);
    ts.tv_nsec = long(timeout_ns % 1'000'000'000u);
    tsp = &ts;
  }
  const long rc = syscall(SYS_futex, word, futex_op(FUTEX_WAIT, scope), expected, tsp, nullptr, 0);
  // EAGAIN: the word no longer held `expected`; EINTR: a signal; ETIMEDOUT.
  if (rc == -1 && errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT) fatal_errno(errno, what);
}

int wake_on(void* word, int count, futex_scope scope, const char* what) {
  const long rc = syscall(SYS_futex, word, futex_op(FUTEX_WAKE, scope), count, nullptr, nullptr, 0);
  if (rc == -1) fatal_errno(errno, what);
  return int(rc);
}

}  // namespace

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::uint64_t timeout_ns,
                futex_scope scope, const char* what) {
  wait_on(&word, expected, timeout_ns, scope, what);
}
void futex_wait(std::atomic<int>& word, int expected, std::uint64_t timeout_ns, futex_scope scope,
                const char* what) {
  wait_on(&word, std::uint32_t(expected), timeout_ns, scope, what);
}
int futex_wake(std::atomic<std::uint32_t>& word, int count, futex_scope scope, const char* what) {
  return wake_on(&word, count, scope, what);
}
int futex_wake(std::atomic<int>& word, int count, futex_scope scope, const char* what) {
  return wake_on(&word, count, scope, what);
}

bool process_alive(pid_t pid) noexcept {
  if (pid <= 0) return false;
  const int saved = errno;
  const bool alive = ::kill(pid, 0) == 0 || errno == EPERM;
  errno = saved;
  return alive;
}

std::string file_name_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out;
}

sys_failure create_shared_segment(const char* name, std::size_t bytes, mapping& out) noexcept {
  const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd == -1) return {"shm_open", errno};
  sys_failure failed;
  if (ftruncate(fd, off_t(bytes)) == -1) {
    failed = {"ftruncate", errno};
  } else if (int e = posix_fallocate(fd, 0, off_t(bytes)); e != 0 && e != EOPNOTSUPP) {
    failed = {"posix_fallocate", e};  // returns the error; errno untouched
  } else {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
      failed = {"mmap", errno};
    else
      out = {m, bytes};
  }
  close(fd);
  if (failed) shm_unlink(name);
  return failed;
}

sys_failure map_shared_segment(const char* name, std::size_t min_bytes, std::size_t bytes,
                               bool writable, mapping& out) noexcept {
  const int fd = shm_open(name, writable ? O_RDWR : O_RDONLY, 0);
  if (fd == -1) return {"shm_open", errno};
  sys_failure failed;
  struct stat st{};
  if (fstat(fd, &st) == -1) {
    failed = {"fstat", errno};
  } else if (std::size_t(st.st_size) >= min_bytes && st.st_size > 0) {
    const std::size_t length = bytes != 0 ? bytes : std::size_t(st.st_size);
    void* m =
        mmap(nullptr, length, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
      failed = {"mmap", errno};
    else
      out = {m, length};
  } else {
    out = {};
  }
  close(fd);
  return failed;
}

int unlink_shared_segment(const char* name) noexcept {
  return shm_unlink(name) == 0 ? 0 : errno;
}

void unmap(const mapping& m, const char* what) {
  if (munmap(m.addr, m.bytes) == -1)
    fatal_sys(errno, "munmap", "for %s (%zu bytes at %p)", what, m.bytes, m.addr);
}

void prefault(void* addr, std::size_t bytes) noexcept {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const auto page = std::uintptr_t(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(addr) & ~(page - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(addr) + bytes;
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

std::optional<std::uint64_t> shared_memory_free_bytes() noexcept {
  struct statvfs vfs{};
  if (statvfs("/dev/shm", &vfs) != 0) return std::nullopt;
  return std::uint64_t(vfs.f_bavail) * std::uint64_t(vfs.f_frsize);
}

void allow_memory_reads_by_any_process() noexcept {
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

std::ptrdiff_t read_process_memory(pid_t pid, void* local, std::uint64_t remote,
                                   std::size_t bytes) noexcept {
  iovec to{local, bytes};
  iovec from{reinterpret_cast<void*>(remote), bytes};
  const ssize_t n = process_vm_readv(pid, &to, 1, &from, 1, 0);
  return n >= 0 ? std::ptrdiff_t(n) : -std::ptrdiff_t(errno);
}

namespace {
long membarrier_call(int cmd) {
  return syscall(SYS_membarrier, cmd, 0, 0);
}
}  // namespace

const char* membarrier_register(membarrier_scope scope) noexcept {
  const bool mine = scope == membarrier_scope::this_process;
  const int cmd = mine ? MEMBARRIER_CMD_PRIVATE_EXPEDITED : MEMBARRIER_CMD_GLOBAL_EXPEDITED;
  const long cmds = membarrier_call(MEMBARRIER_CMD_QUERY);
  if (cmds < 0) return "membarrier(2) is not available (kernel, or blocked by a seccomp filter)";
  if ((cmds & cmd) == 0)
    return mine
               ? "membarrier(2) lacks MEMBARRIER_CMD_PRIVATE_EXPEDITED (Linux 4.14 or newer has it)"
               : "membarrier(2) lacks MEMBARRIER_CMD_GLOBAL_EXPEDITED (Linux 4.16 or newer has it)";
  if (membarrier_call(mine ? MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
                           : MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0)
    return "membarrier(2) refused the registration";
  return "";
}

void membarrier(membarrier_scope scope, const char* what) {
  const int cmd = scope == membarrier_scope::this_process ? MEMBARRIER_CMD_PRIVATE_EXPEDITED
                                                          : MEMBARRIER_CMD_GLOBAL_EXPEDITED;
  while (membarrier_call(cmd) != 0) {
    if (errno != EINTR) fatal_errno(errno, what);
  }
}

}  // namespace weft::base::os
