// membarrier(2) for the asymmetric fences of weft/base/fence.hpp (the
// system call itself: base/os.hpp, membarrier_register and membarrier).
#include "weft/base/fence.hpp"

#include "weft/base/os.hpp"

namespace weft::base {

namespace {
// A full barrier in this thread, then in every running thread that `scope`
// reaches. Registered, so it cannot fail with EPERM; anything else would
// leave a sender's message unseen by a sleeper: fatal, not ignored.
void barrier_all(os::membarrier_scope scope, const char* what) {
  full_fence();
  os::membarrier(scope, what);
  full_fence();
}
}  // namespace

const char* enable_asymmetric_fences() {
  const char* why = os::membarrier_register(os::membarrier_scope::this_process);
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
  barrier_all(os::membarrier_scope::this_process, "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)");
}

const char* register_global_membarrier() {
  return os::membarrier_register(os::membarrier_scope::registered_processes);
}

void global_heavy_fence() {
  barrier_all(os::membarrier_scope::registered_processes,
              "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)");
}

}  // namespace weft::base
