// Collections: the node's directory (how a PE that meets a collection
// first in a message learns it), creation (every PE builds its part when
// the creation message arrives or at its first touch, whichever comes
// first), insertion (home, then the root, then the target PE), and the
// life of an element here (construction, destruction, what an entry asked
// for when it returns). The user-facing names for errors are here too.
#include "weft/objects/collections.hpp"
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <exception>
#include <string>
#include "objects/internal.hpp"
#include "weft/trace/session.hpp"

namespace weft::objects::detail {

constinit thread_local element_record* t_constructing_record = nullptr;

namespace {

const char* collection_kind_name(collection_kind k) {
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

// Chare collections (one per element type) have ids of their own kind, and
// their description follows from the id.
constexpr std::uint64_t chare_id_tag = std::uint64_t(0xffffffffu) << 32;

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
  auto lock = lock_node_objects();
  return directory_entry_locked(*g_node_objects, id);
}

void create_here(local_collection& lc, std::uint32_t ctor, const std::byte* args, std::size_t n);

void report_dropped(element_record& rec, const char* why) {
  if (!rec.extras_) return;
  for (auto& [id, mb] : rec.extras_->mailboxes)
    if (!mb.queued.empty())
      base::warn("%s %s with %zu message(s) for %s never awaited", element_name(rec).c_str(), why,
                 mb.queued.size(), entry_name(id).c_str());
}

void destroy_element(local_collection& lc, element_record& rec) {
  destroy_frames(rec);
  report_dropped(rec, "destroyed");
  const index_key key = rec.key;
  const std::uint32_t epoch = rec.epoch, round = rec.red_round;
  bcast_forget(lc, key);
  remove_element(lc, rec);
  if (lc.ref.kind == collection_kind::chare) {
    // Chare ids are never reused: home alone knows it is gone, and the
    // home of a placed chare is this PE, which knows it by its number.
    if (!lc.known.empty()) lc.known.erase(key);
    if (chare_place(key) >= 0) return;
    tell_home(lc, key, my_pe(), epoch, loc_deleted);
    return;
  }
  lc.known[key] = {my_pe(), epoch, true};
  lc.cache.drop(key);
  tell_home(lc, key, my_pe(), epoch, loc_deleted);
  if (lc.ref.kind == collection_kind::array) {
    message_ptr m = new_control_message(lc.ref, key, op_red_leave, 0);
    header_of(*m).args.round = round;
    send_object_to_pe(lc.ref.root_pe, std::move(m));
  }
  reduction_flush(lc);
}

}  // namespace

// ---- the node's directory of collections ------------------------------------

void register_collection(const collection_ref& ref) {
  auto lock = lock_node_objects();
  g_node_objects->directory.emplace(ref.id, ref);
}

// This PE's part of a collection, made on first touch (without creating it).
local_collection& make_local_collection(const collection_ref& ref) {
  if (local_collection* lc = find_local_collection(ref.id)) return *lc;
  pe_objects& s = this_pe_objects();
  auto lc = std::make_unique<local_collection>();
  lc->ref = ref;
  if (ref.kind == collection_kind::array || ref.kind == collection_kind::group)
    lc->combiner = node_combiner_for(ref);
  // Chare collections have no creation step.
  lc->created = ref.kind == collection_kind::chare;
  lc->deliver_fast = lc->created;
  local_collection* p = lc.get();
  s.collections.emplace(ref.id, std::move(lc));
  s.last = p;
  return *p;
}

// This PE's part of a collection, created here first if its creator
// registered it on this node: a collection is usable on every PE of the node
// as soon as create() returns, whether or not the creation message arrived.
local_collection& get_local_collection(const collection_ref& ref) {
  local_collection& lc = make_local_collection(ref);
  if (!lc.created) {
    std::shared_ptr<const creation_info> info;
    {
      auto lock = lock_node_objects();
      auto it = g_node_objects->creations.find(ref.id);
      if (it != g_node_objects->creations.end()) info = it->second;
    }
    if (info) create_here(lc, info->ctor, info->args.data(), info->args.size());
  }
  return lc;
}

[[gnu::noinline]] local_collection& get_local_collection_first(std::uint64_t id,
                                                               local_collection* lc) {
  return get_local_collection(lc != nullptr ? collection_ref(lc->ref) : lookup_collection(id));
}

// This PE's part of the collection message `m` names; null when this node
// has not learnt the collection yet (its creation message, from another
// node, is still on its way): then `m` waits, parked, until this PE's
// creation message arrives. Later messages for it wait behind the parked
// ones, so that they keep their order.
[[gnu::noinline]] local_collection* local_collection_for_first(std::uint64_t id,
                                                               local_collection* lc,
                                                               message_ptr& m) {
  if (lc != nullptr) return &get_local_collection(lc->ref);
  if ((id & chare_id_tag) == chare_id_tag)
    return &get_local_collection(chare_collection(std::uint32_t(id)));
  pe_objects& s = this_pe_objects();
  auto parked = s.parked.find(id);
  if (parked == s.parked.end()) {
    collection_ref ref;
    {
      auto lock = lock_node_objects();
      auto it = g_node_objects->directory.find(id);
      if (it != g_node_objects->directory.end()) ref = it->second;
    }
    if (ref.id != 0) return &get_local_collection(ref);
    parked = s.parked.emplace(id, std::vector<message*>{}).first;
  }
  parked->second.push_back(m.release());
  return nullptr;
}

// ---- elements ------------------------------------------------------------------

void destroy_frames(element_record& rec) {
  // Destroying a frame runs its awaiters' destructors, which unregister
  // them; copy first, as finished tasks also edit the list.
  if (!rec.extras_) return;
  std::vector<std::coroutine_handle<>> frames;
  frames.swap(rec.extras_->coroutines);
  for (auto h : frames) h.destroy();
}

element_record& construct_element(local_collection& lc, const index_key& key, std::uint32_t ctor,
                                  const std::byte* args, std::size_t n, std::uint32_t round,
                                  std::uint32_t epoch) {
  auto owned = std::make_unique<element_record>();
  element_record& rec = *owned;
  rec.ref = lc.ref;
  rec.key = key;
  // One probe of the table, which both checks and inserts.
  if (!lc.local.insert(owned))
    object_error("insert of " + key_string(lc.ref, key) + ", which already exists on PE " +
                 std::to_string(my_pe()));
  rec.coll = &lc;
  rec.red_round = round;
  rec.epoch = epoch;
  rec.last_bcast = lc.bcast_count;
  set_measured(rec, lc.ref);
  rec.comm = rec.measured && g_comm_records;
  if (lc.ref.kind != collection_kind::chare) {
    // Chares neither reduce nor migrate: the local table is all they need.
    round_hist_add(lc, round);
    lc.known[key] = {my_pe(), epoch, false};
  }
  // It is here: what the tables now say, in the route cache for the
  // messages that follow (a constructor's first send to its own element,
  // a new chare's first message), which would otherwise each miss.
  lc.cache.remember_here(key, &rec, my_pe());
  const entry_info& e = checked_entry(ctor);
  pupper p = pupper::unpacker(args, n);
  t_constructing_record = &rec;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_begin, ctor, lc.ref.type, std::uint32_t(key.w[0]), 0);
  try {
    rec.obj = e.construct(p);
  } catch (const std::exception& ex) {
    t_constructing_record = nullptr;
    base::fatal("constructor of %s threw %s", element_name(rec).c_str(), ex.what());
  }
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_end, ctor, 0, 0, 0);
  t_constructing_record = nullptr;
  return rec;
}

void remove_element(local_collection& lc, element_record& rec) {
  if (lc.ref.kind != collection_kind::chare) round_hist_remove(lc, rec.red_round);
  if (rec.sync != sync_state::none) --lc.sync_waiting;
  element_base* obj = rec.obj;
  index_key key = rec.key;
  rec.obj = nullptr;
  delete obj;
  lc.cache.drop(key);
  lc.local.erase(key);  // frees rec
}

void after_entry(element_record& rec) {
  local_collection& lc = *rec.coll;
  if (rec.destroy_requested)
    destroy_element(lc, rec);
  else if (rec.migrate_to >= 0)
    migrate_out(lc, rec);
}

// ---- creation --------------------------------------------------------------------

namespace {

void create_here(local_collection& lc, std::uint32_t ctor, const std::byte* args, std::size_t n) {
  lc.created = true;
  lc.deliver_fast = !lc.paused;
  const int me = my_pe();
  const collection_ref& ref = lc.ref;
  std::vector<index_key> made;
  if (ref.kind == collection_kind::group) {
    construct_element(lc, index_key::of(me), ctor, args, n, 0, 0);
    made.push_back(index_key::of(me));
  } else if (!ref.dynamic) {
    const std::uint64_t count = dense_count(ref);
    for (std::uint64_t i = 0; i < count; ++i) {
      index_key k = key_of_linear(ref, i);
      if (home_pe(ref, k) == me) {
        construct_element(lc, k, ctor, args, n, 0, 0);
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
  redeliver_kept(lc, std::move(early));
  reduction_flush(lc);
}

}  // namespace

// The creation message carries the collection's description ahead of the
// constructor's arguments: it is how a node learns the collection.
void receive_creation(message_ptr m) {
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
    auto lock = lock_node_objects();
    g_node_objects->directory.emplace(ref.id, ref);
    g_node_objects->creations.emplace(ref.id, std::move(info));
  }
  local_collection& lc = make_local_collection(ref);
  if (!lc.created) create_here(lc, h.entry, args, n);
  // What came for it before this node knew it, in the order it came.
  pe_objects& s = this_pe_objects();
  if (auto it = s.parked.find(ref.id); it != s.parked.end()) {
    std::vector<message*> parked = std::move(it->second);
    s.parked.erase(it);
    for (message* p : parked) dispatch_object_message(message_ptr(p));
  }
}

namespace {

// A chare made by create_on, here, its home: what came for it before it
// existed runs after its constructor; nobody else is told (chare_place).
void receive_placed_chare(local_collection& lc, message_ptr m) {
  const obj_header& h = header_of(*m);
  const index_key key = h.key;
  const chare_id c = key.as<chare_id>();
  // Inserts from one PE arrive in its order: this one is its newest here.
  lc.chares_arrived[c.pe] = c.seq;
  element_record& rec = construct_element(lc, key, h.entry, args_of(*m), args_size(*m), 0, 0);
  m.reset();
  auto w = lc.waiting.empty() ? lc.waiting.end() : lc.waiting.find(key);
  if (w == lc.waiting.end()) {
    // The constructor may have asked to be destroyed.
    after_entry(rec);
    return;
  }
  // Messages kept for it run first, as at the home of any element (they may
  // destroy it; chare ids are never reused, so a record found after them is
  // this one).
  std::vector<message*> msgs = std::move(w->second);
  lc.waiting.erase(w);
  redeliver_kept(lc, std::move(msgs));
  if (auto it = lc.local.find(key); it != lc.local.end()) after_entry(*it->second);
}

}  // namespace

void receive_insert(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  if (lc.ref.kind == collection_kind::chare && chare_place(h.key) >= 0) {
    receive_placed_chare(lc, std::move(m));
    return;
  }
  element_record& rec = construct_element(lc, h.key, h.entry, args_of(*m), args_size(*m),
                                          h.args.insert.first_round, 0);
  const index_key key = h.key;
  tell_home(lc, key, my_pe(), 0, loc_inserted);
  if (lc.ref.kind == collection_kind::array) {
    rec.last_bcast = h.args.insert.bcasts_before;
    bcast_arrived(lc, rec, lc.ref.root_pe);
  }
  // The constructor may have asked to migrate or be destroyed.
  auto it = lc.local.find(key);
  if (it != lc.local.end()) after_entry(*it->second);
  reduction_flush(lc);
}

// Home first (it must expect the element), then the root (the element's
// first reduction round), then the target PE.
void receive_insert_at_home(message_ptr m) {
  obj_header& h = header_of(*m);
  // From now on home keeps the element's messages until it exists, so a
  // send right after insert() is never taken for one to a deleted element.
  local_collection& lc = get_local_collection(h.collection);
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
  send_object_to_pe(lc.ref.root_pe, std::move(m));
}

void receive_insert_at_root(message_ptr m) {
  obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  root_reduction& r = root_reduction_of(lc);
  // The new element joins at the first round the root has not seen, so
  // no round that may already be complete waits for it.
  const std::uint32_t start = std::uint32_t(std::max<std::int64_t>(r.max_seen + 1, r.next_deliver));
  r.deltas[start] += 1;
  int to = h.arg_pe;
  if (to == -1) to = home_pe(lc.ref, h.key);
  h.op = op_insert;
  // Likewise for broadcasts: the element gets those numbered after this
  // point, and none before, whatever reaches its PE first.
  h.args.insert = {start, std::uint32_t(lc.root_bcast_next)};
  if (lc.ref.kind == collection_kind::array) bcast_departed(lc, h.key, 0, lc.root_bcast_next);
  send_object_to_pe(to, std::move(m));
}

// ---- the interface for the templates ------------------------------------------

std::string collection_name(const collection_ref& ref) {
  std::string type = ref.id == 0 ? "?" : element_type(ref.type).name;
  if (ref.kind == collection_kind::chare) return "chare " + type;
  return std::string(collection_kind_name(ref.kind)) + " " + type + "#" +
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

collection_ref create_collection(collection_ref ref, std::uint32_t ctor,
                                 std::vector<std::byte> args) {
  require_pe("creating a collection");
  pe_objects& s = this_pe_objects();
  ref.id = (std::uint64_t(my_pe() + 1) << 32) | ++s.collection_counter;
  ref.root_pe = my_pe();
  register_collection(ref);
  if (ref.kind != collection_kind::nodegroup) {
    local_collection& lc = make_local_collection(ref);
    lc.root = std::make_unique<root_reduction>();
    if (ref.kind == collection_kind::group)
      lc.root->base_expected = num_pes();
    else if (!ref.dynamic)
      lc.root->base_expected = std::int64_t(dense_count(ref));
  }
  if (ref.kind == collection_kind::nodegroup) {
    // This node's instance is built here and now (any PE of the node may
    // run a nodegroup's code); other nodes get a creation message (and, for
    // one made in main's setup, the setup-done message: lifecycle.cpp).
    if (num_nodes() > 1) {
      auto info = std::make_shared<creation_info>();
      info->ctor = ctor;
      info->args = args;
      auto lock = lock_node_objects();
      g_node_objects->nodegroup_creations.emplace(ref.id, std::move(info));
    }
    create_nodegroup_here(ref, ctor, args.data(), args.size());
    for (int node = 0; node < num_nodes(); ++node) {
      if (node == my_node()) continue;
      message_ptr m = new_control_message(ref, index_key{}, op_create, sizeof ref + args.size());
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
    auto lock = lock_node_objects();
    g_node_objects->creations.emplace(ref.id, info);
  }
  // Every PE builds its part when the message arrives, or earlier, at its
  // first touch of the collection.
  message_ptr m = new_control_message(ref, index_key{}, op_create, sizeof ref + args.size());
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
    message_ptr m = new_control_message(ref, key, op_insert_home, args.size());
    header_of(*m).entry = ctor;
    header_of(*m).arg_pe = pe == -2 ? -1 : pe;
    if (!args.empty()) std::memcpy(args_of(*m), args.data(), args.size());
    send_object_to_pe(home_pe(ref, key), std::move(m));
    return;
  }
  // A chare placed by the runtime is homed at the PE creating it (this
  // one): it expects the chare from now on, so messages to it wait until it
  // exists. A chare for a known PE is homed there (chare_place): nothing to
  // record here.
  if (pe == -2) make_local_collection(ref).home[key].inserting = true;
  message_ptr m = new_control_message(ref, key, op_insert, args.size());
  header_of(*m).entry = ctor;
  if (!args.empty()) std::memcpy(args_of(*m), args.data(), args.size());
  if (pe == -2) {
    // Placed by the runtime: the nodes take turns, starting with this one;
    // within a node, the first PE free takes it.
    std::uint32_t& next = this_pe_objects().place_next;
    send_to_node_of(int((unsigned(my_node()) + next++) % unsigned(num_nodes())), std::move(m));
  } else
    send_object_to_pe(pe == -1 ? home_pe(ref, key) : pe, std::move(m));
}

index_key new_chare_key(int pe) {
  pe_objects& s = this_pe_objects();
  index_key k = index_key::of(chare_id{my_pe(), ++s.chare_counter});
  k.w[1] = pe >= 0 ? std::uint64_t(pe) + 1 : 0;
  return k;
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

element_record* constructing_record() noexcept {
  return t_constructing_record;
}

element_base* local_element(const collection_ref& ref) noexcept {
  if (t_pe_objects == nullptr) return nullptr;
  if (ref.kind == collection_kind::nodegroup) return nodegroup_local_element(ref);
  local_collection& lc = get_local_collection(ref);
  auto it = lc.local.find(index_key::of(my_pe()));
  return it == lc.local.end() ? nullptr : it->second->obj;
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

}  // namespace weft::objects::detail
