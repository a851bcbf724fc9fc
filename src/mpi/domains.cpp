// Scheduling domains for the ranks (Phoenix; --weft:rank-domain=pe|node,
// docs/mpi.md "Scheduling domains").
//
// pe (the default): a rank runs on its PE, its home, all along. node: a PE
// of the process that runs no rank (every rank it hosts waits in an MPI
// call, or it hosts none) may run a rank of another PE between two of its
// MPI calls. The rank's MPI state stays its home's -- the messages to it,
// its requests, the collectives' per-PE counts are handled there, by the
// home's thread alone, without locks -- so a rank runs its MPI calls at
// home: as a call ends (guard's domain_leave), a rank whose home hosts
// other ranks moves to a free PE if there is one, runs the program's code
// there, and goes home again as its next call begins (domain_enter).
//
// Moves that do not pay: a rank that computes for less than a move costs
// (min_away_ns) between two calls -- a ping-pong, where the other rank of
// its home waits for it anyway -- stays home for its next call ends, 1, 3,
// 7, ... up to 4095 of them, until a stay away is long enough again.
//
// What is free: each PE counts the ranks it runs or has ready (not waiting
// inside an MPI call); only its own thread changes its count, and a mask
// with a bit per PE says which counts are 0. A rank that moves claims its
// target's bit, so two do not pick the same free PE at once.
//
// A program with thread-locals of its own keeps its ranks home: its
// compiled code keeps thread-locals' addresses across calls (the thread
// pointer is a constant to the compiler), so a rank that moved would write
// the old thread's block, where another rank's copy lies by then
// (ThreadSanitizer showed it on tests/mpi/rank_tls.c).
//
// The cost: a move is a message to the target and a switch there, and a
// moved rank's next MPI call is another; a program that calls MPI often
// pays both per call, one with long computations between its calls on
// unequal ranks gains the idle PEs' time (bench/mpi/imbalance.c).
#include <algorithm>
#include <bit>
#include <cstdio>
#include <memory>
#include "mpi/mpi_internal.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/timer.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/threads/fiber.hpp"
#include "weft/threads/ult.hpp"

namespace weft::mpi {

bool g_domain_node = false;

namespace {

constexpr std::uint64_t min_away_ns = 10000;
constexpr std::uint32_t max_skip = 4095;

struct alignas(base::cache_line) pe_count {
  int active = 0;  // its own thread's: ranks it runs or has ready
  int homed = 0;   // ranks whose home it is (fixed)
};
std::unique_ptr<pe_count[]> g_counts;
std::unique_ptr<std::atomic<std::uint64_t>[]> g_free;  // bit p of word p/64: PE p is free
int g_pes = 0;

void set_free(int pe, bool free) {
  const std::uint64_t bit = std::uint64_t(1) << (pe % 64);
  if (free)
    g_free[std::size_t(pe / 64)].fetch_or(bit, std::memory_order_release);
  else
    g_free[std::size_t(pe / 64)].fetch_and(~bit, std::memory_order_relaxed);
}

// On PE pe's own thread.
void arrive(int pe) {
  if (g_counts[std::size_t(pe)].active++ == 0) set_free(pe, false);
}
void leave(int pe) {
  if (--g_counts[std::size_t(pe)].active == 0) set_free(pe, true);
}

// A free PE other than `home`, claimed (its bit cleared); -1: none.
int claim_free(int home) {
  const int words = (g_pes + 63) / 64;
  for (int i = 0; i < words; ++i) {
    const int w = (home / 64 + i) % words;
    std::uint64_t bits = g_free[std::size_t(w)].load(std::memory_order_acquire);
    if (w == home / 64) bits &= ~(std::uint64_t(1) << (home % 64));
    while (bits != 0) {
      const int b = std::countr_zero(bits);
      const std::uint64_t bit = std::uint64_t(1) << b;
      if (g_free[std::size_t(w)].fetch_and(~bit, std::memory_order_acq_rel) & bit)
        return w * 64 + b;
      bits &= ~bit;
    }
  }
  return -1;
}

}  // namespace

void domains_start(int pes, const std::vector<int>& homed) {
  const runtime_config& cfg = weft::config();
  g_domain_node = cfg.mpi_rank_domain_node;
  if (!g_domain_node) return;
  // Compiled code keeps a thread-local's address across calls (the thread
  // pointer is a constant to the compiler): a rank that moved would go on
  // writing the old thread's block, where another rank's copy now lies.
  if (const std::size_t bytes = threads::fiber::program_tls_bytes(); bytes != 0) {
    g_domain_node = false;
    if (!cfg.quiet && weft::my_node() == 0)
      std::fprintf(stderr,
                   "weft: --weft:rank-domain=node: the program has %zu bytes of thread-local "
                   "variables, whose addresses its compiled code keeps across calls; its ranks "
                   "stay on their PEs (rank-domain=pe)\n",
                   bytes);
    return;
  }
  g_pes = pes;
  g_counts = std::make_unique<pe_count[]>(std::size_t(pes));
  g_free = std::make_unique<std::atomic<std::uint64_t>[]>(std::size_t((pes + 63) / 64));
  for (int p = 0; p < pes; ++p) {
    g_counts[std::size_t(p)].homed = homed[std::size_t(p)];
    g_counts[std::size_t(p)].active = homed[std::size_t(p)];
    if (homed[std::size_t(p)] == 0) set_free(p, true);
  }
}

void domain_enter() {
  rank_state* r = current_rank();
  if (r == nullptr) return;
  if (r->domain_depth++ == 0 && r->u.pe != r->pe) {
    leave(r->u.pe);
    threads::move_to(r->pe);
    arrive(r->pe);
    if (base::wall_ns() - r->domain_left_ns < min_away_ns) {
      r->domain_skip = std::min(r->domain_skip * 2 + 1, max_skip);
      r->domain_skip_left = r->domain_skip;
    } else {
      r->domain_skip = 0;
    }
  }
}

void domain_leave() {
  rank_state* r = current_rank();
  if (r == nullptr || --r->domain_depth != 0) return;
  // After MPI_Finalize the rank stays (its main returns at home).
  if (r->finalized || r->u.pe != r->pe || g_counts[std::size_t(r->pe)].homed < 2) return;
  if (r->domain_skip_left > 0) {
    --r->domain_skip_left;
    return;
  }
  const int to = claim_free(r->pe);
  if (to < 0) return;
  leave(r->pe);
  r->domain_left_ns = base::wall_ns();
  threads::move_to(to);
  arrive(to);
}

void domain_wait(rank_state& r, bool waiting) {
  if (waiting)
    leave(r.u.pe);
  else
    arrive(r.u.pe);
}

void domain_rank_ended(rank_state& r) {
  if (g_domain_node) leave(r.u.pe);
}

}  // namespace weft::mpi
