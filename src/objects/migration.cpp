// Migration: an array element asked to move (migrate_to) leaves when its
// entry returns, packed with its reduction round, epoch, broadcast count
// and (while balancing measures it) its load so far; the messages waiting
// in its mailboxes follow it. At the new PE it is rebuilt (default
// construction, then pup), tells its home, and catches up with the
// broadcasts it missed on the way.
//
// The epoch (migrations so far) orders location news: a PE keeps the
// newest it has heard, whatever order the news arrives in.
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

namespace {

// Migrating elements overtake what is queued at their destination, so few
// messages arrive before them and bounce.
constexpr std::int32_t migration_priority = INT32_MAX;

// The `d` field of migrate_out / migrate_in: the element's packed bytes
// (saturated at 30 bits), whether it moved by pointer (then nothing was
// packed: the bytes are what packing it takes) and whether the balancer
// moved it.
std::uint32_t migrate_field(std::size_t bytes, bool by_pointer, bool by_balancer) {
  constexpr std::size_t most = (std::size_t(1) << 30) - 1;
  return std::uint32_t(std::min(bytes, most)) | (by_pointer ? 1u << 30 : 0u) |
         (by_balancer ? 1u << 31 : 0u);
}

// What packing the element takes, for the trace of a move by pointer.
std::size_t traced_size(const element_record& rec) {
  return element_type(rec.ref.type).pup != nullptr ? packed_size(rec) : 0;
}

}  // namespace

std::size_t packed_size(const element_record& rec) {
  // As migrate_out packs: round, epoch, broadcast count, flags, the state.
  std::uint32_t round = 0, ep = 0;
  std::uint64_t bc = 0;
  std::uint8_t flags = 0;
  pupper sizer = pupper::sizer();
  sizer | round | ep | bc | flags;
  element_type(rec.ref.type).pup(*rec.obj, sizer);
  return sizer.offset();
}

std::size_t migrate_out(local_collection& lc, element_record& rec, bool by_balancer) {
  // It waits for broadcasts it missed from its last PE: it goes once it has
  // them (broadcast.cpp).
  if (bcast_fetching(lc, rec.key)) return 0;
  const int to = rec.migrate_to;
  rec.migrate_to = -1;
  if (to == my_pe()) return 0;
  const element_type_info& type = element_type(rec.ref.type);
  if (type.pup == nullptr)
    object_error(element_name(rec) + " cannot migrate: its type " + type.name +
                 " needs a default constructor and a pup(weft::pupper&) member");
  if (rec.has_coroutines())
    object_error(element_name(rec) + " cannot migrate while " +
                 std::to_string(rec.extras_->coroutines.size()) +
                 " of its coroutine entry methods are suspended (a coroutine frame cannot be "
                 "packed); migrate between coroutines");
  const std::uint32_t epoch = rec.epoch + 1;
  auto pack = [&](pupper& p) {
    std::uint32_t round = rec.red_round, ep = epoch;
    std::uint64_t bc = rec.last_bcast;
    // Whether the balancer moved it (its new PE counts it in the step) and
    // whether it waits there for the step's end.
    std::uint8_t flags =
        std::uint8_t((by_balancer ? 1 : 0) | (rec.sync == sync_state::waiting ? 2 : 0));
    p | round | ep | bc | flags;
    if (rec.measured) pup_load(rec, p);
    type.pup(*rec.obj, p);
  };
  pupper sizer = pupper::sizer();
  pack(sizer);
  const std::size_t bytes = sizer.offset();
  message_ptr m = new_control_message(rec.ref, rec.key, op_migrate_in, bytes);
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  pack(packer);
  m->priority = migration_priority;
  // Messages waiting in its mailboxes follow it.
  std::vector<message*> follow;
  if (rec.extras_)
    for (auto& [id, mb] : rec.extras_->mailboxes)
      for (auto& q : mb.queued) follow.push_back(q.release());
  // Taken here, they are in flight again (sync.cpp counts them).
  lc.msgs_taken -= follow.size();
  const index_key key = rec.key;
  // Then those that waited while a step without at_sync paused the array
  // (sync_pause.cpp): its new PE counts them in.
  const std::vector<message*> paused = take_paused(lc, key);
  header_of(*m).args.round = std::uint32_t(paused.size());
  const std::uint64_t had = rec.last_bcast;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::migrate_out, rec.ref.type, std::uint32_t(to),
                        std::uint32_t(key.w[0]), migrate_field(bytes, false, by_balancer));
  remove_element(lc, rec);
  bcast_departed(lc, key, epoch, had);
  lc.known[key] = {to, epoch, false};
  lc.cache.drop(key);
  send_object_to_pe(to, std::move(m));
  for (message* f : follow) send_object_to_pe(to, message_ptr(f));
  for (message* f : paused) send_object_to_pe(to, message_ptr(f));
  reduction_flush(lc);
  return bytes;
}

void receive_migrating_element(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  const element_type_info& type = element_type(lc.ref.type);
  auto owned = std::make_unique<element_record>();
  element_record& rec = *owned;
  rec.ref = lc.ref;
  rec.key = h.key;
  rec.coll = &lc;
  set_measured(rec, lc.ref);
  rec.comm = rec.measured && g_comm_records;
  pupper p = pupper::unpacker(args_of(*m), args_size(*m));
  std::uint8_t flags = 0;
  p | rec.red_round | rec.epoch | rec.last_bcast | flags;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::migrate_in, lc.ref.type, std::uint32_t(h.origin_pe),
                        std::uint32_t(h.key.w[0]),
                        migrate_field(args_size(*m), false, (flags & 1) != 0));
  if (flags & 2) rec.sync = sync_state::waiting;
  if (rec.measured) pup_load(rec, p);
  t_constructing_record = &rec;
  element_base* obj = type.make_empty();
  t_constructing_record = nullptr;
  try {
    type.pup(*obj, p);
  } catch (const serialization_error& ex) {
    base::fatal("%s: its migrated state does not unpack: %s", element_name(rec).c_str(), ex.what());
  }
  rec.obj = obj;
  (void)lc.local.insert(owned);
  round_hist_add(lc, rec.red_round);
  lc.known[h.key] = {my_pe(), rec.epoch, false};
  lc.cache.drop(h.key);
  tell_home(lc, h.key, my_pe(), rec.epoch, loc_moved);
  const index_key key = h.key;
  if ((flags & 1) != 0) expect_followers(lc, key, h.args.round);
  sync_element_arrived(lc, rec, (flags & 1) != 0);
  obj->on_migrated();
  // Its sender may send the step's next elements in its room.
  bcast_arrived(lc, rec, h.origin_pe, (flags & 1) != 0 ? args_size(*m) : 0);
  // on_migrated may have asked to move on or be destroyed (catch_up may
  // have done so already, freeing rec).
  if (auto it = lc.local.find(key); it != lc.local.end()) after_entry(*it->second);
  reduction_flush(lc);
}

// ---- moves inside a process (the balancer's) -------------------------------------
// A PE of the same process can take the element as it is: the record, the
// object and its coroutine frames change PEs by pointer, with no packing.
// That moves what packing cannot (an element whose coroutine awaits
// at_sync, or a type without pup), and faster. It needs every suspension
// of the element to travel with its record: next<> (its mailboxes) and
// at_sync do; an all_reduce or a future awaited on this PE would resume
// here, so such an element stays.

bool can_move_by_pointer(const element_record& rec, int to) {
  if (!pe_on_this_node(to) || rec.running != nullptr || bcast_fetching(*rec.coll, rec.key))
    return false;
  if (!rec.has_coroutines()) return true;
  pe_objects& s = this_pe_objects();
  for (const auto& [k, slots] : s.allreduce)
    for (const allreduce_slot* slot : slots)
      if (slot->owner == &rec) return false;
  for (const auto& [id, f] : s.futures)
    if (f.waiter != nullptr && f.waiter->effective_owner() == &rec) return false;
  return true;
}

void move_by_pointer(local_collection& lc, element_record& rec, int to, bool by_balancer) {
  const index_key key = rec.key;
  std::unique_ptr<element_record> owned = lc.local.release(lc.local.find(key));
  round_hist_remove(lc, rec.red_round);
  if (rec.sync != sync_state::none) --lc.sync_waiting;
  ++rec.epoch;
  bcast_departed(lc, key, rec.epoch, rec.last_bcast);
  lc.known[key] = {to, rec.epoch, false};
  lc.cache.drop(key);
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::migrate_out, rec.ref.type, std::uint32_t(to),
                        std::uint32_t(key.w[0]),
                        migrate_field(traced_size(rec), true, by_balancer));
  message_ptr m = new_control_message(rec.ref, key, op_migrate_pointer, sizeof(std::uint64_t));
  const std::uint64_t raw = reinterpret_cast<std::uintptr_t>(owned.release());
  std::memcpy(args_of(*m), &raw, sizeof raw);
  header_of(*m).arg_pe = by_balancer ? 1 : 0;
  const std::vector<message*> paused = take_paused(lc, key);  // as migrate_out
  header_of(*m).args.round = std::uint32_t(paused.size());
  m->priority = migration_priority;
  send_object_to_pe(to, std::move(m));
  for (message* f : paused) send_object_to_pe(to, message_ptr(f));
  reduction_flush(lc);
}

void receive_element_by_pointer(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  std::uint64_t raw = 0;
  std::memcpy(&raw, args_of(*m), sizeof raw);
  std::unique_ptr<element_record> owned(reinterpret_cast<element_record*>(std::uintptr_t(raw)));
  element_record& rec = *owned;
  const bool by_balancer = h.arg_pe == 1;
  const int from = h.origin_pe;
  const std::uint32_t followers = h.args.round;
  const index_key key = rec.key;
  rec.coll = &lc;
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::migrate_in, lc.ref.type, std::uint32_t(h.origin_pe),
                        std::uint32_t(key.w[0]),
                        migrate_field(traced_size(rec), true, by_balancer));
  m.reset();
  (void)lc.local.insert(owned);
  round_hist_add(lc, rec.red_round);
  lc.known[key] = {my_pe(), rec.epoch, false};
  lc.cache.drop(key);
  tell_home(lc, key, my_pe(), rec.epoch, loc_moved);
  if (by_balancer) expect_followers(lc, key, followers);
  sync_element_arrived(lc, rec, by_balancer);
  rec.obj->on_migrated();
  bcast_arrived(lc, rec, from);
  if (auto it = lc.local.find(key); it != lc.local.end()) after_entry(*it->second);
  reduction_flush(lc);
}

void request_migration(element_record& rec, int pe) {
  const int pes = num_pes();
  if (rec.ref.kind != collection_kind::array)
    object_error(element_name(rec) + ": only array elements migrate");
  if (rec.sync != sync_state::none)
    object_error(element_name(rec) +
                 " called migrate_to() while it waits in at_sync(): the balancing step decides "
                 "where it goes");
  if (pe < 0 || pe >= pes)
    object_error("migrate_to(" + std::to_string(pe) + ") of " + element_name(rec) +
                 ": no such PE (there are " + std::to_string(pes) + ")");
  rec.migrate_to = pe;
}

}  // namespace weft::objects::detail
