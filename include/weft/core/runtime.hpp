// Starting a node, sending messages, and the PE-local API.
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
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"

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

// When no message is in flight or being handled anywhere and every PE is
// idle, calls `fn` once on PE 0 (quiescence detection). Timers pending count
// as work; conditions (poll_while) do not. PE.
WEFT_API void on_quiescence(std::function<void()> fn);
// Shorthand: weft::exit(code) at quiescence. PE.
WEFT_API void exit_at_quiescence(int code = 0);

// --- where am I --------------------------------------------------------------
// O(1), touch only thread-local state.
namespace detail {
struct pe_local {
  int pe = -1;      // in the job
  int num_pes = 0;  // in the job
  int node = 0;
  int num_nodes = 1;
  int rank = -1;      // in the node
  int node_size = 0;  // PEs per node (every node has as many)
};
// Constant-initialised, so reading it is one thread-pointer-relative load
// (no call, no initialisation guard): my_pe() is on every send path.
WEFT_API extern constinit thread_local pe_local t_pe_local;
inline pe_local& this_pe_local() noexcept {
  return t_pe_local;
}
// True on PE 0 while main_fn runs (its setup, before it first returns).
WEFT_API bool in_main_setup() noexcept;
}  // namespace detail

// PEs are numbered across the job: node n has PEs n*node_size() ..
// (n+1)*node_size()-1. In a one-process run the job is the node.
inline int my_pe() noexcept {
  return detail::this_pe_local().pe;
}  // -1 off a PE
inline int num_pes() noexcept {
  return detail::this_pe_local().num_pes;
}  // in the job
inline int my_node() noexcept {
  return detail::this_pe_local().node;
}
inline int num_nodes() noexcept {
  return detail::this_pe_local().num_nodes;
}
inline int my_rank() noexcept {
  return detail::this_pe_local().rank;
}  // this PE within its node (-1 off a PE)
inline int node_size() noexcept {
  return detail::this_pe_local().node_size;
}  // PEs per node
// The node of PE `pe` of the job (PE; 0 off a PE, where node_size() is 0).
inline int node_of(int pe) noexcept {
  const int per = detail::this_pe_local().node_size;
  return per > 0 ? pe / per : 0;
}

// --- sending -----------------------------------------------------------------
// Delivers `m` to PE `pe` of the job. On this node: pushes the pointer on
// that PE's queue and wakes it if it sleeps; never copies, never calls the
// transport. On another node: the transport carries it (in order with the
// caller's other messages to that node). Any thread. A bad PE or an
// unregistered handler is a fatal error.
WEFT_API void send(int pe, message_ptr m);
namespace detail {
// weft::send of a message already released from its message_ptr: the layers
// above core send through it on every message, without the by-value
// message_ptr's moves and the null test after the call.
WEFT_API void send_released(int pe, message* m);
}  // namespace detail
// Delivers `m` to whichever PE of this node takes it first. Any thread.
WEFT_API void send_node(message_ptr m);
// The same on node `node` of the job. Any thread.
WEFT_API void send_to_node(int node, message_ptr m);
// Delivers a copy of `m` to every PE of the job (the caller's too), through
// a spanning tree rooted at the calling PE: the nodes form a tree of fan-out
// `broadcast_fanout` first, then inside each node each PE forwards to at
// most `broadcast_fanout` children before handling its own copy. Any
// thread.
WEFT_API void broadcast(message_ptr m);
inline constexpr int broadcast_fanout = 4;

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
