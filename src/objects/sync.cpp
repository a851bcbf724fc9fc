// Balancing steps (at_sync): the objects layer's half of measurement-based
// load balancing. The lb layer chooses where elements go; this file
// measures them, gathers the measurements, moves the elements and resumes
// them.
//
// A step of one array:
//  1. each element calls at_sync(): it contributes its record (load, size,
//     PE, whether it may move) to a reduction round of its own, so that
//     elements migrating meanwhile are counted exactly once, as for any
//     reduction;
//  2. at the root, the round's result goes to the balancer (src/lb), which
//     returns a PE per element; each PE that sends or receives gets one
//     plan message: the elements it sends, and how many arrive;
//  3. a PE reports done when it sent its elements and received as many as
//     the plan said (an element that can no longer move is cancelled at
//     its destination). Inside a process elements move by pointer (nothing
//     packed, nothing in flight to bound); to other processes they are
//     packed, and a PE keeps at most --weft:lb-max-bytes of them sent and
//     not yet acknowledged by their destinations (one always goes, however
//     large): the rest wait in its queue and go as acknowledgements free
//     room, so a step that moves many elements does not flood the network
//     or the destinations' memory;
//  4. when every such PE reported, the root broadcasts resume: each element
//     that waited goes on in resume_from_sync(), or its coroutine resumes.
// Messages to elements in flight are forwarded as after any migration
// (location.cpp), so nothing sent during a step is lost or duplicated.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <unordered_set>
#include "objects/internal.hpp"
#include "objects/sync_trace.hpp"
#include "weft/base/timer.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/run.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

namespace {

balancer_fn g_balancer = nullptr;
bool g_balancing = false;  // --weft:lb is not off
bool g_lb_stats = false;
bool g_lb_together = false;  // --weft:lb-arrays=together
bool g_tree = false;         // --weft:lb=hierarchical: the tree at run time (sync_tree.cpp)
// The tree's at_sync steps keep their records (and what the elements
// counted) on their PEs until the step starts; arrays balanced together
// send them to the root as a flat step does (PE 0 places them).
bool g_tree_keeps = false;
std::uint64_t g_max_bytes = std::uint64_t(64) << 20;  // --weft:lb-max-bytes
// The step's round gathers the records: registered at static
// initialisation, as every reducer must be (its id is the same in every
// process).
const std::uint32_t sync_reducer = reducer_registered<op::concat_t, std::vector<sync_record>>;

// Plan message: arg_pe says which kind.
enum plan_kind : std::int32_t { plan_moves = 0, plan_cancel = 1 };
// Done message: arg_pe says whether it is a PE's report or the root's own
// note that the plan moved nothing.
enum done_kind : std::int32_t { done_moves = 0, done_nothing_moved = 1 };

// A PE's part of the step is over (its queue sent, its arrivals in): it
// reports the step's peak of bytes in flight here and the moves it could
// not make. Acknowledgements of its last packed elements may still be on
// their way: they only free room for the next step's.
void report_if_done(local_collection& lc) {
  if (!lc.sync_plan_seen || lc.sync_arrived != lc.sync_expected ||
      lc.sync_queue_next != lc.sync_queue.size())
    return;
  lc.sync_plan_seen = false;
  lc.sync_arrived = lc.sync_expected = 0;
  lc.sync_queue.clear();
  lc.sync_queue_next = 0;
  const std::uint64_t peak = std::exchange(lc.sync_peak, lc.sync_in_flight);
  message_ptr m = new_control_message(lc.ref, index_key{}, op_sync_done,
                                      sizeof peak + lc.sync_kept.size() * sizeof(index_key));
  header_of(*m).arg_pe = done_moves;
  std::memcpy(args_of(*m), &peak, sizeof peak);
  append_bytes(*m, sizeof peak, lc.sync_kept);
  lc.sync_kept.clear();
  send_object_to_pe(lc.ref.root_pe, std::move(m));
  // The root's migration lasts until every PE reported (end_step).
  if (lc.ref.root_pe != my_pe()) lb_trace_phase(lc, lb_phase::migration, false);
}

// The element's place in the plan can no longer be kept: its destination
// stops waiting for it.
void cancel_arrival(local_collection& lc, int to) {
  message_ptr m = new_control_message(lc.ref, index_key{}, op_sync_plan, 0);
  header_of(*m).arg_pe = plan_cancel;
  send_object_to_pe(to, std::move(m));
}

// Whether the element takes part in the current step: in an at_sync step
// it waits in at_sync; in a step without (periodic, on demand) it must not
// (it called at_sync since: its own step will place it).
bool in_step(const element_record& rec, bool unassisted) {
  return unassisted ? rec.sync == sync_state::none : rec.sync != sync_state::none;
}

// Sends the step's queued packed moves while they fit in
// --weft:lb-max-bytes with what is in flight (one at least when nothing
// is). An element gone since the plan (destroyed, or it moved itself in
// a step without at_sync), out of the step, running (this handler is
// nested in one of its entry methods, which serves messages while it
// waits, as a parallel_for does), that cannot be packed (a suspended
// coroutine), or that waits for broadcasts it missed (broadcast.cpp)
// stays, and its destination stops waiting for it. Until it is sent an
// element stays here as any other: messages reach it as usual.
void send_queued(local_collection& lc) {
  while (lc.sync_queue_next < lc.sync_queue.size()) {
    const sync_move mv = lc.sync_queue[lc.sync_queue_next];
    auto it = lc.local.find(mv.key);
    element_record* rec = it == lc.local.end() ? nullptr : it->second;
    const bool packable = rec != nullptr && in_step(*rec, lc.sync_queue_unassisted) &&
                          !rec->has_coroutines() && rec->running == nullptr &&
                          !bcast_fetching(lc, mv.key);
    if (!packable) {
      ++lc.sync_queue_next;
      cancel_arrival(lc, mv.to);
      lc.sync_kept.push_back(mv.key);
      continue;
    }
    if (lc.sync_in_flight > 0 && lc.sync_in_flight + packed_size(*rec) > g_max_bytes) return;
    ++lc.sync_queue_next;
    rec->migrate_to = mv.to;
    lc.sync_in_flight += migrate_out(lc, *rec, true);
    lc.sync_peak = std::max(lc.sync_peak, lc.sync_in_flight);
  }
}

void run_resume_from_sync(element_record& rec) {
  rec.contributed_now = false;
  rec.running = "resume_from_sync";
  const std::uint64_t t0 = rec.measured ? begin_load(rec) : 0;
  element_record* const outer_sender = rec.comm ? comm_enter(rec) : nullptr;
  try {
    rec.obj->resume_from_sync();
  } catch (const std::exception& ex) {
    base::fatal("resume_from_sync of %s on PE %d threw %s", element_name(rec).c_str(), my_pe(),
                ex.what());
  }
  if (t0 != 0) end_load(rec, t0);
  if (rec.comm) comm_leave(outer_sender);
  rec.running = nullptr;
  after_entry(rec);
}

}  // namespace

balancer_fn balancer() {
  return g_balancer;
}

void set_balancer(balancer_fn fn) {
  g_balancer = fn;
}

void sync_node_start() {
  const runtime_config& cfg = weft::config();
  g_balancing = cfg.lb != "off";
  g_measure_load = g_balancing;
  g_comm_records = g_balancing && cfg.lb_comm;
  g_load.cpu = cfg.lb_load_cpu;
  g_load.sample = cfg.lb_sample;
  g_load.average = cfg.lb_average;
  g_lb_stats = cfg.lb_stats;
  g_lb_together = cfg.lb_together;
  g_tree = cfg.lb == "hierarchical";
  g_tree_keeps = g_tree && !g_lb_together;
  g_max_bytes = cfg.lb_max_bytes;
  if (g_balancing && g_balancer == nullptr)
    base::usage_error(
        "--weft:lb=%s needs the lb layer, which this program does not link: link weft::weft "
        "(or weft::lb) and include <weft/weft.hpp>",
        cfg.lb.c_str());
}

void set_migratable(element_record& rec, bool migratable) {
  rec.migratable = migratable;
}

void arrive_at_sync(element_record& rec, std::coroutine_handle<> h) {
  if (rec.ref.kind != collection_kind::array)
    object_error(element_name(rec) +
                 " called at_sync(): only array elements take part in load balancing");
  if (rec.sync != sync_state::none)
    object_error(element_name(rec) +
                 " called at_sync() again before its balancing step ended (one call per step; "
                 "go on in resume_from_sync() or after co_await at_sync())");
  local_collection& lc = *rec.coll;
  if (g_lb_together && !lc.sync_joined) join_group(lc);
  rec.sync = h ? sync_state::coroutine : sync_state::waiting;
  if (h || rec.extras_) rec.extras().sync_h = h;

  sync_record r;
  r.key = rec.key;
  r.pe = my_pe();
  r.epoch = rec.epoch;
  r.load = step_load(lc, rec);
  const element_type_info& type = element_type(rec.ref.type);
  // A coroutine frame (suspended, or this one awaiting at_sync) cannot be
  // packed: such an element keeps its PE.
  // A type with a pup migrates. Inside its process it moves as it is (by
  // pointer, its coroutine frames too); to another process only without
  // coroutine frames (this one awaiting at_sync included): the plan's moves
  // it cannot make are cancelled when carried out.
  r.migratable = rec.migratable && type.pup != nullptr;
  if (g_balancing && r.migratable && !h && !rec.has_coroutines()) {
    pupper sizer = pupper::sizer();
    type.pup(*rec.obj, sizer);
    r.bytes = sizer.offset();
  }
  // The last element of this PE to arrive says what else the PE did since
  // the last step: its handlers' time less every element's (those of other
  // arrays too: they are placed in their own steps, or with this one under
  // --weft:lb-arrays=together).
  ++lc.sync_waiting;
  if (lc.sync_waiting == lc.local.size()) {
    if (g_balancing) r.background = background_since_last(lc);
    lb_trace_enter(lc);  // this PE's elements all wait: its part of the step begins
  }
  callback_desc cb;
  cb.kind = callback_kind::sync;
  cb.ref = rec.ref;
  // The step's round is separate from what the entry contributed before.
  // In the tree the record stays here: the round only counts the elements.
  const bool contributed = rec.contributed_now;
  rec.contributed_now = false;
  std::vector<sync_record> mine{r};
  if (g_tree_keeps) {
    tree_state(lc).here.push_back(r);
    mine.clear();
  }
  contribute(rec, sync_reducer, cb, to_bytes(mine));
  rec.contributed_now = contributed;
}

namespace {

// Counting waves before a step moves anything; past this many the elements
// move anyway (messages keep flowing to the collection from outside it),
// and the job is told that in-flight messages may arrive out of order.
constexpr int max_count_waves = 2000;

void start_count_wave(local_collection& lc) {
  sync_root& root = lc.sync;
  ++root.waves;
  root.replies = 0;
  root.sent = root.taken = 0;
  weft::broadcast(new_control_message(lc.ref, index_key{}, op_sync_count, 0));
}

void plan_step(local_collection& lc);

}  // namespace

void start_unassisted_step(local_collection& lc);

void sync_round_done(const collection_ref& ref, std::vector<std::byte> value) {
  local_collection& lc = get_local_collection(ref.id);
  sync_root& root = lc.sync;
  root.uses_at_sync = true;
  if (root.in_step) {
    root.deferred = std::move(value);
    root.has_deferred = true;
    return;
  }
  root.in_step = true;
  root.unassisted = false;
  root.t_start = base::wall_ns();
  lb_trace_enter(lc);
  root.records.clear();
  root.comm.clear();
  from_bytes(value, root.records);
  root.waves = 0;
  root.last_sent = root.last_taken = ~0ull;
  if (!g_balancing) {
    // Nothing moves: the elements resume at once.
    plan_step(lc);
    return;
  }
  start_count_wave(lc);
}

void receive_sync_count(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  lb_trace_enter(lc);  // a PE without elements waiting takes part from here
  std::uint64_t counts[2] = {lc.msgs_sent, lc.msgs_taken};
  pe_objects& s = this_pe_objects();
  if (auto it = s.msgs_sent_unknown.find(h.collection); it != s.msgs_sent_unknown.end())
    counts[0] += it->second;
  // Each wave's reply also carries what the collection's elements sent
  // from this PE (to elements of any array) since the last reply: by the
  // last wave, everything they sent before the step (they are all in
  // at_sync by the first). In the tree they stay for the step's records
  // (sync_tree.cpp).
  std::vector<comm_record> comm;
  if (!g_tree_keeps) comm = take_comm(lc);
  message_ptr r = new_control_message(lc.ref, index_key{}, op_sync_counts,
                                      sizeof counts + comm.size() * sizeof(comm_record));
  std::memcpy(args_of(*r), counts, sizeof counts);
  append_bytes(*r, sizeof counts, comm);
  send_object_to_pe(lc.ref.root_pe, std::move(r));
}

void receive_sync_counts(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_root& root = lc.sync;
  std::uint64_t counts[2];
  std::memcpy(counts, args_of(*m), sizeof counts);
  if (args_size(*m) > sizeof counts) {
    const std::vector<comm_record> comm = read_bytes<comm_record>(*m, sizeof counts);
    root.comm.insert(root.comm.end(), comm.begin(), comm.end());
  }
  root.sent += counts[0];
  root.taken += counts[1];
  if (++root.replies < num_pes()) return;
  const bool quiet =
      root.sent == root.taken && root.sent == root.last_sent && root.taken == root.last_taken;
  root.last_sent = root.sent;
  root.last_taken = root.taken;
  if (quiet) {
    plan_step(lc);
    return;
  }
  if (root.waves >= max_count_waves) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      base::warn(
          "lb: messages to %s kept flowing during its balancing step; its elements move "
          "anyway, and a message in flight to one that moves may arrive after one its "
          "sender sent later",
          collection_name(lc.ref).c_str());
    plan_step(lc);
    return;
  }
  start_count_wave(lc);
}

namespace {

void plan_step(local_collection& lc) {
  sync_root& root = lc.sync;
  const std::uint64_t step = root.steps++;
  root.t_quiet = base::wall_ns();
  lb_trace_phase(lc, lb_phase::collection, false);
  if (g_balancing) lb_trace_phase(lc, lb_phase::strategy, true);
  balance_plan plan;
  if (g_balancing && g_lb_together && !root.unassisted) {
    // Placed with the other arrays that call at_sync: the plan comes back
    // in carry_out_plan (sync_group.cpp).
    send_records_to_group(lc, step);
    return;
  }
  if (g_balancing && g_tree) {
    // The records are on their PEs: the tree places them, or gathers
    // them here for a dumped step (sync_tree.cpp).
    start_tree_step(lc, step);
    return;
  }
  if (g_balancing) {
    plan = g_balancer(collection_name(lc.ref), step, {{lc.ref.id, root.records.size()}},
                      root.records, root.comm);
  } else {
    plan.pe.resize(root.records.size());
    for (std::size_t i = 0; i < root.records.size(); ++i) plan.pe[i] = root.records[i].pe;
  }
  carry_out_plan(lc, step, std::move(plan));
}

}  // namespace

void carry_out_plan(local_collection& lc, std::uint64_t step, balance_plan plan) {
  const collection_ref& ref = lc.ref;
  sync_root& root = lc.sync;
  const std::vector<sync_record>& records = root.records;
  if (plan.pe.size() != records.size())
    base::fatal("lb: the balancer placed %zu elements of %s, not the %zu that took part",
                plan.pe.size(), collection_name(ref).c_str(), records.size());
  // Per PE: the elements it sends, and how many it receives.
  std::map<int, std::pair<std::vector<sync_move>, std::int64_t>> per_pe;
  root.moves.clear();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const int from = records[i].pe, to = plan.pe[i];
    if (from == to) continue;
    if (!records[i].migratable)
      base::fatal("lb: the balancer moved %s, which cannot move",
                  key_string(ref, records[i].key).c_str());
    per_pe[from].first.push_back({records[i].key, to, records[i].epoch + 1});
    ++per_pe[to].second;
    root.moves.push_back({records[i].key, to, records[i].epoch + 1});
  }
  root.t_plan = base::wall_ns();
  if (trace::on()) [[unlikely]] {
    lb_trace_strategy_done(lc, lb_imbalance(records, {}), lb_imbalance(records, plan.pe));
    lb_trace_phase(lc, lb_phase::migration, true);
  }
  root.line.clear();
  if (g_lb_stats) {
    char waits[48];
    std::snprintf(waits, sizeof waits, ", %d count waves", root.waves);
    root.line = "weft lb: " + collection_name(ref) + " step " + std::to_string(step) + ": " +
                std::to_string(records.size()) + " elements" +
                (plan.summary.empty() ? "" : ", " + plan.summary) + waits;
  }
  root.records.clear();
  root.comm.clear();
  root.pending = int(per_pe.size());
  if (root.pending == 0) {
    message_ptr m = new_control_message(ref, index_key{}, op_sync_done, 0);
    header_of(*m).arg_pe = done_nothing_moved;
    send_object_to_pe(my_pe(), std::move(m));
    return;
  }
  for (auto& [pe, work] : per_pe) send_plan(lc, pe, work.second, work.first, root.unassisted);
}

void send_plan(local_collection& lc, int pe, std::int64_t incoming,
               const std::vector<sync_move>& out, bool unassisted) {
  message_ptr m = new_control_message(lc.ref, index_key{}, op_sync_plan,
                                      sizeof(std::int64_t) + out.size() * sizeof(sync_move));
  header_of(*m).arg_pe = plan_moves;
  header_of(*m).args.round = unassisted ? 1 : 0;
  std::memcpy(args_of(*m), &incoming, sizeof incoming);
  append_bytes(*m, sizeof incoming, out);
  send_object_to_pe(pe, std::move(m));
}

// ---- steps without at_sync (periodic, on demand) -----------------------------------

void start_unassisted_step(local_collection& lc) {
  sync_root& root = lc.sync;
  if (!g_balancing) return;
  if (root.in_step) {
    root.again = true;
    return;
  }
  root.in_step = true;
  root.unassisted = true;
  root.t_start = base::wall_ns();
  lb_trace_enter(lc);
  root.records.clear();
  root.comm.clear();
  root.record_replies = 0;
  root.waves = 0;
  weft::broadcast(new_control_message(lc.ref, index_key{}, op_lb_collect, 0));
}

void receive_lb_start(message_ptr m) {
  start_unassisted_step(get_local_collection(header_of(*m).collection));
}

// This PE's elements, as they are between two entry methods.
std::vector<sync_record> records_between_entries(local_collection& lc) {
  const element_type_info& type = element_type(lc.ref.type);
  std::vector<sync_record> out;
  out.reserve(lc.local.size());
  for (const auto& [key, rec] : lc.local) {
    sync_record r;
    r.key = key;
    r.pe = my_pe();
    r.epoch = rec->epoch;
    r.load = step_load(lc, *rec);
    r.migratable = rec->migratable && type.pup != nullptr && rec->sync == sync_state::none &&
                   rec->running == nullptr;
    if (r.migratable && !rec->has_coroutines()) {
      pupper sizer = pupper::sizer();
      type.pup(*rec->obj, sizer);
      r.bytes = sizer.offset();
    }
    out.push_back(r);
  }
  if (!out.empty()) out.front().background = background_since_last(lc);
  return out;
}

void receive_lb_collect(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  // Until the resume, messages for the elements here wait (sync_pause.cpp):
  // the records stay true, and the counting waves see when none is in
  // flight.
  lc.paused = true;
  lc.deliver_fast = false;
  lb_trace_enter(lc);
  // In the tree the records, and what this PE counted, are taken when
  // the step's plan starts (an empty answer counts this PE in).
  std::vector<sync_record> out;
  std::vector<comm_record> comm;
  if (!g_tree) {
    out = records_between_entries(lc);
    comm = take_comm(lc);  // after the records (--weft:lb-comm)
  }
  const std::uint64_t n = out.size();
  message_ptr r = new_control_message(
      lc.ref, index_key{}, op_lb_records,
      sizeof n + out.size() * sizeof(sync_record) + comm.size() * sizeof(comm_record));
  std::memcpy(args_of(*r), &n, sizeof n);
  append_bytes(*r, sizeof n, out);
  append_bytes(*r, sizeof n + out.size() * sizeof(sync_record), comm);
  send_object_to_pe(lc.ref.root_pe, std::move(r));
}

void receive_lb_records(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_root& root = lc.sync;
  std::uint64_t n = 0;
  std::memcpy(&n, args_of(*m), sizeof n);
  const std::size_t comm_at = sizeof n + n * sizeof(sync_record);
  std::vector<sync_record> got(n);
  if (n > 0) std::memcpy(got.data(), args_of(*m) + sizeof n, n * sizeof(sync_record));
  root.records.insert(root.records.end(), got.begin(), got.end());
  const std::vector<comm_record> comm = read_bytes<comm_record>(*m, comm_at);
  root.comm.insert(root.comm.end(), comm.begin(), comm.end());
  if (++root.record_replies < num_pes()) return;
  // Every PE is paused: nothing moves until no element message is in
  // flight, as in an at_sync step.
  root.last_sent = root.last_taken = ~0ull;
  start_count_wave(lc);
}

void request_balance_everywhere() {
  for (const auto& [id, lc] : this_pe_objects().collections) {
    if (lc->ref.kind != collection_kind::array || !lc->created) continue;
    send_object_to_pe(lc->ref.root_pe, new_control_message(lc->ref, index_key{}, op_lb_start, 0));
  }
}

void sync_pe_start() {
  const runtime_config& cfg = weft::config();
  start_sampling();
  lb_trace_pe_start();
  if (!g_balancing || cfg.lb_period_s <= 0) return;
  // A condition, not a timer: it keeps no job from ending (quiescence).
  const double period_ns = cfg.lb_period_s * 1e9;
  std::uint64_t next = base::wall_ns() + std::uint64_t(period_ns);
  weft::poll_while([next, period_ns]() mutable {
    const std::uint64_t now = base::wall_ns();
    if (now < next) return true;
    next = now + std::uint64_t(period_ns);
    if (t_pe_objects == nullptr) return false;
    for (const auto& [id, lc] : t_pe_objects->collections) {
      const collection_ref& ref = lc->ref;
      if (ref.kind != collection_kind::array || !lc->created || ref.root_pe != my_pe() ||
          lc->sync.uses_at_sync || element_type(ref.type).pup == nullptr)
        continue;
      // Not during a step, nor within a period of its end: the program
      // runs at least a period between periodic steps, however long they
      // take (on demand, a request during a step runs once it ends).
      if (lc->sync.in_step || now < lc->sync.t_end + std::uint64_t(period_ns)) continue;
      start_unassisted_step(*lc);
    }
    return true;
  });
}

void receive_sync_plan(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  if (h.arg_pe == plan_cancel) {
    --lc.sync_expected;
    report_if_done(lc);
    return;
  }
  lb_trace_phase(lc, lb_phase::collection, false);
  lb_trace_phase(lc, lb_phase::migration, true);
  const bool unassisted = h.args.round != 0;
  std::int64_t incoming = 0;
  std::memcpy(&incoming, args_of(*m), sizeof incoming);
  const std::vector<sync_move> out = read_bytes<sync_move>(*m, sizeof incoming);
  m.reset();
  lc.sync_queue.clear();
  lc.sync_queue_next = 0;
  lc.sync_queue_unassisted = unassisted;
  for (const sync_move& mv : out) {
    auto it = lc.local.find(mv.key);
    element_record* rec = it == lc.local.end() ? nullptr : it->second;
    // Inside the process it moves as it is, now; to another, packed, when
    // there is room (send_queued decides then whether it still can).
    if (rec != nullptr && in_step(*rec, unassisted) && can_move_by_pointer(*rec, mv.to))
      move_by_pointer(lc, *rec, mv.to, true);
    else
      lc.sync_queue.push_back(mv);
  }
  lc.sync_expected += incoming;
  lc.sync_plan_seen = true;
  send_queued(lc);
  report_if_done(lc);
}

// The acknowledgement rides on the arrival's answer about broadcasts
// (broadcast.cpp's op_bcast_need).
void sync_acked(local_collection& lc, std::uint64_t b) {
  lc.sync_in_flight -= std::min(b, lc.sync_in_flight);
  send_queued(lc);
  report_if_done(lc);
}

void sync_follower_arrived(local_collection& lc) {
  ++lc.sync_arrived;
  report_if_done(lc);
}

void sync_element_arrived(local_collection& lc, element_record& rec, bool by_balancer) {
  if (rec.sync != sync_state::none) ++lc.sync_waiting;
  if (!by_balancer) return;
  ++lc.sync_arrived;
  report_if_done(lc);
}

void receive_sync_done(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  sync_root& root = lc.sync;
  if (h.arg_pe == done_moves) {
    std::uint64_t peak = 0;
    std::memcpy(&peak, args_of(*m), sizeof peak);
    root.peak_in_flight = std::max(root.peak_in_flight, peak);
    const std::vector<index_key> kept = read_bytes<index_key>(*m, sizeof peak);
    root.kept.insert(root.kept.end(), kept.begin(), kept.end());
    if (--root.pending > 0) return;
  }
  end_step(lc);
}

void end_step(local_collection& lc) {
  sync_root& root = lc.sync;
  lb_trace_phase(lc, lb_phase::migration, false);
  if (!root.kept.empty()) {
    const std::unordered_set<index_key, index_key_hash> kept(root.kept.begin(), root.kept.end());
    std::erase_if(root.moves, [&](const sync_move& mv) { return kept.contains(mv.key); });
    root.kept.clear();
  }
  if (g_lb_stats) {
    const double ms = 1e-6;
    const std::uint64_t now = base::wall_ns();
    std::fprintf(stderr,
                 "%s, peak %llu bytes in flight; %.3f ms: counting %.3f, balancer %.3f, "
                 "migration %.3f\n",
                 root.line.c_str(), static_cast<unsigned long long>(root.peak_in_flight),
                 double(now - root.t_start) * ms, double(root.t_quiet - root.t_start) * ms,
                 double(root.t_plan - root.t_quiet) * ms, double(now - root.t_plan) * ms);
  }
  root.peak_in_flight = 0;
  message_ptr r = new_control_message(lc.ref, index_key{}, op_sync_resume,
                                      root.moves.size() * sizeof(sync_move));
  header_of(*r).args.round = root.unassisted ? 1 : 0;
  append_bytes(*r, 0, root.moves);
  root.moves.clear();
  weft::broadcast(std::move(r));
  root.in_step = false;
  root.t_end = base::wall_ns();
  if (root.has_deferred) {
    root.has_deferred = false;
    sync_round_done(lc.ref, std::move(root.deferred));
  } else if (root.again) {
    root.again = false;
    start_unassisted_step(lc);
  }
}

void receive_sync_resume(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  lb_trace_leave(lc);
  // Where the moved elements are now: nobody sends to them by the old way
  // (a message forwarded from there could be overtaken by a later one).
  for (const sync_move& mv : read_bytes<sync_move>(*m, 0))
    if (!lc.local.contains(mv.key)) learn_location(lc, mv.key, mv.to, mv.epoch, loc_moved);
  // A step without at_sync resumes nobody (elements in at_sync wait for
  // their own step): what waited for the elements here goes now.
  if (h.args.round != 0) {
    if (lc.paused) resume_paused(lc);
    return;
  }
  m.reset();
  start_pe_interval(lc);
  std::vector<index_key> keys;
  keys.reserve(lc.sync_waiting);
  for (const auto& [k, rec] : lc.local)
    if (rec->sync != sync_state::none) keys.push_back(k);
  // Each may insert, destroy or move elements: look each up again.
  for (const index_key& k : keys) {
    auto it = lc.local.find(k);
    if (it == lc.local.end() || it->second->sync == sync_state::none) continue;
    element_record& rec = *it->second;
    const sync_state was = rec.sync;
    rec.sync = sync_state::none;
    --lc.sync_waiting;
    if (was == sync_state::coroutine)
      resume(&rec, std::exchange(rec.extras().sync_h, {}), std::exchange(rec.extras().sync_p, {}));
    else
      run_resume_from_sync(rec);
  }
}

}  // namespace weft::objects::detail
