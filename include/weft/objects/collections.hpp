// Chares, chare arrays, groups and nodegroups, and their typed proxies.
//
//   struct Cell : weft::array_element<Cell, weft::index2d> {
//     explicit Cell(double t0);
//     void ghost(int side, std::vector<double> edge);   // an entry method
//   };
//   auto cells = weft::array<Cell>::create(weft::index2d{8, 8}, 300.0);
//   cells[{1, 2}].send<&Cell::ghost>(0, edge);          // asynchronous
//   cells.broadcast<&Cell::ghost>(1, edge);             // every element, once
//
// Entry methods are ordinary member functions named by pointer; the
// arguments are checked against the method's parameters at compile time and
// packed with pup. A method may return weft::task<> (a coroutine that can
// co_await next<&T::m>(n), all_reduce(...), futures and other tasks).
//
// Kinds:
//  - array_element<T, I>: elements of a chare array, indexed by I (int,
//    index2d, index3d: dense with bounds; any array_index type: sparse,
//    inserted one by one). Elements can migrate (T needs a default
//    constructor and pup) and be inserted and destroyed while the array runs.
//  - group_element<T>: one element per PE.
//  - nodegroup_element<T>: one element per node; its entry methods run on
//    whichever PE of the node is free, concurrently unless listed in
//    `using exclusive_entries = weft::entries<&T::m, ...>;`.
//  - chare<T>: singletons, created on a given PE or placed by the runtime.
//
// Everything here is called on PEs (handlers, entry methods, main).
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/objects/detail/entry.hpp"
#include "weft/objects/detail/runtime.hpp"
#include "weft/objects/future.hpp"
#include "weft/objects/index.hpp"
#include "weft/objects/reduction.hpp"

namespace weft {

template <class T, class I>
class array_proxy;
template <class T>
class group_proxy;
template <class T>
class nodegroup_proxy;
template <class T>
class chare_proxy;

namespace objects::detail {

template <class M>
using first_param_t = std::tuple_element_t<0, typename member_traits<M>::params>;

// A proxy's target: one element (send, call, callback) of a collection.
// Dims: the dense dimensions its index type can have (0: none, as a
// chare's), which bounds the range check's loop at compile time.
template <class T, int Dims = 0>
class target {
 public:
  target() = default;
  target(const collection_ref& ref, const index_key& key, std::string (*show)(const index_key&))
      : ref_(ref), key_(key), show_(show) {}

  // Calls entry method M of the element with `args` (asynchronous; the
  // arguments are packed now).
  template <auto M, class... Args>
  [[gnu::always_inline]] void send(Args&&... args) const {
    using tr = member_traits<decltype(M)>;
    check(member_name_v<M>);
    // Registered during static initialisation, before any send can run.
    message_ptr m = pack_message<typename tr::params>(ref_, key_, entry_registered<T, M>, true,
                                                      std::forward<Args>(args)...);
    m->priority = priority_;
    send_element(ref_, m.release());
  }

  // As send, and the method's return value fills the returned future (on
  // this PE).
  template <auto M, class... Args>
  auto call(Args&&... args) const {
    using tr = member_traits<decltype(M)>;
    using R = typename tr::ret;
    static_assert(!std::is_void_v<R> && !is_task<R>,
                  "call<> needs an entry method that returns a value");
    const std::uint32_t id = entry_id<T, M>();
    (void)entry_registered<T, M>;
    check(member_name_v<M>);
    future<R> f = make_future<R>();
    message_ptr m =
        pack_message<typename tr::params>(ref_, key_, id, true, std::forward<Args>(args)...);
    m->priority = priority_;
    obj_header& h = header_of(*m);
    h.arg_pe = f.owner_pe();
    h.args.future_id = f.id();
    send_element(ref_, std::move(m));
    return f;
  }

  // A callback that calls M (one parameter) of this element with a value.
  template <auto M>
  weft::callback<first_param_t<decltype(M)>> callback() const {
    static_assert(member_traits<decltype(M)>::arity == 1,
                  "a callback's entry method takes exactly one parameter (the value)");
    (void)entry_registered<T, M>;
    check(member_name_v<M>);
    callback_desc d;
    d.kind = callback_kind::element;
    d.entry = entry_id<T, M>();
    d.ref = ref_;
    d.key = key_;
    return weft::callback<first_param_t<decltype(M)>>(d);
  }

  const collection_ref& ref() const noexcept { return ref_; }
  const index_key& key() const noexcept { return key_; }

 protected:
  [[gnu::always_inline]] void check(std::string_view method) const {
    bool bad = ref_.id == 0;
    // A dense array's dims is its index type's (a sparse one's 0).
    if (Dims > 0 && ref_.dims > 0) {
      // A fixed-size copy: a copy of dims * 4 bytes would be a variable-length
      // one, whose stores the loads below cannot be forwarded from.
      int c[3];
      std::memcpy(c, key_.w, sizeof c);
      for (int d = 0; d < Dims; ++d)
        bad |= unsigned(c[d]) >= unsigned(ref_.bounds[d]);  // c < 0 too
    }
    if (bad) [[unlikely]]
      fail_check(method);
  }
  [[gnu::noinline, noreturn]] void fail_check(std::string_view method) const {
    if (ref_.id == 0)
      object_error("send of " + std::string(method) + " through a proxy that names no collection");
    object_error("index " + show_(key_) + " is out of range for " + collection_name(ref_) +
                 " (bounds " + bounds_string() + ") in a call of " + std::string(method));
  }
  std::string bounds_string() const {
    std::string s = "[" + std::to_string(ref_.bounds[0]);
    for (int d = 1; d < ref_.dims; ++d) s += "," + std::to_string(ref_.bounds[d]);
    return s + "]";
  }

  collection_ref ref_;
  index_key key_;
  std::string (*show_)(const index_key&) = nullptr;
  std::int32_t priority_ = 0;
};

template <class T, auto M, class... Args>
void broadcast_to(const collection_ref& ref, Args&&... args) {
  using tr = member_traits<decltype(M)>;
  (void)entry_registered<T, M>;
  if (ref.id == 0)
    object_error("broadcast of " + std::string(member_name_v<M>) +
                 " through a proxy that names no collection");
  message_ptr m = pack_message<typename tr::params>(ref, index_key{}, entry_id<T, M>(), false,
                                                    std::forward<Args>(args)...);
  broadcast_collection(ref, std::move(m));
}

template <class T, auto M>
weft::callback<first_param_t<decltype(M)>> broadcast_callback_to(const collection_ref& ref) {
  static_assert(member_traits<decltype(M)>::arity == 1,
                "a callback's entry method takes exactly one parameter (the value)");
  (void)entry_registered<T, M>;
  callback_desc d;
  d.kind = callback_kind::broadcast;
  d.entry = entry_id<T, M>();
  d.ref = ref;
  return weft::callback<first_param_t<decltype(M)>>(d);
}

template <class I>
std::string show_key(const index_key& k) {
  return index_string(k.as<I>());
}

// What every element kind shares: reductions, coroutine helpers, migration.
template <class T, class I>
class element_ops : public element_base {
 public:
  using index_type = I;

  // Contributes `value` to this collection's next reduction round; the
  // result of `op` over every element's value goes to `cb`. Every element
  // contributes once per round, with the same op and callback.
  template <class V, class Op, class R>
  void contribute(V value, const Op&, const weft::callback<R>& cb) {
    using op_t = as_op_t<Op>;
    auto bytes = lift<op_t>(std::move(value));
    static_assert(std::is_same_v<decltype(bytes), R>,
                  "the callback's value type is not the reduction's result type");
    (void)reducer_registered<op_t, R>;
    detail::contribute(record(), reducer_id<op_t, R>(), cb.desc(), to_bytes(bytes));
  }

  // Contributes `value` and awaits the round's result (every element
  // contributing to the round gets it). In a coroutine entry method.
  template <class V, class Op>
  auto all_reduce(V value, const Op&) {
    using op_t = as_op_t<Op>;
    auto lifted = lift<op_t>(std::move(value));
    using R = decltype(lifted);
    (void)reducer_registered<op_t, R>;
    struct awaiter : awaits_with_promise<awaiter> {
      allreduce_slot slot;
      awaiter(element_record& rec, std::uint32_t reducer, std::vector<std::byte> v) {
        slot.collection = rec.ref.id;
        slot.round = rec.red_round;
        slot.owner = &rec;
        allreduce_register(&slot);
        callback_desc d;
        d.kind = callback_kind::all_reduce;
        d.ref = rec.ref;
        detail::contribute(rec, reducer, d, std::move(v));
      }
      awaiter(const awaiter&) = delete;
      ~awaiter() { allreduce_unregister(&slot); }
      bool await_ready() const noexcept { return slot.ready; }
      void suspend(std::coroutine_handle<> h, promise_base* p) noexcept {
        slot.h = h;
        slot.promise = p;
      }
      R await_resume() {
        R r{};
        from_bytes(slot.value, r);
        return r;
      }
    };
    return awaiter(record(), reducer_id<op_t, R>(), to_bytes(lifted));
  }

  // Awaits the next `n` messages to entry method M of this element; they
  // come back as tuples of M's arguments, in arrival order. Messages of M
  // that arrive while nobody awaits wait in the element's mailbox, so none
  // is missed; M's own body never runs.
  template <auto M>
  auto next(std::size_t n = 1) {
    using params = typename member_traits<decltype(M)>::params;
    static_assert(!has_view<params>,
                  "next<> cannot take the messages of an entry method with a std::span "
                  "parameter: the span would outlive its message; take a std::vector or a "
                  "weft::buffer");
    (void)awaited_registered<T, M>;
    (void)entry_registered<T, M>;
    struct awaiter : awaits_with_promise<awaiter> {
      element_record* rec;
      std::uint32_t id;
      mailbox_waiter w;
      bool waiting = false;
      awaiter(element_record* r, std::uint32_t i, std::size_t need) : rec(r), id(i) {
        w.need = need;
      }
      awaiter(const awaiter&) = delete;
      ~awaiter() {
        if (waiting) {
          auto& boxes = rec->extras().mailboxes;
          auto it = boxes.find(id);
          if (it != boxes.end() && it->second.waiter == &w) it->second.waiter = nullptr;
        }
      }
      bool await_ready() {
        mailbox& mb = rec->extras().mailboxes[id];
        if (mb.waiter != nullptr)
          object_error("two coroutines of " + key_string(rec->ref, rec->key) + " await next<" +
                       std::string(member_name_v<M>) + "> at once");
        while (w.got.size() < w.need && !mb.queued.empty()) {
          w.got.push_back(std::move(mb.queued.front()));
          mb.queued.pop_front();
        }
        return w.got.size() >= w.need;
      }
      void suspend(std::coroutine_handle<> h, promise_base* p) {
        w.h = h;
        w.promise = p;
        waiting = true;
        rec->extras().mailboxes[id].waiter = &w;
      }
      std::vector<params> await_resume() {
        waiting = false;
        std::vector<params> out(w.got.size());
        for (std::size_t i = 0; i < w.got.size(); ++i) {
          message& m = *w.got[i];
          pupper p = pupper::unpacker(
              args_of(m), args_size(m),
              header_of(m).in_process ? pupper::reach::this_process : pupper::reach::anywhere);
          unpack_args(p, out[i], member_name_v<M>);
        }
        w.got.clear();
        return out;
      }
    };
    return awaiter(&record(), entry_id<T, M>(), n);
  }

  // A safe point for load balancing: this element is ready to move. Once
  // every element of the array called it, the balancer (--weft:lb) places
  // them by their measured loads and moves them, and each goes on in
  // resume_from_sync() on its PE. In a coroutine entry method,
  // `co_await at_sync()` resumes the coroutine instead (such an element
  // keeps its PE: a suspended coroutine frame cannot be packed). An element
  // calls it once per step; messages sent to it meanwhile are delivered.
  auto at_sync() {
    struct awaiter : awaits_with_promise<awaiter> {
      element_record* rec;
      bool arrived = false;
      explicit awaiter(element_record* r) : rec(r) {}
      awaiter(const awaiter&) = delete;
      // A plain call: the statement ends, the element waits in the step.
      ~awaiter() {
        if (!arrived) arrive_at_sync(*rec, {});
      }
      bool await_ready() const noexcept { return false; }
      void suspend(std::coroutine_handle<> h, promise_base* p) {
        arrived = true;
        rec->extras().sync_p = p;
        arrive_at_sync(*rec, h);
      }
      void await_resume() const noexcept {}
    };
    return awaiter(&record());
  }
  // Whether the balancer may move this element (default true).
  void set_migratable(bool m) { detail::set_migratable(record(), m); }

  // Moves this element to PE `pe` once the current entry method returns:
  // its state is packed (pup), sent, and unpacked there, then
  // on_migrated() runs. Messages sent meanwhile follow it.
  void migrate_to(int pe) { request_migration(record(), pe); }
  // Destroys this element once the current entry method returns.
  void destroy() { request_destroy(record()); }

 private:
  template <class Op, class V>
  auto lift(V value) {
    if constexpr (std::is_same_v<Op, op::set_t>)
      return std::vector<std::pair<I, V>>{{this_index_value(), std::move(value)}};
    else
      return Op::template lift<V>(std::move(value));
  }
  I this_index_value() const { return record().key.template as<I>(); }
};

}  // namespace objects::detail

// ---- arrays --------------------------------------------------------------------

namespace objects::detail {
template <class R, class A>
A map_arg(R (*)(const A&, int));
template <auto Fn>
std::uint32_t user_map_id() {
  using I = decltype(map_arg(Fn));
  static_assert(array_index<I>, "a map function takes (const I& index, int num_pes)");
  static const std::uint32_t id =
      register_map([](const index_key& k, int num_pes) -> int { return Fn(k.as<I>(), num_pes); },
                   std::string(member_name_v<Fn>));
  return id;
}
template <auto Fn>
inline const std::uint32_t map_registered = user_map_id<Fn>();
}  // namespace objects::detail

// Initial placement of an array's elements.
struct array_map {
  objects::detail::map_kind kind = objects::detail::map_kind::block;
  std::uint32_t user_id = 0;

  // Contiguous blocks of the linear index per PE (dense arrays' default).
  static array_map block() { return {objects::detail::map_kind::block, 0}; }
  // Linear index modulo the number of PEs.
  static array_map round_robin() { return {objects::detail::map_kind::round_robin, 0}; }
  // A hash of the index (sparse arrays' default).
  static array_map hash() { return {objects::detail::map_kind::hash, 0}; }
  // A program's function `int Fn(const I& index, int num_pes)`, which must
  // give every PE the same answer.
  template <auto Fn>
  static array_map function() {
    (void)objects::detail::map_registered<Fn>;
    return {objects::detail::map_kind::user, objects::detail::user_map_id<Fn>()};
  }
};

struct array_options {
  array_map map = array_map::block();
};

template <class T, class I>
class element_proxy : public objects::detail::target<T, index_dims<I>> {
 public:
  element_proxy() = default;
  element_proxy(const objects::detail::collection_ref& ref, const I& i)
      : objects::detail::target<T, index_dims<I>>(ref, index_key::of(i),
                                                  &objects::detail::show_key<I>) {}

  // The same element, messages sent with priority `p` (larger runs first).
  element_proxy priority(int p) const {
    element_proxy e = *this;
    e.priority_ = p;
    return e;
  }
  // Inserts the element (sparse arrays, or a destroyed index of a dense
  // one), constructed from `args`, on its home PE or on `pe`.
  template <class... Args>
  void insert(Args&&... args) const {
    insert_on(-1, std::forward<Args>(args)...);
  }
  template <class... Args>
  void insert_on(int pe, Args&&... args) const {
    static_assert(std::is_constructible_v<T, std::decay_t<Args>...>,
                  "the element type has no constructor taking these arguments");
    (void)objects::detail::ctor_registered<T, std::decay_t<Args>...>;
    this->check("insert");
    objects::detail::insert_element(this->ref_, this->key_, pe,
                                    objects::detail::ctor_id<T, std::decay_t<Args>...>(),
                                    objects::detail::pack_ctor_args(std::forward<Args>(args)...));
  }
  // Destroys the element (after what it is running now).
  void destroy() const { objects::detail::send_destroy(this->ref_, this->key_); }
  I index() const { return this->key_.template as<I>(); }
};

template <class T, class I = typename T::index_type>
class array_proxy {
 public:
  array_proxy() = default;
  explicit array_proxy(const objects::detail::collection_ref& ref) : ref_(ref) {}

  // A dense array with bounds `n` (int, index2d or index3d), each element
  // constructed from `args` on its PE.
  template <class... Args>
  static array_proxy create(const I& n, Args&&... args) {
    return create(array_options{}, n, std::forward<Args>(args)...);
  }
  template <class... Args>
  static array_proxy create(const array_options& opts, const I& n, Args&&... args) {
    static_assert(index_dims<I> > 0,
                  "create(bounds, ...) needs a dense index (int, index2d, index3d); sparse "
                  "arrays start empty: create_sparse() and insert");
    static_assert(std::is_constructible_v<T, std::decay_t<Args>...>,
                  "the element type has no constructor taking these arguments");
    (void)objects::detail::ctor_registered<T, std::decay_t<Args>...>;
    objects::detail::collection_ref ref = base_ref(opts);
    ref.dims = std::uint8_t(index_dims<I>);
    int c[3];
    objects::detail::index_coords(n, c);
    for (int d = 0; d < index_dims<I>; ++d) {
      if (c[d] < 0)
        objects::detail::object_error("array<" + std::string(objects::detail::type_name_v<T>) +
                                      ">::create: negative bounds " + index_string(n));
      ref.bounds[d] = c[d];
    }
    return array_proxy(objects::detail::create_collection(
        ref, objects::detail::ctor_id<T, std::decay_t<Args>...>(),
        objects::detail::pack_ctor_args(std::forward<Args>(args)...)));
  }
  // An empty array whose elements are inserted one by one.
  static array_proxy create_sparse(array_options opts = {}) {
    // Blocks need bounds, which a sparse array has not.
    if (opts.map.kind == objects::detail::map_kind::block) opts.map = array_map::hash();
    objects::detail::collection_ref ref = base_ref(opts);
    ref.dynamic = true;
    return array_proxy(objects::detail::create_collection(ref, 0, {}));
  }

  element_proxy<T, I> operator[](const I& i) const { return element_proxy<T, I>(ref_, i); }

  // Calls M on every element, exactly once each (also on elements migrating
  // meanwhile); elements inserted later do not get it.
  template <auto M, class... Args>
  void broadcast(Args&&... args) const {
    objects::detail::broadcast_to<T, M>(ref_, std::forward<Args>(args)...);
  }
  template <auto M>
  auto broadcast_callback() const {
    return objects::detail::broadcast_callback_to<T, M>(ref_);
  }

  // Dense bounds (as created), and the number of elements they hold.
  I bounds() const {
    if constexpr (index_dims<I> == 1)
      return I(ref_.bounds[0]);
    else if constexpr (index_dims<I> == 2)
      return I{ref_.bounds[0], ref_.bounds[1]};
    else if constexpr (index_dims<I> == 3)
      return I{ref_.bounds[0], ref_.bounds[1], ref_.bounds[2]};
    else
      return I{};
  }
  std::size_t size() const {
    std::size_t s = ref_.dims > 0 ? 1 : 0;
    for (int d = 0; d < ref_.dims; ++d) s *= std::size_t(ref_.bounds[d]);
    return s;
  }
  const objects::detail::collection_ref& ref() const noexcept { return ref_; }

 private:
  static objects::detail::collection_ref base_ref(const array_options& opts) {
    static_assert(array_index<I>,
                  "an array index must be trivially copyable, without padding, "
                  "at most 24 bytes");
    static_assert(std::is_base_of_v<objects::detail::element_ops<T, I>, T>,
                  "T must derive from weft::array_element<T, I>");
    (void)objects::detail::element_type_registered<T>;
    objects::detail::collection_ref ref;
    ref.kind = objects::detail::collection_kind::array;
    ref.type = objects::detail::element_type_id<T>();
    ref.map = opts.map.kind;
    ref.user_map = opts.map.user_id;
    return ref;
  }
  objects::detail::collection_ref ref_;
};

template <class T, class I = int>
class array_element : public objects::detail::element_ops<T, I> {
 public:
  I this_index() const { return this->record().key.template as<I>(); }
  array_proxy<T, I> this_proxy() const { return array_proxy<T, I>(this->record().ref); }
  // Dense arrays: the number of elements of the array (its bounds' volume).
  int array_size() const { return int(this_proxy().size()); }
  I array_bounds() const { return this_proxy().bounds(); }
};

template <class T>
using array = array_proxy<T, typename T::index_type>;

// ---- groups and nodegroups ----------------------------------------------------

template <class T>
class group_proxy {
 public:
  group_proxy() = default;
  explicit group_proxy(const objects::detail::collection_ref& ref) : ref_(ref) {}

  // One element per PE, each constructed from `args` on its PE.
  template <class... Args>
  static group_proxy create(Args&&... args) {
    static_assert(std::is_constructible_v<T, std::decay_t<Args>...>,
                  "the element type has no constructor taking these arguments");
    (void)objects::detail::ctor_registered<T, std::decay_t<Args>...>;
    (void)objects::detail::element_type_registered<T>;
    objects::detail::collection_ref ref;
    ref.kind = objects::detail::collection_kind::group;
    ref.type = objects::detail::element_type_id<T>();
    ref.map = objects::detail::map_kind::owner_field;
    ref.dims = 1;
    ref.bounds[0] = num_pes();
    return group_proxy(objects::detail::create_collection(
        ref, objects::detail::ctor_id<T, std::decay_t<Args>...>(),
        objects::detail::pack_ctor_args(std::forward<Args>(args)...)));
  }
  element_proxy<T, int> operator[](int pe) const { return element_proxy<T, int>(ref_, pe); }
  template <auto M, class... Args>
  void broadcast(Args&&... args) const {
    objects::detail::broadcast_to<T, M>(ref_, std::forward<Args>(args)...);
  }
  template <auto M>
  auto broadcast_callback() const {
    return objects::detail::broadcast_callback_to<T, M>(ref_);
  }
  // This PE's element (built now if the creation message has not arrived).
  T* local() const { return static_cast<T*>(objects::detail::local_element(ref_)); }
  const objects::detail::collection_ref& ref() const noexcept { return ref_; }

 private:
  objects::detail::collection_ref ref_;
};

template <class T>
class group_element : public objects::detail::element_ops<T, int> {
 public:
  int this_pe() const { return this->record().key.template as<int>(); }
  group_proxy<T> this_proxy() const { return group_proxy<T>(this->record().ref); }
};

template <class T>
class nodegroup_proxy {
 public:
  nodegroup_proxy() = default;
  explicit nodegroup_proxy(const objects::detail::collection_ref& ref) : ref_(ref) {}

  template <class... Args>
  static nodegroup_proxy create(Args&&... args) {
    static_assert(std::is_constructible_v<T, std::decay_t<Args>...>,
                  "the element type has no constructor taking these arguments");
    (void)objects::detail::ctor_registered<T, std::decay_t<Args>...>;
    (void)objects::detail::element_type_registered<T>;
    objects::detail::collection_ref ref;
    ref.kind = objects::detail::collection_kind::nodegroup;
    ref.type = objects::detail::element_type_id<T>();
    ref.map = objects::detail::map_kind::owner_field;
    ref.dims = 1;
    ref.bounds[0] = num_nodes();
    return nodegroup_proxy(objects::detail::create_collection(
        ref, objects::detail::ctor_id<T, std::decay_t<Args>...>(),
        objects::detail::pack_ctor_args(std::forward<Args>(args)...)));
  }
  element_proxy<T, int> operator[](int node) const { return element_proxy<T, int>(ref_, node); }
  template <auto M, class... Args>
  void broadcast(Args&&... args) const {
    objects::detail::broadcast_to<T, M>(ref_, std::forward<Args>(args)...);
  }
  T* local() const { return static_cast<T*>(objects::detail::local_element(ref_)); }
  const objects::detail::collection_ref& ref() const noexcept { return ref_; }

 private:
  objects::detail::collection_ref ref_;
};

template <class T>
class nodegroup_element : public objects::detail::element_base {
 public:
  using index_type = int;
  int this_node() const { return record().key.template as<int>(); }
  nodegroup_proxy<T> this_proxy() const { return nodegroup_proxy<T>(record().ref); }
};

// ---- chares ----------------------------------------------------------------------

struct chare_id {
  std::int32_t pe = -1;  // the creating PE: its home
  std::uint32_t seq = 0;
  friend bool operator==(const chare_id&, const chare_id&) = default;
};

template <class T>
class chare_proxy : public objects::detail::target<T> {
 public:
  chare_proxy() = default;
  chare_proxy(const objects::detail::collection_ref& ref, const index_key& key)
      : objects::detail::target<T>(ref, key, &objects::detail::show_key<chare_id>) {}
  chare_proxy priority(int p) const {
    chare_proxy c = *this;
    c.priority_ = p;
    return c;
  }
  void destroy() const { objects::detail::send_destroy(this->ref_, this->key_); }
};

template <class T>
class chare : public objects::detail::element_base {
 public:
  using index_type = chare_id;
  chare_proxy<T> this_proxy() const { return chare_proxy<T>(record().ref, record().key); }
  void destroy() { objects::detail::request_destroy(record()); }
};

namespace objects::detail {
template <class T, class... Args>
chare_proxy<T> create_chare(int pe, Args&&... args) {
  static_assert(std::is_base_of_v<chare<T>, T>, "T must derive from weft::chare<T>");
  static_assert(std::is_constructible_v<T, std::decay_t<Args>...>,
                "the chare type has no constructor taking these arguments");
  (void)ctor_registered<T, std::decay_t<Args>...>;
  (void)element_type_registered<T>;
  collection_ref ref = chare_collection(element_type_id<T>());
  index_key key = new_chare_key(pe);
  insert_element(ref, key, pe, ctor_id<T, std::decay_t<Args>...>(),
                 pack_ctor_args(std::forward<Args>(args)...));
  return chare_proxy<T>(ref, key);
}
}  // namespace objects::detail

// A chare placed by the runtime: the nodes take turns (starting with this
// one), and the first PE of that node free to take it constructs it.
template <class T, class... Args>
chare_proxy<T> create(Args&&... args) {
  return objects::detail::create_chare<T>(-2, std::forward<Args>(args)...);
}
// A chare on PE `pe`.
template <class T, class... Args>
chare_proxy<T> create_on(int pe, Args&&... args) {
  if (pe < 0 || pe >= num_pes())
    objects::detail::object_error("create_on<" + std::string(objects::detail::type_name_v<T>) +
                                  ">(" + std::to_string(pe) + "): no such PE (the job has " +
                                  std::to_string(num_pes()) + ")");
  return objects::detail::create_chare<T>(pe, std::forward<Args>(args)...);
}

}  // namespace weft
