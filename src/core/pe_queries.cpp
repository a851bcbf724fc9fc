// What other layers ask about a PE from outside its loop (handler.hpp):
// whether carriers are its guests, how far it got, the CPU time its thread
// used, whether that thread sleeps in the kernel, its CPU, how many PEs are
// idle and how long this one was busy; and the wake-up of idle PEs. Any
// thread; each answers from the PE's atomics, or with a system call or two
// for the slow paths (a rescue of a held-up logical thread, the watchdog),
// never by stopping the PE.
//
// Apart from scheduler.cpp because none of it is the loop: these read what
// the loop publishes (pe_state's relaxed atomics) and need none of its
// inline helpers.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include "core/node.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/timer.hpp"

namespace weft::detail {

void add_pe_guests(int rank, int delta) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || rank < 0 || rank >= int(node->pes.size())) return;
  node->pes[std::size_t(rank)]->guests.fetch_add(delta, std::memory_order_relaxed);
}

bool pe_has_guests(int rank) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || rank < 0 || rank >= int(node->pes.size())) return false;
  return node->pes[std::size_t(rank)]->guests.load(std::memory_order_relaxed) != 0;
}

std::uint64_t pe_progress(int rank) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || rank < 0 || rank >= int(node->pes.size())) return 0;
  const core::pe_state& pe = *node->pes[std::size_t(rank)];
  const bool inside = pe.current_handler.load(std::memory_order_relaxed) != -1;
  return pe.processed.load(std::memory_order_relaxed) * 2 + (inside ? 1 : 0);
}

std::uint64_t pe_cpu_time_ns(int rank) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || rank < 0 || rank >= int(node->pes.size())) return 0;
  // The clock id was taken by the PE itself as it started: reading it
  // needs no handle of a thread that may have ended meanwhile (the clock of
  // an ended thread reads as an error, 0 here).
  const int clock = node->pes[std::size_t(rank)]->cpu_clock.load(std::memory_order_relaxed);
  timespec ts{};
  if (clock == -1 || clock_gettime(clockid_t(clock), &ts) != 0) return 0;
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

bool pe_blocked(int rank) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || rank < 0 || rank >= int(node->pes.size())) return false;
  const int tid = node->pes[std::size_t(rank)]->tid.load(std::memory_order_relaxed);
  if (tid < 0) return false;
  // Read here, not through base/os: a slow path's glance at one /proc file,
  // where any failure (the thread ended meanwhile) means "not known blocked".
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "tid (comm) S ...": the state follows the last ')' (comm may hold any).
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ') return false;
  return close[2] == 'S' || close[2] == 'D';
}

int pe_cpu(int rank) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || rank < 0 || rank >= int(node->cfg.pe_cpus.size())) return -1;
  return node->cfg.pe_cpus[std::size_t(rank)];
}

// The idle count, busy time and wake-up calls of handler.hpp: reads of what
// the loop publishes, and the producer half of the wake-up protocol.
int idle_pes() noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  return node != nullptr ? node->idle_pes.load(std::memory_order_relaxed) : 0;
}

std::uint64_t pe_busy_cycles() noexcept {
  // Not idle: what the idle loop did not count since the PE started. Two
  // clock reads per idle period instead of two per handler, which load
  // balancing could not afford on every message.
  const core::pe_state* pe = core::t_pe;
  if (pe == nullptr || pe->start_cycles == 0) return 0;
  return base::cycles() - pe->start_cycles - pe->idle_cycles;
}

void wake_idle_pes_fenced(int n) noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node == nullptr || n <= 0) return;
  if (node->sleepers.load(std::memory_order_seq_cst) == 0) return;
  core::wake_sleepers(*node, core::t_pe, n);
}

void wake_idle_pes(int n) noexcept {
  // Orders the caller's publication of its tasks before the read of the
  // sleep words (the producer half of the wake-up protocol).
  base::full_fence();
  wake_idle_pes_fenced(n);
}

}  // namespace weft::detail
