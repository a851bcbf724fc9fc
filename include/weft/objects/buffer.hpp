// weft::buffer<T>: a move-only, owning, contiguous array of trivially
// copyable T whose serialization can hand the memory over instead of copying
// it.
//
//   weft::buffer<double> field(1 << 20);      // uninitialized, like new T[n]
//   for (double& x : field) x = 0.0;
//   struct Msg { weft::buffer<double> field; void pup(weft::pupper& p) { p | field; } };
//
// Memory comes from weft's message blocks (base/memory.hpp): a PE that
// frees a buffer keeps the block for its next buffer or message, so a small
// buffer handed to another PE costs what a message costs, not a malloc and a
// cross-thread free. A buffer may also adopt memory made by `new T[]`.
//
// How `p | buf` serializes depends on the pupper's reach (see pup.hpp):
//
// - reach::anywhere (the default: checkpoints, other nodes): a length, then
//   the elements as raw bytes in one memcpy. Unpacking checks the length
//   against the bytes left before allocating exactly that many elements.
//   The source buffer is left untouched.
//
// - reach::this_process: the bytes hold the pointer and the element count
//   (sizeof(T*) + 8 bytes, whatever the size of the data; the top bit of the
//   count says how the memory was made). Packing RELEASES
//   the source buffer — it becomes empty — and from then on the memory
//   belongs to the packed bytes. Unpacking adopts the pointer: no copy at
//   all, the unpacked buffer's data() is the source's old data().
//
//   Consequences, which callers of a this_process packer must respect:
//     * such bytes must be unpacked EXACTLY ONCE, in the SAME process.
//       Never unpacked (a message dropped, a packing pass that throws after
//       the buffer was written) means the block leaks; unpacked twice means
//       two owners and a double delete; unpacked in another process means a
//       dangling pointer.
//     * such bytes must never come from outside the process: unpacking only
//       checks that a non-zero count does not come with a null pointer, it
//       cannot check that the pointer is real.
//     * packing mutates the buffer being packed, so do not pack a buffer that
//       was declared const (weft::pack/to_bytes take `const&` and cast it
//       away, which is fine for a non-const object only).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include "weft/base/memory.hpp"
#include "weft/objects/detail/type_name.hpp"
#include "weft/objects/pup.hpp"

namespace weft {

template <class T>
class buffer;

namespace objects::detail {

// How a buffer's memory was made, so it is given back the same way.
enum class buffer_memory : std::uint8_t {
  block,      // base::block_alloc, after a prefix naming its class and raw allocator
  array_new,  // new T[] (adopted, or T aligned beyond the blocks' 16 bytes)
};

// The prefix before a block-made buffer's elements: the block's class and
// the raw allocator that was in use (a buffer made before weft::run chose
// another allocator is still freed by the one that made it).
inline constexpr std::size_t buffer_prefix = 16;

inline void* buffer_block_alloc(std::size_t bytes) {
  std::uint8_t cls = 0;
  auto* block = static_cast<std::byte*>(base::block_alloc(buffer_prefix + bytes, cls));
  block[0] = std::byte{cls};
  block[1] = std::byte{static_cast<std::uint8_t>(base::selected_allocator())};
  return block + buffer_prefix;
}

inline void buffer_block_free(void* data) noexcept {
  std::byte* block = static_cast<std::byte*>(data) - buffer_prefix;
  const auto cls = static_cast<std::uint8_t>(block[0]);
  const auto made_by = static_cast<base::raw_allocator>(block[1]);
  if (made_by == base::selected_allocator())
    base::block_free(block, cls);
  else
    base::raw_free_from(made_by, block);
}

}  // namespace objects::detail

// Frees what buffer<T>::release() gave up, the way it was made.
template <class T>
struct buffer_deleter {
  objects::detail::buffer_memory memory = objects::detail::buffer_memory::array_new;
  void operator()(T* p) const noexcept {
    if (p == nullptr) return;
    if (memory == objects::detail::buffer_memory::block)
      objects::detail::buffer_block_free(p);
    else
      delete[] p;
  }
};
template <class T>
using buffer_storage = std::unique_ptr<T[], buffer_deleter<T>>;

template <class T>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "weft::buffer<T>: T must be trivially copyable (its elements are copied as bytes)");
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>,
                "weft::buffer<T>: T must not be const or volatile");
  // Blocks are 16-byte aligned; a more aligned T gets new T[].
  static constexpr bool from_blocks = alignof(T) <= objects::detail::buffer_prefix;

 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;

  // Empty: no allocation, data() is null.
  buffer() noexcept = default;

  // n elements, default-initialized (not zeroed), as `new T[n]`.
  explicit buffer(std::size_t n) : size_(n) {
    if (n == 0) return;
    if constexpr (from_blocks) {
      if (n >
          (std::numeric_limits<std::size_t>::max() - objects::detail::buffer_prefix) / sizeof(T))
        throw std::bad_array_new_length();
      data_ = static_cast<T*>(objects::detail::buffer_block_alloc(n * sizeof(T)));
      memory_ = objects::detail::buffer_memory::block;
    } else {
      data_ = new T[n];
      memory_ = objects::detail::buffer_memory::array_new;
    }
  }

  // Adopts `data`, which must hold at least n elements allocated by new T[].
  buffer(std::unique_ptr<T[]> data, std::size_t n)
      : data_(data.get()), size_(n), memory_(objects::detail::buffer_memory::array_new) {
    if (data_ == nullptr && n != 0)
      throw std::invalid_argument("weft::buffer: null data with a size of " + std::to_string(n));
    (void)data.release();
  }

  // A new buffer holding a copy of `src`.
  static buffer copy_of(std::span<const T> src) {
    buffer b(src.size());
    if (!src.empty()) std::memcpy(b.data(), src.data(), src.size_bytes());
    return b;
  }

  buffer(buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        memory_(o.memory_) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      free();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      memory_ = o.memory_;
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { free(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }

  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size_; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size_; }

  std::span<T> span() noexcept { return {data(), size_}; }
  std::span<const T> span() const noexcept { return {data(), size_}; }
  operator std::span<T>() noexcept { return span(); }
  operator std::span<const T>() const noexcept { return span(); }

  // Gives up the memory (the caller now owns it, with the deleter that
  // frees it the way it was made; size() was its length) and leaves this
  // buffer empty.
  buffer_storage<T> release() noexcept {
    size_ = 0;
    return buffer_storage<T>(std::exchange(data_, nullptr), buffer_deleter<T>{memory_});
  }

 private:
  template <class U>
  friend void pup(pupper& p, buffer<U>& b);

  void free() noexcept {
    buffer_deleter<T>{memory_}(data_);
    data_ = nullptr;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  objects::detail::buffer_memory memory_ = objects::detail::buffer_memory::block;
};

// Serialization (found by ADL from `p | buf`); see the comment at the top.
template <class T>
void pup(pupper& p, buffer<T>& b) {
  constexpr auto what = objects::detail::type_name_v<buffer<T>>;
  // In-process: the count's top bit says the memory came from new T[].
  constexpr std::uint64_t array_new_bit = std::uint64_t(1) << 63;
  if (p.in_process()) {
    T* ptr = b.data_;
    std::uint64_t n = b.size_;
    if (b.memory_ == objects::detail::buffer_memory::array_new) n |= array_new_bit;
    p.bytes(&ptr, sizeof ptr, what);
    p.bytes(&n, sizeof n, what);
    if (p.packing()) {
      // Both fields are written: the bytes own the block from now on.
      b.data_ = nullptr;
      b.size_ = 0;
    } else if (p.unpacking()) {
      const auto memory = (n & array_new_bit) != 0 ? objects::detail::buffer_memory::array_new
                                                   : objects::detail::buffer_memory::block;
      n &= ~array_new_bit;
      if (ptr == nullptr && n != 0)
        p.fail("null pointer with a count of " + std::to_string(n), what);
      if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
        p.fail("count " + std::to_string(n) + " is too large", what);
      b.free();
      b.data_ = ptr;
      b.size_ = std::size_t(n);
      b.memory_ = memory;
    }
    return;
  }
  const std::uint64_t n = p.length(b.size(), sizeof(T), what);
  if (p.unpacking()) b = buffer<T>(std::size_t(n));  // n is bounded by the bytes left
  p.bytes(b.data(), b.size() * sizeof(T), what);     // one memcpy for the whole array
}

}  // namespace weft
