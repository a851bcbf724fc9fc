// Logical threads that behave as threads: user-level threads (fibers) that
// the node runs on its PEs, each on an OS thread that no other live logical
// thread of its *family* uses, so that its thread-local storage is its own.
// Layer `threads` (DESIGN.md, lesson 14): the OpenMP runtime runs the
// members of a team as ULTs (a team and the teams nested in it are one
// family); MPI ranks will be ULTs too.
//
// Where a ULT runs. A ULT belongs to one PE of the node. It runs as a fiber
// on that PE's own OS thread when no logical thread of its family lives
// there: no ULT of the family hosted by it, and the PE's own stack not
// acting as one of the family (an OpenMP thread 0, which claims the stack:
// claim_pe_stack). Logical threads of different families may share the
// PE's thread as fibers (objects running OpenMP regions at once share the
// PEs without threads of their own), a null family shares with none.
// Otherwise it runs on a *carrier*: an OS thread of the node bound to the
// PE's CPUs, a guest of the PE (weft::detail::enter_guest), which runs one
// ULT at a time and blocks while that ULT waits. Carriers are pooled per PE
// and numbered (slots 1, 2, ...), so a caller that places the same logical
// thread in the same slot each time gets the same OS thread (OpenMP's
// threadprivate data persists between regions that way). A ULT never
// moves on its own: code compiled for threads keeps addresses of
// thread-locals across calls, and errno is one of them. move_to() moves
// one whose caller knows where no such address is kept (an MPI rank
// between two of its calls, under a scheduling domain).
//
// Why OS threads and not one thread-local block per fiber switched with
// the thread pointer (wrfsbase / arch_prctl, AMPI's tlsglobals): the
// runtime's own per-PE state is thread-local too and would have to move to
// another mechanism; glibc keeps per-thread state (its struct pthread, the
// DTV of dynamically loaded modules' TLS, malloc's arenas, rseq) that a
// copied block shares or corrupts; the sanitizers' runtimes keep theirs in
// TLS. docs/omp.md has the measurements behind the choice. What a ULT can
// have of its own without an OS thread is the program's thread-local block
// (the executable's variables), copied in and out as it switches
// (private_tls below: MPI ranks; src/threads/program_tls.hpp).
//
// Progress. A ULT that spins waiting for another (a wavefront pipeline's
// flags) cannot be preempted by a fiber scheduler; under these rules no two
// live logical threads of a family share an OS thread, so the OS
// time-slices them as it does any threads. What remains is a ULT that has
// not started because its PE stays inside one long handler (a spinning
// ULT, a long entry method, a handler blocked on a lock): held_up() tells
// who waits for it, and it starts on a carrier instead (--weft:ult-rescue-us
// is how long it waits first). --weft:stats counts each kind of placement.
//
//   threads::ult u;                      // owned by the caller until finished
//   u.body = &run; u.finished = &done; u.arg = &state;
//   if (threads::claim(&u)) threads::start_here(&u);   // on a PE
//   ...                                  // inside run(): threads::suspend(),
//   threads::resume(&u);                 //   resumed from any thread
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include "weft/base/export.hpp"
#include "weft/threads/fiber.hpp"

namespace weft::threads {

class carrier;

struct ult {
  // --- set by the owner before the ULT starts
  void (*body)(ult* self) = nullptr;  // runs on the ULT's own stack
  // Runs on the OS thread that ran the ULT, after its body returned and its
  // stack was released; the ULT's memory is the owner's again.
  void (*finished)(ult* self) = nullptr;
  void* arg = nullptr;  // the owner's, for body and finished
  std::size_t stack_bytes = fiber::default_stack_bytes;
  // What it is, for the report of a stack overflow (fiber::set_label).
  const char* label = nullptr;
  long label_id = -1;
  // Logical threads of one family never share an OS thread; of different
  // families they may share their PE's thread. Null: shares with none.
  const void* family = nullptr;
  // The owner's per-ULT pointer, read and written only by code running on
  // the ULT (libweft-omp: the OpenMP thread it runs as now).
  void* local = nullptr;
  // The program's thread-local variables are its own, not its OS thread's
  // (fiber::give_private_tls): MPI ranks, which share their PE's thread.
  bool private_tls = false;

  // --- the layer's
  enum : int { unstarted = 0, started = 1 };
  std::atomic<int> state{unstarted};
  fiber* f = nullptr;              // while it runs or is suspended
  carrier* host = nullptr;         // null: PE `pe`'s own OS thread runs it
  int pe = -1;                     // node-local rank of the PE it belongs to
  std::uint32_t trace_name = ~0u;  // its name in the trace (user names), once traced
  int move_target = -1;            // move_to's PE while it moves
  // held_up's first reading of the PE it waits behind (see there).
  std::atomic<std::uint64_t> probe_progress{0};
  std::atomic<std::uint64_t> probe_ns{0};
  std::atomic<std::uint64_t> probe_cpu_ns{0};
  std::atomic<std::uint64_t> probe_next_ns{0};  // when to ask /proc again

  ult() = default;
  ult(const ult&) = delete;
  ult& operator=(const ult&) = delete;

  // Back to unstarted, for the next use of the same memory (the ULT has
  // finished, or never started); what the owner set stays. Not while
  // another thread may claim it.
  void reset() noexcept;
};

// Why a ULT runs where it runs (--weft:stats).
enum class placement : int {
  pe_thread,   // on its PE's own OS thread
  beyond_pes,  // a carrier slot asked for: more logical threads than PEs
  pe_taken,    // a carrier: its PE's thread had a live logical thread of its family
  rescued,     // a carrier: its PE stayed inside one handler (held_up)
};

// Takes an unstarted ULT for starting it: true for exactly one caller.
// Any thread.
WEFT_API bool claim(ult* u) noexcept;

// Starts a claimed ULT on this PE: on the PE's own OS thread if no logical
// thread of its family lives there (it runs now, until it first suspends
// or ends), else on a carrier of this PE. PE only (a handler).
WEFT_API void start_here(ult* u);

// Starts a claimed ULT on a carrier of PE `pe` (node-local rank), in carrier
// slot `slot` if that one is free (slot >= 1), else in another. Returns at
// once. Any thread of the node (a PE or a carrier).
WEFT_API void start_on_carrier(ult* u, int pe, int slot, placement why);

// Whether PE `pe`'s own OS thread has a live logical thread now, of any
// family (a hint for callers choosing where to start a ULT). Any thread.
WEFT_API bool pe_thread_taken(int pe) noexcept;

// For an unstarted ULT that is to start on PE `pe` (a message on its way
// there): true once that PE has stayed inside one handler for the rescue
// bound (--weft:ult-rescue-us) since the first call that saw it inside one,
// and has run meanwhile (its thread used a quarter of that in CPU time) or
// sleeps in the kernel now (a lock, a read): a PE that is merely not
// scheduled, on a loaded machine, is not held up, and the ULT waits for
// it, keeping its place. Whoever waits for the ULT calls it now and then
// and, on true, claims the ULT and starts it on a carrier
// (placement::rescued). Any thread.
WEFT_API bool held_up(ult* u, int pe, std::uint64_t now_ns) noexcept;

// Makes a suspended ULT run again: a message to its PE, or a wake-up of its
// carrier. May come before the ULT has finished suspending (it then
// resumes at once). Any thread of the node.
WEFT_API void resume(ult* u);

// As resume(u), but where the caller is a handler on u's own PE's thread
// (not on a ULT or a carrier): runs the suspended ULT now, until it
// suspends again or ends, and returns then -- no message to its PE and
// back (a receive completing a waiting MPI rank). Elsewhere it is resume().
WEFT_API void resume_here(ult* u);

// On a ULT: back to its host until resume(). Does not return on another
// OS thread. Off a ULT: a fatal error.
WEFT_API void suspend();

// On a ULT hosted by its PE's own thread: goes on on PE `pe`'s thread
// (node-local rank) instead; it belongs to that PE from then on (resume()
// goes there). Its copy of the program's thread-locals moves with it; its
// errno is its own anyway. Shared libraries' thread-locals and addresses of
// thread-locals it kept from before are the old thread's: the caller moves
// only where its code (and its callers') keeps none across the call -- an
// MPI rank between two MPI calls (--weft:rank-domain=node). On a carrier,
// or to its own PE: nothing. A scheduling domain's way of letting an idle
// PE run a ready ULT (Phoenix).
WEFT_API void move_to(int pe);

// On a ULT: lets other work have its OS thread or CPU for a moment, and
// comes back without a resume() (on a PE thread: after the PE's queued
// messages; on a carrier: sched_yield).
WEFT_API void yield();

// The ULT running on the calling OS thread now, or null.
WEFT_API ult* current() noexcept;

// Logical threads that live on the calling PE's own OS thread now (hosted
// ULTs, running or suspended, and PE stacks claimed by OpenMP thread 0s);
// 0 off a PE. One: the caller, if it is a ULT, is alone there, and may wait
// by serving the PE's messages itself (detail::serve_while_waiting)
// without keeping another logical thread from running.
WEFT_API int hosted_here() noexcept;

// The PE's own stack acts as a logical thread of `family` from claim to
// release (an OpenMP thread 0 met a region in a handler): no ULT of that
// family starts on this PE's thread meanwhile. Nests; release names the
// family its claim did. PE only; a no-op on a ULT or a carrier.
WEFT_API void claim_pe_stack(const void* family) noexcept;
WEFT_API void release_pe_stack(const void* family) noexcept;

// Stops and joins every carrier of the node (a ULT still suspended on one
// stays so). The layer does it as the node ends; a layer whose ULTs touch
// its own state as they finish calls it first from its own node_stop, so
// that no carrier is still at it when that state goes. Idempotent. The
// thread ending the node, after every PE stopped.
WEFT_API void stop_carriers() noexcept;

// The node-local PE the calling OS thread works for: its PE, or the PE of
// the carrier it is; -1 on other threads.
WEFT_API int current_pe() noexcept;
// Whether the calling thread is a carrier.
WEFT_API bool on_carrier() noexcept;
// --weft:ult-isolate=all on the running node (false when none runs): the
// owner then gives its logical threads no family.
WEFT_API bool isolate_all() noexcept;
// The PEs of the running node (0 when none runs). Any thread.
WEFT_API int node_pes() noexcept;
// The job-wide number of node-local PE `pe` (for weft::send). Any thread of
// the node.
WEFT_API int job_pe(int pe) noexcept;

}  // namespace weft::threads
