// Serialization: one `pup` ("pack/unpack") function per type serves three
// passes — sizing, packing and unpacking — so the three can never disagree.
// The same framework carries entry-method arguments, migrating objects and
// checkpoints (the Charm++ PUP idea, without its macros).
//
//   struct Particle {                      // a user type: one member function
//     std::vector<double> pos;
//     std::string name;
//     int id;
//     void pup(weft::pupper& p) { p | pos | name | id; }
//   };
//
//   auto bytes = weft::to_bytes(particle, step);          // size + pack
//   weft::from_bytes(bytes, particle, step);              // unpack
//
// Trivially copyable values, and contiguous arrays of them (vector, array,
// string), are copied with one memcpy. Standard containers work out of the
// box: vector, string, array, map, unordered_map, set, optional, variant,
// tuple, pair, unique_ptr. Raw pointers are rejected at compile time: what
// they point to has no size the framework could know.
//
// Unpacking never trusts the buffer: a buffer that is truncated, has bytes
// left over, or holds an impossible value (a length larger than what is
// left, a variant index out of range, a flag other than 0 or 1) throws
// weft::serialization_error naming the type being read and the offset.
// Nothing is read outside the buffer, and no length read from it allocates
// more than the buffer could describe.
//
// Reach: every pupper knows where its bytes may go. `reach::anywhere` (the
// default) means the bytes may leave the process — a checkpoint on disk, a
// message to another node — so they must hold the data itself. With
// `reach::this_process` the bytes are read back by the same address space
// (a message between objects of one process), so a type may send a large
// buffer as a pointer and hand over its ownership instead of copying it
// (weft::buffer does; see weft/objects/buffer.hpp). Types that do not ask
// in_process() serialize the same way in both reaches.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/objects/detail/type_name.hpp"

namespace weft {

// Thrown when unpacking finds the buffer corrupt or truncated.
class WEFT_API serialization_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class pupper {
 public:
  enum class pass { sizing, packing, unpacking };
  // Where the bytes may be read back (see the comment at the top of the file).
  // The three passes over one set of bytes must use the same reach.
  enum class reach { anywhere, this_process };

  static pupper sizer(reach r = reach::anywhere) { return pupper(pass::sizing, nullptr, 0, r); }
  static pupper packer(std::byte* out, std::size_t capacity, reach r = reach::anywhere) {
    return pupper(pass::packing, out, capacity, r);
  }
  static pupper unpacker(const std::byte* in, std::size_t size, reach r = reach::anywhere) {
    return pupper(pass::unpacking, const_cast<std::byte*>(in), size, r);
  }

  bool sizing() const noexcept { return pass_ == pass::sizing; }
  bool packing() const noexcept { return pass_ == pass::packing; }
  bool unpacking() const noexcept { return pass_ == pass::unpacking; }
  // Whether the bytes stay in this process (may carry pointers that own memory).
  bool in_process() const noexcept { return reach_ == reach::this_process; }
  // Bytes counted (sizing) or written/read so far.
  std::size_t offset() const noexcept { return pos_; }
  // Bytes left to read (unpacking).
  std::size_t remaining() const noexcept { return size_ - pos_; }

  // Copies n raw bytes in the current direction. `what` names the type for
  // errors.
  [[gnu::always_inline]] void bytes(void* p, std::size_t n, std::string_view what) {
    if (pass_ == pass::sizing) {
      pos_ += n;
      return;
    }
    if (n > size_ - pos_) [[unlikely]]
      fail_truncated(unpacking(), n, pos_, size_, what);
    if (n == 0) return;
    if (pass_ == pass::packing)
      copy(buf_ + pos_, p, n);
    else
      copy(p, buf_ + pos_, n);
    pos_ += n;
  }

  // A length of a container: on unpacking, checked against what is left
  // (each element takes at least `min_element_bytes`).
  [[gnu::always_inline]] std::uint64_t length(std::uint64_t n, std::size_t min_element_bytes,
                                              std::string_view what) {
    bytes(&n, sizeof n, what);
    if (unpacking() && min_element_bytes > 0 && n > remaining() / min_element_bytes) [[unlikely]]
      fail_length(n, pos_, remaining(), what);
    return n;
  }

  // Pads to a multiple of A bytes from the start of the buffer (zeros when
  // packing), so that data viewed in place is aligned when the buffer's
  // start is.
  template <std::size_t A>
  [[gnu::always_inline]] void align(std::string_view what) {
    static_assert((A & (A - 1)) == 0, "alignments are powers of two");
    if constexpr (A == 1) return;
    const std::size_t pad = (A - (pos_ & (A - 1))) & (A - 1);
    if (pad == 0) return;
    if (pass_ == pass::sizing) {
      pos_ += pad;
      return;
    }
    if (pad > size_ - pos_) [[unlikely]]
      fail_truncated(unpacking(), pad, pos_, size_, what);
    if (pass_ == pass::packing) std::memset(buf_ + pos_, 0, pad);
    pos_ += pad;
  }

  // Unpacking: the next n bytes, viewed where they are (no copy), and skips
  // them.
  [[gnu::always_inline]] const std::byte* view(std::size_t n, std::string_view what) {
    if (n > size_ - pos_) [[unlikely]]
      fail_truncated(true, n, pos_, size_, what);
    const std::byte* at = buf_ + pos_;
    pos_ += n;
    return at;
  }

  // A 0/1 flag (optional, unique_ptr), checked on unpacking.
  bool flag(bool b, std::string_view what) {
    std::uint8_t v = b ? 1 : 0;
    bytes(&v, 1, what);
    if (v > 1) fail("flag byte " + std::to_string(v) + " is neither 0 nor 1", what);
    return v == 1;
  }

  [[noreturn, gnu::cold, gnu::noinline]] void fail(const std::string& problem,
                                                   std::string_view what) const {
    fail_at(pos_, problem, what);
  }
  // As fail, for a caller that keeps its pupper in registers: a member
  // call takes the pupper's address, and the whole object then lives in
  // memory on the fast path too.
  [[noreturn, gnu::cold, gnu::noinline]] static void fail_at(std::size_t offset,
                                                             const std::string& problem,
                                                             std::string_view what) {
    throw serialization_error("corrupt buffer while unpacking " + std::string(what) +
                              " at offset " + std::to_string(offset) + ": " + problem);
  }

  template <class T>
  pupper& operator|(T& v);

 private:
  // memcpy, with copies of up to 16 bytes done in place: a library call
  // costs more than the copy of a small argument.
  [[gnu::always_inline]] static void copy(void* to, const void* from, std::size_t n) {
    auto* d = static_cast<std::byte*>(to);
    const auto* s = static_cast<const std::byte*>(from);
    if (n >= 8 && n <= 16) {
      std::uint64_t a, b;  // two overlapping words
      std::memcpy(&a, s, 8);
      std::memcpy(&b, s + n - 8, 8);
      std::memcpy(d, &a, 8);
      std::memcpy(d + n - 8, &b, 8);
    } else {
      std::memcpy(d, s, n);
    }
  }

  pupper(pass p, std::byte* buf, std::size_t size, reach r)
      : pass_(p), reach_(r), buf_(buf), size_(size) {}
  // The failures of the inlined paths are static (see fail_at).
  [[noreturn, gnu::cold, gnu::noinline]] static void fail_length(std::uint64_t n, std::size_t pos,
                                                                 std::size_t left,
                                                                 std::string_view what) {
    fail_at(pos,
            "length " + std::to_string(n) + " is more than the " + std::to_string(left) +
                " bytes left could hold",
            what);
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void fail_truncated(bool unpacking, std::size_t n,
                                                                    std::size_t pos,
                                                                    std::size_t size,
                                                                    std::string_view what) {
    throw serialization_error(std::string(unpacking ? "truncated buffer while unpacking "
                                                    : "buffer too small while packing ") +
                              std::string(what) + ": need " + std::to_string(n) +
                              " bytes at offset " + std::to_string(pos) + ", have " +
                              std::to_string(size - pos));
  }

  pass pass_;
  reach reach_;
  std::byte* buf_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

namespace objects::detail {

template <class T>
concept has_pup_member = requires(T& t, pupper& p) { t.pup(p); };

// Copied as bytes: trivially copyable, no pup member, not a pointer.
template <class T>
concept bitwise = std::is_trivially_copyable_v<T> && !has_pup_member<T> && !std::is_pointer_v<T> &&
                  !std::is_member_pointer_v<T>;

// Smallest number of bytes one packed T can take (bounds lengths read back).
template <class T>
constexpr std::size_t min_packed_bytes() {
  if constexpr (bitwise<T>)
    return sizeof(T);
  else if constexpr (std::is_empty_v<T>)
    return 0;
  else
    return 1;
}

}  // namespace objects::detail

// ---- the pup overloads; user types may add their own in their namespace ----

template <class T>
  requires objects::detail::bitwise<T>
[[gnu::always_inline]] inline void pup(pupper& p, T& v) {
  p.bytes(&v, sizeof v, objects::detail::type_name_v<T>);
}

// bool is checked (a byte other than 0 or 1 would be undefined behaviour to
// read back as a bool). Trivially copyable structs are copied as bytes, so
// their fields are not checked: give a struct with bool or range-limited
// enum fields a pup member if its buffers may come from outside.
inline void pup(pupper& p, bool& b) {
  const bool v = p.flag(b, "bool");
  if (p.unpacking()) b = v;
}

template <class T>
  requires objects::detail::has_pup_member<T>
void pup(pupper& p, T& v) {
  v.pup(p);
}

template <class T>
  requires std::is_pointer_v<T>
void pup(pupper&, T&) {
  static_assert(!std::is_pointer_v<T>,
                "weft::pup: raw pointers cannot be serialized (what they point to has no known "
                "size); use a value, a container or std::unique_ptr");
}

template <class T, class A>
void pup(pupper& p, std::vector<T, A>& v) {
  constexpr auto what = objects::detail::type_name_v<std::vector<T, A>>;
  std::uint64_t n = p.length(v.size(), objects::detail::min_packed_bytes<T>(), what);
  if (p.unpacking()) v.resize(std::size_t(n));
  if constexpr (objects::detail::bitwise<T>) {
    p.bytes(v.data(), v.size() * sizeof(T), what);  // one memcpy for the whole array
  } else {
    for (auto& x : v) p | x;
  }
}

// A span is packed like a vector (a length, then one memcpy) and unpacked
// as a VIEW of the packed bytes: no allocation and no copy, but it points
// into the buffer being unpacked and lives no longer than it. That makes it
// the cheapest way to pass an array to an entry method, which sees it in the
// message while it runs (see docs/objects.md); it cannot be kept, and it has
// no place in an element's migrated state. The elements are aligned for T
// within the buffer.
template <class T, std::size_t E>
[[gnu::always_inline]] inline void pup(pupper& p, std::span<const T, E>& s) {
  static_assert(E == std::dynamic_extent, "weft::pup: only std::span<const T> (dynamic extent)");
  static_assert(objects::detail::bitwise<T>,
                "weft::pup: std::span<const T> needs a trivially copyable T (it is viewed in "
                "place); use a std::vector for other element types");
  constexpr auto what = objects::detail::type_name_v<std::span<const T>>;
  const std::uint64_t n = p.length(s.size(), sizeof(T), what);
  p.template align<alignof(T)>(what);
  if (!p.unpacking()) {
    p.bytes(const_cast<T*>(s.data()), s.size_bytes(), what);
    return;
  }
  const std::byte* at = p.view(std::size_t(n) * sizeof(T), what);
  if (reinterpret_cast<std::uintptr_t>(at) % alignof(T) != 0) [[unlikely]]
    pupper::fail_at(p.offset(),
                    "the buffer is not aligned for its elements (it must start aligned to " +
                        std::to_string(alignof(T)) + " bytes)",
                    what);
  s = std::span<const T>(reinterpret_cast<const T*>(at), std::size_t(n));
}

template <class T, std::size_t E>
  requires(!std::is_const_v<T>)
void pup(pupper&, std::span<T, E>&) {
  static_assert(std::is_const_v<T>,
                "weft::pup: a span is unpacked as a read-only view of the bytes: declare it "
                "std::span<const T>");
}

template <class A>
void pup(pupper& p, std::vector<bool, A>& v) {
  constexpr auto what = objects::detail::type_name_v<std::vector<bool, A>>;
  std::uint64_t n = p.length(v.size(), 1, what);
  if (p.unpacking()) v.assign(std::size_t(n), false);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const bool b = p.flag(v[i], what);
    if (p.unpacking()) v[i] = b;  // the other passes must not write (the value may be const)
  }
}

template <class C, class Tr, class A>
void pup(pupper& p, std::basic_string<C, Tr, A>& s) {
  constexpr auto what = objects::detail::type_name_v<std::basic_string<C, Tr, A>>;
  std::uint64_t n = p.length(s.size(), sizeof(C), what);
  if (p.unpacking()) s.resize(std::size_t(n));
  p.bytes(s.data(), s.size() * sizeof(C), what);
}

template <class T, std::size_t N>
  requires(!objects::detail::bitwise<std::array<T, N>>)
void pup(pupper& p, std::array<T, N>& a) {
  for (auto& x : a) p | x;
}

template <class A, class B>
  requires(!objects::detail::bitwise<std::pair<A, B>>)
void pup(pupper& p, std::pair<A, B>& v) {
  p | v.first | v.second;
}

template <class... Ts>
  requires(!objects::detail::bitwise<std::tuple<Ts...>>)
void pup(pupper& p, std::tuple<Ts...>& t) {
  std::apply([&p](auto&... xs) { ((p | xs), ...); }, t);
}

template <class T>
void pup(pupper& p, std::optional<T>& o) {
  constexpr auto what = objects::detail::type_name_v<std::optional<T>>;
  bool has = p.flag(o.has_value(), what);
  if (p.unpacking()) {
    if (!has) {
      o.reset();
      return;
    }
    o.emplace();
  }
  if (has) p | *o;
}

template <class T, class D>
void pup(pupper& p, std::unique_ptr<T, D>& u) {
  static_assert(!std::is_polymorphic_v<T>,
                "weft::pup: a unique_ptr to a polymorphic type would lose its dynamic type");
  constexpr auto what = objects::detail::type_name_v<std::unique_ptr<T, D>>;
  bool has = p.flag(u != nullptr, what);
  if (p.unpacking()) {
    if (!has) {
      u.reset();
      return;
    }
    u = std::make_unique<T>();
  }
  if (has) p | *u;
}

namespace objects::detail {
template <class V, std::size_t... I>
void emplace_variant(V& v, std::size_t index, std::index_sequence<I...>) {
  ((index == I ? (void)v.template emplace<I>() : (void)0), ...);
}
}  // namespace objects::detail

template <class... Ts>
void pup(pupper& p, std::variant<Ts...>& v) {
  constexpr auto what = objects::detail::type_name_v<std::variant<Ts...>>;
  std::uint32_t index = std::uint32_t(v.index());
  p.bytes(&index, sizeof index, what);
  if (p.unpacking()) {
    if (index >= sizeof...(Ts))
      p.fail("alternative " + std::to_string(index) + " of a variant of " +
                 std::to_string(sizeof...(Ts)),
             what);
    objects::detail::emplace_variant(v, index, std::index_sequence_for<Ts...>{});
  }
  std::visit([&p](auto& x) { p | x; }, v);
}

namespace objects::detail {
// Associative containers: length, then elements; unpacking rebuilds.
template <class C, class Elem>
void pup_associative(pupper& p, C& c, std::string_view what) {
  std::uint64_t n = p.length(c.size(), min_packed_bytes<Elem>(), what);
  if (!p.unpacking()) {
    for (auto& e : c) {
      Elem copy = e;  // keys are const inside the container
      p | copy;
    }
    return;
  }
  c.clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    Elem e{};
    p | e;
    c.insert(c.end(), std::move(e));
  }
}
}  // namespace objects::detail

template <class K, class V, class Cmp, class A>
void pup(pupper& p, std::map<K, V, Cmp, A>& m) {
  objects::detail::pup_associative<std::map<K, V, Cmp, A>, std::pair<K, V>>(
      p, m, objects::detail::type_name_v<std::map<K, V, Cmp, A>>);
}

template <class K, class V, class H, class E, class A>
void pup(pupper& p, std::unordered_map<K, V, H, E, A>& m) {
  objects::detail::pup_associative<std::unordered_map<K, V, H, E, A>, std::pair<K, V>>(
      p, m, objects::detail::type_name_v<std::unordered_map<K, V, H, E, A>>);
}

template <class K, class Cmp, class A>
void pup(pupper& p, std::set<K, Cmp, A>& s) {
  objects::detail::pup_associative<std::set<K, Cmp, A>, K>(
      p, s, objects::detail::type_name_v<std::set<K, Cmp, A>>);
}

// Inlined, so that a pup function that is itself inlined (spans, bitwise
// values) folds away the pass tests when the pass is known at the call.
template <class T>
[[gnu::always_inline]] inline pupper& pupper::operator|(T& v) {
  using weft::pup;
  pup(*this, v);
  return *this;
}

// ---- whole values ----------------------------------------------------------

// Bytes that packing `vs...` takes.
template <class... Ts>
std::size_t packed_size(const Ts&... vs) {
  pupper p = pupper::sizer();
  ((p | const_cast<Ts&>(vs)), ...);  // the sizing pass reads only
  (void)p;
  return p.offset();
}

// Packs `vs...` into `out` (exactly packed_size bytes).
template <class... Ts>
void pack(std::span<std::byte> out, const Ts&... vs) {
  pupper p = pupper::packer(out.data(), out.size());
  ((p | const_cast<Ts&>(vs)), ...);  // the packing pass reads only
  (void)p;
}

template <class... Ts>
std::vector<std::byte> to_bytes(const Ts&... vs) {
  std::vector<std::byte> out(packed_size(vs...));
  pack(std::span<std::byte>(out), vs...);
  return out;
}

// Unpacks `vs...` from `in`; the buffer must be consumed exactly.
template <class... Ts>
void unpack(std::span<const std::byte> in, Ts&... vs) {
  pupper p = pupper::unpacker(in.data(), in.size());
  ((p | vs), ...);
  if (p.remaining() != 0)
    throw serialization_error(std::to_string(p.remaining()) +
                              " bytes left over after unpacking (the buffer holds something "
                              "other than what was asked for)");
}

template <class... Ts>
void from_bytes(const std::vector<std::byte>& in, Ts&... vs) {
  unpack(std::span<const std::byte>(in), vs...);
}

}  // namespace weft
