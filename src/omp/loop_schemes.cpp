// The seed's OpenMP loop schemes (paper 001, section VII-C) for loops the
// runtime schedules as static without a chunk: schedule(runtime) (or a
// GOMP_loop_start asked for `auto`: GCC compiles schedule(auto) as static,
// inline) under OMP_SCHEDULE=static or auto with
// --weft:omp-scheme=idle|history, or under OMP_SCHEDULE=weft_idle or
// weft_history whatever the option says. A `schedule(static)` loop never
// gets here: GCC computes its blocks inline, with no runtime call, and
// OpenMP promises its iteration-to-thread mapping (docs/omp.md, "Loop
// schemes").
//
// Both start from the static blocks (thread i owns block i) and let the
// team's threads that ran out of work take parts of the others' blocks:
//  - idle-counter: an owner offers parts of what is left of its block only
//    when threads of the team are idle (looking for a part, their own
//    block empty), as many as
//    there are idle ones beyond the parts it still offers, capped by the
//    team; with nobody idle it runs its block as static does. It looks
//    each time it comes back for a piece of its own block, which it takes
//    in idle_looks steps so that it does come back.
//  - history: at its start an owner offers a share of its block as one part
//    per other thread; the share follows, per loop call site and thread, a
//    moving average of the fraction of what it offered that was stolen
//    (all taken: offer more; none: offer less, down to a floor from which
//    it can rise again). The owner runs its kept part in one piece, then
//    takes back the parts nobody took.
// A block whose owner has not arrived yet (its PE busy with other work:
// the seed's observation that busy cores do not pick up statically
// assigned work) gives half of what is left to a thief in both schemes.
// The blocks split all but the loop's last iteration, which the first
// thread to leave runs as its last chunk (lastprivate: scheme_next).
//
// Why not weft::parallel_for's deques (src/tasks, which have schemes of the
// same names): the iterations of an OpenMP loop must run on the threads of
// the team (omp_get_thread_num, threadprivate, the body's locals live on
// their stacks), while a task there runs on whichever PE takes it; and omp
// does not sit on the tasks layer (docs/LAYERS.md). What is shared is the
// rule for how many parts to offer, the offer of the farthest parts, and
// the history's moving average (src/tasks/deques.cpp).
#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <mutex>
#include "omp/omp_internal.hpp"
#include "omp/spin_lock.hpp"
#include "weft/base/cache.hpp"
#include "weft/core/config.hpp"
#include "weft/core/run.hpp"

namespace weft::omp {

namespace {

using ull = unsigned long long;

// idle: an owner comes back for its next piece after about 1/idle_looks
// of its block, to see whether threads became idle meanwhile (a look is
// its own block's lock and a read of the idle count).
constexpr unsigned long long idle_looks = 8;
// history: the weight of the last loop in the moving average, its start
// (neither flooding nor starving thieves), and the floor of the offered
// share, from which it can rise again.
constexpr float history_weight = 0.25f;
constexpr float history_start = 0.5f;
constexpr double history_floor = 1.0 / 16;
// History per thread number, modulo this (larger teams share entries).
constexpr int history_threads = 64;

struct counters {
  std::atomic<std::uint64_t> idle_loops{0}, history_loops{0}, offered{0}, stolen{0}, returned{0},
      taken_unstarted{0};
};
counters g_counts;
std::atomic<bool> g_counting{false};
// --weft:omp-scheme of the node that runs (static until one starts).
std::atomic<int> g_option{scheme_static};

void count(std::atomic<std::uint64_t>& c, std::uint64_t k = 1) {
  if (g_counting.load(std::memory_order_relaxed)) [[unlikely]]
    c.fetch_add(k, std::memory_order_relaxed);
}

}  // namespace

struct history_entry {
  std::array<std::atomic<float>, history_threads> share;
  history_entry() {
    for (auto& s : share) s.store(history_start, std::memory_order_relaxed);
  }
};

namespace {

// Call site -> history. Entries are never freed (one per loop in the
// program's code); looked up once per loop, by the thread that sets it up.
std::mutex g_history_mutex;
absl::flat_hash_map<const void*, std::unique_ptr<history_entry>>& history_table() {
  static auto* table = new absl::flat_hash_map<const void*, std::unique_ptr<history_entry>>();
  return *table;
}

history_entry* history_of(const void* site) {
  // A thread that sets up loops mostly sets up the same one again: its
  // last entry spares it the table's lock.
  static thread_local const void* last_site = nullptr;
  static thread_local history_entry* last_entry = nullptr;
  if (site == last_site && last_entry != nullptr) return last_entry;
  std::lock_guard<std::mutex> lock(g_history_mutex);
  auto& slot = history_table()[site];
  if (!slot) slot = std::make_unique<history_entry>();
  last_site = site;
  last_entry = slot.get();
  return last_entry;
}

void lock_block(scheme_block& b, thread_state& me) {
  lock(b.lock, me);
}
void unlock_block(scheme_block& b) {
  unlock(b.lock);
}

// history: offers its share of the block, one part per other thread.
void offer_share(scheme_loop& sl, scheme_block& b, int id, unsigned long long len) {
  if (sl.kind != scheme_history || len < 2 * sl.part_min) return;
  const double top = double(sl.size - 1) / double(sl.size);
  const double share = std::clamp<double>(
      sl.history->share[std::size_t(id % history_threads)].load(std::memory_order_relaxed),
      std::min(history_floor, top), top);
  unsigned long long offer = (unsigned long long)(share * double(len) + 0.5);
  offer = std::min(offer, len - sl.part_min);
  const unsigned long long parts = std::min<ull>(ull(sl.size - 1), offer / sl.part_min);
  if (parts == 0) return;
  b.mid = b.hi - offer;
  b.reserved = b.mid - b.lo;
  b.parts.store(int(parts), std::memory_order_relaxed);
  b.offered = int(parts);
  count(g_counts.offered, parts);
}

// `started` is stored after the offer: a thief that sees it set (acquire)
// sees the parts too, and never leaves a started block's offer behind.
void start_block(scheme_loop& sl, scheme_block& b, int id) {
  const unsigned long long len = b.hi - b.lo;
  b.look = std::max(sl.part_min, (len + idle_looks - 1) / idle_looks);
  b.reserved = len;
  offer_share(sl, b, id, len);
  b.started.store(true, std::memory_order_release);
}

// The owner found its block empty: history learns what share of its offer
// was stolen.
void block_done(scheme_loop& sl, scheme_block& b, int id) {
  b.done = true;
  if (sl.kind != scheme_history || b.offered == 0) return;
  std::atomic<float>& avg = sl.history->share[std::size_t(id % history_threads)];
  const float stolen = float(b.stolen) / float(b.stolen + b.returned);
  // Two teams at one call site may race here: a lost update costs nothing.
  avg.store((1 - history_weight) * avg.load(std::memory_order_relaxed) + history_weight * stolen,
            std::memory_order_relaxed);
}

// A piece of the caller's own block; false once it is empty.
bool own_piece(thread_state& me, scheme_loop& sl, unsigned long long& lo, unsigned long long& hi) {
  scheme_block& b = sl.blocks[std::size_t(me.id)];
  lock_block(b, me);
  if (!b.started.load(std::memory_order_relaxed)) start_block(sl, b, me.id);
  int parts = b.parts.load(std::memory_order_relaxed);
  if (b.lo == b.mid && parts > 0) {
    // Nobody took the nearest part: the owner runs it.
    b.mid += std::max<ull>(1, (b.hi - b.mid) / ull(parts));
    if (b.mid > b.hi) b.mid = b.hi;
    b.parts.store(--parts, std::memory_order_relaxed);
    ++b.returned;
    count(g_counts.returned);
  }
  if (b.lo == b.mid) {
    if (!b.done) block_done(sl, b, me.id);
    unlock_block(b);
    return false;
  }
  unsigned long long len = b.mid - b.lo;
  if (sl.kind == scheme_idle) {
    // One part per idle thread beyond the parts still offered, capped by
    // the other threads and by what is left.
    const int idle = std::min(sl.hungry.load(std::memory_order_relaxed), sl.size - 1);
    const ull left = b.hi - b.lo;
    const ull most = left / sl.part_min > 0 ? left / sl.part_min - 1 : 0;
    const ull want = std::min<ull>(idle > parts ? ull(idle - parts) : 0,
                                   most > ull(parts) ? most - ull(parts) : 0);
    if (want > 0) {
      // Everything left, split anew: the owner keeps the first part.
      const ull total = ull(parts) + want + 1;
      b.mid = b.lo + left / total;
      b.parts.store(int(total - 1), std::memory_order_relaxed);
      b.offered += int(want);
      count(g_counts.offered, want);
      len = b.mid - b.lo;
    }
    len = std::min(len, b.look);
  }
  lo = b.lo;
  hi = b.lo + len;
  b.lo = hi;
  unlock_block(b);
  sl.unclaimed.fetch_sub(len, std::memory_order_relaxed);
  return true;
}

// A part of another thread's block: an offered one (the farthest), else
// half of what is left of a block whose owner has not started.
bool steal_piece(thread_state& me, scheme_loop& sl, unsigned long long& lo,
                 unsigned long long& hi) {
  for (int k = 1; k < sl.size; ++k) {
    scheme_block& b = sl.blocks[std::size_t((me.id + k) % sl.size)];
    if (b.started.load(std::memory_order_acquire) && b.parts.load(std::memory_order_relaxed) == 0)
      continue;
    lock_block(b, me);
    unsigned long long take = 0;
    if (const int parts = b.parts.load(std::memory_order_relaxed); parts > 0) {
      take = std::min<ull>(b.hi - b.mid, std::max<ull>(1, (b.hi - b.mid) / ull(parts)));
      b.parts.store(parts - 1, std::memory_order_relaxed);
      ++b.stolen;
      count(g_counts.stolen);
    } else if (!b.started.load(std::memory_order_relaxed) && b.hi > b.lo) {
      take = (b.hi - b.lo + 1) / 2;
      b.mid = b.hi - take;
      count(g_counts.taken_unstarted);
    }
    if (take > 0) {
      hi = b.hi;
      lo = hi - take;
      b.hi = lo;
      if (b.mid > b.hi) b.mid = b.hi;
    }
    unlock_block(b);
    if (take > 0) {
      sl.unclaimed.fetch_sub(take, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

}  // namespace

int loop_scheme_of(int requested, int sched, long chunk, bool ordered, const thread_state& me,
                   unsigned long long& part_min) {
  part_min = 1;
  // monotonic: each thread's chunks in increasing order, which a thief
  // taking the top of another block breaks.
  if (ordered || sched != sched_static || chunk != 0 || (requested & sched_monotonic) != 0)
    return 0;
  int kind = scheme_option;
  if (requested == 0 && me.icv.run_scheme != scheme_option) {
    kind = me.icv.run_scheme;
    part_min = ull(std::max(1L, me.icv.run_part));
  } else if (requested != 0 && requested != sched_auto) {
    return 0;  // schedule(static) called in (GOMP_loop_static_start): OpenMP's mapping
  }
  if (kind == scheme_option) kind = g_option.load(std::memory_order_relaxed);
  return kind == scheme_static ? 0 : kind;
}

void scheme_init(ws_slot& s, int n, unsigned long long trips, int kind, unsigned long long part_min,
                 const void* site) {
  scheme_loop& sl = s.scheme;
  sl.kind = n >= 2 && trips >= 2 ? kind : 0;
  if (sl.kind == 0) return;
  if (sl.capacity < n) {
    sl.blocks = std::make_unique<scheme_block[]>(std::size_t(n));
    sl.capacity = n;
  }
  sl.size = n;
  sl.part_min = part_min;
  // The blocks split all but the last iteration (see scheme_next).
  const ull nt = ull(n), q = (trips - 1) / nt, r = (trips - 1) % nt;
  for (int i = 0; i < n; ++i) {
    scheme_block& b = sl.blocks[std::size_t(i)];
    const ull id = ull(i);
    b.lo = id * q + std::min(id, r);
    b.hi = b.mid = b.lo + q + (id < r ? 1 : 0);
    b.look = 1;
    b.reserved = 0;
    b.offered = b.stolen = b.returned = 0;
    b.done = false;
    b.parts.store(0, std::memory_order_relaxed);
    b.started.store(false, std::memory_order_relaxed);
  }
  sl.trips = trips;
  sl.last_taker.store(-1, std::memory_order_relaxed);
  sl.final_taken.store(false, std::memory_order_relaxed);
  sl.unclaimed.store(trips - 1, std::memory_order_relaxed);
  sl.hungry.store(0, std::memory_order_relaxed);
  sl.history = sl.kind == scheme_history ? history_of(site) : nullptr;
  count(sl.kind == scheme_idle ? g_counts.idle_loops : g_counts.history_loops);
}

bool scheme_next(thread_state& me, ws_slot& s, unsigned long long& lo, unsigned long long& hi) {
  scheme_loop& sl = s.scheme;
  if (sl.last_taker.load(std::memory_order_relaxed) == me.id) return false;
  if (own_piece(me, sl, lo, hi)) return true;
  // Idle: counted while it looks for a part, not while it runs one (an
  // owner offers parts to threads that can take them now).
  sl.hungry.fetch_add(1, std::memory_order_relaxed);
  auto busy = [&] { sl.hungry.fetch_sub(1, std::memory_order_relaxed); };
  for (int spins = 0;; ++spins) {
    if (steal_piece(me, sl, lo, hi)) {
      busy();
      return true;
    }
    // idle: an owner offers parts only when it comes back, so an idle
    // thread waits in the loop while iterations are unclaimed (it would
    // wait at the loop's end anyway), unless the loop or region was
    // cancelled. history offers at the owners' starts only.
    const bool cancelled = s.cancelled.load(std::memory_order_relaxed) ||
                           (me.t != nullptr && me.t->cancelled.load(std::memory_order_relaxed));
    if (cancelled) {
      busy();
      return false;
    }
    if (sl.kind != scheme_idle || sl.unclaimed.load(std::memory_order_relaxed) == 0) {
      busy();
      // The loop's last iteration goes to the first thread that leaves:
      // GCC's lastprivate copies out on the thread whose last chunk ended
      // at the loop's end, so that chunk must be the last it runs.
      if (sl.final_taken.exchange(true, std::memory_order_relaxed)) return false;
      sl.last_taker.store(me.id, std::memory_order_relaxed);
      lo = sl.trips - 1;
      hi = sl.trips;
      return true;
    }
    if (spins < 64)
      base::cpu_relax();
    else
      wait_step(me, false, nullptr, nullptr, nullptr, nullptr);
  }
}

void schemes_node_start() {
  const std::string& v = weft::config().omp_scheme;
  g_option.store(v == "idle"      ? scheme_idle
                 : v == "history" ? scheme_history
                                  : scheme_static,
                 std::memory_order_relaxed);
  if (weft::config().stats) g_counting.store(true, std::memory_order_relaxed);
}

void schemes_stats(std::FILE* out) {
  const scheme_counts c = scheme_counts_now();
  if (c.idle_loops + c.history_loops == 0) return;
  std::fprintf(out,
               "omp loop schemes: %" PRIu64 " idle and %" PRIu64
               " history loops; parts offered %" PRIu64 ", stolen %" PRIu64 ", taken back %" PRIu64
               "; halves of blocks not started taken %" PRIu64 "\n",
               c.idle_loops, c.history_loops, c.offered, c.stolen, c.returned, c.taken_unstarted);
}

void count_scheme_events(bool on) {
  g_counting.store(on, std::memory_order_relaxed);
}

scheme_counts scheme_counts_now() {
  scheme_counts c;
  c.idle_loops = g_counts.idle_loops.load(std::memory_order_relaxed);
  c.history_loops = g_counts.history_loops.load(std::memory_order_relaxed);
  c.offered = g_counts.offered.load(std::memory_order_relaxed);
  c.stolen = g_counts.stolen.load(std::memory_order_relaxed);
  c.returned = g_counts.returned.load(std::memory_order_relaxed);
  c.taken_unstarted = g_counts.taken_unstarted.load(std::memory_order_relaxed);
  return c;
}

std::vector<std::pair<const void*, std::vector<float>>> history_shares() {
  std::lock_guard<std::mutex> lock(g_history_mutex);
  std::vector<std::pair<const void*, std::vector<float>>> out;
  for (const auto& [site, entry] : history_table()) {
    std::vector<float> shares;
    for (const auto& s : entry->share) shares.push_back(s.load(std::memory_order_relaxed));
    out.emplace_back(site, std::move(shares));
  }
  return out;
}

scheme_view scheme_view_now() {
  thread_state& me = current();
  scheme_view v;
  if (me.ws == nullptr || me.ws->scheme.kind == 0) return v;
  scheme_loop& sl = me.ws->scheme;
  scheme_block& b = sl.blocks[std::size_t(me.id)];
  v.hungry = sl.hungry.load(std::memory_order_relaxed);
  v.parts = b.parts.load(std::memory_order_relaxed);
  lock_block(b, me);
  v.reserved = b.reserved;
  unlock_block(b);
  return v;
}

}  // namespace weft::omp
