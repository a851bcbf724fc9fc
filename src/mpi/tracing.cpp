// MPI calls in the trace (--weft:trace; docs/tracing.md "MPI ranks"): each
// call of a rank is a span, mpi_begin (the rank, the call's name in the
// trace's "mpi" names, the communicator) to mpi_end (the rank, the peer,
// the tag, the bytes of the point-to-point operation it made, if one),
// and each time it waits inside, mpi_wait_begin / mpi_wait_end. A rank is
// a fiber on its PE's thread, so its records go to its PE's track; the
// rank field lets tools make a track of each rank.
#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include "mpi/mpi_internal.hpp"
#include "weft/trace/session.hpp"

namespace weft::mpi {

namespace {

std::mutex g_mutex;
std::vector<std::string> g_names;                      // guarded
std::unordered_map<std::string, std::uint32_t> g_ids;  // guarded

// A peer or tag that the call has none of.
constexpr int none = -3;

const bool registered = [] {
  trace::set_name_source("mpi", [] {
    std::vector<std::pair<std::uint32_t, std::string>> out;
    std::lock_guard lock(g_mutex);
    for (std::size_t i = 0; i < g_names.size(); ++i) out.emplace_back(std::uint32_t(i), g_names[i]);
    return out;
  });
  return true;
}();

}  // namespace

std::uint32_t trace_call_id(const char* call) {
  std::lock_guard lock(g_mutex);
  auto [it, added] = g_ids.try_emplace(call, std::uint32_t(g_names.size()));
  if (added) g_names.emplace_back(call);
  return it->second;
}

void trace_call_begin(std::uint32_t id, MPI_Comm comm) noexcept {
  rank_state* r = current_rank();
  if (r == nullptr) return;
  r->trace_peer = none;
  r->trace_tag = none;
  r->trace_bytes = 0;
  trace::detail::emit(trace::kind::mpi_begin, std::uint32_t(r->rank), id, std::uint32_t(comm), 0);
}

void trace_call_end() noexcept {
  rank_state* r = current_rank();
  if (r == nullptr) return;
  trace::detail::emit(trace::kind::mpi_end, std::uint32_t(r->rank), std::uint32_t(r->trace_peer),
                      std::uint32_t(r->trace_tag),
                      std::uint32_t(std::min<std::uint64_t>(r->trace_bytes, 0xffffffffu)));
}

void trace_wait(rank_state& r, bool begins) noexcept {
  trace::detail::emit(begins ? trace::kind::mpi_wait_begin : trace::kind::mpi_wait_end,
                      std::uint32_t(r.rank), 0, 0, 0);
}

}  // namespace weft::mpi
