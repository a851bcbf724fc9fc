#include "weft/base/memory.hpp"

#include <dlfcn.h>
#include <mimalloc.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include "weft/base/error.hpp"
#include "weft/config.hpp"

namespace weft::base {

namespace {
// Written once before weft threads start, read-only afterwards.
raw_allocator g_alloc = raw_allocator::mimalloc;
bool g_pool = true;

constexpr int num_classes = 11;  // 128 B << 0 .. 128 B << 10 = 128 KiB
// Cap per class: enough blocks for a burst of kNeighbor-style traffic, small
// enough (<= 1 MiB per class) that idle PEs do not hold much memory.
constexpr std::size_t cap_bytes = 1u << 20;
constexpr std::size_t cap_min_blocks = 64;

static_assert(block_min == 128 && (block_min << (num_classes - 1)) == block_max);

inline std::uint8_t class_of(std::size_t bytes) {
  if (bytes <= block_min) return 0;
  int c = 64 - __builtin_clzll(bytes - 1) - 7;  // ceil(log2(bytes)) - log2(block_min)
  return std::uint8_t(c);
}
inline std::size_t class_bytes(std::uint8_t c) {
  return block_min << c;
}
// The cap of each class, worked out once: block_free used to divide for it
// on every free.
constexpr auto class_caps = [] {
  std::array<std::size_t, num_classes> caps{};
  for (int c = 0; c < num_classes; ++c)
    caps[std::size_t(c)] = std::max(cap_min_blocks, cap_bytes / (block_min << c));
  return caps;
}();

// Free blocks are linked through their first word.
struct free_block {
  free_block* next;
};

struct block_cache {
  free_block* head[num_classes] = {};
  std::size_t count[num_classes] = {};
  ~block_cache() { release(); }
  void release() {
    for (int c = 0; c < num_classes; ++c) {
      while (free_block* b = head[c]) {
        head[c] = b->next;
        raw_free(b);
      }
      count[c] = 0;
    }
  }
};

// PE-private: thread_local, never an array indexed by PE (lesson 4).
thread_local block_cache t_cache WEFT_TLS_FAST;
}  // namespace

// Debian's libmimalloc exports malloc and free itself, so in a program linked
// with it a plain malloc() is mimalloc. "system" must mean glibc's allocator,
// so its functions are looked up in libc.so.6 itself. Sanitizer builds keep
// plain malloc: it is the sanitizer's, which must see every allocation.
using malloc_fn = void* (*)(std::size_t);
using free_fn = void (*)(void*);
malloc_fn g_sys_malloc = std::malloc;
free_fn g_sys_free = std::free;

void resolve_system_allocator() {
  if (build_info::sanitizer[0] != '\0') return;
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libc == nullptr) return;  // not glibc: plain malloc is the system's
  auto m = reinterpret_cast<malloc_fn>(dlsym(libc, "malloc"));
  auto f = reinterpret_cast<free_fn>(dlsym(libc, "free"));
  if (m != nullptr && f != nullptr) {
    g_sys_malloc = m;
    g_sys_free = f;
  }
}

void select_allocator(raw_allocator a) {
  static bool resolved = false;
  if (!resolved) {
    resolve_system_allocator();
    resolved = true;
  }
  // Cached blocks belong to the allocator that made them: hand the calling
  // thread's back before switching (weft threads release theirs as they end).
  if (a != g_alloc) block_cache_release();
  g_alloc = a;
}
raw_allocator selected_allocator() {
  return g_alloc;
}
void set_block_pool(bool enabled) {
  g_pool = enabled;
}

void* raw_alloc(std::size_t bytes) {
  // Both return 16-byte aligned blocks on x86-64 and aarch64 (glibc's
  // MALLOC_ALIGNMENT, mimalloc's MI_MAX_ALIGN_SIZE).
  void* p = g_alloc == raw_allocator::mimalloc ? mi_malloc(bytes) : g_sys_malloc(bytes);
  if (p == nullptr) fatal("out of memory allocating %zu bytes", bytes);
  return p;
}

void raw_free(void* p) {
  raw_free_from(g_alloc, p);
}

void raw_free_from(raw_allocator a, void* p) {
  if (p == nullptr) return;
  if (a == raw_allocator::mimalloc)
    mi_free(p);
  else
    g_sys_free(p);
}

// Registered memory for large blocks (set by core around the transport's
// lifetime). Each block it gives out starts with the address of the
// registered_memory it came from, so that it returns there even after
// another one was set (a new run in the same process).
std::atomic<registered_memory*> g_registered{nullptr};
constexpr std::size_t registered_prefix = 16;  // keeps blocks 16-byte aligned

// Its min_bytes(), read once when it is set: block_alloc compares every
// size with it, and a virtual call per message was most of the test for
// the small ones. No memory set: nothing is that large.
std::atomic<std::size_t> g_registered_min{~std::size_t(0)};

void set_registered_memory(registered_memory* m) {
  g_registered_min.store(~std::size_t(0), std::memory_order_relaxed);
  g_registered.store(m, std::memory_order_release);
  if (m != nullptr) g_registered_min.store(m->min_bytes(), std::memory_order_relaxed);
}

// A block's prefix: [0, 8) the registered_memory it returns to in this
// process; [8, 16) the owner's word while another process's memory has
// adopted it (registered_block_adopt).
void registered_block_adopt(void* start, registered_memory* by) {
  auto* prefix = static_cast<unsigned char*>(start);
  std::memcpy(prefix + 8, prefix, sizeof by);
  std::memcpy(prefix, &by, sizeof by);
}

void registered_block_restore(void* start) {
  auto* prefix = static_cast<unsigned char*>(start);
  std::memcpy(prefix, prefix + 8, sizeof(registered_memory*));
}

void* block_alloc(std::size_t bytes, std::uint8_t& size_class) {
  if (bytes >= g_registered_min.load(std::memory_order_relaxed)) [[unlikely]] {
    registered_memory* r = g_registered.load(std::memory_order_acquire);
    if (void* p = r != nullptr ? r->allocate(bytes + registered_prefix) : nullptr) {
      std::memcpy(p, &r, sizeof r);
      size_class = block_registered;
      return static_cast<unsigned char*>(p) + registered_prefix;
    }
  }
  if (!g_pool || bytes > block_max) {
    size_class = block_unpooled;
    return raw_alloc(bytes);
  }
  std::uint8_t c = class_of(bytes);
  size_class = c;
  block_cache& cache = t_cache;
  if (free_block* b = cache.head[c]) {
    cache.head[c] = b->next;
    --cache.count[c];
    return b;
  }
  return raw_alloc(class_bytes(c));
}

std::uint8_t block_class_of(const void* block, std::size_t bytes) {
  registered_memory* r = g_registered.load(std::memory_order_acquire);
  if (r != nullptr && bytes >= r->min_bytes() && r->contains(block)) return block_registered;
  return !g_pool || bytes > block_max ? block_unpooled : class_of(bytes);
}

void block_free(void* p, std::uint8_t size_class) {
  if (size_class == block_registered) {
    void* start = static_cast<unsigned char*>(p) - registered_prefix;
    registered_memory* r = nullptr;
    std::memcpy(&r, start, sizeof r);
    r->deallocate(start);
    return;
  }
  if (size_class == block_unpooled || !g_pool) {
    raw_free(p);
    return;
  }
  block_cache& cache = t_cache;
  if (cache.count[size_class] >= class_caps[size_class]) {
    raw_free(p);
    return;
  }
  auto* b = static_cast<free_block*>(p);
  b->next = cache.head[size_class];
  cache.head[size_class] = b;
  ++cache.count[size_class];
}

void block_cache_release() {
  t_cache.release();
}

}  // namespace weft::base
