// The records of a balancing step in the trace (sync_trace.hpp). Every PE
// numbers the collection's steps itself: each step ends with one resume on
// every PE, so the counts agree without the step's messages carrying it.
#include "objects/sync_trace.hpp"
#include <algorithm>
#include <bit>
#include <unordered_map>

namespace weft::objects::detail {

namespace {

// Bits of `open`: the step, then one per phase.
constexpr std::uint8_t step_bit = 1;
constexpr std::uint8_t phase_bit(lb_phase p) {
  return std::uint8_t(2u << std::uint32_t(p));
}

struct step_trace {
  std::uint32_t step = 0;
  std::uint8_t open = 0;
};

// Per PE (a PE is one thread), per collection.
thread_local std::unordered_map<std::uint64_t, step_trace> t_steps;

step_trace& state_of(const local_collection& lc) {
  return t_steps[lc.ref.id];
}

std::uint32_t phase_field(const local_collection& lc, lb_phase p) {
  return lc.ref.type << 8 | std::uint32_t(p);
}

std::uint32_t float_bits(double x) {
  return std::bit_cast<std::uint32_t>(float(x));
}

void phase_record(const local_collection& lc, step_trace& s, lb_phase p, bool begin,
                  std::uint32_t c, std::uint32_t d) {
  const std::uint8_t bit = phase_bit(p);
  if (begin == ((s.open & bit) != 0)) return;
  s.open ^= bit;
  trace::detail::emit(begin ? trace::kind::lb_phase_begin : trace::kind::lb_phase_end, s.step,
                      phase_field(lc, p), c, d);
}

}  // namespace

void lb_trace_pe_start() {
  t_steps.clear();
}

void lb_trace_enter(const local_collection& lc) {
  if (!trace::on()) return;
  step_trace& s = state_of(lc);
  if (s.open & step_bit) return;
  s.open = step_bit;
  trace::detail::emit(trace::kind::lb_begin, s.step, lc.ref.type,
                      lc.ref.root_pe == my_pe() ? 1u : 0u, 0);
  phase_record(lc, s, lb_phase::collection, true, 0, 0);
}

void lb_trace_phase(const local_collection& lc, lb_phase p, bool begin) {
  if (!trace::on()) return;
  step_trace& s = state_of(lc);
  if (!(s.open & step_bit)) lb_trace_enter(lc);
  phase_record(lc, s, p, begin, 0, 0);
}

void lb_trace_strategy_done(const local_collection& lc, double before, double predicted) {
  if (!trace::on()) return;
  step_trace& s = state_of(lc);
  if (!(s.open & step_bit)) lb_trace_enter(lc);
  phase_record(lc, s, lb_phase::strategy, false, float_bits(before), float_bits(predicted));
}

void lb_trace_leave(const local_collection& lc) {
  if (!trace::on()) return;
  step_trace& s = state_of(lc);
  if (s.open & step_bit) {
    for (lb_phase p : {lb_phase::collection, lb_phase::strategy, lb_phase::migration})
      phase_record(lc, s, p, false, 0, 0);
    trace::detail::emit(trace::kind::lb_end, s.step, lc.ref.type, 0, 0);
  }
  s.open = 0;
  ++s.step;
}

double lb_imbalance(const std::vector<sync_record>& records, const std::vector<int>& pes) {
  // As the lb layer's instance: a PE's background is the largest its
  // records carry, its load that plus its elements'.
  const int n = num_pes();
  if (n <= 0) return 0;
  std::vector<double> load(std::size_t(n), 0.0), background(std::size_t(n), 0.0);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const sync_record& r = records[i];
    const int to = i < pes.size() ? pes[i] : r.pe;
    if (r.pe >= 0 && r.pe < n && r.background > background[std::size_t(r.pe)])
      background[std::size_t(r.pe)] = r.background;
    if (to >= 0 && to < n) load[std::size_t(to)] += r.load;
  }
  double sum = 0, max = 0;
  for (std::size_t p = 0; p < load.size(); ++p) {
    const double l = load[p] + background[p];
    sum += l;
    max = std::max(max, l);
  }
  return sum > 0 ? max * double(n) / sum : 0.0;
}

}  // namespace weft::objects::detail
