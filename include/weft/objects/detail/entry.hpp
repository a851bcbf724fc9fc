// Entry methods named by member-function pointers: their traits, their
// registration, and the packing of their arguments.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include "weft/objects/coroutine.hpp"
#include "weft/objects/detail/runtime.hpp"
#include "weft/objects/detail/type_name.hpp"
#include "weft/objects/pup.hpp"

namespace weft {

// A list of entry methods, for class-level attributes such as a nodegroup's
// `using exclusive_entries = weft::entries<&Table::add>;`.
template <auto... Ms>
struct entries {};

namespace objects::detail {

class element_base {
 public:
  element_base() : rec_(constructing_record()) {
    if (rec_ == nullptr)
      object_error(
          "an element of a weft collection was constructed directly: create it through its "
          "collection (array<T>::create, group<T>::create, weft::create<T>, ... ) or insert it");
  }
  element_base(const element_base&) = delete;
  element_base& operator=(const element_base&) = delete;
  virtual ~element_base() = default;

  // Called on the new PE after a migration, once the state is unpacked.
  virtual void on_migrated() {}
  // After a balancing step this element waited for with at_sync() (not
  // co_await at_sync()), on its PE after the step: where it goes on.
  virtual void resume_from_sync() {}
  // The element's load for the balancer, in seconds over the interval since
  // its last at_sync; negative (the default): the runtime measures it (the
  // wall time of its entry methods).
  virtual double load_estimate() const { return -1.0; }

  element_record& record() const noexcept { return *rec_; }

 private:
  element_record* rec_;
};

template <class M>
struct member_traits;
#define WEFT_MEMBER_TRAITS(QUALS)                      \
  template <class C, class R, class... A>              \
  struct member_traits<R (C::*)(A...) QUALS> {         \
    using cls = C;                                     \
    using ret = R;                                     \
    using params = std::tuple<std::decay_t<A>...>;     \
    static constexpr std::size_t arity = sizeof...(A); \
  };
WEFT_MEMBER_TRAITS()
WEFT_MEMBER_TRAITS(const)
WEFT_MEMBER_TRAITS(noexcept)
WEFT_MEMBER_TRAITS(const noexcept)
#undef WEFT_MEMBER_TRAITS

template <class T>
inline constexpr bool is_task = false;
template <class T>
inline constexpr bool is_task<task<T>> = true;

// "Block::ghost" from the compiler's signature of this function.
template <auto M>
constexpr std::string_view member_name() {
  std::string_view f = __PRETTY_FUNCTION__;
  auto start = f.find("M = ");
  if (start == std::string_view::npos) return "?";
  start += 4;
  if (f.substr(start, 1) == "&") ++start;
  auto end = f.find_first_of(";]", start);
  return f.substr(start, end - start);
}

// Computed once, at compile time (a call in a non-constant context would
// search the signature string on every send).
template <auto M>
inline constexpr std::string_view member_name_v = member_name<M>();

template <class List, auto M>
inline constexpr bool contains_entry = false;
// Member pointers of different types never name the same entry (and do not
// compare).
template <auto A, auto B>
constexpr bool same_entry() {
  if constexpr (std::is_same_v<decltype(A), decltype(B)>)
    return A == B;
  else
    return false;
}
template <auto... Ms, auto M>
inline constexpr bool contains_entry<entries<Ms...>, M> = (same_entry<Ms, M>() || ...);

template <class T, auto M>
constexpr bool is_exclusive() {
  if constexpr (requires { typename T::exclusive_entries; })
    return contains_entry<typename T::exclusive_entries, M>;
  else
    return false;
}

// Every element of a tuple through one pupper. Inlined into the caller,
// where the pass is known, so that the pass tests of inlined pup functions
// fold away.
template <class Tuple, std::size_t... I>
[[gnu::always_inline]] inline void pup_each(pupper& p, Tuple& t, std::index_sequence<I...>) {
  ((p | const_cast<std::remove_cvref_t<std::tuple_element_t<I, Tuple>>&>(std::get<I>(t))), ...);
}
template <class Tuple>
[[gnu::always_inline]] inline void pup_each(pupper& p, Tuple& t) {
  pup_each(p, t, std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

// Takes the offsets, not the pupper: see pupper::fail_at.
[[noreturn, gnu::cold, gnu::noinline]] inline void fail_left_over(std::size_t offset,
                                                                  std::size_t left,
                                                                  std::string_view what) {
  pupper::fail_at(offset, std::to_string(left) + " bytes left over after the arguments", what);
}

// Unpacks a tuple of arguments; the bytes must be consumed exactly.
template <class Tuple>
[[gnu::always_inline]] inline void unpack_args(pupper& p, Tuple& args, std::string_view what) {
  pup_each(p, args);
  if (p.remaining() != 0) [[unlikely]]
    fail_left_over(p.offset(), p.remaining(), what);
}

// Parameters unpacked as views into the message (valid while the call runs).
template <class T>
inline constexpr bool is_view = false;
template <class T, std::size_t E>
inline constexpr bool is_view<std::span<T, E>> = true;
template <class Tuple>
inline constexpr bool has_view = false;
template <class... A>
inline constexpr bool has_view<std::tuple<A...>> = (is_view<A> || ...);

template <class T, auto M>
void invoke_entry(element_base& obj, message& m) {
  using tr = member_traits<decltype(M)>;
  static_assert(!is_task<typename tr::ret> || !has_view<typename tr::params>,
                "a coroutine entry method cannot take a std::span: it views the message, which "
                "is gone once the coroutine first suspends; take a std::vector or a weft::buffer");
  static constexpr std::string_view name = member_name_v<M>;
  // The unpacker is made here, so that the pass is known where the
  // arguments' pup functions are inlined.
  pupper p = pupper::unpacker(
      args_of(m), args_size(m),
      header_of(m).in_process ? pupper::reach::this_process : pupper::reach::anywhere);
  typename tr::params args;
  unpack_args(p, args, name);
  auto& self = static_cast<T&>(obj);
  auto call = [&](auto&... a) -> decltype(auto) { return (self.*M)(std::move(a)...); };
  if constexpr (std::is_void_v<typename tr::ret>) {
    std::apply(call, args);
  } else if constexpr (is_task<typename tr::ret>) {
    static_assert(std::is_same_v<typename tr::ret, task<>>,
                  "a coroutine entry method returns weft::task<> (results go through "
                  "futures or callbacks)");
    auto h = std::apply(call, args).release_to_runtime();
    if (h) {
      h.promise().entry = header_of(m).entry;
      adopt_task(&obj.record(), h, h.promise(), entry(header_of(m).entry).name.c_str());
    }
  } else {
    auto result = std::apply(call, args);
    const obj_header& h = header_of(m);
    if (h.arg_pe >= 0) future_set(h.arg_pe, h.args.future_id, to_bytes(result));
  }
}

// A message of entry M packed for this process, packed again for another
// one. Only messages that leave their node come here.
template <class T, auto M>
message_ptr repack_entry(message& m) {
  using tr = member_traits<decltype(M)>;
  pupper in = pupper::unpacker(args_of(m), args_size(m), pupper::reach::this_process);
  typename tr::params args;
  unpack_args(in, args, member_name_v<M>);
  pupper sizer = pupper::sizer();
  pup_each(sizer, args);
  message_ptr out = make_message(m.handler, sizeof(obj_header) + sizer.offset());
  std::memcpy(out->data(), m.data(), sizeof(obj_header));
  header_of(*out).in_process = 0;
  out->priority = m.priority;
  pupper packer = pupper::packer(args_of(*out), args_size(*out));
  pup_each(packer, args);
  return out;
}

template <class T, auto M>
std::uint32_t entry_id() {
  using tr = member_traits<decltype(M)>;
  static_assert(std::is_base_of_v<typename tr::cls, T>,
                "this entry method belongs to another class than the collection's element type");
  static_assert(!(is_task<typename tr::ret> && is_exclusive<T, M>()),
                "an exclusive nodegroup entry method cannot be a coroutine: its exclusion "
                "would end at its first co_await");
  static const std::uint32_t id =
      register_entry(entry_info{readable_name(member_name_v<M>), &type_tag<T>, &invoke_entry<T, M>,
                                nullptr, false, is_exclusive<T, M>(), &repack_entry<T, M>});
  return id;
}
// Registered during static initialisation for every entry a program names.
template <class T, auto M>
inline const std::uint32_t entry_registered = entry_id<T, M>();

template <class T, auto M>
bool awaited_mark() {
  static const bool b = mark_awaited(entry_id<T, M>());
  return b;
}
template <class T, auto M>
inline const bool awaited_registered = awaited_mark<T, M>();

template <class T, class... A>
element_base* construct_element(pupper& p) {
  std::tuple<A...> args;
  unpack_args(p, args, objects::detail::type_name_v<T>);
  return std::apply([](auto&... a) -> element_base* { return new T(std::move(a)...); }, args);
}
template <class T, class... A>
std::uint32_t ctor_id() {
  static const std::uint32_t id =
      register_entry(entry_info{constructor_name(objects::detail::type_name_v<T>), &type_tag<T>,
                                nullptr, &construct_element<T, A...>, false, false});
  return id;
}
template <class T, class... A>
inline const std::uint32_t ctor_registered = ctor_id<T, A...>();

template <class T>
std::uint32_t element_type_id() {
  static const std::uint32_t id = [] {
    element_type_info info;
    info.name = readable_name(objects::detail::type_name_v<T>);
    if constexpr (std::is_default_constructible_v<T> && has_pup_member<T>) {
      info.make_empty = []() -> element_base* { return new T(); };
      info.pup = [](element_base& e, pupper& p) { static_cast<T&>(e).pup(p); };
    }
    return register_element_type(std::move(info));
  }();
  return id;
}
template <class T>
inline const std::uint32_t element_type_registered = element_type_id<T>();

// How an argument is held while it is packed: a reference when it already
// has the parameter's type, else the converted value.
template <class Arg, class P>
using arg_holder = std::conditional_t<std::is_same_v<std::remove_cvref_t<Arg>, P>, const P&, P>;

template <class Params, class... Args, std::size_t... I>
constexpr bool args_match(std::index_sequence<I...>) {
  return (std::is_convertible_v<Args&&, std::tuple_element_t<I, Params>> && ...);
}
template <class Params, class... Args, std::size_t... I>
constexpr bool args_not_stolen(std::index_sequence<I...>) {
  return ((std::is_copy_constructible_v<std::tuple_element_t<I, Params>> ||
           !std::is_lvalue_reference_v<Args>)&&...);
}

template <class Params, class... Args>
constexpr void check_args() {
  constexpr std::size_t n = std::tuple_size_v<Params>;
  static_assert(sizeof...(Args) == n, "wrong number of arguments for this entry method");
  if constexpr (sizeof...(Args) == n) {
    static_assert(args_match<Params, Args...>(std::make_index_sequence<n>{}),
                  "an argument does not convert to the entry method's parameter type");
    static_assert(args_not_stolen<Params, Args...>(std::make_index_sequence<n>{}),
                  "a move-only argument (weft::buffer, unique_ptr) is passed as an lvalue: "
                  "std::move it into the call");
  }
}

template <class Params, class... Args, std::size_t... I>
auto make_holders(std::index_sequence<I...>, Args&&... args) {
  return std::tuple<arg_holder<Args, std::tuple_element_t<I, Params>>...>(
      std::forward<Args>(args)...);
}

// A message for `entry` carrying `args` packed as `Params`.
// Inlined into the send: the proxy's fields then go to the header without a
// round trip through memory (a stored aggregate read back in wider pieces
// stalls the store-to-load forwarding).
template <class Params, class... Args>
[[gnu::always_inline]] inline message_ptr pack_message(const collection_ref& ref,
                                                       const index_key& key, std::uint32_t entry,
                                                       bool in_process, Args&&... args) {
  check_args<Params, Args...>();
  auto holders = make_holders<Params>(std::make_index_sequence<sizeof...(Args)>{},
                                      std::forward<Args>(args)...);
  const auto r = in_process ? pupper::reach::this_process : pupper::reach::anywhere;
  pupper sizer = pupper::sizer(r);
  pup_each(sizer, holders);
  message_ptr m = new_element_message(ref, key, entry, sizer.offset());
  header_of(*m).in_process = in_process ? 1 : 0;
  pupper packer = pupper::packer(args_of(*m), args_size(*m), r);
  pup_each(packer, holders);
  return m;
}

// Arguments packed alone (constructors: they travel inside a runtime message).
template <class... Args>
std::vector<std::byte> pack_ctor_args(Args&&... args) {
  std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
  return std::apply([](auto&... v) { return to_bytes(v...); }, values);
}

}  // namespace objects::detail
}  // namespace weft
