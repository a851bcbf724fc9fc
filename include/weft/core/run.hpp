// Running a node: weft::run, weft::exit, quiescence, timers and conditions,
// the node's configuration. Where a PE is: weft/core/pe.hpp; sending:
// weft/core/send.hpp.
//
// Contexts. "PE" means a worker thread of the node running its scheduler;
// handlers, main_fn, timers and conditions all run on PEs. Nothing here
// switches a user-level thread. Functions marked "any thread" may also be
// called from threads the program made itself.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <type_traits>
#include "weft/base/export.hpp"
#include "weft/core/config.hpp"

namespace weft {

// What main_fn receives: the program's arguments, weft's removed.
struct args {
  int argc;
  char** argv;
};

// Starts a node: parses the --weft: options (removing them from argv), meets
// the job's other processes if a launcher started several (see
// --weft:transport), starts one PE per configured thread (the calling thread
// becomes the node's first PE), runs main_fn on PE 0 of the job, and returns the exit code once
// some PE calls weft::exit(code). main_fn may return before that; the node keeps running its
// messages. Blocks the calling thread. May be called again after it returns (one node at a time per
// process).
WEFT_API int run(int& argc, char**& argv, std::function<void(args)> main_fn);
// As above, with a configuration already parsed (parse_options).
WEFT_API int run(const runtime_config& config, int argc, char** argv,
                 std::function<void(args)> main_fn);

// Ends the job: every PE of every node stops after its current handler and
// weft::run returns `code` in every process. Any thread; does not block; the
// first call's code wins (per node, if two nodes call it at once).
WEFT_API void exit(int code = 0);

namespace detail {
// Ends the job now with `code` in every process, whatever its PEs are
// doing: weft::exit waits for each PE's current handler, which a PE that
// runs a logical thread that never waits (an MPI rank computing) does not
// end. The transport prints `why` as a fatal error and ends the other
// processes (its abort); in one process it just exits. For MPI_Abort. Any
// thread; off a running node, it prints `why` and exits.
[[noreturn]] WEFT_API void abort_job(int code, const char* why);
}  // namespace detail

// When no message is in flight or being handled anywhere and every PE is
// idle, calls `fn` once on PE 0 (quiescence detection). Timers pending count
// as work; conditions (poll_while) do not. PE.
WEFT_API void on_quiescence(std::function<void()> fn);
// Adds lines to --weft:timeout's dump: after the PEs' states, `dump(fd)`
// writes what a layer knows of the hang to `fd` (the MPI layer: each rank
// and what it waits in). It runs on the watchdog's thread while the PEs
// may still run, so it reads only what is safe to read racily (atomics)
// and writes with write(2). Any thread of the node; for the node's life.
WEFT_API void on_timeout_dump(void (*dump)(int fd));
// Shorthand: weft::exit(code) at quiescence. PE.
WEFT_API void exit_at_quiescence(int code = 0);

// --- timers and conditions (PE) -----------------------------------------------
// Runs `fn` on this PE once `delay` has passed (no earlier; later by at most
// a scheduler turn or a wake-up).
WEFT_API void after(std::chrono::nanoseconds delay, std::function<void()> fn);
// Runs `fn` each scheduler turn on this PE while it returns true (for polling
// external conditions; a PE with conditions does not sleep longer than 1 ms).
WEFT_API void poll_while(std::function<bool()> fn);

// The node's effective configuration. PE or the thread inside weft::run.
WEFT_API const runtime_config& config();

}  // namespace weft
