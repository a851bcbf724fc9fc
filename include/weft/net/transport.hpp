// The transport interface: how core reaches other nodes (the seeds' LRTS idea,
// seed 004). Core calls it only for inter-node messages; intra-node messages
// never touch it (lesson 1).
//
// Lifecycle (one thread, the node's main thread, unless noted):
//   create_transport(name)  -> choose the backend from --weft:transport
//   init(deliver)           -> bootstrap: learn rank and size
//   send / progress         -> while the node runs; from the thread(s) the
//                              comm mode names (for "local": never needed)
//   finalize()              -> after every PE has stopped
// This layer sits below core, so it moves opaque buffers; core owns message
// layout. The backends for several processes (shm, mpi, ucx) arrive with the
// net capability; this build has "local" (one node, no network).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include "weft/base/export.hpp"

namespace weft::net {

// Called by progress() for each received buffer; the callee takes ownership.
using deliver_fn = std::function<void(void* buffer, std::size_t bytes)>;

class WEFT_API transport {
 public:
  virtual ~transport();
  virtual const char* name() const = 0;
  virtual void init(deliver_fn deliver) = 0;
  virtual int node_rank() const = 0;
  virtual int num_nodes() const = 0;
  // Non-blocking: queues `buffer` for `node`; the transport owns it until
  // sent. Thread: per the comm mode.
  virtual void send(int node, void* buffer, std::size_t bytes) = 0;
  // Makes progress on sends and receives; never blocks.
  virtual void progress() = 0;
  // All nodes reach it before any leaves. Main thread.
  virtual void barrier() = 0;
  // Ends the whole job with `code` (every node). Any thread.
  [[noreturn]] virtual void abort(int code) = 0;
  virtual void finalize() = 0;
};

// The transports this build has, e.g. "local".
WEFT_API std::string available_transports();
// A transport by name; a name this build lacks is a clear error (exit 2).
WEFT_API std::unique_ptr<transport> create_transport(const std::string& name);

}  // namespace weft::net
