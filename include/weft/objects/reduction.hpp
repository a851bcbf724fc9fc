// Reductions: ops and callbacks.
//
// Elements of an array or group contribute one value per round:
//   contribute(energy, weft::op::sum, main_proxy[0].callback<&Main::energy_done>());
//   double e = co_await all_reduce(residual, weft::op::max);     // in a coroutine
// Values are combined on each PE, then inside the node, then up the tree of
// nodes; the callback gets the result once per round, in round order.
//
// Ops: sum, product, min, max (arithmetic values, or std::vector of them
// element by element), logical_and/or/xor (bool), bit_and/or/xor (integral,
// or vectors of them), concat (every value, in no particular order, as a
// std::vector), set (every (index, value) pair, as a std::vector of pairs),
// and user ops: any stateless callable type `V op(V, V)`, associative and
// commutative (contributions meet in whatever order they arrive).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "weft/objects/detail/runtime.hpp"
#include "weft/objects/detail/type_name.hpp"
#include "weft/objects/future.hpp"
#include "weft/objects/pup.hpp"

namespace weft {

namespace op {

namespace detail {
template <class V>
inline constexpr bool is_vector = false;
template <class V, class A>
inline constexpr bool is_vector<std::vector<V, A>> = true;

template <class V, class F>
void elementwise(V& acc, const V& more, F f) {
  if constexpr (is_vector<V>) {
    if (acc.size() != more.size())
      weft::objects::detail::object_error(
          "element-wise reduction of vectors of different lengths (" + std::to_string(acc.size()) +
          " and " + std::to_string(more.size()) + ")");
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = f(acc[i], more[i]);
  } else {
    acc = f(acc, more);
  }
}
template <class V>
struct scalar {
  using type = V;
};
template <class V, class A>
struct scalar<std::vector<V, A>> {
  using type = V;
};
template <class V>
using scalar_t = typename scalar<V>::type;

// Ops whose result has the contribution's type.
template <class Derived>
struct same_type_op {
  template <class V>
  using result = V;
  template <class V>
  static V lift(V v) {
    return v;
  }
};
}  // namespace detail

struct sum_t : detail::same_type_op<sum_t> {
  static constexpr const char* name = "sum";
  template <class V>
  static void combine(V& a, const V& b) {
    static_assert(std::is_arithmetic_v<detail::scalar_t<V>>, "op::sum needs arithmetic values");
    detail::elementwise(a, b, [](auto x, auto y) { return x + y; });
  }
};
struct product_t : detail::same_type_op<product_t> {
  static constexpr const char* name = "product";
  template <class V>
  static void combine(V& a, const V& b) {
    static_assert(std::is_arithmetic_v<detail::scalar_t<V>>, "op::product needs arithmetic values");
    detail::elementwise(a, b, [](auto x, auto y) { return x * y; });
  }
};
struct min_t : detail::same_type_op<min_t> {
  static constexpr const char* name = "min";
  template <class V>
  static void combine(V& a, const V& b) {
    detail::elementwise(a, b, [](auto x, auto y) { return y < x ? y : x; });
  }
};
struct max_t : detail::same_type_op<max_t> {
  static constexpr const char* name = "max";
  template <class V>
  static void combine(V& a, const V& b) {
    detail::elementwise(a, b, [](auto x, auto y) { return x < y ? y : x; });
  }
};
#define WEFT_LOGICAL_OP(NAME, EXPR)                                                         \
  struct NAME##_t : detail::same_type_op<NAME##_t> {                                        \
    static constexpr const char* name = #NAME;                                              \
    template <class V>                                                                      \
    static void combine(V& a, const V& b) {                                                 \
      static_assert(std::is_same_v<detail::scalar_t<V>, bool>, "op::" #NAME " needs bool"); \
      detail::elementwise(a, b, [](bool x, bool y) { return EXPR; });                       \
    }                                                                                       \
  }
WEFT_LOGICAL_OP(logical_and, x&& y);
WEFT_LOGICAL_OP(logical_or, x || y);
WEFT_LOGICAL_OP(logical_xor, x != y);
#undef WEFT_LOGICAL_OP
#define WEFT_BIT_OP(NAME, EXPR)                                                               \
  struct NAME##_t : detail::same_type_op<NAME##_t> {                                          \
    static constexpr const char* name = #NAME;                                                \
    template <class V>                                                                        \
    static void combine(V& a, const V& b) {                                                   \
      static_assert(std::is_integral_v<detail::scalar_t<V>>, "op::" #NAME " needs integers"); \
      detail::elementwise(a, b, [](auto x, auto y) { return decltype(x)(EXPR); });            \
    }                                                                                         \
  }
WEFT_BIT_OP(bit_and, x& y);
WEFT_BIT_OP(bit_or, x | y);
WEFT_BIT_OP(bit_xor, x ^ y);
#undef WEFT_BIT_OP

struct concat_t {
  static constexpr const char* name = "concat";
  template <class V>
  using result = std::vector<V>;
  template <class V>
  static std::vector<V> lift(V v) {
    std::vector<V> r;
    r.push_back(std::move(v));
    return r;
  }
  template <class R>
  static void combine(R& a, const R& b) {
    a.insert(a.end(), b.begin(), b.end());
  }
};

// Every contribution with the index of its element.
struct set_t {
  static constexpr const char* name = "set";
  template <class R>
  static void combine(R& a, const R& b) {
    a.insert(a.end(), b.begin(), b.end());
  }
};

inline constexpr sum_t sum{};
inline constexpr product_t product{};
inline constexpr min_t min{};
inline constexpr max_t max{};
inline constexpr logical_and_t logical_and{};
inline constexpr logical_or_t logical_or{};
inline constexpr logical_xor_t logical_xor{};
inline constexpr bit_and_t bit_and{};
inline constexpr bit_or_t bit_or{};
inline constexpr bit_xor_t bit_xor{};
inline constexpr concat_t concat{};
inline constexpr set_t set{};

// A user op F (stateless, `V F(V, V)`) as a reduction op.
template <class F>
struct user {
  static_assert(std::is_empty_v<F> && std::is_default_constructible_v<F>,
                "a user reduction op must be a stateless callable type (combination runs on "
                "other PEs, where only its type is known)");
  static constexpr const char* name = "user";
  template <class V>
  using result = V;
  template <class V>
  static V lift(V v) {
    return v;
  }
  template <class V>
  static void combine(V& a, const V& b) {
    a = F{}(a, b);
  }
};

}  // namespace op

namespace objects::detail {
template <class Op>
struct as_op {
  using type = op::user<Op>;
};
template <class Op>
  requires requires { Op::name; }
struct as_op<Op> {
  using type = Op;
};
template <class Op>
using as_op_t = typename as_op<std::remove_cvref_t<Op>>::type;

template <class R>
struct bitwise_vector : std::false_type {};
template <class T, class A>
struct bitwise_vector<std::vector<T, A>> : std::bool_constant<bitwise<T>> {};

template <class Op, class R>
void combine_packed(std::vector<std::byte>& acc, const std::vector<std::byte>& more) {
  // concat of trivially copyable values appends in place: the packed form
  // is a count and the values' bytes, so the accumulator grows (amortised)
  // instead of being unpacked and packed again for every contribution,
  // which made gathering n values cost n^2.
  if constexpr (std::is_same_v<Op, op::concat_t> && bitwise_vector<R>::value) {
    using T = typename R::value_type;
    std::uint64_t na = 0, nb = 0;
    if (acc.size() >= sizeof na && more.size() >= sizeof nb) {
      std::memcpy(&na, acc.data(), sizeof na);
      std::memcpy(&nb, more.data(), sizeof nb);
      if (acc.size() == sizeof na + na * sizeof(T) && more.size() == sizeof nb + nb * sizeof(T)) {
        acc.insert(acc.end(), more.begin() + sizeof nb, more.end());
        const std::uint64_t n = na + nb;
        std::memcpy(acc.data(), &n, sizeof n);
        return;
      }
    }
  }
  R a{}, b{};
  from_bytes(acc, a);
  from_bytes(more, b);
  Op::combine(a, b);
  acc = to_bytes(a);
}
template <class Op, class R>
std::uint32_t reducer_id() {
  static const std::uint32_t id = register_reducer(
      {std::string(Op::name) + "<" + std::string(objects::detail::type_name_v<R>) + ">",
       &combine_packed<Op, R>});
  return id;
}
template <class Op, class R>
inline const std::uint32_t reducer_registered = reducer_id<Op, R>();
}  // namespace objects::detail

// Where a reduction's result (or any value of type R) goes. Made by proxies
// (an entry method of one element, or of all), from a future, or by exit().
template <class R>
class callback {
 public:
  callback() = default;
  callback(const future<R>& f) {  // NOLINT: a future is a natural callback
    d_.kind = objects::detail::callback_kind::future;
    d_.pe = f.pe_;
    d_.future_id = f.id_;
  }
  // Ends the run with `code` when the value arrives.
  static callback exit(int code = 0) {
    callback c;
    c.d_.kind = objects::detail::callback_kind::exit;
    c.d_.code = code;
    return c;
  }
  explicit callback(const objects::detail::callback_desc& d) : d_(d) {}
  const objects::detail::callback_desc& desc() const noexcept { return d_; }
  bool valid() const noexcept { return d_.kind != objects::detail::callback_kind::none; }
  void pup(pupper& p) { p | d_; }

 private:
  objects::detail::callback_desc d_;
};

}  // namespace weft
