// OpenMP memory allocators (OpenMP 5.0, 2.11 and 3.7) and
// omp_pause_resource, as libgomp 12 provides them on a host without special
// memory: every memory space is the C library's heap, and an allocator is
// a set of traits over it.
//
// A block is malloc'd with a header just below the address handed out:
// where the malloc'd block starts, how many bytes it took and the
// allocator it came from. omp_free and omp_realloc need nothing more than
// the pointer (OpenMP lets them ignore the allocator argument; libgomp
// does), and a block taken under an allocator_fb chain or default_mem_fb
// is charged to, and given back to, the allocator that really served it.
// libgomp places the same header; the layout (32 bytes, alignment below
// sizeof(void*) raised to it, an alignment above it paid for with
// `alignment - sizeof(void*)` bytes more) is kept alike so that a pool
// fills at the same allocation under both runtimes -- programs that probe
// a pool's edge (libgomp's own tests do) see the same answers.
//
// Handles: 0 is omp_null_allocator, 1..8 the predefined allocators, any
// larger value an allocator_data made by omp_init_allocator. The
// predefined ones are all plain malloc with no pool and no fallback (what
// libgomp 12 does: no high-bandwidth, low-latency or pinned memory here).
#include <strings.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/threads/ult.hpp"

using namespace weft::omp;

namespace {

// The values of GCC 12's <omp.h> (omp_allocator_handle_t,
// omp_memspace_handle_t, omp_alloctrait_key_t, omp_alloctrait_value_t).
constexpr std::uintptr_t null_allocator = 0, default_mem_alloc = 1, last_predefined = 8;
constexpr std::uintptr_t high_bw_mem_space = 3, low_lat_mem_space = 4;
enum trait_key : int {
  atk_sync_hint = 1,
  atk_alignment = 2,
  atk_access = 3,
  atk_pool_size = 4,
  atk_fallback = 5,
  atk_fb_data = 6,
  atk_pinned = 7,
  atk_partition = 8
};
constexpr std::uintptr_t atv_default = ~std::uintptr_t(0);
enum trait_value : std::uintptr_t {
  atv_false = 0,
  atv_true = 1,
  atv_contended = 3,
  atv_uncontended = 4,
  atv_serialized = 5,
  atv_private = 6,
  atv_all = 7,
  atv_thread = 8,
  atv_pteam = 9,
  atv_cgroup = 10,
  atv_default_mem_fb = 11,
  atv_null_fb = 12,
  atv_abort_fb = 13,
  atv_allocator_fb = 14,
  atv_environment = 15,
  atv_nearest = 16,
  atv_blocked = 17,
  atv_interleaved = 18
};

struct alloctrait {
  int key;
  std::uintptr_t value;
};

constexpr std::uintptr_t unlimited = ~std::uintptr_t(0);

// An allocator of omp_init_allocator. Its traits are written once, before
// the handle is returned, and only read after; `used` is the one field
// that changes, by every thread allocating from or freeing to the pool.
struct allocator_data {
  std::uintptr_t memspace = 0;
  std::size_t alignment = sizeof(void*);
  std::uintptr_t pool_size = unlimited;
  std::uintptr_t fallback = atv_default_mem_fb;
  std::uintptr_t fb_data = null_allocator;
  // Accepted and kept, with no effect: one heap, no NUMA placement, and
  // the pool's counter is lock-free whatever the sync hint says.
  std::uintptr_t sync_hint = atv_contended, access = atv_all, partition = atv_environment;
  // Bytes of the pool in use (headers and alignment padding included):
  // its own cache line, so that the writes of allocating threads do not
  // evict the traits every allocation reads.
  alignas(weft::base::cache_line) std::atomic<std::uintptr_t> used{0};

  bool pooled() const noexcept { return pool_size != unlimited; }
};

allocator_data* data_of(std::uintptr_t a) noexcept {
  return a > last_predefined ? reinterpret_cast<allocator_data*>(a) : nullptr;
}

// Below each block handed out.
struct block_header {
  void* base;             // what malloc returned
  std::size_t bytes;      // what was asked of malloc (charged to a pool)
  std::uintptr_t owner;   // the allocator that served it
  std::uintptr_t unused;  // keeps the header 32 bytes, as libgomp's
};
static_assert(sizeof(block_header) == 32);

block_header& header_of(void* p) noexcept {
  return static_cast<block_header*>(p)[-1];
}

// Charges `bytes` to a pool: false (nothing charged) when it would go past
// pool_size. A compare-and-swap loop, not a lock: one atomic
// read-modify-write when threads do not collide, and a thread retries only
// because another one's charge or refund landed first, whatever the
// thread count. A fetch_add that backs out on overflow would cost one
// operation always, but two threads each backing out could both fail where
// either alone fits -- and under abort_fb that ends a program whose
// allocations fit in either order.
bool charge(allocator_data& d, std::size_t bytes) noexcept {
  if (bytes > d.pool_size) return false;
  std::uintptr_t used = d.used.load(std::memory_order_relaxed);
  do {
    if (used > d.pool_size - bytes) return false;
  } while (!d.used.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}
void refund(allocator_data& d, std::size_t bytes) noexcept {
  d.used.fetch_sub(bytes, std::memory_order_relaxed);
}

// The calling thread's def-allocator-var: an implicit task's starts as
// its parent's (thread_state::icv is copied at a region's start).
std::uintptr_t default_allocator() {
  std::uintptr_t a = current().icv.def_allocator;
  return a == null_allocator ? default_mem_alloc : a;
}

// The alignment a block from `a` gets for a request of `align`.
std::size_t effective_alignment(std::size_t align, const allocator_data* d) noexcept {
  if (d != nullptr && align < d->alignment) align = d->alignment;
  return align < sizeof(void*) ? sizeof(void*) : align;
}

// What malloc is asked for a block of `size` bytes aligned to `align`
// (false: it overflows).
bool block_bytes(std::size_t size, std::size_t align, std::size_t& bytes) noexcept {
  std::size_t extra = sizeof(block_header);
  if (align > sizeof(void*)) extra += align - sizeof(void*);
  return !__builtin_add_overflow(size, extra, &bytes);
}

void* place(void* base, std::size_t bytes, std::size_t align, std::uintptr_t owner) noexcept {
  auto at = reinterpret_cast<std::uintptr_t>(base) + sizeof(block_header);
  if (align > sizeof(void*)) at = (at + align - sizeof(void*)) & ~std::uintptr_t(align - 1);
  void* p = reinterpret_cast<void*>(at);
  header_of(p) = {base, bytes, owner, 0};
  return p;
}

[[noreturn]] void out_of_memory(std::size_t size) {
  // libgomp exits with EXIT_FAILURE here, and programs (and their test
  // harnesses) may look at the code: the same one, not weft's fatal 3.
  weft::base::error("libweft-omp: out of memory allocating %zu bytes", size);
  std::exit(EXIT_FAILURE);
}

// What a failed allocation from `*a` (an allocator_data) does next: true
// with *a the allocator to retry with; false to return null. `asked` is
// the caller's alignment: default_mem_fb retries with the default
// allocator only where that could succeed where `*a` did not (a pool, or
// an alignment trait above the request); else the heap already said no.
bool fall_back(std::uintptr_t& a, std::size_t asked, std::size_t size) {
  const allocator_data& d = *data_of(a);
  switch (d.fallback) {
    case atv_default_mem_fb:
      if (!d.pooled() && effective_alignment(asked, &d) == effective_alignment(asked, nullptr))
        return false;
      a = default_mem_alloc;
      return true;
    case atv_null_fb:
      return false;
    case atv_allocator_fb:
      a = d.fb_data;  // omp_null_allocator: the thread's default one
      return true;
    default:
      out_of_memory(size);
  }
}

void* allocate(std::size_t align, std::size_t size, std::uintptr_t a, bool zero) {
  for (;;) {
    if (a == null_allocator) a = default_allocator();
    allocator_data* d = data_of(a);
    const std::size_t alignment = effective_alignment(align, d);
    std::size_t bytes = 0;
    if (block_bytes(size, alignment, bytes)) {
      const bool pooled = d != nullptr && d->pooled();
      if (!pooled || charge(*d, bytes)) {
        void* base = zero ? std::calloc(1, bytes) : std::malloc(bytes);
        if (base != nullptr) return place(base, bytes, alignment, a);
        if (pooled) refund(*d, bytes);
      }
    }
    if (d == nullptr || !fall_back(a, align, size)) return nullptr;
  }
}

// An alignment argument OpenMP requires to be a power of two; anything
// else is taken as no request (libgomp rounds nothing either).
std::size_t requested_alignment(std::size_t align) noexcept {
  return align != 0 && (align & (align - 1)) == 0 ? align : 1;
}

// omp_realloc of a block `p` with its header `h`, to `size` bytes from `a`.
void* reallocate(void* p, std::size_t size, std::uintptr_t a) {
  block_header& h = header_of(p);
  const std::uintptr_t from = h.owner;
  allocator_data* old_d = data_of(from);
  const std::size_t old_offset = std::size_t(static_cast<char*>(p) - static_cast<char*>(h.base));
  for (;;) {
    if (a == null_allocator) a = from;
    allocator_data* d = data_of(a);
    const std::size_t alignment = effective_alignment(1, d);
    std::size_t bytes = 0;
    if (block_bytes(size, alignment, bytes)) {
      const bool pooled = d != nullptr && d->pooled();
      // realloc keeps the block in place where no padding is at stake (it
      // may move it to a different alignment) and no pool would be charged
      // for a block another one paid for.
      const bool in_place = alignment == sizeof(void*) && old_offset == sizeof(block_header) &&
                            (d == old_d || (!pooled && (old_d == nullptr || !old_d->pooled())));
      if (in_place) {
        const std::size_t old_bytes = h.bytes;
        const bool grow = pooled && bytes > old_bytes;
        if (!grow || charge(*d, bytes - old_bytes)) {
          if (void* base = std::realloc(h.base, bytes)) {
            if (pooled && bytes < old_bytes) refund(*d, old_bytes - bytes);
            return place(base, bytes, alignment, a);
          }
          if (grow) refund(*d, bytes - old_bytes);
        }
      } else if (!pooled || charge(*d, bytes)) {
        if (void* base = std::malloc(bytes)) {
          void* q = place(base, bytes, alignment, a);
          std::memcpy(q, p, std::min(size, h.bytes - old_offset));
          if (old_d != nullptr && old_d->pooled()) refund(*old_d, h.bytes);
          std::free(h.base);
          return q;
        }
        if (pooled) refund(*d, bytes);
      }
    }
    if (d == nullptr || !fall_back(a, 1, size)) return nullptr;
  }
}

bool starts_with_nocase(const char*& s, const char* word) {
  const std::size_t n = std::strlen(word);
  if (strncasecmp(s, word, n) != 0) return false;
  s += n;
  return true;
}

const char* const predefined_names[] = {"omp_default_mem_alloc", "omp_large_cap_mem_alloc",
                                        "omp_const_mem_alloc",   "omp_high_bw_mem_alloc",
                                        "omp_low_lat_mem_alloc", "omp_cgroup_mem_alloc",
                                        "omp_pteam_mem_alloc",   "omp_thread_mem_alloc"};

}  // namespace

namespace weft::omp {

std::uintptr_t parse_allocator(const char* var, const char* v) {
  const char* s = v;
  while (std::isspace(static_cast<unsigned char>(*s))) ++s;
  for (std::uintptr_t a = 1; a <= last_predefined; ++a) {
    const char* rest = s;
    if (!starts_with_nocase(rest, predefined_names[a - 1])) continue;
    while (std::isspace(static_cast<unsigned char>(*rest))) ++rest;
    if (*rest == '\0') return a;
  }
  base::warn(
      "invalid value for environment variable %s=%s (expected the name of a predefined "
      "allocator, e.g. omp_default_mem_alloc); ignored, as libgomp does",
      var, v);
  return default_mem_alloc;
}

const char* allocator_name(std::uintptr_t a) {
  return a >= 1 && a <= last_predefined ? predefined_names[a - 1] : "omp_default_mem_alloc";
}

}  // namespace weft::omp

extern "C" {

WEFT_GOMP std::uintptr_t omp_init_allocator(std::uintptr_t memspace, int ntraits,
                                            const alloctrait* traits) {
  // As libgomp 12: a memory space it does not know, a trait or value it
  // does not know, or what this host cannot give (pinned memory, the
  // high-bandwidth space) makes no allocator.
  if (memspace > low_lat_mem_space || memspace == high_bw_mem_space) return null_allocator;
  allocator_data d;
  d.memspace = memspace;
  const auto one_of = [](std::uintptr_t v, std::initializer_list<std::uintptr_t> ok) {
    for (std::uintptr_t o : ok)
      if (v == o) return true;
    return false;
  };
  for (int i = 0; i < ntraits; ++i) {
    const std::uintptr_t v = traits[i].value;
    switch (traits[i].key) {
      case atk_sync_hint:
        if (v == atv_default)
          d.sync_hint = atv_contended;
        else if (one_of(v, {atv_contended, atv_uncontended, atv_serialized, atv_private}))
          d.sync_hint = v;
        else
          return null_allocator;
        break;
      case atk_alignment:
        if (v == atv_default)
          d.alignment = 1;
        else if (v != 0 && (v & (v - 1)) == 0)
          d.alignment = v;
        else
          return null_allocator;
        break;
      case atk_access:
        if (v == atv_default)
          d.access = atv_all;
        else if (one_of(v, {atv_all, atv_cgroup, atv_pteam, atv_thread}))
          d.access = v;
        else
          return null_allocator;
        break;
      case atk_pool_size:
        d.pool_size = v;  // atv_default is `unlimited`
        break;
      case atk_fallback:
        if (v == atv_default)
          d.fallback = atv_default_mem_fb;
        else if (one_of(v, {atv_default_mem_fb, atv_null_fb, atv_abort_fb, atv_allocator_fb}))
          d.fallback = v;
        else
          return null_allocator;
        break;
      case atk_fb_data:
        d.fb_data = v;
        break;
      case atk_pinned:
        if (v == atv_true) return null_allocator;  // no pinned memory here
        if (v != atv_default && v != atv_false) return null_allocator;
        break;
      case atk_partition:
        if (v == atv_default)
          d.partition = atv_environment;
        else if (one_of(v, {atv_environment, atv_nearest, atv_blocked, atv_interleaved}))
          d.partition = v;
        else
          return null_allocator;
        break;
      default:
        return null_allocator;
    }
  }
  if (d.alignment < sizeof(void*)) d.alignment = sizeof(void*);
  auto* made = new (std::nothrow) allocator_data;
  if (made == nullptr) return null_allocator;
  made->memspace = d.memspace;
  made->alignment = d.alignment;
  made->pool_size = d.pool_size;
  made->fallback = d.fallback;
  made->fb_data = d.fb_data;
  made->sync_hint = d.sync_hint;
  made->access = d.access;
  made->partition = d.partition;
  return reinterpret_cast<std::uintptr_t>(made);
}

// Blocks still allocated from it are the program's error (OpenMP: the
// behaviour is unspecified); freeing one later would read freed traits.
WEFT_GOMP void omp_destroy_allocator(std::uintptr_t a) {
  delete data_of(a);
}

// def-allocator-var of the calling thread (the implicit task it runs).
WEFT_GOMP void omp_set_default_allocator(std::uintptr_t a) {
  icv_for_write(current()).def_allocator = a == null_allocator ? default_mem_alloc : a;
}
WEFT_GOMP std::uintptr_t omp_get_default_allocator() {
  return default_allocator();
}

WEFT_GOMP void* omp_aligned_alloc(std::size_t align, std::size_t size, std::uintptr_t a) {
  if (size == 0) return nullptr;
  return allocate(requested_alignment(align), size, a, false);
}
WEFT_GOMP void* omp_alloc(std::size_t size, std::uintptr_t a) {
  return omp_aligned_alloc(1, size, a);
}
WEFT_GOMP void* omp_aligned_calloc(std::size_t align, std::size_t n, std::size_t size,
                                   std::uintptr_t a) {
  if (n == 0 || size == 0) return nullptr;
  std::size_t total = 0;
  if (__builtin_mul_overflow(n, size, &total)) total = ~std::size_t(0);  // fails, then falls back
  return allocate(requested_alignment(align), total, a, true);
}
WEFT_GOMP void* omp_calloc(std::size_t n, std::size_t size, std::uintptr_t a) {
  return omp_aligned_calloc(1, n, size, a);
}

// The allocator argument may be omp_null_allocator or any other: the
// header says where the block came from.
WEFT_GOMP void omp_free(void* p, std::uintptr_t) {
  if (p == nullptr) return;
  const block_header& h = header_of(p);
  if (allocator_data* d = data_of(h.owner); d != nullptr && d->pooled()) refund(*d, h.bytes);
  std::free(h.base);
}

// The new block comes from `a` (omp_null_allocator: the one `p` came
// from); `free_a` is not needed (the header names p's allocator).
WEFT_GOMP void* omp_realloc(void* p, std::size_t size, std::uintptr_t a, std::uintptr_t free_a) {
  if (p == nullptr) return omp_aligned_alloc(1, size, a);
  if (size == 0) {
    omp_free(p, free_a);
    return nullptr;
  }
  return reallocate(p, size, a);
}

// The `allocate` clause and directive: OpenMP makes a null_fb behave as
// abort_fb for them, so a failure never returns.
WEFT_GOMP void* GOMP_alloc(std::size_t align, std::size_t size, std::uintptr_t a) {
  void* p = omp_aligned_alloc(align, size, a);
  if (p == nullptr && size != 0) out_of_memory(size);
  return p;
}
WEFT_GOMP void GOMP_free(void* p, std::uintptr_t a) {
  omp_free(p, a);
}

// Pausing the host (device number omp_get_initial_device(), 0 here: there
// are no other devices). libgomp joins its pool's threads at either kind
// of pause, and the next region makes new ones: programs see the other
// threads' threadprivate copies start afresh (libgomp's own pause test
// checks it). Here, the attached node of a plain OpenMP program
// (docs/omp.md) is what holds threads and CPUs between regions, and it is
// stopped the same way, at either kind: the next region starts a fresh one
// as the program's first region did (a node start, milliseconds, and the
// same startup warnings again). Keeping the node (return 0, releasing
// nothing) is what OpenMP requires at least, but a program that pauses to
// give its CPUs back to another one (the reason the routine exists) would
// keep weft's PEs. A node that a weft program runs (weft::run) is the
// program's, not OpenMP's: never stopped here, the pause only returns 0.
// As with libgomp, a pause from inside a parallel region fails.
WEFT_GOMP int omp_pause_resource(int, int device) {
  if (device != 0) return -1;
  if (current().level > 0) return -1;
  if (weft::detail::attached_node_runs() && weft::my_rank() == 0 && !weft::threads::on_carrier() &&
      weft::threads::current_pe() >= 0)
    weft::detail::stop_attached_node();
  return 0;
}
WEFT_GOMP int omp_pause_resource_all(int kind) {
  return omp_pause_resource(kind, 0);
}

}  // extern "C"
