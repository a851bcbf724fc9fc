// Logical threads on the node's PEs and carriers (weft/threads/ult.hpp has
// the model and the contract).
//
// Per PE, the layer keeps which families' logical threads live on the PE's
// own OS thread (hosted ULTs, and the PE's stack claimed by OpenMP thread
// 0s), in a thread-local list of the PE's, with their total published as
// `taken` for callers choosing where to start a ULT; the PE's carriers; and
// what --weft:stats reports. A PE decides from its own list alone, in
// start_here: nothing on the start path touches another PE's line beyond
// the message that brought the ULT.
#include "weft/threads/ult.hpp"

#include <sched.h>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <vector>
#include "threads/carrier.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/error.hpp"
#include "weft/core/config.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"

namespace weft::threads {

namespace {

struct alignas(base::cache_line) pe_record {
  // Logical threads on the PE's own OS thread: written by the PE (a copy
  // of its thread-local count), read by others.
  std::atomic<int> taken{0};
  // Statistics: `hosted` written by the PE, the rest by whoever starts a ULT
  // on one of its carriers.
  alignas(base::cache_line) std::atomic<std::uint64_t> hosted{0};
  std::atomic<std::uint64_t> beyond_pes{0};
  std::atomic<std::uint64_t> pe_taken{0};
  std::atomic<std::uint64_t> rescued{0};
  std::atomic<std::uint64_t> carriers{0};
  carrier_pool pool;
};

struct node_data {
  int pes = 0;
  std::atomic<int> first_pe{0};
  std::uint64_t rescue_ns = 0;
  bool quiet = false;
  bool isolate_all = false;
  std::unique_ptr<pe_record[]> records;
  std::atomic<bool> rescue_reported{false};
};

// The running node's (null when none), and the last node's, kept for its
// statistics (printed after node_stop) until the next node starts. Never
// freed at process exit: a node the program did not stop (exit() called on
// another thread than an attached node's) may still have carriers, and a
// static destructor must not wait for them.
std::atomic<node_data*> g_data{nullptr};
node_data* g_owned = nullptr;

// Logical threads on this PE's own OS thread, by family, and their total
// (PE threads only): a few at once (a hosted ULT per family, thread 0s
// nested on the stack).
struct family_count {
  const void* family;
  int count;
};
thread_local std::vector<family_count> t_families;
thread_local int t_taken = 0;

handler_id h_resume = 0;
handler_id h_moved = 0;

node_data& data(const char* what) {
  node_data* d = g_data.load(std::memory_order_acquire);
  if (d == nullptr) base::fatal("weft::threads::%s called while no node runs", what);
  return *d;
}

void set_taken(node_data& d, int rank, const void* family, int delta) noexcept {
  auto it = t_families.begin();
  while (it != t_families.end() && it->family != family) ++it;
  if (it == t_families.end()) it = t_families.insert(it, {family, 0});
  it->count += delta;
  if (it->count == 0) t_families.erase(it);
  t_taken += delta;
  d.records[std::size_t(rank)].taken.store(t_taken, std::memory_order_release);
}

// Whether a logical thread of `family` must not join this PE's thread:
// one of the family lives there, or one that shares with none, or it
// shares with none itself.
bool family_here(const void* family) noexcept {
  if (t_taken == 0) return false;
  if (family == nullptr) return true;
  for (const family_count& f : t_families)
    if (f.family == family || f.family == nullptr) return true;
  return false;
}

}  // namespace

namespace detail {
// The logical thread running on this OS thread (null: none); read inline
// by the omp layer (ult_tls.hpp).
constinit thread_local ult* t_ult WEFT_TLS_FAST = nullptr;
// A traced ULT's switch in or out on its host thread's track (ult_begin /
// ult_end): named once, by its label and id ("MPI rank 3"), so that each
// logical thread's running time is a name of the summary.
void trace_switch(trace::kind k, ult* u) {
  if (u->trace_name == ~0u) {
    char name[96];
    if (u->label != nullptr && u->label_id >= 0)
      std::snprintf(name, sizeof name, "%s %ld", u->label, u->label_id);
    else
      std::snprintf(name, sizeof name, "%s", u->label != nullptr ? u->label : "logical thread");
    u->trace_name = trace::detail::intern_user_name(name);
  }
  trace::detail::emit(k, u->trace_name, std::uint32_t(u->label_id), std::uint32_t(u->pe), 0);
}
}  // namespace detail

namespace {

void hand_over(node_data& d, ult* u);

// Runs (or goes on with) a ULT hosted by this PE's thread until it
// suspends or ends.
void run_on_pe(node_data& d, ult* u) {
  ult* const saved = detail::t_ult;
  detail::t_ult = u;
  if (trace::on()) detail::trace_switch(trace::kind::ult_begin, u);
  const bool done = u->f->resume();
  if (trace::on()) detail::trace_switch(trace::kind::ult_end, u);
  detail::t_ult = saved;
  if (!done) {
    if (u->move_target >= 0) [[unlikely]]
      hand_over(d, u);
    return;
  }
  fiber::destroy(u->f);
  u->f = nullptr;
  set_taken(d, u->pe, u->family, -1);
  u->finished(u);
}

// A ULT suspended in move_to: it leaves this PE's thread (its copy of the
// program's thread-locals with it) for its target's, where on_moved runs it.
void hand_over(node_data& d, ult* u) {
  const int to = u->move_target;
  u->move_target = -1;
  u->f->release_private_tls();
  set_taken(d, u->pe, u->family, -1);
  u->pe = to;
  weft::send(job_pe(to), make_message_with(h_moved, u));
}

void on_moved(message_ptr msg) {
  ult* u = msg->as<ult*>();
  node_data& d = data("move_to");
  const int me = weft::my_rank();
  if (u->pe != me || u->host != nullptr || u->f == nullptr)
    base::fatal("weft::threads: a logical thread moving to PE %d arrived on PE %d", u->pe, me);
  if (family_here(u->family))
    base::fatal(
        "weft::threads::move_to: PE %d's thread has a logical thread of the moving one's "
        "family",
        me);
  set_taken(d, me, u->family, +1);
  pe_record& r = d.records[std::size_t(me)];
  r.hosted.store(r.hosted.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  run_on_pe(d, u);
}

void on_resume(message_ptr msg) {
  ult* u = msg->as<ult*>();
  const int me = weft::my_rank();
  if (u->host != nullptr || u->pe != me || u->f == nullptr)
    base::fatal("weft::threads: resume of a logical thread of PE %d on PE %d, but it %s", u->pe, me,
                u->f == nullptr      ? "is not running"
                : u->host != nullptr ? "runs on a carrier"
                                     : "belongs to another PE");
  run_on_pe(data("resume"), u);
}

void node_start() {
  auto d = std::make_unique<node_data>();
  const runtime_config& cfg = weft::config();
  d->pes = cfg.threads;
  d->rescue_ns = std::uint64_t(cfg.ult_rescue_us) * 1000;
  d->quiet = cfg.quiet;
  d->isolate_all = cfg.ult_isolate_all;
  d->records = std::make_unique<pe_record[]>(std::size_t(cfg.threads));
  delete g_owned;  // the last node's: its carriers stopped with it
  g_owned = d.release();
  g_data.store(g_owned, std::memory_order_release);
}

void pe_start() {
  node_data& d = data("pe_start");
  d.first_pe.store(weft::my_pe() - weft::my_rank(), std::memory_order_relaxed);
  t_taken = 0;
  t_families.clear();
}

void node_stop() {
  stop_carriers();
  g_data.store(nullptr, std::memory_order_release);
}

void print_stats(std::FILE* out) {
  node_data* d = g_owned;
  if (d == nullptr) return;
  std::uint64_t carried = 0, carriers = 0;
  for (int i = 0; i < d->pes; ++i) {
    const pe_record& r = d->records[std::size_t(i)];
    carried += r.beyond_pes.load() + r.pe_taken.load() + r.rescued.load();
    carriers += r.carriers.load();
  }
  std::uint64_t hosted = 0;
  for (int i = 0; i < d->pes; ++i) hosted += d->records[std::size_t(i)].hosted.load();
  if (hosted + carried == 0) return;  // no logical thread ran
  std::fprintf(out,
               "logical threads (OpenMP threads): %" PRIu64 " on their PE's thread, %" PRIu64
               " on carriers (OS threads of their own), %" PRIu64 " carrier thread%s\n",
               hosted, carried, carriers, carriers == 1 ? "" : "s");
  if (carried == 0) return;
  std::fprintf(out, "%4s %12s %12s %12s %12s %9s\n", "PE", "pe_thread", "beyond_pes", "pe_taken",
               "rescued", "carriers");
  for (int i = 0; i < d->pes; ++i) {
    const pe_record& r = d->records[std::size_t(i)];
    std::fprintf(out, "%4d %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %9" PRIu64 "\n",
                 d->first_pe.load() + i, r.hosted.load(), r.beyond_pes.load(), r.pe_taken.load(),
                 r.rescued.load(), r.carriers.load());
  }
  std::fprintf(out,
               "  beyond_pes: more logical threads than PEs; pe_taken: the PE's thread had one "
               "of the family already; rescued: the PE stayed inside one handler for "
               "--weft:ult-rescue-us\n");
}

const bool registered = [] {
  h_resume = register_handler("threads.resume", &on_resume);
  h_moved = register_handler("threads.moved", &on_moved);
  weft::detail::layer_hooks hooks{"threads", &node_start, &pe_start, nullptr, &node_stop};
  hooks.stats = &print_stats;
  weft::detail::register_layer(hooks);
  return true;
}();

}  // namespace

namespace detail {

void set_current(ult* u) noexcept {
  detail::t_ult = u;
}

void ult_entry(void* arg) {
  ult* u = static_cast<ult*>(arg);
  u->body(u);
}

}  // namespace detail

void ult::reset() noexcept {
  // f, host and pe are set when it starts; probe_progress and probe_cpu_ns
  // count only with probe_ns.
  state.store(unstarted, std::memory_order_relaxed);
  probe_ns.store(0, std::memory_order_relaxed);
  probe_next_ns.store(0, std::memory_order_relaxed);
}

bool claim(ult* u) noexcept {
  int expected = ult::unstarted;
  return u->state.load(std::memory_order_relaxed) == ult::unstarted &&
         u->state.compare_exchange_strong(expected, ult::started, std::memory_order_acq_rel);
}

void start_here(ult* u) {
  node_data& d = data("start_here");
  const int me = weft::my_rank();
  if (me < 0 || carrier::current() != nullptr)
    base::fatal("weft::threads::start_here called off a PE's own thread");
  if (family_here(u->family)) {
    start_on_carrier(u, me, 1, placement::pe_taken);
    return;
  }
  set_taken(d, me, u->family, +1);
  pe_record& r = d.records[std::size_t(me)];
  r.hosted.store(r.hosted.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  u->pe = me;
  u->host = nullptr;
  u->f = fiber::create(&detail::ult_entry, u, u->stack_bytes);
  u->f->set_label(u->label, u->label_id);
  if (u->private_tls) u->f->give_private_tls();
  run_on_pe(d, u);
}

void start_on_carrier(ult* u, int pe, int slot, placement why) {
  node_data& d = data("start_on_carrier");
  if (pe < 0 || pe >= d.pes)
    base::fatal("weft::threads::start_on_carrier: PE %d, but the node has PEs 0..%d", pe,
                d.pes - 1);
  pe_record& r = d.records[std::size_t(pe)];
  bool created = false;
  carrier* c = r.pool.acquire(pe, slot, weft::detail::pe_cpu(pe), created);
  if (created) r.carriers.fetch_add(1, std::memory_order_relaxed);
  switch (why) {
    case placement::pe_thread:
    case placement::beyond_pes:
      r.beyond_pes.fetch_add(1, std::memory_order_relaxed);
      break;
    case placement::pe_taken:
      r.pe_taken.fetch_add(1, std::memory_order_relaxed);
      break;
    case placement::rescued:
      r.rescued.fetch_add(1, std::memory_order_relaxed);
      if (!d.quiet && !d.rescue_reported.exchange(true, std::memory_order_relaxed))
        base::warn(
            "a logical thread (an OpenMP thread) waited %" PRIu64
            " us to start behind a PE that stayed inside one handler; it runs on an OS thread "
            "of its own (--weft:ult-rescue-us; --weft:stats counts every such start)",
            d.rescue_ns / 1000);
      break;
  }
  u->pe = pe;
  u->host = c;
  c->start(u);
}

bool pe_thread_taken(int pe) noexcept {
  node_data* d = g_data.load(std::memory_order_acquire);
  if (d == nullptr || pe < 0 || pe >= d->pes) return false;
  return d->records[std::size_t(pe)].taken.load(std::memory_order_acquire) != 0;
}

bool held_up(ult* u, int pe, std::uint64_t now_ns) noexcept {
  node_data* d = g_data.load(std::memory_order_acquire);
  if (d == nullptr || u->state.load(std::memory_order_acquire) != ult::unstarted) return false;
  const std::uint64_t progress = weft::detail::pe_progress(pe);
  if ((progress & 1) == 0) {
    // Between handlers, idle or asleep: it will come to the ULT by itself.
    u->probe_ns.store(0, std::memory_order_relaxed);
    return false;
  }
  const std::uint64_t since = u->probe_ns.load(std::memory_order_relaxed);
  if (since == 0 || u->probe_progress.load(std::memory_order_relaxed) != progress) {
    u->probe_progress.store(progress, std::memory_order_relaxed);
    u->probe_cpu_ns.store(weft::detail::pe_cpu_time_ns(pe), std::memory_order_relaxed);
    u->probe_ns.store(now_ns, std::memory_order_relaxed);
    return false;
  }
  if (now_ns - since < d->rescue_ns) return false;
  // Inside one handler all along: running it, blocked in it, or only not
  // scheduled?
  const std::uint64_t ran =
      weft::detail::pe_cpu_time_ns(pe) - u->probe_cpu_ns.load(std::memory_order_relaxed);
  if (ran >= d->rescue_ns / 4) return true;
  // Asking /proc costs system calls: at most once a quarter bound.
  if (now_ns < u->probe_next_ns.load(std::memory_order_relaxed)) return false;
  u->probe_next_ns.store(now_ns + d->rescue_ns / 4, std::memory_order_relaxed);
  return weft::detail::pe_blocked(pe);
}

void resume(ult* u) {
  if (carrier* c = u->host) {
    c->post();
    return;
  }
  weft::send(job_pe(u->pe), make_message_with(h_resume, u));
}

void resume_here(ult* u) {
  if (u->host == nullptr && detail::t_ult == nullptr && u->f != nullptr &&
      carrier::current() == nullptr && u->pe == weft::my_rank()) {
    run_on_pe(data("resume_here"), u);
    return;
  }
  resume(u);
}

void suspend() {
  if (detail::t_ult == nullptr) base::fatal("weft::threads::suspend called off a logical thread");
  fiber::suspend();
}

void yield() {
  ult* u = detail::t_ult;
  if (u == nullptr) base::fatal("weft::threads::yield called off a logical thread");
  if (u->host != nullptr) {
    // A carrier runs this ULT alone: its CPU is what there is to give.
    sched_yield();
    return;
  }
  // Where PEs share CPUs (or a carrier needs this PE's), what this ULT
  // waits for may be another thread's that needs this CPU: the resume
  // below keeps this PE busy, so without giving the CPU up a waiting ULT
  // spun through its PE for whole time slices (the ordered loops of
  // tests/omp/loop_lastprivate_conditional.cpp, 4 threads on 2 CPUs under
  // ThreadSanitizer: 20 s, near their timeout, against 0.5 s with this).
  if (weft::config().oversubscribed || weft::detail::pe_has_guests(u->pe)) sched_yield();
  resume(u);
  fiber::suspend();
}

void move_to(int pe) {
  ult* u = detail::t_ult;
  if (u == nullptr) base::fatal("weft::threads::move_to called off a logical thread");
  if (u->host != nullptr || pe == u->pe) return;
  node_data& d = data("move_to");
  if (pe < 0 || pe >= d.pes)
    base::fatal("weft::threads::move_to: PE %d, but the node has PEs 0..%d", pe, d.pes - 1);
  u->move_target = pe;
  fiber::suspend();
}

ult* current() noexcept {
  return detail::t_ult;
}

int hosted_here() noexcept {
  return carrier::current() != nullptr ? 0 : t_taken;
}

void claim_pe_stack(const void* family) noexcept {
  if (detail::t_ult != nullptr || carrier::current() != nullptr) return;
  const int me = weft::my_rank();
  node_data* d = g_data.load(std::memory_order_acquire);
  if (me < 0 || d == nullptr) return;
  set_taken(*d, me, family, +1);
}

void release_pe_stack(const void* family) noexcept {
  if (detail::t_ult != nullptr || carrier::current() != nullptr) return;
  const int me = weft::my_rank();
  node_data* d = g_data.load(std::memory_order_acquire);
  if (me < 0 || d == nullptr) return;
  set_taken(*d, me, family, -1);
}

void stop_carriers() noexcept {
  node_data* d = g_data.load(std::memory_order_acquire);
  if (d == nullptr) return;
  for (int i = 0; i < d->pes; ++i) d->records[std::size_t(i)].pool.stop_all();
}

int current_pe() noexcept {
  if (carrier* c = carrier::current()) return c->pe();
  return weft::my_rank();
}

bool on_carrier() noexcept {
  return carrier::current() != nullptr;
}

bool isolate_all() noexcept {
  node_data* d = g_data.load(std::memory_order_acquire);
  return d != nullptr && d->isolate_all;
}

int node_pes() noexcept {
  node_data* d = g_data.load(std::memory_order_acquire);
  return d != nullptr ? d->pes : 0;
}

int job_pe(int pe) noexcept {
  node_data* d = g_data.load(std::memory_order_acquire);
  return d != nullptr ? d->first_pe.load(std::memory_order_relaxed) + pe : pe;
}

}  // namespace weft::threads
