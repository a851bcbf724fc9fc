// membarrier(2) for the asymmetric fences of weft/base/fence.hpp.
#include "weft/base/fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>

#include "weft/base/error.hpp"

namespace weft::base {

namespace {
long membarrier(int cmd) {
  return syscall(SYS_membarrier, cmd, 0, 0);
}

// "" once registered for `cmd`, else why not.
const char* register_for(int cmd, int register_cmd) {
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0) return "membarrier(2) is not available (kernel, or blocked by a seccomp filter)";
  if ((cmds & cmd) == 0)
    return cmd == MEMBARRIER_CMD_PRIVATE_EXPEDITED
               ? "membarrier(2) lacks MEMBARRIER_CMD_PRIVATE_EXPEDITED (Linux 4.14 or newer has it)"
               : "membarrier(2) lacks MEMBARRIER_CMD_GLOBAL_EXPEDITED (Linux 4.16 or newer has it)";
  if (membarrier(register_cmd) != 0) return "membarrier(2) refused the registration";
  return "";
}

// A full barrier in this thread, then in every running thread that `cmd`
// reaches. Registered, so it cannot fail with EPERM; anything else would
// leave a sender's message unseen by a sleeper: fatal, not ignored.
void barrier_all(int cmd, const char* what) {
  full_fence();
  while (membarrier(cmd) != 0) {
    if (errno != EINTR) fatal_errno(errno, what);
  }
  full_fence();
}
}  // namespace

const char* enable_asymmetric_fences() {
  const char* why = register_for(MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                                 MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
  if (*why == '\0') detail::asymmetric_fences.store(true, std::memory_order_relaxed);
  return why;
}

void disable_asymmetric_fences() {
  detail::asymmetric_fences.store(false, std::memory_order_relaxed);
}

void heavy_fence() {
  if (!detail::asymmetric_fences.load(std::memory_order_relaxed)) {
    full_fence();
    return;
  }
  barrier_all(MEMBARRIER_CMD_PRIVATE_EXPEDITED, "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)");
}

const char* register_global_membarrier() {
  return register_for(MEMBARRIER_CMD_GLOBAL_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
}

void global_heavy_fence() {
  barrier_all(MEMBARRIER_CMD_GLOBAL_EXPEDITED, "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)");
}

}  // namespace weft::base
