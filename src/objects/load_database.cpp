// The load database: what a balancing step's records say of an element
// and of its PE, measured while the program runs. An element's load is the
// time of its entry methods (the TSC at every entry by default; with
// --weft:lb-load=cpu the thread's CPU time; with --weft:lb-sample=N one
// entry in N timed and the rest estimated), optionally averaged over steps
// (--weft:lb-average); a PE's background is its busy time outside every
// element; with --weft:lb-comm=element each element counts what it sends
// to elements of arrays (its own and others). sync.cpp takes these figures
// at each step.
#include <cstring>
#include <ctime>
#include "objects/internal.hpp"
#include "weft/base/timer.hpp"
#include "weft/core/handler.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

bool g_measure_load = false;
bool g_comm_records = false;
load_options g_load;
thread_local std::uint64_t t_element_cycles = 0;
thread_local pe_sampling t_sampling;

namespace {

// Uniform on 1..2N-1: mean N. A fixed gap of N would time the same element
// every time when the PE runs its elements in a rotation whose length
// divides N, and never the others.
std::int64_t draw_gap(pe_sampling& s) {
  s.rng ^= s.rng << 13;
  s.rng ^= s.rng >> 7;
  s.rng ^= s.rng << 17;
  return 1 + std::int64_t(s.rng % std::uint64_t(2 * g_load.sample - 1));
}

// The thread's CPU time in ns, never 0 (0 says "not timed"): a system call,
// not the vDSO: about 1 µs on the 2-core VM, 50 times an rdtsc (18 ns).
std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec) + 1;
}

std::uint64_t load_clock() noexcept {
  return g_load.cpu ? thread_cpu_ns() : base::cycles();
}

// Counts the entry for `rec` and its PE; true when this one is timed.
bool sample_entry(element_record& rec) {
  element_extras& x = rec.extras();
  pe_sampling& s = t_sampling;
  ++x.entries;
  ++s.entries;
  if (--s.gap > 0) return false;
  s.gap = draw_gap(s);
  ++x.sampled;
  ++s.sampled;
  return true;
}

}  // namespace

void start_sampling() {
  // Each PE draws its own gaps, the first one too.
  t_sampling.rng ^= std::uint64_t(my_pe() + 1) * 0xbf58476d1ce4e5b9ull;
  t_sampling.gap = draw_gap(t_sampling);
}

std::uint64_t begin_load_other(element_record& rec) {
  if (g_load.sample > 1 && !sample_entry(rec)) return 0;
  return load_clock();
}

void end_load_other(element_record& rec, std::uint64_t t0) {
  count_element_cycles(rec, load_clock() - t0);
}

void pup_load(element_record& rec, pupper& p) {
  std::uint64_t cycles = rec.load_cycles;
  std::uint32_t entries = rec.extras_ ? rec.extras_->entries : 0;
  std::uint32_t sampled = rec.extras_ ? rec.extras_->sampled : 0;
  double previous = rec.extras_ ? rec.extras_->previous_load : -1;
  p | cycles | entries | sampled | previous;
  if (!p.unpacking()) return;
  rec.load_cycles = cycles;
  if (entries != 0 || sampled != 0 || previous >= 0) {
    element_extras& x = rec.extras();
    x.entries = entries;
    x.sampled = sampled;
    x.previous_load = previous;
  }
}

// One hash probe per message sent by a counted element to an element of
// an array: the pair's running totals on this PE, in the sender's
// collection's table, no lock (the map is the PE's). The sender's array's
// root takes them with its step's other figures; the receiver's collection
// is part of the pair, as two arrays' keys may be alike. Sends to chares
// are not counted: no step places them.
void record_comm(pe_objects& s, const collection_ref& to, message& m) {
  if (to.kind != collection_kind::array) return;
  const element_record& sender = *s.comm_sender;
  comm_count& c = sender.coll->comm[comm_pair{sender.key, header_of(m).key, to.id}];
  ++c.messages;
  c.bytes += args_size(m);
}

// The element is its PE's sender while the entry runs, which runs as any
// other: with `comm` cleared, so that invoke_entry does not come back here
// (an entry of the same element nested in this one, as a scheduler turn
// inside it may run, then leaves the sender as it is).
void invoke_entry_counted(element_record& rec, const entry_info& e, message& m) {
  element_record* const outer_sender = comm_enter(rec);
  rec.comm = false;
  invoke_entry(rec, e, m);
  rec.comm = true;
  comm_leave(outer_sender);
}

static double cycles_to_s(std::uint64_t c) {
  return base::cycles_to_ns(c) * 1e-9;
}

// Seconds of load_cycles' unit: TSC cycles, or CPU nanoseconds.
static double load_to_s(std::uint64_t u) {
  return g_load.cpu ? double(u) * 1e-9 : cycles_to_s(u);
}

// With sampling: the PE's time per timed entry (all arrays' elements) since
// lc's last step here, or since the PE started when none was timed since.
static double pe_seconds_per_entry(const local_collection& lc) {
  std::uint64_t n = t_sampling.sampled - lc.sync_sampled0, u = t_element_cycles - lc.sync_elements0;
  if (n == 0) {
    n = t_sampling.sampled;
    u = t_element_cycles;
  }
  return n == 0 ? 0.0 : load_to_s(u) / double(n);
}

// --weft:lb-average: A x the last step's value + (1 - A) x this interval's;
// the first step sees its interval alone (an average with 0 would halve it).
static double averaged(double now, double& previous) {
  const double a = g_load.average;
  if (a > 0 && previous >= 0) now = a * previous + (1 - a) * now;
  previous = now;
  return now;
}

// The load of `rec` a step sees; its next interval starts. With sampling,
// the ratio estimator: its entries x its mean timed entry. Unbiased for the
// element as long as which entries are timed does not depend on their cost
// (the random gaps); an element none of whose entries was timed gets its
// entries x the PE's mean timed entry, biased towards the PE's other
// elements.
double step_load(const local_collection& lc, element_record& rec) {
  double now = load_to_s(rec.load_cycles);
  rec.load_cycles = 0;
  if (g_load.sample > 1 && rec.extras_) {
    element_extras& x = *rec.extras_;
    if (x.sampled > 0)
      now *= double(x.entries) / double(x.sampled);
    else
      now = double(x.entries) * pe_seconds_per_entry(lc);
    x.entries = x.sampled = 0;
  }
  const double estimate = rec.obj->load_estimate();
  if (estimate >= 0) return estimate;
  if (g_load.average <= 0) return now;
  return averaged(now, rec.extras().previous_load);
}

// The PE's interval for lc starts now.
void start_pe_interval(local_collection& lc) {
  lc.sync_busy0 = weft::detail::pe_busy_cycles();
  lc.sync_elements0 = t_element_cycles;
  lc.sync_entries0 = t_sampling.entries;
  lc.sync_sampled0 = t_sampling.sampled;
}

// What this PE counted for the collection since the root last took it;
// the next interval starts now.
std::vector<comm_record> take_comm(local_collection& lc) {
  std::vector<comm_record> out;
  out.reserve(lc.comm.size());
  for (const auto& [pair, c] : lc.comm)
    out.push_back({pair.from, pair.to, lc.ref.id, pair.to_collection, c.messages, c.bytes});
  lc.comm.clear();
  return out;
}

// This PE's busy time other than element entry methods since the
// collection's last step here (seconds); the next interval starts now. The
// busy time is wall time (the PE not idle) whatever --weft:lb-load says:
// with cpu, time the core ran something else while an element ran stays
// with the PE as background instead of moving with the element, and the
// PE's total stays its busy time.
double background_since_last(local_collection& lc) {
  const double busy = cycles_to_s(weft::detail::pe_busy_cycles() - lc.sync_busy0);
  double elements = load_to_s(t_element_cycles - lc.sync_elements0);
  if (g_load.sample > 1) {
    const std::uint64_t n = t_sampling.entries - lc.sync_entries0;
    const std::uint64_t timed = t_sampling.sampled - lc.sync_sampled0;
    elements =
        timed > 0 ? elements * double(n) / double(timed) : double(n) * pe_seconds_per_entry(lc);
  }
  start_pe_interval(lc);
  return averaged(busy > elements ? busy - elements : 0.0, lc.sync_background_previous);
}

bool is_measured(const collection_ref& ref) {
  return g_measure_load && ref.kind == collection_kind::array &&
         element_type(ref.type).pup != nullptr;
}

void set_measured(element_record& rec, const collection_ref& ref) {
  rec.measured = is_measured(ref);
  rec.load_plain = rec.measured && !g_load.cpu && g_load.sample == 1;
}

}  // namespace weft::objects::detail
