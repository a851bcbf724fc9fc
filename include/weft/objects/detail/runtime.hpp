// The objects layer's runtime interface: what the templates in
// collections.hpp, reduction.hpp and future.hpp call into (src/objects).
// Not for programs: names and layouts here may change at any time.
//
// Registration. Entry methods, constructors, element types, reducers and
// index maps get dense ids from tables filled during static initialisation
// (an inline variable per instantiation), so every process of a job started
// from one binary numbers them alike; the tables are read without locks once
// a node runs.
#pragma once
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/core/message.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/objects/index.hpp"
#include "weft/objects/pup.hpp"

namespace weft::objects::detail {

struct promise_base;
class element_base;
struct element_record;
struct local_collection;  // src/objects: one per collection per PE

// ---- collections ------------------------------------------------------------

enum class collection_kind : std::uint8_t { array, group, nodegroup, chare };
enum class map_kind : std::uint8_t { block, round_robin, hash, user, owner_field };

// Everything a PE needs to route a message to a collection's element without
// having seen the collection before: proxies carry it, messages repeat it.
struct collection_ref {
  std::uint64_t id = 0;    // (creator PE + 1) << 32 | creator's counter
  std::uint32_t type = 0;  // element type id
  collection_kind kind = collection_kind::array;
  map_kind map = map_kind::block;
  std::uint8_t dims = 0;  // dense dimensions (0: sparse index)
  bool dynamic = false;   // elements may be inserted after creation
  std::int32_t bounds[3] = {0, 0, 0};
  std::uint32_t user_map = 0;  // map_kind::user: registered map id
  std::int32_t root_pe = 0;    // broadcasts and reductions are rooted here
  std::uint32_t reserved_ = 0;
};

// The PE an element of `ref` lives on unless it migrated.
WEFT_API int home_pe(const collection_ref& ref, const index_key& key) noexcept;
// Readable "array Block#3" for errors.
WEFT_API std::string collection_name(const collection_ref& ref);
WEFT_API std::string key_string(const collection_ref& ref, const index_key& key);

// ---- registries -------------------------------------------------------------

template <class T>
inline const char type_tag = 0;

struct entry_info {
  std::string name;           // "Block::ghost"
  const void* cls = nullptr;  // type_tag of the declaring class
  // A method: unpacks its arguments from the message and calls it on `obj`.
  void (*invoke)(element_base& obj, message& m) = nullptr;
  // A constructor: unpacks its arguments from `p` and builds the element.
  element_base* (*construct)(pupper& p) = nullptr;
  bool awaited = false;    // some coroutine awaits next<this>: its messages wait in a mailbox
  bool exclusive = false;  // nodegroup: never runs beside another exclusive entry of the node
  // A method: the same call packed for another process, from a message
  // packed for this one (obj_header::in_process): what the arguments hold
  // by address (weft::buffer) travels as bytes.
  message_ptr (*to_anywhere)(message& m) = nullptr;
};
WEFT_API std::uint32_t register_entry(entry_info info);
WEFT_API const entry_info& entry(std::uint32_t id) noexcept;
WEFT_API bool mark_awaited(std::uint32_t id);

struct element_type_info {
  std::string name;
  element_base* (*make_empty)() = nullptr;  // default construction for migration; null: cannot
  void (*pup)(element_base&, pupper&) = nullptr;  // null: the type cannot migrate
};
WEFT_API std::uint32_t register_element_type(element_type_info info);
WEFT_API const element_type_info& element_type(std::uint32_t id) noexcept;

struct reducer_info {
  std::string name;
  void (*combine)(std::vector<std::byte>& acc, const std::vector<std::byte>& more) = nullptr;
};
WEFT_API std::uint32_t register_reducer(reducer_info info);

using map_fn = int (*)(const index_key& key, int num_pes);
WEFT_API std::uint32_t register_map(map_fn fn, std::string name);

// ---- elements ----------------------------------------------------------------

// Messages of an awaited entry method wait here for next<>().
struct mailbox_waiter {
  std::size_t need = 0;
  std::vector<message_ptr> got;
  std::coroutine_handle<> h;
  promise_base* promise = nullptr;  // h's, if a weft task (resume)
};
struct mailbox {
  std::deque<message_ptr> queued;
  mailbox_waiter* waiter = nullptr;
};

// Where an element stands in a balancing step (at_sync, sync.cpp).
enum class sync_state : std::uint8_t {
  none,       // running freely
  waiting,    // called at_sync(); resume_from_sync() runs after the step
  coroutine,  // a coroutine awaits at_sync(); it resumes after the step
};

// What few elements use, kept apart from their records (made at the first
// use): a suspended coroutine, next<>'s mailboxes, co_await at_sync().
struct element_extras {
  std::vector<std::coroutine_handle<>> coroutines;  // suspended tasks it owns
  std::unordered_map<std::uint32_t, mailbox> mailboxes;
  std::coroutine_handle<> sync_h;  // co_await at_sync(): resumed after the step
  promise_base* sync_p = nullptr;  // sync_h's promise, if a weft task (resume)
  // The load options that need more than the record's load_cycles
  // (src/objects/sync.cpp; the record has no room left): with
  // --weft:lb-sample > 1, the entries since the last step and how many of
  // them were timed; with --weft:lb-average > 0, the load the last step saw.
  // They move with the element.
  std::uint32_t entries = 0, sampled = 0;
  double previous_load = -1;  // seconds; < 0: no step yet
};

// The runtime's record of one element, shared with the element's base
// class. Two cache lines (128 bytes, a size class of the allocator): making
// and destroying an element writes all of it, and a burst of creations of
// chares that are yet to run holds one per chare, so each line is a cache
// miss per creation once the burst outgrows the cache (with the extras
// inside, 216 bytes: four lines).
struct element_record {
  collection_ref ref;
  index_key key;
  element_base* obj = nullptr;
  local_collection* coll = nullptr;
  std::uint64_t last_bcast = 0;   // broadcasts delivered so far
  const char* running = nullptr;  // entry running now, for errors
  // Load balancing (src/objects/sync.cpp). Time in this element's entry
  // methods since its last step (counted only while balancing is on): TSC
  // cycles, or nanoseconds of CPU time with --weft:lb-load=cpu; with
  // --weft:lb-sample > 1, of the timed entries only.
  std::uint64_t load_cycles = 0;
  std::unique_ptr<element_extras> extras_;  // null until needed: extras()
  std::uint32_t red_round = 0;              // next reduction round this element contributes to
  std::uint32_t epoch = 0;                  // migrations so far (orders location updates)
  int migrate_to = -1;  // requested by migrate_to(), done after the entry returns
  bool destroy_requested = false;
  bool contributed_now = false;  // in the current invocation (twice is an error)
  sync_state sync = sync_state::none;
  bool migratable : 1 = true;   // set_migratable(false): the balancer never moves it
  bool measured : 1 = false;    // an array element of a type with pup: its load is measured
  bool comm : 1 = false;        // measured, and --weft:lb-comm=element: what it sends is counted
  bool load_plain : 1 = false;  // measured by the TSC at every entry (no lb-load=cpu, no sampling)

  element_extras& extras() {
    if (!extras_) extras_ = std::make_unique<element_extras>();
    return *extras_;
  }
  bool has_coroutines() const noexcept { return extras_ && !extras_->coroutines.empty(); }
};
static_assert(sizeof(element_record) <= 128, "an element's record fits two cache lines");

// ---- messages ----------------------------------------------------------------

// What an operation carries in the header besides its target: one member
// per operation (src/objects/state.hpp, op_kind), each read and written by
// name, so that no code packs two fields into one word by hand. 8 bytes, in
// the place of the word they replaced; an entry call's header is written
// whole on every send (new_element_message), future_id first.

// Where an element is, as the news of it says (op_location).
enum location_kind : std::uint32_t { loc_moved = 0, loc_inserted = 1, loc_deleted = 2 };

// op_insert: where the new element starts, chosen by the root.
struct insert_args {
  std::uint32_t first_round;    // the first reduction round it contributes to
  std::uint32_t bcasts_before;  // broadcasts numbered before it (it gets those after)
};
// op_location (with obj_header::arg_pe, where the element is).
struct location_args {
  std::uint32_t epoch;  // its migrations so far: newer news wins
  location_kind kind;
};
union op_args {
  std::uint64_t future_id;  // an entry call<> (with arg_pe, the future's owner); op_future_set
  insert_args insert;       // op_insert
  location_args location;   // op_location
  std::uint64_t bcast_seq;  // op_bcast: the broadcast's number
  std::uint32_t round;      // op_red_partial, op_red_leave, op_allreduce_done: the round
};
static_assert(sizeof(op_args) == 8, "an operation's arguments take 8 bytes of the header");

// Object-level header at the start of an object message's payload; the
// packed arguments follow. It names the collection by id only: the rest of
// the collection's description comes from this PE's table or the node's
// directory (filled when the collection is created), which keeps a message
// with a small argument within two cache lines, header included.
struct alignas(8) obj_header {
  std::uint64_t collection = 0;  // collection_ref::id
  index_key key;
  std::uint32_t entry = 0;
  std::int32_t origin_pe = -1;  // the sender, told the element's place after forwarding
  std::uint16_t hops = 0;
  std::uint8_t in_process = 0;  // arguments packed with pupper::reach::this_process
  std::uint8_t op = 0;          // runtime-internal message kind
  // The PE an operation names: an entry call<>'s future owner (-1: no
  // reply), op_insert_home's and op_insert_root's target (-1: the element's
  // home), op_location's place of the element.
  std::int32_t arg_pe = -1;
  op_args args{};  // by op
};
static_assert(sizeof(obj_header) == 56, "an element message's header is 56 bytes");
static_assert(offsetof(obj_header, arg_pe) == 44 && offsetof(obj_header, args) == 48,
              "the header's layout is the one the hot paths were measured with");

inline obj_header& header_of(message& m) noexcept {
  return *std::launder(reinterpret_cast<obj_header*>(m.data()));
}
inline std::byte* args_of(message& m) noexcept {
  return m.data() + sizeof(obj_header);
}
inline std::size_t args_size(const message& m) noexcept {
  return m.size - sizeof(obj_header);
}

// The core handler of element messages (registered during static
// initialisation).
WEFT_API extern handler_id element_handler_id;

// A message for entry `entry` of element `key` with room for `args_bytes`.
// Inline: it is on every send.
inline message_ptr new_element_message(const collection_ref& ref, const index_key& key,
                                       std::uint32_t entry, std::size_t args_bytes) {
  message_ptr m = make_message(element_handler_id, sizeof(obj_header) + args_bytes);
  // The key is read a word at a time: it was just written that way (a
  // proxy made for this send), and a wider load over narrower stores
  // stalls store-to-load forwarding. The empty asm keeps the compiler from
  // merging the loads into vector ones.
  std::uint64_t k0 = key.w[0], k1 = key.w[1], k2 = key.w[2];
  asm("" : "+r"(k0), "+r"(k1), "+r"(k2));
  // Every field in one go (a default-initialised header would write most
  // of them twice); op 0 is an entry call.
  new (m->data()) obj_header{ref.id, index_key{{k0, k1, k2}}, entry, my_pe(), 0, 0, 0, -1, 0};
  return m;
}
// Routes it to the element of `ref` (wherever it lives now), taking it
// over (a pointer released from its message_ptr: no moves and no null test
// around the call, which is on every send). PE.
WEFT_API void send_element(const collection_ref& ref, message* m);
inline void send_element(const collection_ref& ref, message_ptr&& m) {
  send_element(ref, m.release());
}
// Delivers it to every element of `ref` exactly once. PE.
WEFT_API void broadcast_collection(const collection_ref& ref, message_ptr m);

// Creates a collection: assigns its id, and constructs its elements (dense
// arrays: every index; groups: one per PE; nodegroups: one per node) on
// their PEs with constructor entry `ctor` and the packed arguments. PE.
WEFT_API collection_ref create_collection(collection_ref proto, std::uint32_t ctor,
                                          std::vector<std::byte> args);
// Inserts one element (sparse arrays, chares) on `pe` (-1: its home; -2:
// whichever PE of the node is free first). PE.
WEFT_API void insert_element(const collection_ref& ref, const index_key& key, int pe,
                             std::uint32_t ctor, std::vector<std::byte> args);
// A fresh key for a chare created by this PE for PE `pe` (-2: placed by
// the runtime). Its first word is the chare_id; a chare made for a known
// PE carries that PE + 1 in the second (0: placed by the runtime), and is
// homed there (home_pe): messages go straight to it, and nothing about it
// is recorded anywhere else.
WEFT_API index_key new_chare_key(int pe);
WEFT_API collection_ref chare_collection(std::uint32_t type);

// The element being constructed on this thread (its base class takes it).
WEFT_API element_record* constructing_record() noexcept;
// The local element of a group or nodegroup (null if not there).
WEFT_API element_base* local_element(const collection_ref& ref) noexcept;

// Requests from inside an entry method; carried out when it returns.
WEFT_API void request_migration(element_record& rec, int pe);
WEFT_API void request_destroy(element_record& rec);
// at_sync(): the element waits for the collection's balancing step; `h`
// (a coroutine awaiting at_sync) resumes after it, else resume_from_sync().
WEFT_API void arrive_at_sync(element_record& rec, std::coroutine_handle<> h);
WEFT_API void set_migratable(element_record& rec, bool migratable);

// What an element tells the balancer at at_sync (gathered at the root).
struct sync_record {
  index_key key;
  double load = 0;          // seconds in its entry methods since its last step (or its estimate)
  double background = -1;   // seconds of its PE's other work; negative: not in this record
  std::uint64_t bytes = 0;  // its packed size (0 when not measured)
  std::int32_t pe = 0;
  std::uint32_t epoch = 0;  // its migrations so far
  std::uint8_t migratable = 1;
  std::uint8_t reserved_[7] = {};
};
// What an element of an array sent to an element of any array since the
// last step (--weft:lb-comm=element): one per pair and PE that counted it
// (a sender that moved has a record on each PE it sent from). Each end is
// named by its collection's id and its key: two arrays' keys may be alike.
// `bytes`: the packed arguments, without the runtime's header.
struct comm_record {
  index_key from, to;
  std::uint64_t from_collection = 0, to_collection = 0;
  std::uint64_t messages = 0, bytes = 0;
};
// The arrays a balancing step places, in the order of its records: the
// first `records` records are the first array's, and so on (one array,
// or with --weft:lb-arrays=together every array taking part).
struct step_array {
  std::uint64_t collection = 0;
  std::uint64_t records = 0;
};
// The plan of a balancing step: a PE for each record, in their order, and
// what --weft:lb-stats says of it.
struct balance_plan {
  std::vector<int> pe;
  std::string summary;
  double predicted_max = 0;  // tree_balancer::within: the node's max PE load after
};
// The lb layer's strategy runner (src/lb/runtime.cpp installs it); called
// on the collection's root PE when every element arrived at at_sync (with
// --weft:lb-arrays=together, on PE 0 for the records of every array taking
// part), with what the step's elements sent meanwhile (empty unless
// --weft:lb-comm; records whose receiver is not in `arrays` are traffic
// off the step's arrays). `name` names the step's collection(s) in stats
// and dumps.
using balancer_fn = balance_plan (*)(const std::string& name, std::uint64_t step,
                                     const std::vector<step_array>& arrays,
                                     const std::vector<sync_record>& records,
                                     const std::vector<comm_record>& comm);
WEFT_API void set_balancer(balancer_fn fn);
// --weft:lb=hierarchical at run time: src/objects/sync_tree.cpp carries the
// tree out (records stay on their node; the root sees the groups' totals,
// a group's leader its nodes', and each the records that change node);
// the lb layer decides at each level (src/lb/tree_runtime.cpp).
struct tree_balancer {
  // At the root, from each group's load and PE count, or at a group's
  // leader from its nodes' (with `incoming`, the load the root gave the
  // group): what each sheds (0: nothing).
  std::vector<double> (*shed_amounts)(const std::vector<double>& load,
                                      const std::vector<double>& pes, double incoming) = nullptr;
  // At a group's leader: how much of the group's `amount` each node sheds.
  std::vector<double> (*split)(const std::vector<double>& load, const std::vector<double>& pes,
                               double amount) = nullptr;
  // At the root or a group's leader: the child each shed record goes to,
  // by their loads; `load` is what each child keeps.
  std::vector<int> (*share)(std::vector<double> load, const std::vector<double>& pes,
                            const std::vector<double>& shed) = nullptr;
  // At a node: which of its records it sheds for about `amount`, none of
  // those `offered` already this step.
  std::vector<std::uint32_t> (*pick)(const std::vector<sync_record>& records, double amount,
                                     const std::vector<std::uint32_t>& offered) = nullptr;
  // At the node of PEs [first_pe, first_pe + pes): a PE of the node for
  // each record (one whose pe is outside arrives from another node), and
  // the node's predicted max PE load. `comm`: what the node's PEs counted
  // for array `collection`'s elements (--weft:lb-comm=element; empty
  // otherwise), for a node level that places by communication.
  balance_plan (*within)(const std::vector<sync_record>& records,
                         const std::vector<comm_record>& comm, std::uint64_t collection,
                         int first_pe, int pes) = nullptr;
  // At the root as a step starts: whether step `step` needs the whole
  // snapshot in one place (--weft:lb-dump): the root then gathers every
  // record and communication record and places them through the balancer
  // (balancer_fn), as a flat step does, instead of the tree.
  bool (*whole)(std::uint64_t step) = nullptr;
};
WEFT_API void set_tree_balancer(const tree_balancer& t);
// weft::lb::balance(): a step without at_sync for every array, now.
WEFT_API void request_balance_everywhere();
// A destroy message to an element from outside.
WEFT_API void send_destroy(const collection_ref& ref, const index_key& key);

// ---- coroutines -------------------------------------------------------------

// Adopts a suspended entry-method task for its element (null: main).
WEFT_API void adopt_task(element_record* owner, std::coroutine_handle<> h, promise_base& p,
                         const char* what);
// Resumes a coroutine waiting on something of `owner` (null: not an element).
// `p` is h's promise when h is a weft task: the trace then shows the run as
// the entry method that made the coroutine (or as main).
WEFT_API void resume(element_record* owner, std::coroutine_handle<> h,
                     const promise_base* p = nullptr);

// The base of an awaiter whose coroutine resume() resumes: its
// await_suspend gives Derived::suspend(h, p) the awaiting coroutine and its
// promise when that is a weft task, else null (an awaiter declared inside a
// function cannot have the member template itself).
template <class Derived>
struct awaits_with_promise {
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) {
    promise_base* p = nullptr;
    if constexpr (std::is_base_of_v<promise_base, P>) p = &h.promise();
    static_cast<Derived*>(this)->suspend(h, p);
  }
};

// ---- reductions ---------------------------------------------------------------

// sync: at_sync's round, to the balancer at the root (sync.cpp).
enum class callback_kind : std::uint8_t {
  none,
  element,
  broadcast,
  future,
  exit,
  all_reduce,
  sync
};
struct callback_desc {
  callback_kind kind = callback_kind::none;
  std::int32_t pe = -1;  // future owner
  std::uint32_t entry = 0;
  std::int32_t code = 0;  // exit code
  std::uint64_t future_id = 0;
  collection_ref ref;
  index_key key;
};
WEFT_API bool same_callback(const callback_desc& a, const callback_desc& b) noexcept;

// Contributes this element's value (packed result type) to its next round.
// Returns the round.
WEFT_API std::uint32_t contribute(element_record& rec, std::uint32_t reducer,
                                  const callback_desc& cb, std::vector<std::byte> value);
// Partial results the root of `ref` received so far (this PE must be the
// root): with combining inside nodes, one per node per round. For tests.
WEFT_API std::uint64_t reduction_partials_received(const collection_ref& ref);

// all_reduce results on this PE: a slot filled when the round completes.
struct allreduce_slot {
  std::uint64_t collection = 0;
  std::uint32_t round = 0;
  bool ready = false;
  std::vector<std::byte> value;
  std::coroutine_handle<> h;
  element_record* owner = nullptr;
  promise_base* promise = nullptr;  // h's, if a weft task (resume)
};
WEFT_API void allreduce_register(allreduce_slot* s);
WEFT_API void allreduce_unregister(allreduce_slot* s) noexcept;

// ---- futures -----------------------------------------------------------------

WEFT_API std::uint64_t future_new();
WEFT_API void future_set(int pe, std::uint64_t id, std::vector<std::byte> value);
// True and the value moved out if it arrived (owner PE only).
WEFT_API bool future_take(std::uint64_t id, std::vector<std::byte>& out);
WEFT_API void future_wait(std::uint64_t id, std::coroutine_handle<> h, promise_base* waiter);
WEFT_API void future_cancel(std::uint64_t id) noexcept;

// ---- readonly globals ---------------------------------------------------------

// Packs or unpacks one weft::readonly's value (null: its type cannot be
// serialized, so it cannot reach another process).
using readonly_pup_fn = void (*)(void* self, pupper& p);
WEFT_API void register_readonly(void* self, readonly_pup_fn pup, std::string_view type);
WEFT_API void unregister_readonly(void* self) noexcept;

// ---- errors ------------------------------------------------------------------

[[noreturn]] WEFT_API void object_error(const std::string& what);
WEFT_API void require_pe(const char* what);

}  // namespace weft::objects::detail
