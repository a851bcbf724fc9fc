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
}  // namespace

const char* enable_asymmetric_fences() {
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0) return "membarrier(2) is not available (kernel, or blocked by a seccomp filter)";
  if ((cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    return "membarrier(2) lacks MEMBARRIER_CMD_PRIVATE_EXPEDITED (Linux 4.14 or newer has it)";
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
    return "membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) failed";
  detail::asymmetric_fences.store(true, std::memory_order_relaxed);
  return "";
}

void disable_asymmetric_fences() {
  detail::asymmetric_fences.store(false, std::memory_order_relaxed);
}

void heavy_fence() {
  if (!detail::asymmetric_fences.load(std::memory_order_relaxed)) {
    full_fence();
    return;
  }
  // Registered, so it cannot fail with EPERM; anything else would leave a
  // producer's message unseen by a sleeping PE: fatal, not ignored.
  while (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    if (errno != EINTR) fatal_errno(errno, "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)");
  }
  full_fence();  // and this thread's own order
}

const char* register_global_membarrier() {
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0) return "membarrier(2) is not available (kernel, or blocked by a seccomp filter)";
  if ((cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0)
    return "membarrier(2) lacks MEMBARRIER_CMD_GLOBAL_EXPEDITED (Linux 4.16 or newer has it)";
  if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0)
    return "membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) failed";
  return "";
}

void global_heavy_fence() {
  full_fence();
  while (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
    if (errno != EINTR) fatal_errno(errno, "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)");
  }
  full_fence();
}

}  // namespace weft::base
