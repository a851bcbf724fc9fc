// The objects layer's runtime: collections, the location manager,
// migration, broadcasts, reductions, futures and coroutine bookkeeping.
// docs/design/objects.md explains the protocols; the comments here say why
// each step is where it is.
//
// All per-PE state is reached through a thread-local pointer and touched
// only by its PE; node-level state (nodegroups, reduction combiners) sits
// behind a short mutex. Every message goes through core's send: a message to
// an element on this PE is queued like any other, never called inline.
#include "weft/core/runtime.hpp"
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include "objects/state.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/objects/collections.hpp"
#include "weft/objects/detail/type_name.hpp"
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace weft::detail {

handler_id element_handler_id = 0;

namespace {

thread_local pe_objects* t_obj = nullptr;
thread_local element_record* t_constructing = nullptr;
node_objects* g_node_objects = nullptr;  // set while a node runs
std::span<const entry_info> g_entries;   // the entry table, fixed while a node runs

// An entry method named by a message (checked: the id comes from outside).
const entry_info& entry_of(std::uint32_t id) {
  if (id >= g_entries.size()) [[unlikely]]
    base::fatal("objects: a message names entry method id %u; only %zu are registered", id,
                g_entries.size());
  return g_entries[id];
}

// element_handler_id (runtime.hpp): messages for an element (entry, destroy)
handler_id h_nodegroup = 0;  // messages for a nodegroup (any PE of the node takes them)
handler_id h_control = 0;    // everything else

// Migrating elements overtake what is queued at their destination, so few
// messages arrive before them and bounce.
constexpr std::int32_t migration_priority = INT32_MAX;
constexpr std::size_t bcast_history_limit = 256;

// What a call from a guest of a PE (layer threads: an OpenMP thread on a
// carrier) is told: it has the PE's numbers, not its state.
std::string guest_text() {
  return " on a guest of PE " + std::to_string(my_pe()) +
         ": an OpenMP thread that runs on a carrier thread, not on the PE (a thread beyond the "
         "node's PEs, or of a nested team); call it from thread 0 of the region, or after it";
}

[[noreturn, gnu::cold, gnu::noinline]] void off_pe_error() {
  if (detail::on_guest_thread()) object_error("the weft objects API was called" + guest_text());
  object_error("the weft objects API was called off a PE (or while no node runs)");
}

[[gnu::always_inline]] inline pe_objects& pe_state() {
  if (t_obj == nullptr) [[unlikely]]
    off_pe_error();
  return *t_obj;
}

const char* kind_name(collection_kind k) {
  switch (k) {
    case collection_kind::array:
      return "array";
    case collection_kind::group:
      return "group";
    case collection_kind::nodegroup:
      return "nodegroup";
    case collection_kind::chare:
      return "chare";
  }
  return "?";
}

std::uint64_t linear_index(const collection_ref& ref, const index_key& key) {
  int c[3] = {0, 0, 0};
  std::memcpy(c, key.w, sizeof(int) * std::size_t(ref.dims));
  std::uint64_t lin = 0;
  for (int d = 0; d < ref.dims; ++d) lin = lin * std::uint64_t(ref.bounds[d]) + std::uint64_t(c[d]);
  return lin;
}

std::uint64_t dense_count(const collection_ref& ref) {
  std::uint64_t n = ref.dims > 0 ? 1 : 0;
  for (int d = 0; d < ref.dims; ++d) n *= std::uint64_t(ref.bounds[d]);
  return n;
}

index_key key_of_linear(const collection_ref& ref, std::uint64_t lin) {
  int c[3] = {0, 0, 0};
  for (int d = ref.dims - 1; d >= 0; --d) {
    c[d] = int(lin % std::uint64_t(ref.bounds[d]));
    lin /= std::uint64_t(ref.bounds[d]);
  }
  index_key k;
  std::memcpy(k.w, c, sizeof(int) * std::size_t(ref.dims));
  return k;
}

message_ptr new_control(const collection_ref& ref, const index_key& key, op_kind op,
                        std::size_t payload) {
  message_ptr m = make_message(h_control, sizeof(obj_header) + payload);
  obj_header* h = new (m->data()) obj_header;
  h->collection = ref.id;
  h->key = key;
  h->op = op;
  h->origin_pe = my_pe();
  return m;
}

// Whether PE `pe` is on this node (PEs are numbered node by node).
[[gnu::always_inline]] inline bool on_this_node(int pe) noexcept {
  return unsigned(pe - my_node() * node_size()) < unsigned(node_size());
}

// An entry call packed for this process (pointers inside, see
// obj_header::in_process), packed again to leave it.
[[gnu::noinline]] message_ptr for_another_node(message_ptr m) {
  const obj_header& h = header_of(*m);
  const entry_info& e = entry_of(h.entry);
  if (e.to_anywhere == nullptr)
    base::fatal("objects: a message for %s packed for this process is about to leave it",
                e.name.c_str());
  return e.to_anywhere(*m);
}

// Every object message leaves the PE here (or through send_to_node_of):
// one packed for this process is packed again when its target is on
// another node, wherever it was sent from or forwarded by.
[[gnu::always_inline]] inline void send_to(int pe, message* m) {
  if (num_nodes() > 1 && header_of(*m).in_process != 0 && !on_this_node(pe)) [[unlikely]]
    m = for_another_node(message_ptr(m)).release();
  detail::send_released(pe, m);
}
[[gnu::always_inline]] inline void send_to(int pe, message_ptr&& m) {
  send_to(pe, m.release());
}

// To any PE of node `node` (nodegroups, chares placed by the runtime).
void send_to_node_of(int node, message_ptr m) {
  if (node == my_node()) {
    send_node(std::move(m));
    return;
  }
  if (header_of(*m).in_process != 0) m = for_another_node(std::move(m));
  weft::send_to_node(node, std::move(m));
}

[[gnu::always_inline]] inline local_collection* find_local(std::uint64_t id) {
  pe_objects& s = pe_state();
  if (s.last != nullptr && s.last->ref.id == id) return s.last;
  auto it = s.collections.find(id);
  if (it == s.collections.end()) return nullptr;
  s.last = it->second.get();
  return s.last;
}

// The spanning tree of nodes that reductions climb: node `root` (the root
// PE's) at the top, each node with up to tree_arity children.
constexpr int tree_arity = 4;
int tree_parent(int node, int root, int nodes) {
  const int v = (node - root + nodes) % nodes;
  return v == 0 ? -1 : ((v - 1) / tree_arity + root) % nodes;
}
std::vector<int> tree_children(int node, int root, int nodes) {
  const int v = (node - root + nodes) % nodes;
  std::vector<int> out;
  for (int c = 1; c <= tree_arity; ++c)
    if (v * tree_arity + c < nodes) out.push_back((v * tree_arity + c + root) % nodes);
  return out;
}

node_combiner* combiner_for(const collection_ref& ref) {
  node_objects& n = *g_node_objects;
  std::lock_guard<std::mutex> lock(n.mutex);
  auto& c = n.combiners[ref.id];
  if (!c) {
    c = std::make_unique<node_combiner>();
    const int root = node_of(ref.root_pe);
    c->children = tree_children(my_node(), root, num_nodes());
    c->parent = tree_parent(my_node(), root, num_nodes());
    c->passed.assign(std::size_t(node_size()) + c->children.size(), -1);
    c->child_reports.resize(c->children.size());
  }
  return c.get();
}

// ---- the node's directory of collections ------------------------------------

// Chare collections (one per element type) have ids of their own kind, and
// their description follows from the id.
constexpr std::uint64_t chare_id_tag = std::uint64_t(0xffffffffu) << 32;

void register_collection(const collection_ref& ref) {
  std::lock_guard<std::mutex> lock(g_node_objects->mutex);
  g_node_objects->directory.emplace(ref.id, ref);
}

// The directory's entry for `id`. Under the node's lock. The node learns
// every collection before a message can name it (the creator registers it
// before create() returns), so a miss is a corrupt message.
const collection_ref& directory_entry_locked(node_objects& n, std::uint64_t id) {
  auto it = n.directory.find(id);
  if (it == n.directory.end())
    base::fatal("objects: PE %d got a message for collection %#" PRIx64
                ", which this node does not know (a corrupt message?)",
                my_pe(), id);
  return it->second;
}

// The description of collection `id`, for a PE that meets it first in a
// message.
collection_ref lookup_collection(std::uint64_t id) {
  if ((id & chare_id_tag) == chare_id_tag) return chare_collection(std::uint32_t(id));
  std::lock_guard<std::mutex> lock(g_node_objects->mutex);
  return directory_entry_locked(*g_node_objects, id);
}

// This PE's part of a collection, made on first touch (without creating it).
local_collection& make_local(const collection_ref& ref) {
  if (local_collection* lc = find_local(ref.id)) return *lc;
  pe_objects& s = pe_state();
  auto lc = std::make_unique<local_collection>();
  lc->ref = ref;
  if (ref.kind == collection_kind::array || ref.kind == collection_kind::group)
    lc->combiner = combiner_for(ref);
  // Chare collections have no creation step.
  lc->created = ref.kind == collection_kind::chare;
  local_collection* p = lc.get();
  s.collections.emplace(ref.id, std::move(lc));
  s.last = p;
  return *p;
}

void create_here(local_collection& lc, std::uint32_t ctor, const std::byte* args, std::size_t n);

// This PE's part of a collection, created here first if its creator
// registered it on this node: a collection is usable on every PE of the node
// as soon as create() returns, whether or not the creation message arrived.
local_collection& get_local(const collection_ref& ref) {
  local_collection& lc = make_local(ref);
  if (!lc.created) {
    std::shared_ptr<const creation_info> info;
    {
      std::lock_guard<std::mutex> lock(g_node_objects->mutex);
      auto it = g_node_objects->creations.find(ref.id);
      if (it != g_node_objects->creations.end()) info = it->second;
    }
    if (info) create_here(lc, info->ctor, info->args.data(), info->args.size());
  }
  return lc;
}

// The same, for a collection named by id in a message: inline for the
// common case (the collection of the previous message, created here).
[[gnu::noinline]] local_collection& get_local_first(std::uint64_t id, local_collection* lc) {
  return get_local(lc != nullptr ? collection_ref(lc->ref) : lookup_collection(id));
}
[[gnu::always_inline]] inline local_collection& get_local(std::uint64_t id) {
  local_collection* lc = find_local(id);
  if (lc != nullptr && lc->created) [[likely]]
    return *lc;
  return get_local_first(id, lc);
}

// This PE's part of the collection message `m` names; null when this node
// has not learnt the collection yet (its creation message, from another
// node, is still on its way): then `m` waits, parked, until this PE's
// creation message arrives. Later messages for it wait behind the parked
// ones, so that they keep their order.
[[gnu::noinline]] local_collection* local_for_first(std::uint64_t id, local_collection* lc,
                                                    message_ptr& m) {
  if (lc != nullptr) return &get_local(lc->ref);
  if ((id & chare_id_tag) == chare_id_tag) return &get_local(chare_collection(std::uint32_t(id)));
  pe_objects& s = pe_state();
  auto parked = s.parked.find(id);
  if (parked == s.parked.end()) {
    collection_ref ref;
    {
      std::lock_guard<std::mutex> lock(g_node_objects->mutex);
      auto it = g_node_objects->directory.find(id);
      if (it != g_node_objects->directory.end()) ref = it->second;
    }
    if (ref.id != 0) return &get_local(ref);
    parked = s.parked.emplace(id, std::vector<message*>{}).first;
  }
  parked->second.push_back(m.release());
  return nullptr;
}
[[gnu::always_inline]] inline local_collection* local_for(message_ptr& m) {
  const std::uint64_t id = header_of(*m).collection;
  local_collection* lc = find_local(id);
  if (lc != nullptr && lc->created) [[likely]]
    return lc;
  return local_for_first(id, lc, m);
}

std::string entry_name(std::uint32_t id) {
  return entry(id).name;
}

// ---- reductions on this PE --------------------------------------------------

std::int64_t pe_passed(const local_collection& lc) {
  return lc.hist.empty() ? passed_all : std::int64_t(lc.hist.begin()->first) - 1;
}
void hist_add(local_collection& lc, std::uint32_t r) {
  ++lc.hist[r];
}
void hist_remove(local_collection& lc, std::uint32_t r) {
  auto it = lc.hist.find(r);
  if (it != lc.hist.end() && --it->second == 0) lc.hist.erase(it);
}

void merge_partial(partial& into, partial&& more, const collection_ref& ref, std::uint32_t round) {
  if (into.count == 0) {
    into = std::move(more);
    return;
  }
  if (into.reducer != more.reducer || !same_callback(into.cb, more.cb))
    object_error("round " + std::to_string(round) + " of the reductions of " +
                 collection_name(ref) + " gets contributions with different " +
                 (into.reducer != more.reducer
                      ? "ops or value types (" + reducer(into.reducer).name + " and " +
                            reducer(more.reducer).name + ")"
                      : std::string("callbacks")) +
                 ": every element contributes to a round with the same op, type and callback");
  reducer(into.reducer).combine(into.value, more.value);
  into.count += more.count;
}

void send_partial(const collection_ref& ref, std::uint32_t round, partial&& p) {
  pupper sizer = pupper::sizer();
  sizer | p.reducer | p.cb | p.count | p.value;
  message_ptr m = new_control(ref, index_key{}, op_red_partial, sizer.offset());
  header_of(*m).reply_id = round;
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  packer | p.reducer | p.cb | p.count | p.value;
  send_to(ref.root_pe, std::move(m));
}

using round_partials = std::vector<std::pair<std::uint32_t, partial>>;

// What leaves a node's combiner after an update.
struct leaving {
  round_partials up;    // rounds the node completed: to the parent node or the root PE
  round_partials late;  // rounds it completed before they came: to the root PE
  bool report = false;  // the parent must hear (up, or a new `passed`)
  std::int64_t passed = 0;
  std::uint64_t seq = 0;
};

// Slot `slot` of the node's combiner passed `passed`, with the partial
// results `ready` of rounds it passed. Under the combiner's lock.
void combine_locked(node_combiner& c, const collection_ref& ref, std::size_t slot,
                    std::int64_t passed, round_partials& ready, leaving& out) {
  c.passed[slot] = passed;
  for (auto& [r, p] : ready) {
    if (std::int64_t(r) <= c.completed)
      out.late.emplace_back(r, std::move(p));  // the node already sent this round
    else
      merge_partial(c.acc[r], std::move(p), ref, r);
  }
  const std::int64_t raw = *std::min_element(c.passed.begin(), c.passed.end());
  std::int64_t all = raw;
  if (all == passed_all) {
    // No element below this node now (a sparse array before its
    // insertions, or every element gone): what is here may leave, but the
    // node has not passed the rounds after it. An element inserted or
    // migrating here later contributes to them here, combined with its
    // neighbours, instead of straight to the root as a late partial.
    all = c.acc.empty() ? c.completed : std::max<std::int64_t>(c.completed, c.acc.rbegin()->first);
  }
  if (all > c.completed) {
    c.completed = all;
    while (!c.acc.empty() && std::int64_t(c.acc.begin()->first) <= all) {
      auto it = c.acc.begin();
      out.up.emplace_back(it->first, std::move(it->second));
      c.acc.erase(it);
    }
  }
  if (c.parent >= 0 && (raw != c.reported || !out.up.empty())) {
    c.reported = raw;
    out.report = true;
    out.passed = raw;
  }
}

// Numbers the report that leaves, once per message. Under the lock.
void number_report(node_combiner& c, leaving& out) {
  if (out.report) out.seq = ++c.report_seq;
}

void pup_partials(pupper& p, round_partials& v) {
  const std::uint64_t n = p.length(v.size(), 8, "reduction partials");
  if (p.unpacking()) v.resize(std::size_t(n));
  for (auto& [r, q] : v) p | r | q.reducer | q.cb | q.count | q.value;
}

// Sends what left a combiner: a late round goes straight to the root PE
// (the root counts contributions, whichever way they come), completed
// rounds to the parent node with what the node passed.
void send_leaving(const collection_ref& ref, const node_combiner& c, leaving& out) {
  if (trace::on()) [[unlikely]]
    for (auto& [r, p] : out.up) trace::detail::emit(trace::kind::reduction, ref.type, 1, r, 0);
  for (auto& [r, p] : out.late) send_partial(ref, r, std::move(p));
  if (c.parent < 0) {
    for (auto& [r, p] : out.up) send_partial(ref, r, std::move(p));
    return;
  }
  if (!out.report) return;
  auto pack = [&](pupper& p) {
    p | out.passed | out.seq;
    pup_partials(p, out.up);
  };
  pupper sizer = pupper::sizer();
  pack(sizer);
  message_ptr m = new_control(ref, index_key{}, op_red_up, sizer.offset());
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  pack(packer);
  send_to_node_of(c.parent, std::move(m));
}

// Reports what this PE passed to the node's combiner, with the partial
// results of those rounds, and sends whatever leaves the node.
void reduction_flush(local_collection& lc) {
  if (lc.combiner == nullptr) return;
  const std::int64_t passed = pe_passed(lc);
  round_partials ready;
  while (!lc.pending.empty() && std::int64_t(lc.pending.begin()->first) <= passed) {
    auto it = lc.pending.begin();
    ready.emplace_back(it->first, std::move(it->second));
    lc.pending.erase(it);
  }
  if (ready.empty() && passed == lc.reported_passed) return;
  lc.reported_passed = passed;
  node_combiner& c = *lc.combiner;
  leaving out;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    combine_locked(c, lc.ref, std::size_t(my_rank()), passed, ready, out);
    number_report(c, out);
  }
  send_leaving(lc.ref, c, out);
}

// A child node's report: what its subtree passed and the rounds it
// completed. Reports may overtake one another (any PE of this node takes
// them), so they are applied in the order the child numbered them: one
// that comes early waits for those before it.
void on_red_up(local_collection& lc, message_ptr m) {
  const obj_header& h = header_of(*m);
  node_combiner& c = *lc.combiner;
  const int child = node_of(h.origin_pe);
  auto at = std::find(c.children.begin(), c.children.end(), child);
  if (at == c.children.end())
    base::fatal("objects: node %d got reduction results of %s from node %d, not its child",
                my_node(), collection_name(lc.ref).c_str(), child);
  const auto i = std::size_t(at - c.children.begin());
  std::int64_t passed = 0;
  std::uint64_t seq = 0;
  round_partials ready;
  pupper u = pupper::unpacker(args_of(*m), args_size(*m));
  u | passed | seq;
  pup_partials(u, ready);
  leaving out;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    node_combiner::child_report& from = c.child_reports[i];
    if (seq != from.applied + 1) {
      from.ahead.emplace(seq, std::make_pair(passed, std::move(ready)));
      return;
    }
    const std::size_t slot = std::size_t(node_size()) + i;
    combine_locked(c, lc.ref, slot, passed, ready, out);
    from.applied = seq;
    for (auto it = from.ahead.begin(); it != from.ahead.end() && it->first == from.applied + 1;
         it = from.ahead.erase(it)) {
      combine_locked(c, lc.ref, slot, it->second.first, it->second.second, out);
      from.applied = it->first;
    }
    number_report(c, out);
  }
  send_leaving(lc.ref, c, out);
}

// ---- elements ------------------------------------------------------------------

void after_entry(element_record& rec);

std::string element_name(const element_record& rec) {
  return key_string(rec.ref, rec.key);
}

void destroy_frames(element_record& rec) {
  // Destroying a frame runs its awaiters' destructors, which unregister
  // them; copy first, as finished tasks also edit the list.
  std::vector<std::coroutine_handle<>> frames;
  frames.swap(rec.coroutines);
  for (auto h : frames) h.destroy();
}

void report_dropped(element_record& rec, const char* why) {
  for (auto& [id, mb] : rec.mailboxes)
    if (!mb.queued.empty())
      base::warn("%s %s with %zu message(s) for %s never awaited", element_name(rec).c_str(), why,
                 mb.queued.size(), entry_name(id).c_str());
}

element_record& construct(local_collection& lc, const index_key& key, std::uint32_t ctor,
                          const std::byte* args, std::size_t n, std::uint32_t round,
                          std::uint32_t epoch) {
  // One probe of the table, which both checks and inserts.
  auto [slot, fresh] = lc.local.try_emplace(key);
  if (!fresh)
    object_error("insert of " + key_string(lc.ref, key) + ", which already exists on PE " +
                 std::to_string(my_pe()));
  slot->second = std::make_unique<element_record>();
  element_record& rec = *slot->second;
  rec.ref = lc.ref;
  rec.key = key;
  rec.coll = &lc;
  rec.red_round = round;
  rec.epoch = epoch;
  rec.last_bcast = lc.bcast_count;
  if (lc.ref.kind != collection_kind::chare) {
    // Chares neither reduce nor migrate: the local table is all they need.
    hist_add(lc, round);
    lc.known[key] = {my_pe(), epoch, false};
  }
  // It is here: what the tables now say, in the route cache for the
  // messages that follow (a constructor's first send to its own element,
  // a new chare's first message), which would otherwise each miss.
  lc.cache.remember_here(key, &rec, my_pe());
  const entry_info& e = entry(ctor);
  pupper p = pupper::unpacker(args, n);
  t_constructing = &rec;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_begin, ctor, lc.ref.type, std::uint32_t(key.w[0]), 0);
  try {
    rec.obj = e.construct(p);
  } catch (const std::exception& ex) {
    t_constructing = nullptr;
    base::fatal("constructor of %s threw %s", element_name(rec).c_str(), ex.what());
  }
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_end, ctor, 0, 0, 0);
  t_constructing = nullptr;
  return rec;
}

void remove_element(local_collection& lc, element_record& rec) {
  hist_remove(lc, rec.red_round);
  element_base* obj = rec.obj;
  index_key key = rec.key;
  rec.obj = nullptr;
  delete obj;
  lc.cache.drop(key);
  lc.local.erase(key);  // frees rec
}

void tell_home(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
               location_kind kind);
void redeliver(local_collection& lc, std::vector<message*> msgs);

void apply_home_update(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
                       location_kind kind) {
  if (lc.ref.kind == collection_kind::chare && kind == loc_deleted) {
    // No tombstone: a chare id homed here and issued by this PE that is
    // neither here nor in the table is one that was destroyed.
    lc.home.erase(key);
    return;
  }
  auto at = lc.home.try_emplace(key).first;
  location& l = at->second;
  if (kind == loc_inserted) {
    l = {pe, epoch, false, false};
  } else if (l.inserting) {
    // The news of an earlier life of the element, overtaken by its
    // re-insertion: the new element's own news decides.
  } else if (epoch >= l.epoch || l.pe < 0) {
    l.pe = pe;
    l.epoch = epoch;
    l.deleted = kind == loc_deleted;
  }
  if (!l.deleted && l.pe == my_pe() && lc.local.contains(key)) lc.home.erase(at);
  if (kind != loc_deleted && !lc.waiting.empty()) {
    auto w = lc.waiting.find(key);
    if (w != lc.waiting.end()) {
      std::vector<message*> msgs = std::move(w->second);
      lc.waiting.erase(w);
      redeliver(lc, std::move(msgs));
    }
  }
}

void tell_home(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
               location_kind kind) {
  const int home = home_pe(lc.ref, key);
  if (home == my_pe()) {
    apply_home_update(lc, key, pe, epoch, kind);
    return;
  }
  message_ptr m = new_control(lc.ref, key, op_location, 0);
  header_of(*m).reply_pe = pe;
  header_of(*m).reply_id = std::uint64_t(epoch) | (std::uint64_t(kind) << 32);
  send_to(home, std::move(m));
}

void destroy_element(local_collection& lc, element_record& rec) {
  destroy_frames(rec);
  report_dropped(rec, "destroyed");
  const index_key key = rec.key;
  const std::uint32_t epoch = rec.epoch, round = rec.red_round;
  remove_element(lc, rec);
  if (lc.ref.kind == collection_kind::chare)
    lc.known.erase(key);  // chare ids are never reused: home alone knows it is gone
  else
    lc.known[key] = {my_pe(), epoch, true};
  lc.cache.drop(key);
  tell_home(lc, key, my_pe(), epoch, loc_deleted);
  if (lc.ref.kind == collection_kind::array) {
    message_ptr m = new_control(lc.ref, key, op_red_leave, 0);
    header_of(*m).reply_id = round;
    send_to(lc.ref.root_pe, std::move(m));
  }
  reduction_flush(lc);
}

void migrate(local_collection& lc, element_record& rec) {
  const int to = rec.migrate_to;
  rec.migrate_to = -1;
  if (to == my_pe()) return;
  const element_type_info& type = element_type(rec.ref.type);
  if (type.pup == nullptr)
    object_error(element_name(rec) + " cannot migrate: its type " + type.name +
                 " needs a default constructor and a pup(weft::pupper&) member");
  if (!rec.coroutines.empty())
    object_error(element_name(rec) + " cannot migrate while " +
                 std::to_string(rec.coroutines.size()) +
                 " of its coroutine entry methods are suspended (a coroutine frame cannot be "
                 "packed); migrate between coroutines");
  const std::uint32_t epoch = rec.epoch + 1;
  auto pack = [&](pupper& p) {
    std::uint32_t round = rec.red_round, ep = epoch;
    std::uint64_t bc = rec.last_bcast;
    p | round | ep | bc;
    type.pup(*rec.obj, p);
  };
  pupper sizer = pupper::sizer();
  pack(sizer);
  message_ptr m = new_control(rec.ref, rec.key, op_migrate_in, sizer.offset());
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  pack(packer);
  m->priority = migration_priority;
  // Messages waiting in its mailboxes follow it.
  std::vector<message*> follow;
  for (auto& [id, mb] : rec.mailboxes)
    for (auto& q : mb.queued) follow.push_back(q.release());
  const index_key key = rec.key;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::migrate_out, rec.ref.type, std::uint32_t(to),
                          std::uint32_t(key.w[0]), 0);
  remove_element(lc, rec);
  lc.known[key] = {to, epoch, false};
  lc.cache.drop(key);
  send_to(to, std::move(m));
  for (message* f : follow) send_to(to, message_ptr(f));
  reduction_flush(lc);
}

void after_entry(element_record& rec) {
  local_collection& lc = *rec.coll;
  if (rec.destroy_requested)
    destroy_element(lc, rec);
  else if (rec.migrate_to >= 0)
    migrate(lc, rec);
}

// The trace records around an entry call, out of line: their code would
// take registers from the delivery path, which runs them rarely.
[[gnu::noinline, gnu::cold]] void trace_entry_begin(const element_record& rec,
                                                    const entry_info& e) {
  trace::detail::emit_adjacent(trace::kind::handler_begin, trace::kind::entry_begin,
                               std::uint32_t(&e - g_entries.data()), rec.ref.type,
                               std::uint32_t(rec.key.w[0]), 0);
}
[[gnu::noinline, gnu::cold]] void trace_entry_end(const entry_info& e) {
  trace::detail::emit(trace::kind::entry_end, std::uint32_t(&e - g_entries.data()), 0, 0, 0);
}

// Runs entry `e` of the element with the arguments in `m` (the caller
// frees `m` afterwards).
[[gnu::always_inline]] inline void invoke(element_record& rec, const entry_info& e, message& m) {
  rec.contributed_now = false;
  rec.running = e.name.c_str();
  if (trace::on()) [[unlikely]]
    trace_entry_begin(rec, e);
  try {
    e.invoke(*rec.obj, m);
  } catch (const serialization_error& ex) {
    base::fatal("%s: the arguments of %s do not unpack: %s", element_name(rec).c_str(),
                e.name.c_str(), ex.what());
  } catch (const std::exception& ex) {
    base::fatal("entry method %s of %s on PE %d threw %s", e.name.c_str(),
                element_name(rec).c_str(), my_pe(), ex.what());
  }
  if (trace::on()) [[unlikely]]
    trace_entry_end(e);
  rec.running = nullptr;
}

// What a message for an element that is here needs before (or instead of)
// an ordinary entry call: the sender told where the element is now, if it
// was forwarded; a destroy carried out. False when it consumed the message.
[[gnu::noinline]] bool deliver_special(element_record& rec, message_ptr& m) {
  obj_header& h = header_of(*m);
  if (h.hops > 0 && h.origin_pe >= 0 && h.origin_pe != my_pe()) {
    message_ptr u = new_control(rec.ref, rec.key, op_location, 0);
    header_of(*u).reply_pe = my_pe();
    header_of(*u).reply_id = rec.epoch;
    send_to(h.origin_pe, std::move(u));
  }
  h.hops = 0;
  if (h.op == op_destroy) {
    m.reset();
    rec.destroy_requested = true;
    after_entry(rec);
    return false;
  }
  return true;
}

// A message for an entry some coroutine awaits: to the waiting coroutine,
// or kept in the element's mailbox until one awaits it.
[[gnu::noinline]] void deliver_to_mailbox(element_record& rec, message_ptr m) {
  const std::uint32_t entry_id = header_of(*m).entry;
  mailbox& mb = rec.mailboxes[entry_id];
  if (mb.waiter == nullptr) {
    mb.queued.push_back(std::move(m));
    return;
  }
  mb.waiter->got.push_back(std::move(m));
  if (mb.waiter->got.size() >= mb.waiter->need) {
    std::coroutine_handle<> c = mb.waiter->h;
    mb.waiter = nullptr;
    resume(&rec, c);
  }
}

// A message for an element that is here. Inlined into its callers: the
// plain entry call (not forwarded, not awaited) takes no other branch.
[[gnu::always_inline]] inline void deliver(element_record& rec, message_ptr&& m) {
  const obj_header& h = header_of(*m);
  if ((h.hops | h.op) != 0 && !deliver_special(rec, m)) [[unlikely]]
    return;
  const entry_info& e = entry_of(h.entry);
  if (e.awaited) [[unlikely]] {
    deliver_to_mailbox(rec, std::move(m));
    return;
  }
  invoke(rec, e, *m);
  m.reset();
  if (rec.destroy_requested || rec.migrate_to >= 0) [[unlikely]]
    after_entry(rec);
}

[[noreturn]] void error_deleted(const local_collection& lc, const obj_header& h) {
  object_error("a message " +
               (h.op == op_destroy ? std::string("destroying") : "for " + entry_name(h.entry)) +
               " was sent to " + key_string(lc.ref, h.key) + ", which was deleted (sent by PE " +
               std::to_string(h.origin_pe) + ")");
}

// A message for an element that is not here: forward it, or keep it until
// the element exists.
void miss(local_collection& lc, message_ptr m) {
  obj_header& h = header_of(*m);
  ++h.hops;
  const int me = my_pe();
  const int home = home_pe(lc.ref, h.key);
  if (home == me) {
    auto it = lc.home.find(h.key);
    if (it == lc.home.end() && lc.ref.kind == collection_kind::chare) error_deleted(lc, h);
    if (it != lc.home.end()) {
      if (it->second.deleted) error_deleted(lc, h);
      if (it->second.inserting) {
        lc.waiting[h.key].push_back(m.release());
        return;
      }
      if (it->second.pe != me) {
        send_to(it->second.pe, std::move(m));
        return;
      }
    } else if (auto k = lc.known.find(h.key);
               k != lc.known.end() && !k->second.deleted && k->second.pe != me) {
      // It left home and has not announced its new place yet.
      send_to(k->second.pe, std::move(m));
      return;
    }
    const bool may_appear = !lc.created || lc.ref.dynamic ||
                            lc.ref.kind == collection_kind::chare || it != lc.home.end();
    if (!may_appear) {
      // A dense element that should be here is gone: it was destroyed.
      auto k = lc.known.find(h.key);
      if (k != lc.known.end() && k->second.deleted) error_deleted(lc, h);
    }
    lc.waiting[h.key].push_back(m.release());
    return;
  }
  auto k = lc.known.find(h.key);
  if (k != lc.known.end() && !k->second.deleted && k->second.pe != me)
    send_to(k->second.pe, std::move(m));
  else
    send_to(home, std::move(m));
}

void hold_until_setup(message_ptr m);

// The element table behind the route cache (the cache missed): out of line,
// so that the hash table's code does not crowd the delivery path's registers.
[[gnu::noinline]] element_record* find_local_record(local_collection& lc, const index_key& key) {
  auto it = lc.local.find(key);
  if (it == lc.local.end()) return nullptr;
  element_record* rec = it->second.get();
  lc.cache.remember_rec(key, rec);
  return rec;
}

// Every case of an element message: on_element_message below takes the
// common one itself.
[[gnu::noinline]] void on_element_message_general(message_ptr m) {
  if (pe_state().gated) [[unlikely]] {
    hold_until_setup(std::move(m));
    return;
  }
  local_collection* found = local_for(m);
  if (found == nullptr) return;  // parked
  local_collection& lc = *found;
  obj_header& h = header_of(*m);
  element_record* rec = lc.cache.rec(h.key);
  if (rec == nullptr) [[unlikely]]
    rec = find_local_record(lc, h.key);
  if (rec != nullptr && rec->obj != nullptr) [[likely]] {
    deliver(*rec, std::move(m));
    return;
  }
  miss(lc, std::move(m));
}

// The common case, an entry call (not forwarded, not awaited) to an element
// of the collection this PE used last, found in the route cache, runs here
// with few registers to save; every other goes to the general path.
void on_element_message(message_ptr m) {
  pe_objects* s = t_obj;
  const obj_header& h = header_of(*m);
  if (s != nullptr && !s->gated) [[likely]] {
    local_collection* lc = s->last;
    if (lc != nullptr && lc->ref.id == h.collection && lc->created && (h.hops | h.op) == 0)
        [[likely]] {
      element_record* rec = lc->cache.rec(h.key);
      if (rec != nullptr && rec->obj != nullptr) [[likely]] {
        const entry_info& e = entry_of(h.entry);
        if (!e.awaited) [[likely]] {
          // The message is freed by whoever passed it (handle(): the
          // parameter's destructor), on return.
          invoke(*rec, e, *m);
          if (rec->destroy_requested || rec->migrate_to >= 0) [[unlikely]]
            after_entry(*rec);
          return;
        }
      }
    }
  }
  on_element_message_general(std::move(m));
}

// Kept messages are delivered here and now, in the order they came: queued
// again they would fall behind what the same senders sent later.
void handle_bcast(local_collection& lc, message_ptr m);
void redeliver(local_collection& lc, std::vector<message*> msgs) {
  std::vector<message_ptr> owned;
  owned.reserve(msgs.size());
  for (message* raw : msgs) owned.emplace_back(raw);
  for (message_ptr& m : owned) {
    const obj_header& h = header_of(*m);
    if (h.op == op_bcast) {
      handle_bcast(lc, std::move(m));
      continue;
    }
    auto it = lc.local.find(h.key);
    if (it != lc.local.end() && it->second->obj != nullptr)
      deliver(*it->second, std::move(m));
    else
      miss(lc, std::move(m));
  }
}

// ---- nodegroups --------------------------------------------------------------------

// This node's instance of nodegroup `id` (made on first use, built later by
// create_nodegroup_here: on another node than the creator's, messages may
// come before the creation message). Under the node's lock.
nodegroup_instance& nodegroup_locked(node_objects& n, std::uint64_t id) {
  auto& g = n.nodegroups[id];
  if (!g) {
    g = std::make_unique<nodegroup_instance>();
    g->rec = std::make_unique<element_record>();
    g->rec->ref.id = id;
    g->rec->key = index_key::of(my_node());
  }
  return *g;
}

nodegroup_instance& nodegroup(const collection_ref& ref) {
  std::lock_guard<std::mutex> lock(g_node_objects->mutex);
  return nodegroup_locked(*g_node_objects, ref.id);
}

void on_nodegroup_message(message_ptr m) {
  if (pe_state().gated) [[unlikely]] {
    hold_until_setup(std::move(m));
    return;
  }
  obj_header& h = header_of(*m);
  nodegroup_instance* found;
  {
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    nodegroup_instance& g = nodegroup_locked(*g_node_objects, h.collection);
    if (!g.created) {
      g.waiting.push_back(m.release());
      return;
    }
    found = &g;
  }
  nodegroup_instance& g = *found;
  if (h.op == op_destroy)
    object_error("destroy of " + collection_name(g.rec->ref) +
                 ": nodegroups live as long as the run");
  const entry_info& e = entry_of(h.entry);
  element_record& rec = *g.rec;
  std::unique_lock<std::mutex> excl(g.exclusive, std::defer_lock);
  if (e.exclusive && !excl.try_lock()) {
    // Another PE runs an exclusive entry: requeue rather than block this PE.
    send_node(std::move(m));
    return;
  }
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_begin, h.entry, rec.ref.type, 0, 0);
  try {
    e.invoke(*rec.obj, *m);
  } catch (const std::exception& ex) {
    base::fatal("entry method %s of %s on PE %d threw %s", e.name.c_str(),
                collection_name(rec.ref).c_str(), my_pe(), ex.what());
  }
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_end, h.entry, 0, 0, 0);
}

void create_nodegroup_here(const collection_ref& ref, std::uint32_t ctor, const std::byte* args,
                           std::size_t n) {
  nodegroup_instance& g = nodegroup(ref);
  {
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    if (g.created || g.rec->obj != nullptr) return;  // made by an earlier creation message
    g.rec->ref = ref;
  }
  const entry_info& e = entry(ctor);
  pupper p = pupper::unpacker(args, n);
  t_constructing = g.rec.get();
  try {
    g.rec->obj = e.construct(p);
  } catch (const std::exception& ex) {
    t_constructing = nullptr;
    base::fatal("constructor of %s threw %s", collection_name(ref).c_str(), ex.what());
  }
  t_constructing = nullptr;
  std::vector<message*> waiting;
  {
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    g.created = true;
    waiting.swap(g.waiting);
  }
  for (message* w : waiting) send_node(message_ptr(w));
}

// ---- broadcasts ------------------------------------------------------------------

void deliver_broadcast(local_collection& lc, std::uint64_t seq, const message& m) {
  lc.bcast_count = seq;
  const obj_header& h = header_of(const_cast<message&>(m));
  std::vector<index_key> keys;
  keys.reserve(lc.local.size());
  for (auto& [k, rec] : lc.local) keys.push_back(k);
  for (const index_key& k : keys) {
    auto it = lc.local.find(k);
    if (it == lc.local.end()) continue;  // destroyed or moved by an earlier one
    element_record& rec = *it->second;
    if (rec.obj == nullptr || rec.last_bcast >= seq) continue;
    rec.last_bcast = seq;
    message_ptr copy = copy_message(m);
    header_of(*copy).key = k;
    header_of(*copy).op = op_entry;
    header_of(*copy).hops = 0;
    deliver(rec, std::move(copy));
  }
  (void)h;
}

void handle_bcast(local_collection& lc, message_ptr m) {
  if (!lc.created) {
    lc.early.push_back(m.release());
    return;
  }
  const std::uint64_t seq = header_of(*m).reply_id;
  lc.bcast_ahead.emplace(seq, std::move(m));
  while (!lc.bcast_ahead.empty() && lc.bcast_ahead.begin()->first == lc.bcast_count + 1) {
    auto node = lc.bcast_ahead.extract(lc.bcast_ahead.begin());
    deliver_broadcast(lc, node.key(), *node.mapped());
    lc.bcast_history.emplace_back(node.key(), std::move(node.mapped()));
    if (lc.bcast_history.size() > bcast_history_limit) lc.bcast_history.pop_front();
  }
}

// An element arrived with fewer broadcasts than this PE delivered.
void catch_up(local_collection& lc, element_record& rec) {
  while (rec.obj != nullptr && rec.last_bcast < lc.bcast_count) {
    const std::uint64_t want = rec.last_bcast + 1;
    if (lc.bcast_history.empty() || lc.bcast_history.front().first > want)
      object_error("not implemented: " + element_name(rec) + " migrated while more than " +
                   std::to_string(bcast_history_limit) + " broadcasts to its collection were in " +
                   "flight");
    const message& m = *lc.bcast_history[std::size_t(want - lc.bcast_history.front().first)].second;
    rec.last_bcast = want;
    const index_key key = rec.key;
    message_ptr copy = copy_message(m);
    header_of(*copy).key = key;
    header_of(*copy).op = op_entry;
    deliver(rec, std::move(copy));
    if (lc.local.count(key) == 0) return;  // it moved on or was destroyed: rec is gone
  }
}

// ---- creation --------------------------------------------------------------------

void create_here(local_collection& lc, std::uint32_t ctor, const std::byte* args, std::size_t n) {
  lc.created = true;
  const int me = my_pe();
  const collection_ref& ref = lc.ref;
  std::vector<index_key> made;
  if (ref.kind == collection_kind::group) {
    construct(lc, index_key::of(me), ctor, args, n, 0, 0);
    made.push_back(index_key::of(me));
  } else if (!ref.dynamic) {
    const std::uint64_t count = dense_count(ref);
    for (std::uint64_t i = 0; i < count; ++i) {
      index_key k = key_of_linear(ref, i);
      if (home_pe(ref, k) == me) {
        construct(lc, k, ctor, args, n, 0, 0);
        made.push_back(k);
      }
    }
  }
  // A constructor may have asked to migrate or be destroyed.
  for (const index_key& k : made) {
    auto it = lc.local.find(k);
    if (it != lc.local.end()) after_entry(*it->second);
  }
  std::vector<message*> early;
  early.swap(lc.early);
  for (auto& [k, msgs] : lc.waiting)
    for (message* w : msgs) early.push_back(w);
  lc.waiting.clear();
  redeliver(lc, std::move(early));
  reduction_flush(lc);
}

// The creation message carries the collection's description ahead of the
// constructor's arguments: it is how a node learns the collection.
void dispatch(message_ptr m);

void on_create(message_ptr m) {
  const obj_header& h = header_of(*m);
  collection_ref ref;
  std::memcpy(&ref, args_of(*m), sizeof ref);
  const std::byte* args = args_of(*m) + sizeof ref;
  const std::size_t n = args_size(*m) - sizeof ref;
  if (ref.kind == collection_kind::nodegroup) {
    register_collection(ref);
    create_nodegroup_here(ref, h.entry, args, n);
    return;
  }
  {
    // On another node than the creator's, too, the PEs of this node build
    // their parts at their first touch of the collection.
    auto info = std::make_shared<creation_info>();
    info->ctor = h.entry;
    info->args.assign(args, args + n);
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    g_node_objects->directory.emplace(ref.id, ref);
    g_node_objects->creations.emplace(ref.id, std::move(info));
  }
  local_collection& lc = make_local(ref);
  if (!lc.created) create_here(lc, h.entry, args, n);
  // What came for it before this node knew it, in the order it came.
  pe_objects& s = pe_state();
  if (auto it = s.parked.find(ref.id); it != s.parked.end()) {
    std::vector<message*> parked = std::move(it->second);
    s.parked.erase(it);
    for (message* p : parked) dispatch(message_ptr(p));
  }
}

void on_insert(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local(h.collection);
  element_record& rec = construct(lc, h.key, h.entry, args_of(*m), args_size(*m),
                                  std::uint32_t(h.reply_id & 0xffffffffu), 0);
  const index_key key = h.key;
  tell_home(lc, key, my_pe(), 0, loc_inserted);
  if (lc.ref.kind == collection_kind::array) {
    rec.last_bcast = h.reply_id >> 32;
    if (rec.last_bcast < lc.bcast_count) catch_up(lc, rec);
  }
  // The constructor may have asked to migrate or be destroyed.
  auto it = lc.local.find(key);
  if (it != lc.local.end()) after_entry(*it->second);
  reduction_flush(lc);
}

// ---- reductions at the root -----------------------------------------------------

std::int64_t expected(const root_reduction& r, std::uint32_t round) {
  std::int64_t e = r.base_expected;
  for (auto it = r.deltas.begin(); it != r.deltas.end() && it->first <= round; ++it)
    e += it->second;
  return e;
}

void deliver_result(const collection_ref& ref, std::uint32_t round, partial&& p) {
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::reduction, ref.type, 2, round, 0);
  const callback_desc& cb = p.cb;
  switch (cb.kind) {
    case callback_kind::element:
    case callback_kind::broadcast: {
      message_ptr m = new_element_message(cb.ref, cb.key, cb.entry, p.value.size());
      std::memcpy(args_of(*m), p.value.data(), p.value.size());
      if (cb.kind == callback_kind::element)
        send_element(cb.ref, std::move(m));
      else
        broadcast_collection(cb.ref, std::move(m));
      break;
    }
    case callback_kind::future:
      future_set(cb.pe, cb.future_id, std::move(p.value));
      break;
    case callback_kind::exit:
      weft::exit(cb.code);
      break;
    case callback_kind::all_reduce: {
      message_ptr m = new_control(ref, index_key{}, op_allreduce_done, p.value.size());
      header_of(*m).reply_id = round;
      std::memcpy(args_of(*m), p.value.data(), p.value.size());
      weft::broadcast(std::move(m));
      break;
    }
    case callback_kind::none:
      object_error("round " + std::to_string(round) + " of the reductions of " +
                   collection_name(ref) + " has no callback");
  }
}

void root_progress(local_collection& lc) {
  root_reduction& r = *lc.root;
  for (;;) {
    auto it = r.acc.find(r.next_deliver);
    const std::int64_t want = expected(r, r.next_deliver);
    if (it == r.acc.end()) {
      // A round nobody could contribute to (every element left) is skipped.
      if (want == 0 && std::int64_t(r.next_deliver) < r.max_seen) {
        ++r.next_deliver;
        continue;
      }
      return;
    }
    if (std::int64_t(it->second.count) < want) return;
    if (std::int64_t(it->second.count) > want)
      object_error("round " + std::to_string(r.next_deliver) + " of the reductions of " +
                   collection_name(lc.ref) + " got " + std::to_string(it->second.count) +
                   " contributions for " + std::to_string(want) + " elements");
    partial p = std::move(it->second);
    r.acc.erase(it);
    const std::uint32_t round = r.next_deliver++;
    deliver_result(lc.ref, round, std::move(p));
  }
}

root_reduction& root_of(local_collection& lc) {
  if (!lc.root)
    object_error("PE " + std::to_string(my_pe()) + " got a reduction message for " +
                 collection_name(lc.ref) + " but is not its root");
  return *lc.root;
}

void on_partial(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local(h.collection);
  root_reduction& r = root_of(lc);
  ++r.partials_received;
  partial p;
  pupper u = pupper::unpacker(args_of(*m), args_size(*m));
  u | p.reducer | p.cb | p.count | p.value;
  const auto round = std::uint32_t(h.reply_id);
  r.max_seen = std::max<std::int64_t>(r.max_seen, round);
  if (round < r.next_deliver)
    object_error("a contribution to round " + std::to_string(round) + " of the reductions of " +
                 collection_name(lc.ref) + " arrived after that round completed");
  merge_partial(r.acc[round], std::move(p), lc.ref, round);
  root_progress(lc);
}

// ---- control messages ----------------------------------------------------------

void on_setup_done(message_ptr m);

void on_control(message_ptr m) {
  obj_header& h = header_of(*m);
  if (h.op == op_setup_done) {
    on_setup_done(std::move(m));
    return;
  }
  if (pe_state().gated) [[unlikely]] {
    hold_until_setup(std::move(m));
    return;
  }
  // Messages about a collection this node has not learnt yet wait for it.
  const bool names_collection =
      h.op != op_create && h.op != op_allreduce_done && h.op != op_future_set;
  if (names_collection && local_for(m) == nullptr) return;
  switch (h.op) {
    case op_create:
      on_create(std::move(m));
      return;
    case op_insert:
      on_insert(std::move(m));
      return;
    case op_insert_home: {
      // From now on home keeps the element's messages until it exists, so a
      // send right after insert() is never taken for one to a deleted element.
      local_collection& lc = get_local(h.collection);
      auto known_home = lc.home.find(h.key);
      const bool here = lc.local.count(h.key) != 0;
      const bool elsewhere = known_home != lc.home.end() && !known_home->second.deleted &&
                             !known_home->second.inserting && known_home->second.pe >= 0;
      if (here || elsewhere)
        object_error("insert of " + key_string(lc.ref, h.key) + ", which already exists on PE " +
                     std::to_string(here ? my_pe() : known_home->second.pe));
      location& l = lc.home[h.key];
      l.inserting = true;
      l.deleted = false;
      h.op = op_insert_root;
      send_to(lc.ref.root_pe, std::move(m));
      return;
    }
    case op_insert_root: {
      local_collection& lc = get_local(h.collection);
      root_reduction& r = root_of(lc);
      // The new element joins at the first round the root has not seen, so
      // no round that may already be complete waits for it.
      const std::uint32_t start =
          std::uint32_t(std::max<std::int64_t>(r.max_seen + 1, r.next_deliver));
      r.deltas[start] += 1;
      int to = h.reply_pe;
      if (to == -1) to = home_pe(lc.ref, h.key);
      h.op = op_insert;
      // Likewise for broadcasts: the element gets those numbered after this
      // point, and none before, whatever reaches its PE first.
      h.reply_id = start | (lc.root_bcast_next << 32);
      send_to(to, std::move(m));
      return;
    }
    case op_location: {
      local_collection& lc = get_local(h.collection);
      const int pe = h.reply_pe;
      const auto epoch = std::uint32_t(h.reply_id & 0xffffffffu);
      const auto kind = location_kind(h.reply_id >> 32);
      if (home_pe(lc.ref, h.key) == my_pe()) {
        apply_home_update(lc, h.key, pe, epoch, kind);
      } else {
        location& l = lc.known[h.key];
        if (l.pe < 0 || epoch >= l.epoch) l = {pe, epoch, kind == loc_deleted};
        lc.cache.drop(h.key);
      }
      return;
    }
    case op_migrate_in: {
      local_collection& lc = get_local(h.collection);
      const element_type_info& type = element_type(lc.ref.type);
      auto owned = std::make_unique<element_record>();
      element_record& rec = *owned;
      rec.ref = lc.ref;
      rec.key = h.key;
      rec.coll = &lc;
      if (trace::on()) [[unlikely]]
        trace::detail::emit(trace::kind::migrate_in, lc.ref.type, std::uint32_t(h.origin_pe),
                              std::uint32_t(h.key.w[0]), 0);
      pupper p = pupper::unpacker(args_of(*m), args_size(*m));
      p | rec.red_round | rec.epoch | rec.last_bcast;
      t_constructing = &rec;
      element_base* obj = type.make_empty();
      t_constructing = nullptr;
      try {
        type.pup(*obj, p);
      } catch (const serialization_error& ex) {
        base::fatal("%s: its migrated state does not unpack: %s", element_name(rec).c_str(),
                    ex.what());
      }
      rec.obj = obj;
      lc.local.emplace(h.key, std::move(owned));
      hist_add(lc, rec.red_round);
      lc.known[h.key] = {my_pe(), rec.epoch, false};
      lc.cache.drop(h.key);
      tell_home(lc, h.key, my_pe(), rec.epoch, loc_moved);
      const index_key key = h.key;
      obj->on_migrated();
      catch_up(lc, rec);
      // on_migrated may have asked to move on or be destroyed (catch_up may
      // have done so already, freeing rec).
      if (auto it = lc.local.find(key); it != lc.local.end()) after_entry(*it->second);
      reduction_flush(lc);
      return;
    }
    case op_bcast_request: {
      local_collection& lc = get_local(h.collection);
      h.op = op_bcast;
      h.reply_id = ++lc.root_bcast_next;
      if (lc.ref.kind == collection_kind::nodegroup) {
        h.op = op_entry;
        m->handler = h_nodegroup;
        for (int node = 0; node < num_nodes(); ++node)
          if (node != my_node()) send_to_node_of(node, copy_message(*m));
        send_node(std::move(m));
        return;
      }
      weft::broadcast(std::move(m));
      return;
    }
    case op_bcast:
      handle_bcast(get_local(h.collection), std::move(m));
      return;
    case op_red_partial:
      on_partial(std::move(m));
      return;
    case op_red_up:
      on_red_up(get_local(h.collection), std::move(m));
      return;
    case op_red_leave: {
      local_collection& lc = get_local(h.collection);
      root_reduction& r = root_of(lc);
      r.deltas[std::uint32_t(h.reply_id)] -= 1;
      root_progress(lc);
      return;
    }
    case op_allreduce_done: {
      pe_objects& s = pe_state();
      auto it = s.allreduce.find({h.collection, std::uint32_t(h.reply_id)});
      if (it == s.allreduce.end()) return;  // nobody on this PE awaits it
      std::vector<allreduce_slot*> slots = it->second;
      std::vector<std::byte> value(args_of(*m), args_of(*m) + args_size(*m));
      for (allreduce_slot* slot : slots) {
        slot->ready = true;
        slot->value = value;
      }
      for (allreduce_slot* slot : slots) {
        auto again = s.allreduce.find({h.collection, std::uint32_t(h.reply_id)});
        if (again == s.allreduce.end()) break;
        if (std::find(again->second.begin(), again->second.end(), slot) == again->second.end())
          continue;
        if (slot->h) {
          std::coroutine_handle<> c = std::exchange(slot->h, {});
          resume(slot->owner, c);
        }
      }
      return;
    }
    case op_future_set: {
      pe_objects& s = pe_state();
      auto it = s.futures.find(h.reply_id);
      if (it == s.futures.end() || it->second.has)
        object_error("a weft::future of PE " + std::to_string(my_pe()) +
                     " was set twice (or after its value was taken)");
      future_slot& f = it->second;
      f.has = true;
      f.value.assign(args_of(*m), args_of(*m) + args_size(*m));
      if (f.h) resume(f.waiter ? f.waiter->effective_owner() : nullptr, std::exchange(f.h, {}));
      return;
    }
    default:
      base::fatal("objects: control message of unknown kind %d", int(h.op));
  }
}

// ---- main's setup, readonly values, and the other nodes -------------------------

// Any object message, to its handler (messages kept for later).
void dispatch(message_ptr m) {
  if (m->handler == element_handler_id)
    on_element_message(std::move(m));
  else if (m->handler == h_nodegroup)
    on_nodegroup_message(std::move(m));
  else
    on_control(std::move(m));
}

void hold_until_setup(message_ptr m) {
  pe_state().gate.push_back(m.release());
}

// PE 0 of node 0, when the main function returned (or first suspended):
// the readonly values go to every PE of the other nodes, which hold their
// object messages until then (the values are set before any element there
// runs, as on node 0).
void main_returned() {
  if (num_nodes() == 1) return;
  std::vector<readonly_entry> table = readonly_table();
  for (const readonly_entry& r : table)
    if (r.pup == nullptr)
      object_error("weft::readonly<" + r.type + "> cannot be sent to the other " +
                   std::to_string(num_nodes() - 1) +
                   " process(es) of this job: its type has no weft::pup; give it a pup "
                   "function or run in one process");
  auto pack = [&](pupper& p) {
    std::uint64_t n = table.size();
    p | n;
    for (const readonly_entry& r : table) r.pup(r.self, p);
  };
  pupper sizer = pupper::sizer();
  pack(sizer);
  message_ptr m = new_control(collection_ref{}, index_key{}, op_setup_done, sizer.offset());
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  pack(packer);
  weft::broadcast(std::move(m));
}

void on_setup_done(message_ptr m) {
  pe_objects& s = pe_state();
  if (!s.gated) return;  // node 0
  {
    // The first PE of the node to hear sets the values; the others see
    // them through the lock before they run anything that reads them.
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    if (!g_node_objects->readonlies_set) {
      std::vector<readonly_entry> table = readonly_table();
      pupper u = pupper::unpacker(args_of(*m), args_size(*m));
      try {
        std::uint64_t n = 0;
        u | n;
        if (n != table.size())
          base::fatal(
              "node 0 sent %llu readonly value(s) and this process has %zu weft::readonly "
              "globals: every process of a job must run the same program build",
              static_cast<unsigned long long>(n), table.size());
        for (const readonly_entry& r : table) r.pup(r.self, u);
      } catch (const serialization_error& ex) {
        base::fatal("the readonly values from node 0 do not unpack: %s", ex.what());
      }
      g_node_objects->readonlies_set = true;
    }
  }
  s.gated = false;
  std::vector<message*> held;
  held.swap(s.gate);
  for (message* h : held) dispatch(message_ptr(h));
}

// ---- lifetime ----------------------------------------------------------------------

void node_start() {
  freeze_registries(true);
  g_entries = entry_table();
  g_node_objects = new node_objects;
  // The trace names entry methods and collections (by element type).
  trace::set_name_source("entry", [] {
    std::vector<std::pair<std::uint32_t, std::string>> names;
    const std::span<const entry_info> table = entry_table();
    for (std::size_t i = 0; i < table.size(); ++i) names.emplace_back(std::uint32_t(i), table[i].name);
    return names;
  });
  trace::set_name_source("collection", [] {
    std::vector<std::pair<std::uint32_t, std::string>> names;
    for (std::uint32_t i = 0; i < element_type_count(); ++i) names.emplace_back(i, element_type(i).name);
    return names;
  });
}

void pe_start() {
  t_obj = new pe_objects;
  t_obj->gated = num_nodes() > 1 && my_node() != 0;
}

void pe_stop() {
  pe_objects* s = t_obj;
  if (s == nullptr) return;
  for (auto h : s->main_tasks) h.destroy();
  s->main_tasks.clear();
  std::size_t stranded = s->gate.size();
  for (message* w : s->gate) message_ptr{w};
  for (auto& [id, msgs] : s->parked) {
    stranded += msgs.size();
    for (message* w : msgs) message_ptr{w};
  }
  if (stranded > 0)
    base::warn(
        "%zu object message(s) were not delivered: they came before the main function's setup "
        "ended or before this node learnt their collection, and the run ended first",
        stranded);
  for (auto& [id, lc] : s->collections) {
    for (auto& [k, rec] : lc->local) destroy_frames(*rec);
  }
  for (auto& [id, lc] : s->collections) {
    std::size_t undelivered = 0;
    for (auto& [k, msgs] : lc->waiting) {
      undelivered += msgs.size();
      for (message* w : msgs) message_ptr{w};
    }
    if (undelivered > 0)
      base::warn("%zu message(s) to elements of %s that were never inserted were not delivered",
                 undelivered, collection_name(lc->ref).c_str());
    for (message* w : lc->early) message_ptr{w};
    for (auto& [k, rec] : lc->local) {
      element_base* obj = rec->obj;
      rec->obj = nullptr;
      delete obj;
    }
    lc->local.clear();
  }
  s->collections.clear();
  t_obj = nullptr;
  delete s;
}

void node_stop() {
  node_objects* n = g_node_objects;
  g_node_objects = nullptr;
  if (n != nullptr) {
    for (auto& [id, g] : n->nodegroups) {
      for (message* w : g->waiting) message_ptr{w};
      if (g->rec) destroy_frames(*g->rec);  // coroutines still suspended at the end
      if (g->rec) {
        element_base* obj = g->rec->obj;
        g->rec->obj = nullptr;
        delete obj;
      }
    }
    delete n;
  }
  freeze_registries(false);
}

const bool registered = [] {
  element_handler_id = register_handler("objects.element", &on_element_message);
  h_nodegroup = register_handler("objects.nodegroup", &on_nodegroup_message);
  h_control = register_handler("objects.control", &on_control);
  register_layer({"objects", &node_start, &pe_start, &pe_stop, &node_stop, &main_returned,
                  &registry_fingerprint});
  return true;
}();

}  // namespace

// ---- the interface for the templates ------------------------------------------

void object_error(const std::string& what) {
  base::fatal("%s", what.c_str());
}

void require_pe(const char* what) {
  if (t_obj == nullptr && detail::on_guest_thread())
    object_error(std::string(what) + " was called" + guest_text());
  if (t_obj == nullptr) object_error(std::string(what) + " was called off a PE");
}

int home_pe(const collection_ref& ref, const index_key& key) noexcept {
  const int pes = num_pes();
  switch (ref.map) {
    case map_kind::owner_field: {
      int pe;
      std::memcpy(&pe, key.w, sizeof pe);
      return pe;
    }
    case map_kind::block: {
      const std::uint64_t n = dense_count(ref);
      if (n == 0) return 0;
      const std::uint64_t lin = linear_index(ref, key);
      return int(lin * std::uint64_t(pes) / n);
    }
    case map_kind::round_robin:
      return ref.dims > 0 ? int(linear_index(ref, key) % std::uint64_t(pes))
                          : int(index_key_hash{}(key) % std::size_t(pes));
    case map_kind::hash:
      return int(index_key_hash{}(key) % std::size_t(pes));
    case map_kind::user: {
      const int pe = user_map(ref.user_map)(key, pes);
      if (pe < 0 || pe >= pes)
        base::fatal("the map of %s put %s on PE %d; there are %d PEs", collection_name(ref).c_str(),
                    key_string(ref, key).c_str(), pe, pes);
      return pe;
    }
  }
  return 0;
}

std::string collection_name(const collection_ref& ref) {
  std::string type = ref.id == 0 ? "?" : element_type(ref.type).name;
  if (ref.kind == collection_kind::chare) return "chare " + type;
  return std::string(kind_name(ref.kind)) + " " + type + "#" +
         std::to_string(ref.id >> 32 == 0 ? 0 : (ref.id >> 32) - 1) + "." +
         std::to_string(ref.id & 0xffffffffu);
}

std::string key_string(const collection_ref& ref, const index_key& key) {
  std::string idx;
  if (ref.kind == collection_kind::chare) {
    chare_id c = key.as<chare_id>();
    return "chare " + element_type(ref.type).name + " (made on PE " + std::to_string(c.pe) + ", #" +
           std::to_string(c.seq) + ")";
  }
  if (ref.dims > 0) {
    int c[3] = {0, 0, 0};
    std::memcpy(c, key.w, sizeof(int) * std::size_t(ref.dims));
    idx = "[" + std::to_string(c[0]);
    for (int d = 1; d < ref.dims; ++d) idx += "," + std::to_string(c[d]);
    idx += "]";
  } else {
    char buf[80];
    std::snprintf(buf, sizeof buf, "[0x%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "]", key.w[0],
                  key.w[1], key.w[2]);
    idx = buf;
  }
  return "element " + idx + " of " + collection_name(ref);
}

bool same_callback(const callback_desc& a, const callback_desc& b) noexcept {
  return a.kind == b.kind && a.pe == b.pe && a.entry == b.entry && a.code == b.code &&
         a.future_id == b.future_id && a.ref.id == b.ref.id && a.key == b.key;
}

namespace {
// Groups (the PE is the index) and nodegroups (any PE of the node).
[[gnu::noinline]] void send_to_group_element(const collection_ref& ref, message_ptr m) {
  require_pe("send to an element");
  obj_header& h = header_of(*m);
  int where;
  std::memcpy(&where, h.key.w, sizeof where);
  if (ref.kind == collection_kind::nodegroup) {
    if (where < 0 || where >= num_nodes())
      object_error("send of " + entry_name(h.entry) + " to node " + std::to_string(where) + " of " +
                   collection_name(ref) + ": the job has " + std::to_string(num_nodes()) +
                   " node(s)");
    m->handler = h_nodegroup;
    send_to_node_of(where, std::move(m));
    return;
  }
  if (where < 0 || where >= num_pes())
    object_error("send of " + entry_name(h.entry) + " to PE " + std::to_string(where) + " of " +
                 collection_name(ref) + ": there are " + std::to_string(num_pes()) + " PEs");
  send_to(where, std::move(m));
}
}  // namespace

// Where an element of `ref` is, when the route cache does not say: where
// this PE last saw it (the known table has every array element that lives
// here, too), else its home; remembered in the cache (the known table
// gaining the key drops the entry). -1: deleted (the home knows more). Out
// of line, as find_local_record.
[[gnu::noinline]] int find_element_pe(local_collection& lc, const collection_ref& ref,
                                      const index_key& key) {
  if (ref.kind == collection_kind::chare)
    return lc.local.contains(key) ? my_pe() : -1;  // chares are not in the known table
  int dest;
  auto k = lc.known.find(key);
  if (k == lc.known.end())
    dest = home_pe(ref, key);
  else
    dest = k->second.deleted ? -1 : k->second.pe;
  if (dest >= 0) lc.cache.remember_pe(key, dest);
  return dest;
}

[[gnu::noinline]] void send_element_general(const collection_ref& ref, message_ptr&& m) {
  if (ref.kind == collection_kind::group || ref.kind == collection_kind::nodegroup) [[unlikely]] {
    send_to_group_element(ref, std::move(m));
    return;
  }
  const index_key& key = header_of(*m).key;
  int dest = -1;
  if (local_collection* lc = find_local(ref.id)) [[likely]] {
    // A chare is cached by pe only from its construction here to its
    // destruction (chares do not move); elsewhere its lookups go the slow way.
    dest = lc->cache.pe(key);
    if (dest < 0) [[unlikely]]
      dest = find_element_pe(*lc, ref, key);
  }
  if (dest < 0) [[unlikely]]
    dest = home_pe(ref, key);
  send_to(dest, std::move(m));
}

// The common case, an element of the collection this PE used last whose
// place the route cache knows, goes from here; every other goes through
// send_element_general. (Groups and nodegroups are never cached by PE.)
void send_element(const collection_ref& ref, message* m) {
  if (pe_objects* s = t_obj) [[likely]] {
    local_collection* lc = s->last;
    if (lc != nullptr && lc->ref.id == ref.id) [[likely]] {
      const std::int32_t dest = lc->cache.pe(header_of(*m).key);
      if (dest >= 0) [[likely]] {
        send_to(dest, m);
        return;
      }
    }
  }
  send_element_general(ref, message_ptr(m));
}

void broadcast_collection(const collection_ref& ref, message_ptr m) {
  require_pe("broadcast to a collection");
  obj_header& h = header_of(*m);
  h.op = op_bcast_request;
  m->handler = h_control;
  send_to(ref.root_pe, std::move(m));
}

collection_ref create_collection(collection_ref ref, std::uint32_t ctor,
                                 std::vector<std::byte> args) {
  require_pe("creating a collection");
  pe_objects& s = pe_state();
  ref.id = (std::uint64_t(my_pe() + 1) << 32) | ++s.collection_counter;
  ref.root_pe = my_pe();
  register_collection(ref);
  if (ref.kind != collection_kind::nodegroup) {
    local_collection& lc = make_local(ref);
    lc.root = std::make_unique<root_reduction>();
    if (ref.kind == collection_kind::group)
      lc.root->base_expected = num_pes();
    else if (!ref.dynamic)
      lc.root->base_expected = std::int64_t(dense_count(ref));
  }
  if (ref.kind == collection_kind::nodegroup) {
    // This node's instance is built here and now (any PE of the node may
    // run a nodegroup's code); other nodes get a creation message.
    create_nodegroup_here(ref, ctor, args.data(), args.size());
    for (int node = 0; node < num_nodes(); ++node) {
      if (node == my_node()) continue;
      message_ptr m = new_control(ref, index_key{}, op_create, sizeof ref + args.size());
      header_of(*m).entry = ctor;
      std::memcpy(args_of(*m), &ref, sizeof ref);
      if (!args.empty()) std::memcpy(args_of(*m) + sizeof ref, args.data(), args.size());
      send_to_node_of(node, std::move(m));
    }
    return ref;
  }
  auto info = std::make_shared<creation_info>();
  info->ctor = ctor;
  info->args = args;
  {
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    g_node_objects->creations.emplace(ref.id, info);
  }
  // Every PE builds its part when the message arrives, or earlier, at its
  // first touch of the collection.
  message_ptr m = new_control(ref, index_key{}, op_create, sizeof ref + args.size());
  header_of(*m).entry = ctor;
  std::memcpy(args_of(*m), &ref, sizeof ref);
  if (!args.empty()) std::memcpy(args_of(*m) + sizeof ref, args.data(), args.size());
  weft::broadcast(std::move(m));
  return ref;
}

void insert_element(const collection_ref& ref, const index_key& key, int pe, std::uint32_t ctor,
                    std::vector<std::byte> args) {
  require_pe("inserting an element");
  const int pes = num_pes();
  if (pe >= pes || pe < -2)
    object_error("insert of " + key_string(ref, key) + " on PE " + std::to_string(pe) +
                 ": there are " + std::to_string(pes) + " PEs");
  if (ref.kind == collection_kind::group || ref.kind == collection_kind::nodegroup)
    object_error("insert into " + collection_name(ref) +
                 ": groups and nodegroups have their elements from creation");
  if (ref.kind == collection_kind::array) {
    // Home first (it must expect the element), then the root (the element's
    // first reduction round), then the target PE.
    message_ptr m = new_control(ref, key, op_insert_home, args.size());
    header_of(*m).entry = ctor;
    header_of(*m).reply_pe = pe == -2 ? -1 : pe;
    if (!args.empty()) std::memcpy(args_of(*m), args.data(), args.size());
    send_to(home_pe(ref, key), std::move(m));
    return;
  }
  // A chare's home is the PE creating it (this one): it expects the chare
  // from now on, so messages to it wait until it exists.
  make_local(ref).home[key].inserting = true;
  message_ptr m = new_control(ref, key, op_insert, args.size());
  header_of(*m).entry = ctor;
  if (!args.empty()) std::memcpy(args_of(*m), args.data(), args.size());
  if (pe == -2) {
    // Placed by the runtime: the nodes take turns, starting with this one;
    // within a node, the first PE free takes it.
    std::uint32_t& next = pe_state().place_next;
    send_to_node_of(int((unsigned(my_node()) + next++) % unsigned(num_nodes())), std::move(m));
  } else
    send_to(pe == -1 ? home_pe(ref, key) : pe, std::move(m));
}

index_key new_chare_key() {
  pe_objects& s = pe_state();
  return index_key::of(chare_id{my_pe(), ++s.chare_counter});
}

collection_ref chare_collection(std::uint32_t type) {
  collection_ref ref;
  ref.id = (std::uint64_t(0xffffffffu) << 32) | type;
  ref.type = type;
  ref.kind = collection_kind::chare;
  ref.map = map_kind::owner_field;
  ref.dynamic = true;
  return ref;
}

std::uint64_t reduction_partials_received(const collection_ref& ref) {
  local_collection* lc = find_local(ref.id);
  if (lc == nullptr || !lc->root)
    object_error("reduction_partials_received: PE " + std::to_string(my_pe()) +
                 " is not the root of " + collection_name(ref));
  return lc->root->partials_received;
}

element_record* constructing_record() noexcept {
  return t_constructing;
}

element_base* local_element(const collection_ref& ref) noexcept {
  if (t_obj == nullptr) return nullptr;
  if (ref.kind == collection_kind::nodegroup) {
    nodegroup_instance& g = nodegroup(ref);
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    return g.created ? g.rec->obj : nullptr;
  }
  local_collection& lc = get_local(ref);
  auto it = lc.local.find(index_key::of(my_pe()));
  return it == lc.local.end() ? nullptr : it->second->obj;
}

void request_migration(element_record& rec, int pe) {
  const int pes = num_pes();
  if (rec.ref.kind != collection_kind::array)
    object_error(element_name(rec) + ": only array elements migrate");
  if (pe < 0 || pe >= pes)
    object_error("migrate_to(" + std::to_string(pe) + ") of " + element_name(rec) +
                 ": no such PE (there are " + std::to_string(pes) + ")");
  rec.migrate_to = pe;
}

void request_destroy(element_record& rec) {
  if (rec.ref.kind == collection_kind::group || rec.ref.kind == collection_kind::nodegroup)
    object_error("destroy of " + element_name(rec) + ": group elements live as long as the run");
  rec.destroy_requested = true;
}

void send_destroy(const collection_ref& ref, const index_key& key) {
  message_ptr m = new_element_message(ref, key, 0, 0);
  header_of(*m).op = op_destroy;
  send_element(ref, std::move(m));
}

void adopt_task(element_record* owner, std::coroutine_handle<> h, promise_base& p,
                const char* what) {
  p.owner = owner;
  p.what = what;
  p.self = h;
  if (owner == nullptr) {
    pe_state().main_tasks.push_back(h);
    return;
  }
  if (owner->ref.kind == collection_kind::nodegroup) {
    // Every PE of the node may run the nodegroup's coroutines.
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    owner->coroutines.push_back(h);
    return;
  }
  owner->coroutines.push_back(h);
}

void resume(element_record* owner, std::coroutine_handle<> h) {
  if (owner != nullptr && owner->ref.kind == collection_kind::nodegroup) {
    // A nodegroup neither reduces nor migrates: nothing to do after it.
    h.resume();
    return;
  }
  if (owner != nullptr) owner->contributed_now = false;
  h.resume();
  if (owner != nullptr && owner->obj != nullptr) after_entry(*owner);
}

void promise_base::finished_detached(promise_base& p) noexcept {
  if (t_obj == nullptr) return;
  auto erase = [&p](std::vector<std::coroutine_handle<>>& list) {
    auto it = std::find(list.begin(), list.end(), p.self);
    if (it != list.end()) list.erase(it);
  };
  if (p.owner != nullptr && p.owner->ref.kind == collection_kind::nodegroup) {
    std::lock_guard<std::mutex> lock(g_node_objects->mutex);
    erase(p.owner->coroutines);
    return;
  }
  erase(p.owner != nullptr ? p.owner->coroutines : t_obj->main_tasks);
}

void promise_base::fail_detached(promise_base& p, std::exception_ptr e) noexcept {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    what = ex.what();
  } catch (...) {
  }
  std::string where = p.owner != nullptr ? " of " + element_name(*p.owner) : std::string();
  base::fatal("%s%s on PE %d threw %s", p.what, where.c_str(), my_pe(), what.c_str());
}

std::uint32_t contribute(element_record& rec, std::uint32_t reducer_id, const callback_desc& cb,
                         std::vector<std::byte> value) {
  if (rec.ref.kind != collection_kind::array && rec.ref.kind != collection_kind::group)
    object_error("contribute from " + element_name(rec) +
                 ": reductions run over arrays and groups");
  if (rec.contributed_now)
    object_error(element_name(rec) + " contributed twice to reductions in one invocation of " +
                 (rec.running ? std::string(rec.running) : std::string("an entry method")) +
                 " (rounds " + std::to_string(rec.red_round - 1) + " and " +
                 std::to_string(rec.red_round) +
                 "): contribute once per round; to reduce two values, contribute a pair with a "
                 "user op");
  rec.contributed_now = true;
  local_collection& lc = *rec.coll;
  const std::uint32_t round = rec.red_round++;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::reduction, rec.ref.type, 0, round, 0);
  hist_remove(lc, round);
  hist_add(lc, round + 1);
  partial p;
  p.reducer = reducer_id;
  p.cb = cb;
  p.count = 1;
  p.value = std::move(value);
  merge_partial(lc.pending[round], std::move(p), lc.ref, round);
  reduction_flush(lc);
  return round;
}

void allreduce_register(allreduce_slot* s) {
  pe_state().allreduce[{s->collection, s->round}].push_back(s);
}

void allreduce_unregister(allreduce_slot* s) noexcept {
  if (t_obj == nullptr) return;
  auto it = t_obj->allreduce.find({s->collection, s->round});
  if (it == t_obj->allreduce.end()) return;
  auto& v = it->second;
  v.erase(std::remove(v.begin(), v.end(), s), v.end());
  if (v.empty()) t_obj->allreduce.erase(it);
}

std::uint64_t future_new() {
  pe_objects& s = pe_state();
  const std::uint64_t id = ++s.future_counter;
  s.futures.emplace(id, future_slot{});
  return id;
}

void future_set(int pe, std::uint64_t id, std::vector<std::byte> value) {
  const int pes = num_pes();
  if (pe < 0 || pe >= pes)
    object_error("set of a weft::future owned by PE " + std::to_string(pe) +
                 ", which does not exist (an unset or corrupt future)");
  message_ptr m = new_control(collection_ref{}, index_key{}, op_future_set, value.size());
  header_of(*m).reply_id = id;
  if (!value.empty()) std::memcpy(args_of(*m), value.data(), value.size());
  send_to(pe, std::move(m));
}

bool future_take(std::uint64_t id, std::vector<std::byte>& out) {
  pe_objects& s = pe_state();
  auto it = s.futures.find(id);
  if (it == s.futures.end())
    object_error("a weft::future of PE " + std::to_string(my_pe()) +
                 " is awaited twice (a future gives its value once)");
  if (!it->second.has) return false;
  out = std::move(it->second.value);
  s.futures.erase(it);
  return true;
}

void future_wait(std::uint64_t id, std::coroutine_handle<> h, promise_base* waiter) {
  pe_objects& s = pe_state();
  future_slot& f = s.futures[id];
  if (f.h) object_error("a weft::future is awaited by two coroutines at once");
  f.h = h;
  f.waiter = waiter;
}

void future_cancel(std::uint64_t id) noexcept {
  if (t_obj == nullptr) return;
  auto it = t_obj->futures.find(id);
  if (it != t_obj->futures.end()) it->second.h = {};
}

}  // namespace weft::detail
