// Summary mode (--weft:trace-mode=summary): per name a count of its slices
// and their estimated total, self and max time, and per PE its busy and
// idle time with a histogram of both, written as nodeN.summary.json.
//
// Counting every slice is cheap (the inline path of weft/trace/hooks.hpp
// increments a row); timing one costs two clock reads, ~9 ns each here,
// and this file's calls, ~20 ns more for a handler and its entry method
// (kNeighbor with every slice timed), which on a message-driven code whose
// handlers last ~50 ns would be most of the cost of tracing. So a name's
// first slices are timed (first_timed of them), and then one in as many as
// keeps timing under 1% of the name's time (budget_ns over its shortest
// timed slice; at most --weft:trace-time-every): coarse-grained codes get
// exact times, fine-grained ones an estimate at a fraction of the cost. A
// timed slice stands for the untimed ones of its name since the last timed
// one, and that weight scales its time in the totals, the busy time and
// the histogram. Every slice inside a timed slice is timed, so its self
// time is exact.
//
// Idle periods are always timed: there are few of them per message, and
// busy + idle + overhead = wall keeps its meaning.
#include <algorithm>
#include "session_state.hpp"
#include "weft/base/timer.hpp"

namespace weft::trace::internal {

namespace {

// Adds w times the span [t0, t1) (ticks) to the histogram's column `which`
// (0 busy, 1 idle), halving its resolution first while t1 lies past its end.
void add_to_bins(summary_state& m, int which, std::uint64_t t0, std::uint64_t t1, std::uint64_t w) {
  if (t1 <= t0) return;
  while (t1 >= m.bin_ticks * max_bins) {
    // Halve the resolution: pairs of bins become one.
    for (std::size_t i = 0; i < max_bins / 2; ++i) {
      m.bins[2 * i] = m.bins[4 * i] + m.bins[4 * i + 2];
      m.bins[2 * i + 1] = m.bins[4 * i + 1] + m.bins[4 * i + 3];
    }
    std::fill(m.bins.begin() + max_bins, m.bins.end(), 0);
    m.bin_ticks *= 2;
  }
  while (t0 < t1) {
    const std::uint64_t b = t0 / m.bin_ticks;
    const std::uint64_t end = std::min((b + 1) * m.bin_ticks, t1);
    m.bins[2 * b + std::uint64_t(which)] += (end - t0) * w;
    t0 = end;
  }
}

struct row {
  detail::summary_count* count;
  name_timing* timing;
};

// A name's row, made when it is new; a table that grows is handed to the
// inline path again.
row row_of(track& t, kind k, std::uint32_t id) {
  summary_state& m = t.sum;
  const int i = detail::summary_index(k);
  if (i >= 0 && id < summary_state::flat_ids) {
    auto& counts = m.counts[std::size_t(i)];
    auto& timing = m.timing[std::size_t(i)];
    if (id >= counts.size()) {
      const std::size_t n = std::min<std::size_t>(
          summary_state::flat_ids,
          std::max<std::size_t>({std::size_t(id) + 1, 2 * counts.size(), 64}));
      counts.resize(n);
      timing.resize(n);
      t.fp->counts[i] = counts.data();
      t.fp->count_size[i] = std::uint32_t(n);
    }
    return {&counts[id], &timing[id]};
  }
  auto& e = m.others[std::uint64_t(k) << 32 | id];
  return {&e.first, &e.second};
}

// Slices of a name until its next timed one: on average as many as keep
// its timing within budget (at most the stride), drawn at random from 1 to
// twice that. A fixed gap would alias with a program's own period: a
// handler whose messages come in a repeating order of entry methods, timed
// every 256th, is timed on the same entry method every time.
std::uint64_t gap(summary_state& m, const name_timing& tm) {
  const std::uint64_t mean = std::clamp<std::uint64_t>(
      m.budget_ticks / std::max<std::uint64_t>(tm.shortest, 1), 1, m.stride);
  if (mean == 1) return 1;
  // xorshift64: a few cycles, and a fixed seed makes a run's choice repeatable.
  m.rng ^= m.rng << 13;
  m.rng ^= m.rng >> 7;
  m.rng ^= m.rng << 17;
  return 1 + m.rng % (2 * mean - 1);
}

std::uint64_t ticks(std::uint64_t tsc) {
  return tick_of(*g_session.load(std::memory_order_relaxed), tsc);
}

}  // namespace

void summary_idle(track& t, bool begin, std::uint64_t now) {
  summary_state& m = t.sum;
  t.fp->stamped = std::uint8_t(begin ? kind::idle_begin : kind::idle_end);
  m.last_now = now;
  const std::uint64_t tick = ticks(now);
  if (begin) {
    m.idle_t0 = tick;
    return;
  }
  if (tick <= m.idle_t0) return;
  m.idle += tick - m.idle_t0;
  add_to_bins(m, 1, m.idle_t0, tick, 1);
}

void summary_event(track& t, kind k, std::uint32_t id, std::uint64_t stamp) {
  detail::fast_path& f = *t.fp;
  summary_state& m = t.sum;
  const auto clock = [&stamp] {
    if (stamp == 0) stamp = base::cycles();
    return stamp;
  };
  if (is_begin(k)) {
    if (f.idle_open) {
      f.idle_open = false;
      summary_idle(t, false, clock());
    }
    const bool busy = is_busy(k);
    // The outermost busy slice: nothing open but slices that are not busy.
    const bool top = busy && f.depth == m.nonbusy_open;
    ++f.depth;
    if (!busy) ++m.nonbusy_open;
    const row r = row_of(t, k, id);
    const std::uint64_t n = ++r.count->count;
    if (!f.timing && n < r.count->next_timed) {
      f.stamped = 0;
      return;
    }
    r.count->next_timed = n + (n < first_timed ? 1 : gap(m, *r.timing));
    const std::uint64_t weight = r.count->count - r.timing->counted;
    r.timing->counted = r.count->count;
    const std::uint64_t now = clock();
    m.stack.push_back({k, id, now, 0, weight, f.depth, top});
    f.timing = true;
    f.stamped = std::uint8_t(k);
    m.last_now = now;
    return;
  }
  if (!is_end(k) || f.depth == 0) return;  // an instant, or a stray end
  if (!is_busy(kind(std::uint8_t(k) - 1)) && m.nonbusy_open > 0) --m.nonbusy_open;
  if (m.stack.empty() || m.stack.back().depth != f.depth) {  // not timed
    --f.depth;
    f.stamped = 0;
    return;
  }
  const open_slice sl = m.stack.back();
  m.stack.pop_back();
  --f.depth;
  f.timing = !m.stack.empty();
  const std::uint64_t now = clock();
  f.stamped = std::uint8_t(k);
  m.last_now = now;
  // Less what timing an empty slice measures (summary_begin): the clock
  // reads and these calls are not the program's time.
  const std::uint64_t raw = now > sl.t0 ? now - sl.t0 : 0;
  const std::uint64_t dur = raw > m.own_cost ? raw - m.own_cost : 0;
  name_timing& tm = *row_of(t, sl.k, sl.id).timing;
  ++tm.timed;
  tm.shortest = std::min(tm.shortest, dur);
  tm.weight += sl.weight;
  tm.total += dur * sl.weight;
  tm.self += (dur > sl.nested ? dur - sl.nested : 0) * sl.weight;
  tm.max = std::max(tm.max, dur);
  // Slices inside a timed one are timed: its parent, if open, is this one's.
  if (!m.stack.empty()) m.stack.back().nested += dur;
  if (sl.top) {
    m.busy += dur * sl.weight;
    add_to_bins(m, 0, ticks(sl.t0), ticks(now), sl.weight);
  }
}

void summary_begin(track& t, const session& s) {
  summary_state& m = t.sum;
  m.stride = std::max<std::uint32_t>(1, s.cfg.time_every);
  m.budget_ticks = std::max<std::uint64_t>(1, std::uint64_t(budget_ns / s.ns_per_tick));
  m.bins.assign(2 * max_bins, 0);
  m.bin_ticks = std::max<std::uint64_t>(1, std::uint64_t(1e6 / s.ns_per_tick));
  t.fp->summary = true;
  // The cost of timing itself: the shortest of a few empty slices timed
  // through this path (a progress slice, which is not busy time, of an id
  // no name has), taken off every timed slice. Without it a 0.2 us entry
  // method timed alone measured 0.3 us.
  constexpr std::uint32_t probe = 0xfffffff0u;
  for (std::uint64_t i = 0; i < first_timed; ++i) {
    summary_event(t, kind::progress_begin, probe, 0);
    summary_event(t, kind::progress_end, probe, 0);
  }
  const std::uint64_t key = std::uint64_t(kind::progress_begin) << 32 | probe;
  m.own_cost = m.others[key].second.shortest;
  m.others.erase(key);
  t.fp->stamped = 0;
}

void summary_end(track& t, std::uint64_t now) {
  detail::fast_path& f = *t.fp;
  if (f.idle_open) {
    f.idle_open = false;
    summary_idle(t, false, now);
  }
  // Slices still open (a run that ended inside a handler: weft::exit) end
  // here; the untimed ones have no time to add.
  while (!t.sum.stack.empty()) {
    f.depth = t.sum.stack.back().depth;
    summary_event(t, kind(std::uint8_t(t.sum.stack.back().k) + 1), t.sum.stack.back().id, now);
  }
  f.depth = 0;
}

std::map<std::uint64_t, name_stat> summary_state::sorted() const {
  const auto stat = [](const detail::summary_count& c, const name_timing& tm) {
    name_stat st;
    st.count = c.count;
    st.timed = tm.timed;
    st.max = tm.max;
    // The untimed slices after a name's last timed one are in no weight:
    // the totals scale to the count.
    if (tm.weight != 0) {
      const double scale = double(c.count) / double(tm.weight);
      st.total = std::uint64_t(double(tm.total) * scale);
      st.self = std::uint64_t(double(tm.self) * scale);
    }
    return st;
  };
  std::map<std::uint64_t, name_stat> out;
  for (const auto& [key, e] : others)
    if (e.first.count != 0) out[key] = stat(e.first, e.second);
  constexpr kind begins[detail::summary_kinds] = {kind::handler_begin, kind::entry_begin,
                                                  kind::task_begin, kind::region_begin};
  for (int i = 0; i < detail::summary_kinds; ++i)
    for (std::size_t id = 0; id < counts[std::size_t(i)].size(); ++id)
      if (counts[std::size_t(i)][id].count != 0)
        out[std::uint64_t(begins[i]) << 32 | id] =
            stat(counts[std::size_t(i)][id], timing[std::size_t(i)][id]);
  return out;
}

}  // namespace weft::trace::internal
