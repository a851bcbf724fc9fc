// base/os.hpp: the OS primitives, behind one error convention.
#include "weft/base/os.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
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
  const long rc =
      syscall(SYS_futex, word, futex_op(FUTEX_WAIT, scope), expected, tsp, nullptr, 0);
  // EAGAIN: the word no longer held `expected`; EINTR: a signal; ETIMEDOUT.
  if (rc == -1 && errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
    fatal_errno(errno, what);
}

int wake_on(void* word, int count, futex_scope scope, const char* what) {
  const long rc =
      syscall(SYS_futex, word, futex_op(FUTEX_WAKE, scope), count, nullptr, nullptr, 0);
  if (rc == -1) fatal_errno(errno, what);
  return int(rc);
}

}  // namespace

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::uint64_t timeout_ns, futex_scope scope, const char* what) {
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

}  // namespace weft::base::os
