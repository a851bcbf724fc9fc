// The target and teams constructs on the host. weft offloads to no device:
// omp_get_num_devices() is 0, and every target region runs on the host as
// the OpenMP 5.1 host fallback says -- as an initial thread of its own
// (level 0, a team of one, the initial ICVs), its firstprivate data copied
// at the construct, its map clauses without effect (host and "device"
// memory are one). Data constructs and updates only order themselves after
// the tasks their depend clauses name. A host teams construct runs its
// teams one after the other on the encountering thread (the league is a
// loop, as in libgomp): each team's parallel regions get the whole node,
// where teams run side by side would each get a share of it.
//
// These entry points exist so that a program written for accelerators,
// which falls back to the host where none is found, runs unmodified; under
// LD_PRELOAD, libgomp's own would run on a weft thread without libgomp's
// thread state, and crash.
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/error.hpp"

using namespace weft::omp;

extern "C" void GOMP_taskwait_depend(void** depend);

namespace {

// GCC's encodings (gomp-constants.h): device numbers, a map kind's low
// byte, the target flags and the argument list of GOMP_target_ext.
constexpr int device_icv = -1;            // the default-device-var
constexpr int device_host_fallback = -2;  // `if` false: the host
constexpr int host_device = 0;            // omp_get_initial_device() with no devices
constexpr unsigned map_firstprivate = 12;
constexpr std::intptr_t arg_device_mask = (1 << 7) - 1;
constexpr std::intptr_t arg_subsequent_param = 1 << 7;
constexpr std::intptr_t arg_id_mask = ((1 << 8) - 1) << 8;
constexpr std::intptr_t arg_thread_limit = 2 << 8;
constexpr int arg_value_shift = 16;

// A device other than the host is named: with OMP_TARGET_OFFLOAD=mandatory
// that ends the job (OpenMP 5.1, 6.17), otherwise the construct runs on
// the host.
void check_device(int device, const char* construct) {
  if (device == device_icv || device == device_host_fallback || device == host_device) return;
  if (globals().offload_mandatory)
    weft::base::fatal(
        "OMP_TARGET_OFFLOAD is set to MANDATORY, but device %d of a %s construct does not exist: "
        "weft has no offload devices (omp_get_num_devices() is 0), only the host (device %d)",
        device, construct, host_device);
}

// Copies the firstprivate variables of a target construct into one block,
// as the construct's start sees them, and points hostaddrs at the copies.
std::unique_ptr<unsigned char[]> copy_firstprivates(std::size_t mapnum, void** hostaddrs,
                                                    const std::size_t* sizes,
                                                    const unsigned short* kinds) {
  std::size_t align = 1, size = 0;
  for (std::size_t i = 0; i < mapnum; ++i) {
    if ((kinds[i] & 0xff) != map_firstprivate) continue;
    const std::size_t a = std::size_t(1) << (kinds[i] >> 8);
    align = std::max(align, a);
    size = (size + a - 1) / a * a + sizes[i];
  }
  if (size == 0) return nullptr;
  std::unique_ptr<unsigned char[]> block(new unsigned char[size + align]);
  auto base = reinterpret_cast<std::uintptr_t>(block.get());
  base = (base + align - 1) / align * align;
  std::size_t at = 0;
  for (std::size_t i = 0; i < mapnum; ++i) {
    if ((kinds[i] & 0xff) != map_firstprivate || hostaddrs[i] == nullptr) continue;
    const std::size_t a = std::size_t(1) << (kinds[i] >> 8);
    at = (at + a - 1) / a * a;
    auto* to = reinterpret_cast<void*>(base + at);
    std::memcpy(to, hostaddrs[i], sizes[i]);
    hostaddrs[i] = to;
    at += sizes[i];
  }
  return block;
}

// The thread_limit a target construct passes among GOMP_target_ext's
// arguments (0: none).
int thread_limit_of(void** args) {
  if (args == nullptr) return 0;
  while (*args != nullptr) {
    const auto id = reinterpret_cast<std::intptr_t>(*args++);
    std::intptr_t value = 0;
    if ((id & arg_subsequent_param) != 0)
      value = reinterpret_cast<std::intptr_t>(*args++);
    else
      value = id >> arg_value_shift;
    if ((id & arg_device_mask) != 0 || (id & arg_id_mask) != arg_thread_limit) continue;
    return value > INT_MAX ? INT_MAX : int(value);
  }
  return 0;
}

// Runs a target region's body as the initial thread of a device that is
// the host: level 0, no team, the initial ICVs; on the encountering
// thread's logical thread and PE, which a parallel region inside then
// starts from.
void run_on_host(void (*fn)(void*), void** hostaddrs, int thread_limit) {
  thread_state& outer = current();
  thread_state inner;
  inner.icv = globals().initial;
  if (thread_limit > 0) inner.icv.thread_limit = thread_limit;
  inner.ult = outer.ult;
  inner.pe = outer.pe;
  thread_state* before = swap_current(&inner);
  fn(hostaddrs);
  set_current(before);
}

// A teams construct's league: runs the body once per team on the calling
// thread, restoring its team number and thread-limit-var after.
void run_league(void (*fn)(void*), void* data, unsigned num_teams, unsigned thread_limit) {
  thread_state& me = current();
  const unsigned saved_num = me.team_num, saved_count = me.num_teams;
  const int saved_limit = me.icv.thread_limit;
  if (thread_limit == 0) thread_limit = unsigned(globals().teams_thread_limit.load());
  if (thread_limit != 0) me.icv.thread_limit = thread_limit > INT_MAX ? INT_MAX : int(thread_limit);
  if (num_teams == 0) {
    const int n = globals().num_teams.load();
    num_teams = n > 0 ? unsigned(n) : 1;
  }
  me.num_teams = num_teams;
  for (unsigned i = 0; i < num_teams; ++i) {
    me.team_num = i;
    fn(data);
  }
  me.team_num = saved_num;
  me.num_teams = saved_count;
  me.icv.thread_limit = saved_limit;
}

}  // namespace

extern "C" {

// ---- teams ---------------------------------------------------------------------------

// A host teams construct (outside a target region): GCC outlines the body.
WEFT_GOMP void GOMP_teams_reg(void (*fn)(void*), void* data, unsigned num_teams,
                              unsigned thread_limit, unsigned flags) {
  (void)flags;
  run_league(fn, data, num_teams, thread_limit);
}

// A teams construct inside a target region: GCC loops over the body while
// this answers true (first: the first team; then the next, until the
// league is done). The target region's initial thread is its own, so what
// it sets lasts until the region ends.
WEFT_GOMP bool GOMP_teams4(unsigned num_teams_low, unsigned num_teams_high, unsigned thread_limit,
                           bool first) {
  (void)num_teams_high;
  thread_state& me = current();
  if (first) {
    if (thread_limit != 0)
      me.icv.thread_limit = thread_limit > INT_MAX ? INT_MAX : int(thread_limit);
    me.num_teams = num_teams_low != 0 ? num_teams_low : 1;
    me.team_num = 0;
    return true;
  }
  if (me.team_num + 1 >= me.num_teams) return false;
  ++me.team_num;
  return true;
}

// GCC before 12, in a target region: one team.
WEFT_GOMP void GOMP_teams(unsigned num_teams, unsigned thread_limit) {
  (void)num_teams;
  if (thread_limit != 0)
    icv_for_write(current()).thread_limit = thread_limit > INT_MAX ? INT_MAX : int(thread_limit);
}

WEFT_GOMP int omp_get_num_teams() {
  return int(current().num_teams);
}
WEFT_GOMP int omp_get_team_num() {
  return int(current().team_num);
}
WEFT_GOMP void omp_set_num_teams(int n) {
  if (n >= 0) globals().num_teams.store(n, std::memory_order_relaxed);
}
WEFT_GOMP int omp_get_max_teams() {
  return globals().num_teams.load(std::memory_order_relaxed);
}
WEFT_GOMP void omp_set_teams_thread_limit(int n) {
  if (n >= 0) globals().teams_thread_limit.store(n, std::memory_order_relaxed);
}
WEFT_GOMP int omp_get_teams_thread_limit() {
  return globals().teams_thread_limit.load(std::memory_order_relaxed);
}

// ---- target regions ------------------------------------------------------------------

WEFT_GOMP void GOMP_target_ext(int device, void (*fn)(void*), std::size_t mapnum, void** hostaddrs,
                               std::size_t* sizes, unsigned short* kinds, unsigned flags,
                               void** depend, void** args) {
  (void)flags;  // nowait: the target task runs at once, once its predecessors are done
  check_device(device, "target");
  // Firstprivate values are the construct's, before any wait.
  const auto copies = copy_firstprivates(mapnum, hostaddrs, sizes, kinds);
  if (depend != nullptr) GOMP_taskwait_depend(depend);
  run_on_host(fn, hostaddrs, thread_limit_of(args));
}

// GCC before 5 (no firstprivate, no arguments).
WEFT_GOMP void GOMP_target(int device, void (*fn)(void*), const void* unused, std::size_t mapnum,
                           void** hostaddrs, std::size_t* sizes, unsigned char* kinds) {
  (void)unused, (void)mapnum, (void)sizes, (void)kinds;
  check_device(device, "target");
  run_on_host(fn, hostaddrs, 0);
}

WEFT_GOMP void GOMP_target_data_ext(int device, std::size_t, void**, std::size_t*,
                                    unsigned short*) {
  check_device(device, "target data");
}
WEFT_GOMP void GOMP_target_data(int device, const void*, std::size_t, void**, std::size_t*,
                                unsigned char*) {
  check_device(device, "target data");
}
WEFT_GOMP void GOMP_target_end_data() {}

WEFT_GOMP void GOMP_target_update_ext(int device, std::size_t, void**, std::size_t*,
                                      unsigned short*, unsigned, void** depend) {
  check_device(device, "target update");
  if (depend != nullptr) GOMP_taskwait_depend(depend);
}
WEFT_GOMP void GOMP_target_update(int device, const void*, std::size_t, void**, std::size_t*,
                                  unsigned char*) {
  check_device(device, "target update");
}
WEFT_GOMP void GOMP_target_enter_exit_data(int device, std::size_t, void**, std::size_t*,
                                           unsigned short*, unsigned, void** depend) {
  check_device(device, "target enter/exit data");
  if (depend != nullptr) GOMP_taskwait_depend(depend);
}

// A program built where GCC has offload compilers registers its device
// images at start; weft has no device to load them on.
WEFT_GOMP void GOMP_offload_register_ver(unsigned, const void*, int, const void*) {}
WEFT_GOMP void GOMP_offload_unregister_ver(unsigned, const void*, int, const void*) {}
WEFT_GOMP void GOMP_offload_register(const void*, int, const void*) {}
WEFT_GOMP void GOMP_offload_unregister(const void*, int, const void*) {}

// ---- device memory routines: the host is the only device -----------------------------

WEFT_GOMP int omp_get_device_num() {
  return host_device;
}
WEFT_GOMP void* omp_target_alloc(std::size_t size, int device) {
  return device == host_device ? std::malloc(size) : nullptr;
}
WEFT_GOMP void omp_target_free(void* p, int device) {
  if (device == host_device) std::free(p);
}
WEFT_GOMP int omp_target_is_present(const void* p, int device) {
  return p == nullptr || device == host_device ? 1 : 0;
}
WEFT_GOMP int omp_target_is_accessible(const void*, std::size_t, int device) {
  return device == host_device ? 1 : 0;
}
WEFT_GOMP void* omp_get_mapped_ptr(const void* p, int device) {
  return device == host_device ? const_cast<void*>(p) : nullptr;
}
WEFT_GOMP int omp_target_memcpy(void* dst, const void* src, std::size_t length,
                                std::size_t dst_offset, std::size_t src_offset, int dst_device,
                                int src_device) {
  if (dst_device != host_device || src_device != host_device) return EINVAL;
  std::memmove(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset,
               length);
  return 0;
}
}  // extern "C"

namespace {
// One dimension of omp_target_memcpy_rect after another, the last one a
// contiguous run.
void copy_rect(char* dst, const char* src, std::size_t element, int dims, const std::size_t* volume,
               const std::size_t* dst_off, const std::size_t* src_off, const std::size_t* dst_dims,
               const std::size_t* src_dims) {
  if (dims == 1) {
    std::memmove(dst + dst_off[0] * element, src + src_off[0] * element, volume[0] * element);
    return;
  }
  std::size_t dst_stride = element, src_stride = element;
  for (int d = 1; d < dims; ++d) {
    dst_stride *= dst_dims[d];
    src_stride *= src_dims[d];
  }
  for (std::size_t i = 0; i < volume[0]; ++i)
    copy_rect(dst + (dst_off[0] + i) * dst_stride, src + (src_off[0] + i) * src_stride, element,
              dims - 1, volume + 1, dst_off + 1, src_off + 1, dst_dims + 1, src_dims + 1);
}
}  // namespace

extern "C" {
WEFT_GOMP int omp_target_memcpy_rect(void* dst, const void* src, std::size_t element_size,
                                     int num_dims, const std::size_t* volume,
                                     const std::size_t* dst_offsets, const std::size_t* src_offsets,
                                     const std::size_t* dst_dimensions,
                                     const std::size_t* src_dimensions, int dst_device,
                                     int src_device) {
  // Both null: the number of dimensions supported.
  if (dst == nullptr && src == nullptr) return INT_MAX;
  if (dst == nullptr || src == nullptr || num_dims < 1) return EINVAL;
  if (dst_device != host_device || src_device != host_device) return EINVAL;
  copy_rect(static_cast<char*>(dst), static_cast<const char*>(src), element_size, num_dims, volume,
            dst_offsets, src_offsets, dst_dimensions, src_dimensions);
  return 0;
}
// A host pointer is its own device pointer: nothing to associate.
WEFT_GOMP int omp_target_associate_ptr(const void*, const void*, std::size_t, std::size_t, int) {
  return EINVAL;
}
WEFT_GOMP int omp_target_disassociate_ptr(const void*, int) {
  return EINVAL;
}
}  // extern "C"
