// What the files of the objects layer's runtime share: the per-PE and
// per-node state's roots, the handler ids, and the helpers every protocol
// uses (finding this PE's part of a collection, sending an object message,
// delivering one to an element). One file per concept includes it:
//
//   location.cpp     home PEs, the route cache, forwarding, send_element and
//                    the element handler (the hot paths: one translation
//                    unit with the inline helpers below)
//   lifecycle.cpp    node and PE start and stop, main's setup gate, readonlies
//   dispatch.cpp     the control handler: one switch, a call per operation
//   collections.cpp  the directory, creation, insertion, elements' life
//   migration.cpp    an element leaving and arriving
//   broadcast.cpp    numbered broadcasts and catching up after migration
//   reduction.cpp    per-PE rounds, node combining, the root, all_reduce
//   nodegroup.cpp    nodegroups (any PE of the node runs them)
//   future.cpp       futures and coroutine bookkeeping
//   registry.cpp     entry, type, reducer and map tables (state.hpp)
//
// docs/design/objects.md explains the protocols; the comments in each file
// say why each step is where it is.
//
// All per-PE state is reached through a thread-local pointer and touched
// only by its PE; node-level state (nodegroups, reduction combiners) sits
// behind a short mutex. Every message goes through core's send: a message to
// an element on this PE is queued like any other, never called inline.
//
// Everything here is in weft::objects::detail, apart from core's
// weft::detail (whose names are written in full here); the names are
// shared by ten files, so each says what it is for (no bare send_to,
// pe_state or dispatch).
#pragma once
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>
#include "base/op_count.hpp"
#include "objects/state.hpp"
#include "weft/base/error.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/trace/hooks.hpp"

namespace weft::objects::detail {

// ---- state ---------------------------------------------------------------------

// This PE's objects (null off a PE). Defined in location.cpp, whose hot
// paths read it directly; constinit: no TLS initialisation wrapper elsewhere.
[[gnu::visibility("hidden")]] extern constinit thread_local pe_objects* t_pe_objects;
// The element being constructed on this thread (its base class takes it).
[[gnu::visibility("hidden")]] extern constinit thread_local element_record* t_constructing_record;
// Set while a node runs.
[[gnu::visibility("hidden")]] extern node_objects* g_node_objects;

// The node's lock (g_node_objects->mutex), taken through here so that it
// counts (base/op_count.hpp): every PE of the node may take it, so a path
// that takes it once per operation serialises as the node grows.
[[nodiscard]] inline std::unique_lock<std::mutex> lock_node_objects() {
  base::count(base::op::shared_rmw);
  return std::unique_lock<std::mutex>(g_node_objects->mutex);
}
// The entry table, fixed while a node runs (location.cpp: read on every
// delivery).
[[gnu::visibility("hidden")]] extern std::span<const entry_info> g_entry_table;

// The handlers (lifecycle.cpp registers them): element_handler_id
// (detail/runtime.hpp) takes messages for an element (entry, destroy);
// nodegroup_handler_id messages for a nodegroup (any PE of the node takes
// them); control_handler_id everything else.
[[gnu::visibility("hidden")]] extern handler_id nodegroup_handler_id;
[[gnu::visibility("hidden")]] extern handler_id control_handler_id;

// An entry method named by a message (checked: the id comes from outside).
[[gnu::always_inline]] inline const entry_info& checked_entry(std::uint32_t id) {
  if (id >= g_entry_table.size()) [[unlikely]]
    base::fatal("objects: a message names entry method id %u; only %zu are registered", id,
                g_entry_table.size());
  return g_entry_table[id];
}

[[noreturn, gnu::cold, gnu::noinline]] void off_pe_error();

[[gnu::always_inline]] inline pe_objects& this_pe_objects() {
  if (t_pe_objects == nullptr) [[unlikely]]
    off_pe_error();
  return *t_pe_objects;
}

inline std::string entry_name(std::uint32_t id) {
  return entry(id).name;
}

inline std::string element_name(const element_record& rec) {
  return key_string(rec.ref, rec.key);
}

// ---- dense indices -------------------------------------------------------------

inline std::uint64_t linear_index(const collection_ref& ref, const index_key& key) {
  int c[3] = {0, 0, 0};
  std::memcpy(c, key.w, sizeof(int) * std::size_t(ref.dims));
  std::uint64_t lin = 0;
  for (int d = 0; d < ref.dims; ++d) lin = lin * std::uint64_t(ref.bounds[d]) + std::uint64_t(c[d]);
  return lin;
}

inline std::uint64_t dense_count(const collection_ref& ref) {
  std::uint64_t n = ref.dims > 0 ? 1 : 0;
  for (int d = 0; d < ref.dims; ++d) n *= std::uint64_t(ref.bounds[d]);
  return n;
}

// ---- chares --------------------------------------------------------------------

// The PE a chare made by create_on lives on, which is its home too (the
// second word of its key, new_chare_key); -1: a chare placed by the
// runtime, homed at its creator, which the constructing PE tells where it
// went. Chares never move, so a placed chare needs no location record
// anywhere: its messages go straight to it, and its PE alone tells an early
// message (kept) from a late one (an error) by the chare's number
// (local_collection::chares_arrived).
[[gnu::always_inline]] inline int chare_place(const index_key& key) noexcept {
  return int(key.w[1]) - 1;
}

// ---- sending -------------------------------------------------------------------

// A control message (handler control_handler_id) about element `key` of `ref`
// (dispatch.cpp), with room for `payload` bytes after the header.
message_ptr new_control_message(const collection_ref& ref, const index_key& key, op_kind op,
                                std::size_t payload);

// Whether PE `pe` is on this node (PEs are numbered node by node).
[[gnu::always_inline]] inline bool pe_on_this_node(int pe) noexcept {
  return unsigned(pe - my_node() * node_size()) < unsigned(node_size());
}

// An entry call packed for this process (pointers inside, see
// obj_header::in_process), packed again to leave it (location.cpp).
[[gnu::noinline]] message_ptr repack_for_another_node(message_ptr m);

// Every object message leaves the PE here (or through send_to_node_of):
// one packed for this process is packed again when its target is on
// another node, wherever it was sent from or forwarded by.
[[gnu::always_inline]] inline void send_object_to_pe(int pe, message* m) {
  if (num_nodes() > 1 && header_of(*m).in_process != 0 && !pe_on_this_node(pe)) [[unlikely]]
    m = repack_for_another_node(message_ptr(m)).release();
  weft::detail::send_released(pe, m);
}
[[gnu::always_inline]] inline void send_object_to_pe(int pe, message_ptr&& m) {
  send_object_to_pe(pe, m.release());
}

// To any PE of node `node` (nodegroups, chares placed by the runtime).
void send_to_node_of(int node, message_ptr m);

// Any object message, to its handler (messages kept for later).
void dispatch_object_message(message_ptr m);
// On a node other than 0 before main's setup ended: `m` waits (lifecycle.cpp).
void hold_until_setup(message_ptr m);

// The three handlers.
void on_element_message(message_ptr m);
void on_nodegroup_message(message_ptr m);
void on_control(message_ptr m);

// ---- this PE's part of a collection (collections.cpp) --------------------------

[[gnu::always_inline]] inline local_collection* find_local_collection(std::uint64_t id) {
  pe_objects& s = this_pe_objects();
  if (s.last != nullptr && s.last->ref.id == id) return s.last;
  auto it = s.collections.find(id);
  if (it == s.collections.end()) return nullptr;
  s.last = it->second.get();
  return s.last;
}

void register_collection(const collection_ref& ref);
// This PE's part of a collection, made on first touch (without creating it).
local_collection& make_local_collection(const collection_ref& ref);
// This PE's part of a collection, created here first if its creator
// registered it on this node: a collection is usable on every PE of the node
// as soon as create() returns, whether or not the creation message arrived.
local_collection& get_local_collection(const collection_ref& ref);

// The same, for a collection named by id in a message: inline for the
// common case (the collection of the previous message, created here).
[[gnu::noinline]] local_collection& get_local_collection_first(std::uint64_t id,
                                                               local_collection* lc);
[[gnu::always_inline]] inline local_collection& get_local_collection(std::uint64_t id) {
  local_collection* lc = find_local_collection(id);
  if (lc != nullptr && lc->created) [[likely]]
    return *lc;
  return get_local_collection_first(id, lc);
}

// This PE's part of the collection message `m` names; null when this node
// has not learnt the collection yet (its creation message, from another
// node, is still on its way): then `m` waits, parked, until this PE's
// creation message arrives. Later messages for it wait behind the parked
// ones, so that they keep their order.
[[gnu::noinline]] local_collection* local_collection_for_first(std::uint64_t id,
                                                               local_collection* lc,
                                                               message_ptr& m);
[[gnu::always_inline]] inline local_collection* local_collection_for(message_ptr& m) {
  const std::uint64_t id = header_of(*m).collection;
  local_collection* lc = find_local_collection(id);
  if (lc != nullptr && lc->created) [[likely]]
    return lc;
  return local_collection_for_first(id, lc, m);
}

// ---- elements (collections.cpp) ------------------------------------------------

element_record& construct_element(local_collection& lc, const index_key& key, std::uint32_t ctor,
                                  const std::byte* args, std::size_t n, std::uint32_t round,
                                  std::uint32_t epoch);
void remove_element(local_collection& lc, element_record& rec);
// Destroys the coroutine frames an element owns.
void destroy_frames(element_record& rec);
// What an entry asked for (destroy, migrate), carried out when it returned.
void after_entry(element_record& rec);
// Migration (migration.cpp).
// Returns the packed bytes sent (0 when it stays).
std::size_t migrate_out(local_collection& lc, element_record& rec, bool by_balancer = false);
// The bytes migrate_out would send for it now.
std::size_t packed_size(const element_record& rec);
// Moves inside the process: the record itself, by pointer (migration.cpp).
bool can_move_by_pointer(const element_record& rec, int to);
void move_by_pointer(local_collection& lc, element_record& rec, int to, bool by_balancer);
void receive_element_by_pointer(message_ptr m);

// ---- location (location.cpp) ---------------------------------------------------

// Tells the home of `key` where it is now (or that it is gone).
void tell_home(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
               location_kind kind);
void apply_home_update(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
                       location_kind kind);
// What this PE knows of where `key` is: news at least as new as what it
// knew replaces it (at the element's home, its home table).
void learn_location(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
                    location_kind kind);
// Kept messages are delivered here and now, in the order they came: queued
// again they would fall behind what the same senders sent later.
void redeliver_kept(local_collection& lc, std::vector<message*> msgs);

// ---- delivery to an element that is here (location.cpp's hot path) ------------

[[gnu::noinline, gnu::cold]] void trace_entry_begin(const element_record& rec, const entry_info& e);
[[gnu::noinline, gnu::cold]] void trace_entry_end(const entry_info& e);
// Summary mode's common case, in place of those calls: an entry (kind
// entry_begin or entry_end) that is not timed is only counted, which is a
// few instructions (trace/hooks.hpp); false when the hook must take it.
[[gnu::always_inline]] inline bool trace_entry_counted(trace::kind k, const entry_info& e) {
  trace::detail::fast_path& f = trace::detail::t_fast;
  return f.summary &&
         trace::detail::summary_untimed(f, k, std::uint32_t(&e - g_entry_table.data()));
}
[[gnu::noinline]] bool deliver_special(element_record& rec, message_ptr& m);
[[gnu::noinline]] void deliver_to_mailbox(element_record& rec, message_ptr m);

// ---- load balancing (sync.cpp) -------------------------------------------------

// Entry methods' wall time is measured per element (--weft:lb is on). Set
// before the PEs start, read-only while they run.
extern bool g_measure_load;
// The load database covers the elements that can migrate: array elements of
// a type with pup, while balancing is on (two clock reads per entry method,
// ~20 ns here; the others pay nothing and count in their PE's background).
bool is_measured(const collection_ref& ref);
// Sets the record's measured and load_plain for an element of `ref`.
void set_measured(element_record& rec, const collection_ref& ref);
// --weft:lb-load, -average and -sample (docs/lb.md "Load options"). Set
// before the PEs start, read-only while they run.
struct load_options {
  bool cpu = false;    // the PE thread's CPU time instead of the TSC's wall time
  int sample = 1;      // one entry timed in `sample` per PE, on average
  double average = 0;  // the previous step's weight in a step's loads
};
extern load_options g_load;
// Time in element entry methods on this PE (every collection's, timed
// entries only), beside the element's own: background is the PE's busy
// time less these.
extern thread_local std::uint64_t t_element_cycles;
// Sampling's state on a PE (sync.cpp): one thread_local, so that an entry
// pays one look-up of it (__tls_get_addr in the shared library), not four.
struct pe_sampling {
  std::int64_t gap = 1;                       // entries until the next timed one
  std::uint64_t rng = 0x9e3779b97f4a7c15ull;  // xorshift state that draws the gaps
  std::uint64_t entries = 0, sampled = 0;     // measured elements' entries, timed ones
};
extern thread_local pe_sampling t_sampling;
[[gnu::always_inline]] inline void count_element_cycles(element_record& rec, std::uint64_t c) {
  rec.load_cycles += c;
  t_element_cycles += c;
}
// --weft:lb-comm=element: elements measured (is_measured) count what they
// send to elements of arrays, theirs and others (set before the PEs start).
extern bool g_comm_records;
// While an element with `comm` runs an entry method, it is its PE's sender
// (pe_objects::comm_sender); a nested entry of another counted element
// takes over and gives the outer one back (comm_leave).
[[gnu::always_inline]] inline element_record* comm_enter(element_record& rec) {
  return std::exchange(t_pe_objects->comm_sender, &rec);
}
[[gnu::always_inline]] inline void comm_leave(element_record* outer) {
  t_pe_objects->comm_sender = outer;
}
// Counts `m`, about to be sent to an element of `to`, for s.comm_sender,
// in the sender's collection's table. (The callers test s.comm_sender and
// pass `s`: a compare with memory, where passing the sender kept it in a
// register, one instruction more per send.)
[[gnu::noinline]] void record_comm(pe_objects& s, const collection_ref& to, message& m);
// invoke_entry for an element with `comm`: out of line, so that the entry
// calls of others test one bit and keep nothing across the call.
[[gnu::noinline]] void invoke_entry_counted(element_record& rec, const entry_info& e, message& m);
// The clock where a measured element's entry method starts, or 0 when this
// entry is not timed (sampling: a PE-local countdown of random length, mean
// N, so that entries in a fixed rotation do not always time the same
// element); end_load adds what it took. Only the default (the TSC, every
// entry) is inline, and chosen by a bit of the record, which is in a
// register already: the other cases inlined, or g_load read, made every
// element message's delivery save one more register, balancing on or off
// (4 instructions a message more in callgrind).
[[gnu::noinline]] std::uint64_t begin_load_other(element_record& rec);
[[gnu::noinline]] void end_load_other(element_record& rec, std::uint64_t t0);
[[gnu::always_inline]] inline std::uint64_t begin_load(element_record& rec) {
  return rec.load_plain ? base::cycles() : begin_load_other(rec);
}
[[gnu::always_inline]] inline void end_load(element_record& rec, std::uint64_t t0) {
  if (rec.load_plain)
    count_element_cycles(rec, base::cycles() - t0);
  else
    end_load_other(rec, t0);
}
// The load state that moves with a migrating element (migration.cpp):
// packed or unpacked as `p` says.
void pup_load(element_record& rec, pupper& p);
// The load database (load_database.cpp), as sync.cpp's steps take it.
// The load of `rec` a step sees (its estimate, or its measured time,
// sampled and averaged as the options say); its next interval starts.
double step_load(const local_collection& lc, element_record& rec);
// This PE's busy time outside every element since lc's last step here
// (seconds); its next interval starts.
double background_since_last(local_collection& lc);
// The PE's interval for lc starts now.
void start_pe_interval(local_collection& lc);
// --weft:lb-sample: this PE's first gap (each PE draws its own).
void start_sampling();
// What this PE counted for lc since the root last took it.
std::vector<comm_record> take_comm(local_collection& lc);
// A migrating element's state says whether the balancer moved it (the new
// PE counts it in the step) and whether it waits in at_sync.
void sync_element_arrived(local_collection& lc, element_record& rec, bool by_balancer);
void sync_node_start();
// One of the paused messages that follow an element the step moved here
// arrived (sync_pause.cpp): the PE's part of the step waits for them.
void sync_follower_arrived(local_collection& lc);
void receive_sync_plan(message_ptr m);

// ---- pauses of steps without at_sync (sync_pause.cpp) ----------------------------

// A message for an element here while lc is paused: it waits, in order.
void pause_message(local_collection& lc, message_ptr m);
// The element leaves for `to`: its paused messages, taken out (they go
// after it, as many as its migration message says).
std::vector<message*> take_paused(local_collection& lc, const index_key& key);
// An element the step moved arrived with `n` paused messages behind it.
void expect_followers(local_collection& lc, const index_key& key, std::uint32_t n);
// The step ended: what waited is delivered (or forwarded), in order.
void resume_paused(local_collection& lc);
// Every case of an element message (location.cpp).
void on_element_message_general(message_ptr m);
// Packed elements the balancer sent from here arrived (their bytes).
void sync_acked(local_collection& lc, std::uint64_t bytes);
void receive_sync_done(message_ptr m);
void receive_sync_resume(message_ptr m);
void receive_sync_count(message_ptr m);
void receive_sync_counts(message_ptr m);
void receive_lb_start(message_ptr m);
void receive_lb_collect(message_ptr m);
void receive_lb_records(message_ptr m);
void sync_pe_start();
// Trivially copyable values in a control message's arguments, from byte
// `at` (reading: to the end).
template <class T>
void append_bytes(message& m, std::size_t at, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(args_of(m) + at, v.data(), v.size() * sizeof(T));
}
template <class T>
std::vector<T> read_bytes(message& m, std::size_t at) {
  std::vector<T> v((args_size(m) - at) / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), args_of(m) + at, v.size() * sizeof(T));
  return v;
}
// --weft:lb-arrays=together (sync_group.cpp): an array's at_sync step
// sends its records to PE 0, which places the arrays taking part as one set
// and sends each root its part, which carry_out_plan carries out.
void send_records_to_group(local_collection& lc, std::uint64_t step);
balancer_fn balancer();
void carry_out_plan(local_collection& lc, std::uint64_t step, balance_plan plan);
void join_group(local_collection& lc);
void receive_group_join(message_ptr m);
void receive_group_records(message_ptr m);
void receive_group_plan(message_ptr m);
// --weft:lb=hierarchical (sync_tree.cpp, sync_tree_group.cpp): records
// stay on their node; the root sees per group of nodes a load and the
// records that change group, a group's leader the same per node; every PE
// gets one plan message from its node's first PE. end_step ends a step at
// the root once every PE reported (and, in the tree, every group its
// moves).
sync_tree_state& tree_state(local_collection& lc);
void start_tree_step(local_collection& lc, std::uint64_t step);
std::vector<sync_record> records_between_entries(local_collection& lc);
void end_step(local_collection& lc);
// One PE's part of a step's plan: the elements it sends, how many arrive.
void send_plan(local_collection& lc, int pe, std::int64_t incoming,
               const std::vector<sync_move>& out, bool unassisted);
// What sync_tree.cpp and sync_tree_group.cpp share: the lb layer's
// decisions, the groups (--weft:lb-tree-group consecutive nodes each; the
// leader of a group is its first node's first PE, or the root when there
// is one group, so that one group costs no hop), a summary, and the
// root's parts that the only group's leader calls directly.
const tree_balancer& tree_decisions();
int tree_groups();
int tree_group_of(int node);
int tree_group_first(int group);  // its first node
int tree_group_nodes(int group);
int tree_group_leader(const local_collection& lc, int group);
struct tree_summary {
  double load = 0;
  double max_pe = 0;
  std::uint64_t records = 0;
};
void tree_root_summary(local_collection& lc, int group, const tree_summary& s);
void tree_root_moves(local_collection& lc, double predicted, std::uint64_t crossing,
                     const std::vector<sync_move>& moves);
// The moves of a node (op_tree_moves) or of a group (op_tree_group_moves):
// the largest predicted PE load, how many records changed node, and every
// move. One format, written and read here (sync_tree.cpp).
struct tree_moves {
  double predicted = 0;
  std::uint64_t crossing = 0;
  std::vector<sync_move> moves;
};
message_ptr make_tree_moves(local_collection& lc, op_kind op, int arg_pe, double predicted,
                            std::uint64_t crossing, const std::vector<sync_move>& moves);
tree_moves read_tree_moves(message& m);
void tree_group_level(local_collection& lc, std::vector<sync_record> incoming);
void receive_tree_go(message_ptr m);
void receive_tree_records(message_ptr m);
void receive_tree_summary(message_ptr m);
void receive_tree_quota(message_ptr m);
void receive_tree_offer(message_ptr m);
void receive_tree_assign(message_ptr m);
void receive_tree_placed(message_ptr m);
void receive_tree_moves(message_ptr m);
void receive_tree_group_summary(message_ptr m);
void receive_tree_group_quota(message_ptr m);
void receive_tree_group_offer(message_ptr m);
void receive_tree_group_assign(message_ptr m);
void receive_tree_group_moves(message_ptr m);
// The at_sync round of `ref` completed at its root with these records.
void sync_round_done(const collection_ref& ref, std::vector<std::byte> value);

// Runs entry `e` of the element with the arguments in `m` (the caller
// frees `m` afterwards).
[[gnu::always_inline]] inline void invoke_entry(element_record& rec, const entry_info& e,
                                                message& m) {
  if (rec.comm) [[unlikely]] {
    invoke_entry_counted(rec, e, m);
    return;
  }
  rec.contributed_now = false;
  rec.running = e.name.c_str();
  if (trace::on() && !trace_entry_counted(trace::kind::entry_begin, e)) [[unlikely]]
    trace_entry_begin(rec, e);
  const std::uint64_t t0 = __builtin_expect(rec.measured, 0) ? begin_load(rec) : 0;
  try {
    e.invoke(*rec.obj, m);
  } catch (const serialization_error& ex) {
    base::fatal("%s: the arguments of %s do not unpack: %s", element_name(rec).c_str(),
                e.name.c_str(), ex.what());
  } catch (const std::exception& ex) {
    base::fatal("entry method %s of %s on PE %d threw %s", e.name.c_str(),
                element_name(rec).c_str(), my_pe(), ex.what());
  }
  if (t0 != 0) [[unlikely]]
    end_load(rec, t0);
  if (trace::on() && !trace_entry_counted(trace::kind::entry_end, e)) [[unlikely]]
    trace_entry_end(e);
  rec.running = nullptr;
}

// What a message for an element that is here needs before (or instead of)
// an ordinary entry call is in deliver_special; an awaited entry's message
// goes to deliver_to_mailbox.
// A message for an element that is here. Inlined into its callers: the
// plain entry call (not forwarded, not awaited) takes no other branch.
[[gnu::always_inline]] inline void deliver_to_element(element_record& rec, message_ptr&& m) {
  const obj_header& h = header_of(*m);
  if ((h.hops | h.op) != 0 && !deliver_special(rec, m)) [[unlikely]]
    return;
  const entry_info& e = checked_entry(h.entry);
  if (e.awaited) [[unlikely]] {
    deliver_to_mailbox(rec, std::move(m));
    return;
  }
  invoke_entry(rec, e, *m);
  m.reset();
  if (rec.destroy_requested || rec.migrate_to >= 0) [[unlikely]]
    after_entry(rec);
}

// ---- broadcasts (broadcast.cpp) ------------------------------------------------

void handle_bcast(local_collection& lc, message_ptr m);
// An element left for another PE (migration) or its insertion was numbered
// here (the root): keep the broadcasts after `had` for it until its
// destination says which it needs.
void bcast_departed(local_collection& lc, const index_key& key, std::uint32_t epoch,
                    std::uint64_t had);
// An element arrived with its broadcast count: it catches up from this PE's
// history, or from `source` (where bcast_departed kept them), and tells
// `source` what it took; the same message acknowledges `acked` packed bytes
// of a balancing step (sync.cpp), so that an arrival costs one answer.
void bcast_arrived(local_collection& lc, element_record& rec, int source, std::uint64_t acked = 0);
// Waiting for broadcasts from its last PE: it cannot move on before it has them.
inline bool bcast_fetching(const local_collection& lc, const index_key& key) {
  return !lc.bcast_fetching.empty() && lc.bcast_fetching.contains(key);
}
// The element is destroyed: it waits for nothing more.
void bcast_forget(local_collection& lc, const index_key& key);
void receive_bcast_need(message_ptr m);
void receive_bcast_forward(message_ptr m);

// ---- reductions (reduction.cpp) ------------------------------------------------

node_combiner* node_combiner_for(const collection_ref& ref);
void round_hist_add(local_collection& lc, std::uint32_t r);
void round_hist_remove(local_collection& lc, std::uint32_t r);
// Reports what this PE passed to the node's combiner, with the partial
// results of those rounds, and sends whatever leaves the node.
void reduction_flush(local_collection& lc);
// The root's reductions of `lc` (an error off the root).
root_reduction& root_reduction_of(local_collection& lc);

// ---- nodegroups (nodegroup.cpp) ------------------------------------------------

void create_nodegroup_here(const collection_ref& ref, std::uint32_t ctor, const std::byte* args,
                           std::size_t n);
// This node's nodegroup element, if built (null: not yet).
element_base* nodegroup_local_element(const collection_ref& ref);

// ---- control operations, one per op_kind (dispatch.cpp calls them) ------------

// collections.cpp
void receive_creation(message_ptr m);
void receive_insert(message_ptr m);
void receive_insert_at_home(message_ptr m);
void receive_insert_at_root(message_ptr m);
// location.cpp
void receive_location(message_ptr m);
// migration.cpp
void receive_migrating_element(message_ptr m);
// broadcast.cpp
void receive_bcast_request(message_ptr m);
void receive_bcast(message_ptr m);
// reduction.cpp
void receive_reduction_partial(message_ptr m);
void receive_reduction_up(message_ptr m);
void receive_element_left(message_ptr m);
void receive_allreduce_result(message_ptr m);
// future.cpp
void receive_future_value(message_ptr m);
// lifecycle.cpp
void receive_setup_done(message_ptr m);

}  // namespace weft::objects::detail
