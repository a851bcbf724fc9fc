// The location manager and the element handler: where an element lives
// (its home PE, the route cache, the known and home tables), forwarding a
// message that missed, send_element, and delivery to an element that is
// here.
//
// The hot paths are here, in one translation unit with the inline helpers
// of internal.hpp: send_element's fast path (the collection used last, its
// place in the route cache) and on_element_message's (an entry call to an
// element found in the route cache). Everything they call is defined here
// or inline, and this PE's objects (t_pe_objects) and the entry table are defined
// here, so both are read directly; the general cases are out of line
// (noinline) so that their code does not take the fast paths' registers.
//
// The location protocol: an element's home PE (from its collection's map)
// always knows where it is, told by tell_home whenever it is inserted,
// migrates or is destroyed; other PEs remember where they last saw it
// (known), and a message that missed is forwarded there or home. The
// element, reached after forwarding, tells the sender its place
// (deliver_special), so the next message goes straight.
#include <cinttypes>
#include <cstring>
#include <exception>
#include <string>
#include "objects/internal.hpp"
#include "weft/core/handler.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

handler_id element_handler_id = 0;
constinit thread_local pe_objects* t_pe_objects = nullptr;
std::span<const entry_info> g_entry_table;  // the entry table, fixed while a node runs

// An entry call packed for this process (pointers inside, see
// obj_header::in_process), packed again to leave it.
[[gnu::noinline]] message_ptr repack_for_another_node(message_ptr m) {
  const obj_header& h = header_of(*m);
  const entry_info& e = checked_entry(h.entry);
  if (e.to_anywhere == nullptr)
    base::fatal("objects: a message for %s packed for this process is about to leave it",
                e.name.c_str());
  return e.to_anywhere(*m);
}

// To any PE of node `node` (nodegroups, chares placed by the runtime).
void send_to_node_of(int node, message_ptr m) {
  if (node == my_node()) {
    send_node(std::move(m));
    return;
  }
  if (header_of(*m).in_process != 0) m = repack_for_another_node(std::move(m));
  weft::send_to_node(node, std::move(m));
}

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
  // The route cache may hold the old place (this PE sent there): a message
  // sent from here by it would be forwarded, and the next one, sent
  // straight to the new place, could overtake it.
  lc.cache.drop(key);
  if (kind == loc_inserted) {
    l = {pe, epoch, false, false};
  } else if (l.inserting) {
    // The news of an earlier life of the element, overtaken by its
    // re-insertion: the new element's own news decides.
  } else if (epoch >= l.epoch || l.pe < 0) {
    l.pe = pe;
    l.epoch = epoch;
    l.deleted = kind == loc_deleted;
    // This PE's own sends look in `known` (find_element_pe), which it set
    // when the element left from here: left stale, they would go to a place
    // two moves old and be forwarded, and a later one, sent once a PE on
    // that path has learnt the new place, could overtake them.
    if (auto k = lc.known.find(key); k != lc.known.end() && epoch >= k->second.epoch)
      k->second = {pe, epoch, kind == loc_deleted};
  }
  if (!l.deleted && l.pe == my_pe() && lc.local.contains(key)) lc.home.erase(at);
  if (kind != loc_deleted && !lc.waiting.empty()) {
    auto w = lc.waiting.find(key);
    if (w != lc.waiting.end()) {
      std::vector<message*> msgs = std::move(w->second);
      lc.waiting.erase(w);
      redeliver_kept(lc, std::move(msgs));
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
  message_ptr m = new_control_message(lc.ref, key, op_location, 0);
  header_of(*m).arg_pe = pe;
  header_of(*m).args.location = {epoch, kind};
  send_object_to_pe(home, std::move(m));
}

void learn_location(local_collection& lc, const index_key& key, int pe, std::uint32_t epoch,
                    location_kind kind) {
  if (home_pe(lc.ref, key) == my_pe()) {
    apply_home_update(lc, key, pe, epoch, kind);
  } else {
    location& l = lc.known[key];
    if (l.pe < 0 || epoch >= l.epoch) l = {pe, epoch, kind == loc_deleted};
    lc.cache.drop(key);
  }
}

void receive_location(message_ptr m) {
  const obj_header& h = header_of(*m);
  learn_location(get_local_collection(h.collection), h.key, h.arg_pe, h.args.location.epoch,
                 h.args.location.kind);
}

// The trace records around an entry call, out of line: their code would
// take registers from the delivery path, which runs them rarely (summary
// mode's untimed entries are counted inline: trace_entry_counted). An entry
// begins as its handler does; in a sampled trace (--weft:trace-sample) most
// handlers are not recorded, and an entry that follows another entry or
// handler at once on this PE begins where that one ended: a time-stamp read
// saved per message, for the dispatch between the two (tens of ns) charged
// to the entry.
[[gnu::noinline, gnu::cold]] void trace_entry_begin(const element_record& rec,
                                                    const entry_info& e) {
  const auto id = std::uint32_t(&e - g_entry_table.data());
  trace::kind after = trace::kind::handler_begin;
  if (trace::detail::g_sample_every.load(std::memory_order_relaxed) > 1) {
    const std::uint8_t last = trace::detail::last_kind();
    if (last == std::uint8_t(trace::kind::entry_end) ||
        last == std::uint8_t(trace::kind::handler_end))
      after = trace::kind(last);
  }
  trace::detail::emit_adjacent(after, trace::kind::entry_begin, id, rec.ref.type,
                               std::uint32_t(rec.key.w[0]), 0);
}
[[gnu::noinline, gnu::cold]] void trace_entry_end(const entry_info& e) {
  trace::detail::emit(trace::kind::entry_end, std::uint32_t(&e - g_entry_table.data()), 0, 0, 0);
}

// What a message for an element that is here needs before (or instead of)
// an ordinary entry call: the sender told where the element is now, if it
// was forwarded; a destroy carried out. False when it consumed the message.
[[gnu::noinline]] bool deliver_special(element_record& rec, message_ptr& m) {
  obj_header& h = header_of(*m);
  // (A placed chare's senders already send to its place: a message of
  // theirs was only kept, waiting for the chare.)
  if (h.hops > 0 && h.origin_pe >= 0 && h.origin_pe != my_pe() &&
      !(rec.ref.kind == collection_kind::chare && chare_place(rec.key) >= 0)) {
    message_ptr u = new_control_message(rec.ref, rec.key, op_location, 0);
    header_of(*u).arg_pe = my_pe();
    header_of(*u).args.location = {rec.epoch, loc_moved};
    send_object_to_pe(h.origin_pe, std::move(u));
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
  mailbox& mb = rec.extras().mailboxes[entry_id];
  if (mb.waiter == nullptr) {
    mb.queued.push_back(std::move(m));
    return;
  }
  mb.waiter->got.push_back(std::move(m));
  if (mb.waiter->got.size() >= mb.waiter->need) {
    std::coroutine_handle<> c = mb.waiter->h;
    const promise_base* p = mb.waiter->promise;
    mb.waiter = nullptr;
    resume(&rec, c, p);
  }
}

namespace {

[[noreturn]] void error_deleted(const local_collection& lc, const obj_header& h) {
  object_error("a message " +
               (h.op == op_destroy ? std::string("destroying") : "for " + entry_name(h.entry)) +
               " was sent to " + key_string(lc.ref, h.key) + ", which was deleted (sent by PE " +
               std::to_string(h.origin_pe) + ")");
}

// A message for a chare placed here that is not here: its insert is on
// its way (keep the message until the chare exists) or arrived before
// (the chare was destroyed). Numbers compared modulo 2^32, so that a PE
// that made 2^32 chares goes on.
void keep_or_refuse_for_placed_chare(local_collection& lc, message_ptr m) {
  const obj_header& h = header_of(*m);
  const chare_id c = h.key.as<chare_id>();
  auto it = lc.chares_arrived.find(c.pe);
  if (it != lc.chares_arrived.end() && std::int32_t(c.seq - it->second) <= 0) error_deleted(lc, h);
  lc.waiting[h.key].push_back(m.release());
}

// A message for an element that is not here: forward it, or keep it until
// the element exists.
void forward_or_keep(local_collection& lc, message_ptr m) {
  obj_header& h = header_of(*m);
  ++h.hops;
  const int me = my_pe();
  const int home = home_pe(lc.ref, h.key);
  if (home == me) {
    if (lc.ref.kind == collection_kind::chare && chare_place(h.key) >= 0) {
      keep_or_refuse_for_placed_chare(lc, std::move(m));
      return;
    }
    auto it = lc.home.find(h.key);
    if (it == lc.home.end() && lc.ref.kind == collection_kind::chare) error_deleted(lc, h);
    if (it != lc.home.end()) {
      if (it->second.deleted) error_deleted(lc, h);
      if (it->second.inserting) {
        lc.waiting[h.key].push_back(m.release());
        return;
      }
      if (it->second.pe != me) {
        send_object_to_pe(it->second.pe, std::move(m));
        return;
      }
    } else if (auto k = lc.known.find(h.key);
               k != lc.known.end() && !k->second.deleted && k->second.pe != me) {
      // It left home and has not announced its new place yet.
      send_object_to_pe(k->second.pe, std::move(m));
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
    send_object_to_pe(k->second.pe, std::move(m));
  else
    send_object_to_pe(home, std::move(m));
}

// The element table behind the route cache (the cache missed): out of line,
// so that the hash table's code does not crowd the delivery path's registers.
[[gnu::noinline]] element_record* find_local_record(local_collection& lc, const index_key& key) {
  auto it = lc.local.find(key);
  if (it == lc.local.end()) return nullptr;
  element_record* rec = it->second;
  lc.cache.remember_rec(key, rec);
  return rec;
}
}  // namespace

// Every case of an element message: on_element_message below takes the
// common one itself.
[[gnu::noinline]] void on_element_message_general(message_ptr m) {
  if (this_pe_objects().gated) [[unlikely]] {
    hold_until_setup(std::move(m));
    return;
  }
  local_collection* found = local_collection_for(m);
  if (found == nullptr) return;  // parked
  local_collection& lc = *found;
  obj_header& h = header_of(*m);
  element_record* rec = lc.cache.rec(h.key);
  if (rec == nullptr) [[unlikely]]
    rec = find_local_record(lc, h.key);
  if (rec != nullptr && rec->obj != nullptr) [[likely]] {
    ++lc.msgs_taken;
    if (lc.paused) [[unlikely]] {
      pause_message(lc, std::move(m));
      return;
    }
    deliver_to_element(*rec, std::move(m));
    return;
  }
  forward_or_keep(lc, std::move(m));
}

// The common case, an entry call (not forwarded, not awaited) to an element
// of the collection this PE used last, found in the route cache (or, on a
// miss, in the table behind it), runs here with few registers to save;
// every other goes to the general path.
void on_element_message(message_ptr m) {
  pe_objects* s = t_pe_objects;
  const obj_header& h = header_of(*m);
  if (s != nullptr && !s->gated) [[likely]] {
    local_collection* lc = s->last;
    if (lc != nullptr && lc->ref.id == h.collection && lc->deliver_fast && (h.hops | h.op) == 0)
        [[likely]] {
      element_record* rec = lc->cache.rec(h.key);
      // More elements here than the cache holds (a burst of new chares):
      // the table, from here rather than through the general path.
      if (rec == nullptr) [[unlikely]]
        rec = find_local_record(*lc, h.key);
      if (rec != nullptr && rec->obj != nullptr) [[likely]] {
        const entry_info& e = checked_entry(h.entry);
        if (!e.awaited) [[likely]] {
          ++lc->msgs_taken;
          // The message is freed by whoever passed it (handle(): the
          // parameter's destructor), on return.
          invoke_entry(*rec, e, *m);
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
void redeliver_kept(local_collection& lc, std::vector<message*> msgs) {
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
    if (it != lc.local.end() && it->second->obj != nullptr) {
      ++lc.msgs_taken;
      if (lc.paused)
        pause_message(lc, std::move(m));
      else
        deliver_to_element(*it->second, std::move(m));
    } else
      forward_or_keep(lc, std::move(m));
  }
}

int home_pe(const collection_ref& ref, const index_key& key) noexcept {
  const int pes = num_pes();
  switch (ref.map) {
    case map_kind::owner_field: {
      if (ref.kind == collection_kind::chare && key.w[1] != 0) return chare_place(key);
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
    m->handler = nodegroup_handler_id;
    send_to_node_of(where, std::move(m));
    return;
  }
  if (where < 0 || where >= num_pes())
    object_error("send of " + entry_name(h.entry) + " to PE " + std::to_string(where) + " of " +
                 collection_name(ref) + ": there are " + std::to_string(num_pes()) + " PEs");
  send_object_to_pe(where, std::move(m));
}
}  // namespace

// Where an element of `ref` is, when the route cache does not say: where
// this PE last saw it (the known table has every array element that lives
// here, too), else its home; remembered in the cache (the known table
// gaining the key drops the entry). -1: deleted (the home knows more). Out
// of line, as find_local_record.
[[gnu::noinline]] int find_element_pe(local_collection& lc, const collection_ref& ref,
                                      const index_key& key) {
  if (ref.kind == collection_kind::chare) {
    // A placed chare is where its key says, for its whole life: cached as
    // a fact of the key, not of a table. Others are in no known table.
    if (const int place = chare_place(key); place >= 0) {
      lc.cache.remember_pe(key, place);
      return place;
    }
    return lc.local.contains(key) ? my_pe() : -1;
  }
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
  if (pe_objects& s = this_pe_objects(); s.comm_sender != nullptr) [[unlikely]]
    record_comm(s, ref, *m);
  if (local_collection* lc = find_local_collection(ref.id)) [[likely]] {
    ++lc->msgs_sent;  // counted for balancing steps (sync.cpp)
    // A chare is cached by pe only from its construction here to its
    // destruction (chares do not move); elsewhere its lookups go the slow way.
    dest = lc->cache.pe(key);
    if (dest < 0) [[unlikely]]
      dest = find_element_pe(*lc, ref, key);
  } else if (t_pe_objects != nullptr) {
    ++t_pe_objects->msgs_sent_unknown[ref.id];  // a collection not learnt yet
  }
  if (dest < 0) [[unlikely]]
    dest = home_pe(ref, key);
  send_object_to_pe(dest, std::move(m));
}

// The common case, an element of the collection this PE used last whose
// place the route cache knows, goes from here; every other goes through
// send_element_general. (Groups and nodegroups are never cached by PE.)
void send_element(const collection_ref& ref, message* m) {
  if (pe_objects* s = t_pe_objects) [[likely]] {
    local_collection* lc = s->last;
    if (lc != nullptr && lc->ref.id == ref.id) [[likely]] {
      const std::int32_t dest = lc->cache.pe(header_of(*m).key);
      if (dest >= 0) [[likely]] {
        ++lc->msgs_sent;
        // Beside `last`, in a line this path reads anyway: with
        // --weft:lb-comm off it is never set.
        if (s->comm_sender != nullptr) [[unlikely]]
          record_comm(*s, ref, *m);
        send_object_to_pe(dest, m);
        return;
      }
    }
  }
  send_element_general(ref, message_ptr(m));
}

}  // namespace weft::objects::detail
