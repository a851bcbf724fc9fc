// Library-private state of the objects layer: per PE (collections, their
// elements and location knowledge, reductions, futures) and per node
// (nodegroups, reduction combiners). See docs/design/objects.md.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "weft/objects/coroutine.hpp"
#include "weft/objects/detail/runtime.hpp"

namespace weft::objects::detail {

void freeze_registries(bool frozen);
std::uint64_t registry_fingerprint();
// The entry table, fixed while a node runs (registries are frozen).
std::span<const entry_info> entry_table() noexcept;
// Element types registered (ids 0 .. count - 1).
std::uint32_t element_type_count() noexcept;
const reducer_info& reducer(std::uint32_t id);
map_fn user_map(std::uint32_t id);
struct readonly_entry {
  void* self = nullptr;
  readonly_pup_fn pup = nullptr;
  std::string type;
};
// The program's readonlies now, in construction order.
std::vector<readonly_entry> readonly_table();

inline constexpr std::int64_t passed_all = std::numeric_limits<std::int64_t>::max();

// Runtime-internal kinds of object messages (obj_header::op).
enum op_kind : std::uint8_t {
  op_entry = 0,        // an entry method call to an element
  op_destroy,          // destroy an element
  op_create,           // construct this PE's (node's) part of a new collection
  op_insert,           // construct one element here; args.insert: where it starts
  op_insert_home,      // at home: expect the element (keep its messages), then op_insert_root
  op_insert_root,      // at the root: choose the first round, then op_insert; arg_pe: the PE
  op_location,         // an element's place: arg_pe, args.location (epoch, kind)
  op_migrate_in,       // a migrating element's state
  op_bcast_request,    // at the root: number and send a broadcast
  op_bcast,            // a numbered broadcast; args.bcast_seq: its number
  op_red_partial,      // at the root: a partial reduction result of round args.round
  op_red_leave,        // at the root: an element left at round args.round
  op_allreduce_done,   // to every PE: the result of all_reduce round args.round
  op_future_set,       // to the owner PE: the value of future args.future_id
  op_red_up,           // to the parent node: a child node's partial results and what it passed
  op_setup_done,       // to every PE of other nodes: main's setup ended; the readonly values
  op_sync_plan,        // from the root: elements of this PE to move, and how many arrive
  op_sync_done,        // to the root: this PE's moves of the step are over
  op_sync_resume,      // to every PE: the balancing step ended; resume the waiting elements
  op_sync_count,       // to every PE: how many element messages of the collection it sent and took
  op_sync_counts,      // to the root: the answer
  op_lb_start,         // to the root: balance the collection now, without at_sync (on demand)
  op_lb_collect,       // to every PE: the records of the elements here, for a step without at_sync
  op_lb_records,       // to the root: the answer
  op_migrate_pointer,  // an element moving inside the process: its record, by pointer
  op_tree_go,          // to every PE (hierarchical): send the step's records to the node's first PE
  op_tree_records,     // to the node's first PE: a PE's records
  op_tree_summary,     // to the group's leader: a node's load, max PE load and records
  op_tree_quota,       // to a node's first PE: how much load to offer
  op_tree_offer,       // to the group's leader: the records a node offers
  op_tree_assign,      // to a node's first PE: records arriving, its own that stay
  op_tree_placed,      // to the first PE of a record's old node: its new PE
  op_tree_moves,       // to the group's leader: a node's moves (and its predicted max PE load)
  op_tree_group_summary,  // to the root: a group's load, max PE load and records
  op_tree_group_quota,    // to a group's leader: how much load the group offers
  op_tree_group_offer,    // to the root: the records a group offers
  op_tree_group_assign,   // to a group's leader: the records the root gives the group
  op_tree_group_moves,    // to the root: a group's moves
  op_sync_group_join,  // to PE 0: an element of the collection called at_sync (lb-arrays=together)
  op_sync_group_records,  // to PE 0: the collection's records of its at_sync step
  op_sync_group_plan,     // from PE 0: the collection's part of the joint plan
  op_bcast_need,     // to an element's last PE: it arrived; the broadcasts to send it; bytes acked
  op_bcast_forward,  // a broadcast an element missed, from its last PE; args.bcast_seq
};

struct location {
  int pe = -1;
  std::uint32_t epoch = 0;
  bool deleted = false;
  bool inserting = false;  // home: an insert is on its way; keep the messages
};

struct partial {
  std::uint32_t reducer = 0;
  callback_desc cb;
  std::uint64_t count = 0;
  std::vector<std::byte> value;
};

// Node-level combining of one collection's reductions: a slot per PE of the
// node and one per child node in the spanning tree of nodes holds the rounds
// that PE or subtree has passed (every element there contributed); a round
// leaves the node, for the parent node or the root PE, once every slot
// passed it.
struct node_combiner {
  std::mutex mutex;
  std::vector<std::int64_t> passed;  // the node's PEs by rank, then the children; -1: nothing yet
  std::vector<int> children;         // child nodes, in slot order
  int parent = -1;                   // parent node; -1: this node holds the root PE
  // Reports of a child node, applied in the order it numbered them.
  struct child_report {
    std::uint64_t applied = 0;  // the last one applied
    std::map<std::uint64_t, std::pair<std::int64_t, std::vector<std::pair<std::uint32_t, partial>>>>
        ahead;  // came before an earlier one
  };
  std::vector<child_report> child_reports;
  std::uint64_t report_seq = 0;  // reports sent to the parent
  std::int64_t completed = -1;
  std::int64_t reported = std::numeric_limits<std::int64_t>::min();  // passed, as the parent knows
  std::map<std::uint32_t, partial> acc;
};

// The root's view of one collection's reductions.
struct root_reduction {
  std::int64_t base_expected = 0;
  std::map<std::uint32_t, std::int64_t> deltas;  // elements joining (+) or leaving (-) from a round
  std::map<std::uint32_t, partial> acc;
  std::uint32_t next_deliver = 0;
  std::int64_t max_seen = -1;
  std::uint64_t partials_received = 0;  // messages: one per node per round when combined
};

// Element and location tables are looked up on every send and every
// delivery: open addressing (one probe of a control group, no node to chase,
// no division by a prime) keeps that a few nanoseconds. Entries move on
// rehash, so the code keeps no reference into a table across an insertion.
template <class V>
using key_map = absl::flat_hash_map<index_key, V, index_key_hash>;

// The elements of a collection on this PE, by key: pointers to their
// records in an open-addressing set, hashed and compared by the key inside
// each record, which owns them. A slot is 8 bytes where a map from key to
// record took 32: a burst of 20000 new chares (bench/objects
// entry_overhead) keeps a table of 300 KB where it kept 1.1 MB, and the
// three probes of each chare's life (insert, delivery, destruction) find
// it in the cache; a lookup reads the record, which the delivery that
// asked reads anyway. The interface is the subset of a map's that the
// layer uses, an entry being {key, record pointer}.
class element_table {
  struct by_key {
    using is_transparent = void;
    std::size_t operator()(const index_key& k) const noexcept { return index_key_hash{}(k); }
    std::size_t operator()(const element_record* r) const noexcept {
      return index_key_hash{}(r->key);
    }
    bool operator()(const element_record* a, const element_record* b) const noexcept {
      return a->key == b->key;
    }
    bool operator()(const element_record* a, const index_key& k) const noexcept {
      return a->key == k;
    }
    bool operator()(const index_key& k, const element_record* a) const noexcept {
      return a->key == k;
    }
  };
  using set = absl::flat_hash_set<element_record*, by_key, by_key>;

 public:
  struct entry {
    const index_key& first;
    element_record* second;
  };
  class iterator {
   public:
    explicit iterator(set::iterator it) : it_(it) {}
    entry operator*() const { return {(*it_)->key, *it_}; }
    struct arrow {
      entry e;
      const entry* operator->() const { return &e; }
    };
    arrow operator->() const { return {**this}; }
    iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator==(const iterator& o) const { return it_ == o.it_; }

   private:
    friend class element_table;
    set::iterator it_;
  };

  element_table() = default;
  element_table(const element_table&) = delete;
  element_table& operator=(const element_table&) = delete;
  ~element_table() { clear(); }

  iterator begin() { return iterator(set_.begin()); }
  iterator end() { return iterator(set_.end()); }
  iterator find(const index_key& k) { return iterator(set_.find(k)); }
  bool contains(const index_key& k) const { return set_.contains(k); }
  std::size_t count(const index_key& k) const { return set_.contains(k) ? 1 : 0; }
  std::size_t size() const { return set_.size(); }
  // Takes the record (keyed by its key) unless one with its key is here:
  // then false, and `r` keeps it. One probe.
  bool insert(std::unique_ptr<element_record>& r) {
    if (!set_.insert(r.get()).second) return false;
    (void)r.release();
    return true;
  }
  // The record, out of the table.
  std::unique_ptr<element_record> release(iterator it) {
    element_record* r = *it.it_;
    set_.erase(it.it_);
    return std::unique_ptr<element_record>(r);
  }
  void erase(iterator it) { (void)release(it); }
  void erase(const index_key& k) {
    auto it = set_.find(k);
    if (it != set_.end()) erase(iterator(it));
  }
  void clear() {
    for (element_record* r : set_) delete r;
    set_.clear();
  }

 private:
  set set_;
};

// A direct-mapped cache in front of the element and location tables: a
// message to an element this PE recently delivered to (rec) or sent to
// (pe) skips the table lookup. An entry says nothing it did not copy from
// the tables, and it is dropped whenever they change for its key.
struct route_cache {
  struct slot {
    index_key key;
    element_record* rec = nullptr;  // the element, here (non-null: in `local`)
    std::int32_t pe = -1;           // where to send it (>= 0): the known place, else home
  };
  static constexpr std::size_t size = 64;
  std::array<slot, size> slots{};

  // On every send and delivery, so a few operations. A dense index is
  // (x, y) in the first word and z in the second: the slot is about
  // x + 8y + 21z, so consecutive elements fill consecutive slots and the 27
  // points of a 3D stencil take 27 different ones; the third word (sparse
  // keys only) is mixed in by a multiplication, and the fold brings high
  // bits down.
  static std::size_t index_of(const index_key& k) noexcept {
    const std::uint64_t h = k.w[0] + (k.w[0] >> 29) + k.w[1] * 21 + k.w[2] * 0x9E3779B97F4A7C15ull;
    return std::size_t(h ^ (h >> 17)) & (size - 1);
  }
  slot& at(const index_key& k) noexcept { return slots[index_of(k)]; }
  // Cached facts about `k` (null, -1: not cached).
  element_record* rec(const index_key& k) noexcept {
    const slot& s = at(k);
    return s.key == k ? s.rec : nullptr;
  }
  std::int32_t pe(const index_key& k) noexcept {
    const slot& s = at(k);
    return s.key == k ? s.pe : -1;
  }
  // Records a fact about `k`, evicting whatever the slot held for another
  // key.
  void remember_rec(const index_key& k, element_record* r) noexcept { claim(k).rec = r; }
  void remember_pe(const index_key& k, std::int32_t p) noexcept { claim(k).pe = p; }
  // Both: the element is here, on PE `p` (this one).
  void remember_here(const index_key& k, element_record* r, std::int32_t p) noexcept {
    at(k) = {k, r, p};
  }
  void drop(const index_key& k) noexcept {
    slot& s = at(k);
    if (s.key == k) {
      s.rec = nullptr;
      s.pe = -1;
    }
  }

 private:
  slot& claim(const index_key& k) noexcept {
    slot& s = at(k);
    if (s.key != k) s = {k, nullptr, -1};
    return s;
  }
};

// One element's move in a balancing step: in plan messages (its new PE),
// and in the resume message, with its epoch there, so that every PE knows
// where it went before anybody sends to it again.
struct sync_move {
  index_key key;
  std::int32_t to = 0;
  std::uint32_t epoch = 0;
};

// --weft:lb=hierarchical at run time (sync_tree.cpp, sync_tree_group.cpp):
// what a step keeps on every PE (its records), on a node's first PE (the
// node's records, what crosses nodes), on a group's leader (per node of
// the group: totals, what crosses) and on the root (per group: totals,
// what crosses groups). One PE may hold several of these parts at once.
struct sync_tree_state {
  std::vector<sync_record> here;  // every PE: its elements' at_sync records
  // The node's first PE.
  std::vector<sync_record> node;
  std::vector<comm_record> node_comm;  // what the node's PEs counted (--weft:lb-comm)
  int node_replies = 0;
  bool unassisted = false;
  std::vector<std::uint32_t> offered;  // indices into `node`, from both quota rounds
  std::vector<sync_record> arriving;   // from other nodes
  std::vector<index_key> staying;      // offered, sent back by the group's leader
  std::vector<sync_move> placed;       // own offered records' new PEs
  std::int64_t placed_expected = -1;   // -1 until the group leader's assignment
  std::vector<sync_move> moves;        // the node's moves, until placed is complete
  std::vector<std::int64_t> incoming;  // per PE of the node
  double predicted_max = 0;
  // A group's leader (one group: the root).
  struct group_part {
    std::vector<double> load;          // per node of the group, less what it offered
    std::vector<std::int64_t> offers;  // per node: records it offered, both rounds
    double max_pe = 0;
    std::uint64_t records = 0;
    int replies = 0;                // summaries, then offers of the current round
    int asked = 0;                  // nodes asked in the current round
    bool own_round = false;         // the round is the group's own level (else the root's)
    std::vector<sync_record> pool;  // to the root (its round), or shared among the nodes
    int moved = 0;                  // nodes whose moves are in
    std::vector<sync_move> moves;
    double predicted_max = 0;
    std::uint64_t crossing = 0;
  } group;
  // The root.
  std::vector<double> load, max_before;  // per group
  std::uint64_t elements = 0;
  int replies = 0;
  std::vector<sync_record> pool;  // offered records
  std::vector<int> pool_from;     // their groups
  double predicted_max_all = 0;
  std::uint64_t crossing = 0;  // records that changed node
  int summaries = 0;           // summary messages the root took this step
};

// A sender of the collection whose table holds the pair, its receiver in
// collection `to_collection` (this one or another array), and what went
// between them (--weft:lb-comm=element, sync.cpp).
struct comm_pair {
  index_key from, to;
  std::uint64_t to_collection = 0;
  friend bool operator==(const comm_pair&, const comm_pair&) = default;
};
struct comm_pair_hash {
  std::size_t operator()(const comm_pair& p) const noexcept {
    return (index_key_hash{}(p.from) * 31 ^ index_key_hash{}(p.to)) +
           p.to_collection * 0x9E3779B97F4A7C15ull;
  }
};
struct comm_count {
  std::uint64_t messages = 0, bytes = 0;
};

// The root's view of a collection's balancing steps.
struct sync_root {
  std::vector<sync_move> moves;  // the current step's
  std::vector<index_key> kept;   // moves the PEs could not make (dropped at the end)
  std::vector<sync_record> records;
  std::vector<comm_record> comm;  // the step's, from every PE (--weft:lb-comm)
  // One step at a time. A step without at_sync (periodic, on demand)
  // moves elements between their entry methods; an at_sync round that
  // completes meanwhile waits for it to end, as does a request for another.
  bool in_step = false;
  bool unassisted = false;    // the current step is one without at_sync
  bool uses_at_sync = false;  // periodic balancing leaves the collection to at_sync
  bool again = false;
  std::vector<std::byte> deferred;  // an at_sync round's result, while a step runs
  bool has_deferred = false;
  int record_replies = 0;
  // Waves of counts until no message to the collection's elements is in
  // flight (sent == taken, twice alike): then elements move, and nothing
  // sent before the step can be forwarded past something sent after it.
  int waves = 0;
  int replies = 0;
  std::uint64_t sent = 0, taken = 0, last_sent = ~0ull, last_taken = ~0ull;
  std::uint64_t steps = 0;  // steps started
  int pending = 0;          // PEs of the current step that have not reported their moves done
  std::uint64_t t_start = 0, t_quiet = 0, t_plan = 0;  // wall_ns: round done, quiet, plan sent
  // wall_ns when the last step ended: a periodic one starts a period after
  // it at the earliest, so that steps longer than the period (a paused
  // array: sync_pause.cpp) leave the program that long between them.
  std::uint64_t t_end = 0;
  std::uint64_t peak_in_flight = 0;  // the step's most packed bytes in flight on one PE
  double strategy_s = 0;
  // For --weft:lb-stats: the step's figures, printed when it ends.
  std::string line;
};

// Broadcasts an element missed while it moved (broadcast.cpp). On the PE it
// left: the broadcasts after `from` are kept until its destination says which
// it needs, then sent it (`next` to `upto`, as they arrive here).
struct bcast_departure {
  std::uint32_t epoch = 0;  // the element's epoch where it went
  std::uint64_t from = 0;   // broadcasts it had when it left
};
struct bcast_forwarding {
  index_key key;
  int to = -1;
  std::uint64_t from = 0, next = 0, upto = 0;
};
// At its destination: those it waits for from there (up to `upto`), kept
// in order of number until it can take them.
struct bcast_fetch {
  std::uint64_t upto = 0;
  std::map<std::uint64_t, message_ptr> got;
};

struct local_collection {
  collection_ref ref;
  route_cache cache;     // in front of `local` and `known`: drop a key whenever they change for it
  bool created = false;  // the creation message was handled here
  // A balancing step without at_sync is on (sync_pause.cpp): messages for
  // the elements here wait in `paused_msgs`.
  bool paused = false;
  // Created and not paused: the one flag the element handler's fast path
  // reads (location.cpp), set where either changes.
  bool deliver_fast = false;
  element_table local;
  key_map<location> known;                     // where elements went or were last seen
  key_map<location> home;                      // elements homed here: where they live, if not here
  key_map<std::vector<message*>> waiting;      // homed here, not inserted yet
  key_map<std::vector<message*>> paused_msgs;  // per element here, in arrival order (`paused`)
  key_map<std::uint32_t> followers;  // paused messages still to come after an element that arrived
  std::vector<message*> early;       // arrived before creation (broadcasts)
  // Chare collections: chares placed here by create_on, per creating PE,
  // the number (chare_id::seq) of the last whose insert arrived. One PE's
  // inserts arrive here in the order it sent them, with its numbers rising:
  // a chare of that PE not here is gone if numbered up to this, and on its
  // way if above (its messages wait in `waiting`). One word per creator,
  // where a record per chare would have to be kept forever.
  absl::flat_hash_map<std::int32_t, std::uint32_t> chares_arrived;

  // Broadcasts.
  std::uint64_t bcast_count = 0;                     // numbered broadcasts delivered here
  std::map<std::uint64_t, message_ptr> bcast_ahead;  // arrived before their turn
  std::deque<std::pair<std::uint64_t, message_ptr>> bcast_history;
  std::uint64_t root_bcast_next = 0;  // root only
  // Kept history: every broadcast above the lowest pin (departed elements'
  // `from`, fetching elements' `upto`) besides the last few.
  std::multiset<std::uint64_t> bcast_pins;
  key_map<std::vector<bcast_departure>> bcast_departed;
  std::vector<bcast_forwarding> bcast_serving;
  key_map<bcast_fetch> bcast_fetching;
  int bcast_depth = 0;  // deliveries in progress (nested): the history is not trimmed

  // Reductions on this PE.
  std::map<std::uint32_t, int> hist;  // elements here by next round
  std::map<std::uint32_t, partial> pending;
  std::int64_t reported_passed = std::numeric_limits<std::int64_t>::min();
  node_combiner* combiner = nullptr;
  std::unique_ptr<root_reduction> root;  // on the root PE

  // Balancing steps (sync.cpp). This PE in the current step: elements the
  // balancer moved here so far, and (once the plan came) how many it sends.
  std::int64_t sync_arrived = 0;
  std::int64_t sync_expected = 0;
  bool sync_plan_seen = false;
  std::vector<index_key> sync_kept;  // told to send, but kept (gone or busy)
  // Packed moves of the step not sent yet: they go as destinations
  // acknowledge earlier ones, within --weft:lb-max-bytes in flight.
  std::vector<sync_move> sync_queue;
  std::size_t sync_queue_next = 0;
  bool sync_queue_unassisted = false;
  std::uint64_t sync_in_flight = 0;  // packed bytes sent, not yet acknowledged
  std::uint64_t sync_peak = 0;       // the most in flight during the current step
  std::uint64_t sync_busy0 = 0;      // pe_busy_cycles() when the last step ended here
  std::size_t sync_waiting = 0;      // elements here whose record says sync_state other than none
  std::uint64_t sync_elements0 = 0;  // t_element_cycles then (sync.cpp)
  std::uint64_t sync_entries0 = 0;   // t_sampling.entries then
  std::uint64_t sync_sampled0 = 0;   // t_sampling.sampled then
  double sync_background_previous = -1;  // the last step's background here (--weft:lb-average)
  std::unique_ptr<sync_tree_state> sync_tree;  // hierarchical steps (sync_tree.cpp)
  bool sync_joined = false;                    // told PE 0 it takes part (lb-arrays=together)
  sync_root sync;                              // on the root PE
  // Element messages of this collection sent from this PE (entry calls,
  // not broadcasts) and taken here by an element (run or kept for next<>):
  // in flight somewhere while the job's sums differ.
  std::uint64_t msgs_sent = 0;
  std::uint64_t msgs_taken = 0;
  // --weft:lb-comm=element (sync.cpp): what this PE's elements of this
  // collection sent to elements of any array since the root last took it,
  // kept in the sender's collection so that its steps gather it; kept on
  // the PE whatever moves: a sender that migrated has its earlier counts
  // gathered from here.
  absl::flat_hash_map<comm_pair, comm_count, comm_pair_hash> comm;
};

struct future_slot {
  bool has = false;
  std::vector<std::byte> value;
  std::coroutine_handle<> h;
  promise_base* waiter = nullptr;  // null: not a weft task
};

struct pe_objects {
  absl::flat_hash_map<std::uint64_t, std::unique_ptr<local_collection>> collections;
  // `last`: a one-entry cache for the common case. comm_sender: the
  // counted element whose entry method runs on this PE now (null: none, or
  // --weft:lb-comm is off), whatever array it sends to; send_element reads
  // it beside `last`, in the 16 aligned bytes it reads anyway.
  alignas(16) local_collection* last = nullptr;
  element_record* comm_sender = nullptr;
  std::uint32_t collection_counter = 0;
  std::uint32_t chare_counter = 0;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::vector<allreduce_slot*>> allreduce;
  std::unordered_map<std::uint64_t, future_slot> futures;
  std::uint64_t future_counter = 0;
  std::vector<std::coroutine_handle<>> main_tasks;
  // Messages naming a collection this node has not learnt yet (its creation
  // message is still on its way from another node), kept in arrival order.
  std::unordered_map<std::uint64_t, std::vector<message*>> parked;
  // On a node other than 0, until main's setup ended and the readonlies
  // arrived: every object message waits here, in arrival order.
  bool gated = false;
  std::vector<message*> gate;
  std::uint32_t place_next = 0;  // chares placed by the runtime: the next node, round robin
  // Element messages sent to collections this PE did not know yet, by id.
  std::unordered_map<std::uint64_t, std::uint64_t> msgs_sent_unknown;
};

struct nodegroup_instance {
  std::unique_ptr<element_record> rec;
  bool created = false;
  std::vector<message*> waiting;
  std::mutex exclusive;
};

// What a PE needs to build its part of a collection created on its node.
struct creation_info {
  std::uint32_t ctor = 0;
  std::vector<std::byte> args;
};

struct node_objects {
  std::mutex mutex;
  // Every collection this node knows, by id: messages name collections by
  // id only (chare collections excepted: their id says it all).
  std::unordered_map<std::uint64_t, collection_ref> directory;
  std::unordered_map<std::uint64_t, std::shared_ptr<const creation_info>> creations;
  std::unordered_map<std::uint64_t, std::unique_ptr<node_combiner>> combiners;
  std::unordered_map<std::uint64_t, std::unique_ptr<nodegroup_instance>> nodegroups;
  // Node 0, several nodes: the nodegroups made here, for the setup-done
  // message (groups and arrays are in `creations`).
  std::unordered_map<std::uint64_t, std::shared_ptr<const creation_info>> nodegroup_creations;
  bool readonlies_set = false;   // the setup from node 0 is in place: past the gate
  bool setup_unpacking = false;  // a PE of this node is putting it in place
};

}  // namespace weft::objects::detail
