// Indices of chare-array elements.
//
// Dense arrays are indexed by `int` (1-D), `weft::index2d` or
// `weft::index3d`, with bounds fixed at creation. Any other type may index a
// sparse array (elements inserted one by one) if its bytes are its value:
// trivially copyable, no padding (std::has_unique_object_representations),
// at most 24 bytes. Inside the runtime an index travels as an `index_key`: its
// bytes, zero-filled to 24, so equality and hashing need no knowledge of the
// type.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

namespace weft {

struct index2d {
  int x = 0, y = 0;
  friend bool operator==(const index2d&, const index2d&) = default;
};
struct index3d {
  int x = 0, y = 0, z = 0;
  friend bool operator==(const index3d&, const index3d&) = default;
};

// A type usable as an array index.
template <class I>
concept array_index = std::is_trivially_copyable_v<I> &&
                      std::has_unique_object_representations_v<I> && sizeof(I) <= 24;

// Number of dense dimensions of an index type (0: sparse only).
template <class I>
inline constexpr int index_dims = 0;
template <>
inline constexpr int index_dims<int> = 1;
template <>
inline constexpr int index_dims<index2d> = 2;
template <>
inline constexpr int index_dims<index3d> = 3;

struct index_key {
  std::uint64_t w[3] = {0, 0, 0};
  friend bool operator==(const index_key&, const index_key&) = default;

  // Built a word at a time in registers. A narrow copy into a zeroed array,
  // read back in wider pieces (as a header copy does), would stall
  // store-to-load forwarding on every send.
  template <array_index I>
  static index_key of(const I& i) {
    index_key k;
    const auto* b = reinterpret_cast<const unsigned char*>(&i);
    for (std::size_t word = 0; word * 8 < sizeof(I); ++word) {
      std::uint64_t v = 0;
      std::memcpy(&v, b + word * 8, sizeof(I) - word * 8 < 8 ? sizeof(I) - word * 8 : 8);
      k.w[word] = v;
    }
    return k;
  }
  template <array_index I>
  I as() const {
    I i;
    std::memcpy(&i, w, sizeof(I));
    return i;
  }
};

struct index_key_hash {
  std::size_t operator()(const index_key& k) const noexcept {
    std::uint64_t h = k.w[0] * 0x9E3779B97F4A7C15ull;
    h ^= (k.w[1] + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    h ^= (k.w[2] + 0x165667B19E3779F9ull) * 0x94D049BB133111EBull;
    return std::size_t(h ^ (h >> 29));
  }
};

namespace objects::detail {
// Dense coordinates of an index (unused ones are 0).
template <class I>
void index_coords(const I& i, int c[3]) {
  c[0] = c[1] = c[2] = 0;
  if constexpr (std::is_same_v<I, int>) {
    c[0] = i;
  } else if constexpr (std::is_same_v<I, index2d>) {
    c[0] = i.x;
    c[1] = i.y;
  } else if constexpr (std::is_same_v<I, index3d>) {
    c[0] = i.x;
    c[1] = i.y;
    c[2] = i.z;
  }
}
}  // namespace objects::detail

// Readable form for error messages: "[3]", "[1,2]", or the bytes in hex.
template <class I>
std::string index_string(const I& i) {
  if constexpr (index_dims < I >> 0) {
    int c[3];
    objects::detail::index_coords(i, c);
    std::string s = "[" + std::to_string(c[0]);
    for (int d = 1; d < index_dims<I>; ++d) s += "," + std::to_string(c[d]);
    return s + "]";
  } else {
    const auto* b = reinterpret_cast<const unsigned char*>(&i);
    static const char* hex = "0123456789abcdef";
    std::string s = "[0x";
    for (std::size_t k = 0; k < sizeof(I); ++k) {
      s += hex[b[k] >> 4];
      s += hex[b[k] & 15];
    }
    return s + "]";
  }
}

}  // namespace weft
