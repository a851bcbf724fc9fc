// A balancing step in the trace (docs/design/trace-format.md, "Load
// balancing"): each PE's part of a step as lb_begin ... lb_end, its phases
// as lb_phase_begin ... lb_phase_end, paired per collection and step rather
// than nested in the track's slices (a step spans many handlers).
#pragma once
#include <cstdint>
#include <vector>
#include "objects/internal.hpp"

namespace weft::objects::detail {

enum class lb_phase : std::uint32_t { collection = 0, strategy = 1, migration = 2 };

// A PE starts: its counts of steps start again (a thread that was a PE of
// an earlier run in the process, the main thread, keeps its thread_locals).
void lb_trace_pe_start();
// The PE takes part in the collection's current step: its span and its
// collection phase begin (once per step; later calls do nothing).
void lb_trace_enter(const local_collection& lc);
// A phase of the step on this PE begins or ends (an open phase is not
// opened again, a closed one not closed again). The strategy's end carries
// max/avg of the PEs' loads before the step and as the plan predicts them.
void lb_trace_phase(const local_collection& lc, lb_phase p, bool begin);
void lb_trace_strategy_done(const local_collection& lc, double before, double predicted);
// The step ended on this PE (its resume): what is open closes, and the
// PE's count of the collection's steps moves on.
void lb_trace_leave(const local_collection& lc);
// max/avg of the PEs' loads (elements' and background, as the balancer
// sees them) with the records on `pes` (their own PEs when empty).
double lb_imbalance(const std::vector<sync_record>& records, const std::vector<int>& pes);

}  // namespace weft::objects::detail
