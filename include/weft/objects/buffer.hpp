// weft::buffer<T>: a move-only, owning, contiguous array of trivially
// copyable T whose serialization can hand the memory over instead of copying
// it.
//
//   weft::buffer<double> field(1 << 20);      // uninitialized, like new T[n]
//   for (double& x : field) x = 0.0;
//   struct Msg { weft::buffer<double> field; void pup(weft::pupper& p) { p | field; } };
//
// How `p | buf` serializes depends on the pupper's reach (see pup.hpp):
//
// - reach::anywhere (the default: checkpoints, other nodes): a length, then
//   the elements as raw bytes in one memcpy. Unpacking checks the length
//   against the bytes left before allocating exactly that many elements.
//   The source buffer is left untouched.
//
// - reach::this_process: the bytes hold the pointer and the element count
//   (sizeof(T*) + 8 bytes, whatever the size of the data). Packing RELEASES
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
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include "weft/objects/detail/type_name.hpp"
#include "weft/objects/pup.hpp"

namespace weft {

template <class T>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "weft::buffer<T>: T must be trivially copyable (its elements are copied as bytes)");
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>,
                "weft::buffer<T>: T must not be const or volatile");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;

  // Empty: no allocation, data() is null.
  buffer() noexcept = default;

  // n elements, default-initialized (not zeroed), as `new T[n]`.
  explicit buffer(std::size_t n) : data_(n == 0 ? nullptr : new T[n]), size_(n) {}

  // Adopts `data`, which must hold at least n elements allocated by new T[].
  buffer(std::unique_ptr<T[]> data, std::size_t n) : data_(std::move(data)), size_(n) {
    if (!data_ && n != 0)
      throw std::invalid_argument("weft::buffer: null data with a size of " + std::to_string(n));
  }

  // A new buffer holding a copy of `src`.
  static buffer copy_of(std::span<const T> src) {
    buffer b(src.size());
    if (!src.empty()) std::memcpy(b.data(), src.data(), src.size_bytes());
    return b;
  }

  buffer(buffer&& o) noexcept : data_(std::move(o.data_)), size_(std::exchange(o.size_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      data_ = std::move(o.data_);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() = default;

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
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

  // Gives up the memory (the caller now owns it; size() was its length) and
  // leaves this buffer empty.
  std::unique_ptr<T[]> release() noexcept {
    size_ = 0;
    return std::move(data_);
  }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t size_ = 0;
};

// Serialization (found by ADL from `p | buf`); see the comment at the top.
template <class T>
void pup(pupper& p, buffer<T>& b) {
  constexpr auto what = objects::detail::type_name_v<buffer<T>>;
  if (p.in_process()) {
    T* ptr = b.data();
    std::uint64_t n = b.size();
    p.bytes(&ptr, sizeof ptr, what);
    p.bytes(&n, sizeof n, what);
    if (p.packing()) {
      // Both fields are written: the bytes own the block from now on.
      (void)b.release().release();
    } else if (p.unpacking()) {
      if (ptr == nullptr && n != 0)
        p.fail("null pointer with a count of " + std::to_string(n), what);
      if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
        p.fail("count " + std::to_string(n) + " is too large", what);
      b = buffer<T>(std::unique_ptr<T[]>(ptr), std::size_t(n));
    }
    return;
  }
  const std::uint64_t n = p.length(b.size(), sizeof(T), what);
  if (p.unpacking()) b = buffer<T>(std::size_t(n));  // n is bounded by the bytes left
  p.bytes(b.data(), b.size() * sizeof(T), what);     // one memcpy for the whole array
}

}  // namespace weft
