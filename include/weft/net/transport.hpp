// The transport interface: how core reaches other nodes (the seeds' LRTS idea,
// seed 004). A node is one process; core calls the transport only for
// messages between processes, never for messages inside one (lesson 1).
//
// Lifecycle:
//   create_transport(name)  -> choose the backend from --weft:transport
//   init(launch, hooks)     -> bootstrap: learn rank and size, reach the peers
//   send / progress / ...   -> while the node runs
//   finalize()              -> after every PE has stopped
//
// Threads. Core serialises every call (one thread at a time, not always the
// same thread: a comm thread, or whichever PE holds the progress lock), so a
// backend needs no locks of its own, like MPI_THREAD_SERIALIZED. The only
// calls that may come concurrently from any thread are wake_waiter() and
// abort().
//
// This layer sits below core, so it moves opaque buffers: core owns the
// message layout, the transport owns nothing but the bytes in flight.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "weft/base/export.hpp"
#include "weft/base/memory.hpp"

namespace weft::net {

// Where this process stands in the job, as the launcher (mpirun, srun, or
// none) told it through the environment.
struct launch_info {
  int rank = 0;          // this process in the job: its node number
  int size = 1;          // processes in the job
  int local_rank = 0;    // this process among those on its host
  int local_size = 1;    // 0: the launcher does not say (then the job may span hosts)
  std::string job_id;    // the same in every process of one job, unique per job
  std::string launcher;  // "none", "open-mpi", "pmix", "slurm" or "pmi"
};

// Reads the launcher's environment (Open MPI's OMPI_COMM_WORLD_*, PMIx's
// PMIX_RANK, Slurm's SLURM_PROCID/SLURM_NTASKS, PMI's PMI_RANK/PMI_SIZE); no
// launcher: rank 0 of 1. Inconsistent values are a clear error (exit 2).
WEFT_API launch_info launch_from_environment();

// How a transport hands work back to core. Plain function pointers: they
// run on the progress path for every message.
struct hooks {
  // A buffer for an incoming message of `bytes` (4-byte aligned: core's
  // messages travel from a field 12 bytes into their block). The transport
  // fills it and passes it to deliver, which takes ownership.
  void* (*alloc)(std::size_t bytes) = nullptr;
  void (*deliver)(int src_node, void* buffer, std::size_t bytes) = nullptr;
  // Optional. Like deliver, for a message the transport leaves where it
  // lies, in registered memory of another process mapped here (a block the
  // transport gave over with base::registered_block_adopt): core takes it
  // as a registered block, and the free returns it to the sender. Without
  // this hook such messages are copied into a buffer from alloc.
  void (*deliver_block)(int src_node, void* buffer, std::size_t bytes) = nullptr;
  // The transport no longer needs a buffer it was given by send().
  void (*release)(void* buffer) = nullptr;
  // A peer is gone (its process died, or its connection broke). Core ends
  // the job with an error naming the node; the call does not return.
  void (*node_lost)(int node, const char* why) = nullptr;
};

class WEFT_API transport {
 public:
  virtual ~transport();
  virtual const char* name() const = 0;

  // Bootstrap. Every process of the job calls it; it returns once all have
  // arrived and can reach each other. A process that does not arrive within
  // `startup_timeout_s` is named in a fatal error.
  virtual void init(const launch_info& launch, const hooks& h, double startup_timeout_s) = 0;
  virtual int node_rank() const = 0;
  virtual int num_nodes() const = 0;

  // Non-blocking: queues `bytes` at `buffer` (4-byte aligned) for `node`
  // (never this node); the transport may use the buffer until it passes it
  // to hooks.release. Messages from one node to another arrive in the order
  // they were sent.
  virtual void send(int node, void* buffer, std::size_t bytes) = 0;
  // Sends what is pending, polls, hands received messages to hooks.deliver
  // and finished send buffers to hooks.release. Never blocks on one message
  // (lesson 9). Returns how many things it did (0: nothing to do).
  virtual int progress() = 0;

  // Persistent channel to `node` for messages of at most `max_bytes`:
  // created once, then send_persistent skips allocation and the handshake
  // where the backend can (lesson 8). Backends without a cheaper path fall
  // back to send(). Handles are small integers, valid until finalize.
  virtual int create_persistent(int node, std::size_t max_bytes);
  virtual void send_persistent(int channel, void* buffer, std::size_t bytes);

  // Blocks the caller at most `timeout_ns` until something may have arrived
  // or wake_waiter() is called (for an idle comm thread). Default: returns
  // at once, and the caller backs off by itself; can_wait() says which.
  virtual void wait_for_incoming(std::uint64_t timeout_ns);
  virtual bool can_wait() const;
  // Ends a wait_for_incoming in progress (or the next one). Any thread.
  virtual void wake_waiter();
  // Whether a thread that polls this transport in a loop should pause the
  // CPU between two progress() calls (the default) or call it back to back.
  // A backend whose idle progress() is little more than a load of a line
  // another process writes wants the pause: a tighter loop takes that line
  // from its writer more often (shm: 8-byte one-way +13 ns without it). One
  // whose idle progress() does enough work of its own between two such
  // loads does not (ucx: -50 ns without it). Measured on the reference
  // machine; see docs/net.md.
  virtual bool pause_between_polls() const;

  // Memory this transport registered once for remote access, for core's
  // large message blocks (base::set_registered_memory): a message written
  // there leaves by rendezvous with no copy and no registration of its own.
  // Null (the default): the transport has none. After init; the object
  // stays usable, also after finalize, until its last block is freed.
  virtual base::registered_memory* message_memory();

  // Collective, blocking, startup and shutdown only: every node passes
  // `bytes` at `mine`, and `all` receives num_nodes() * bytes, node 0 first.
  // Messages that arrive meanwhile are delivered as by progress().
  virtual void allgather(const void* mine, std::size_t bytes, void* all) = 0;
  // All nodes reach it before any leaves; progresses while it waits.
  virtual void barrier() = 0;
  // Ends the whole job with `code` (every node) after printing `why`. Any
  // thread.
  [[noreturn]] virtual void abort(int code, const char* why) = 0;
  // Sends what is still queued (each buffer is released), then tears down.
  // Every node calls it; messages arriving meanwhile are still delivered.
  virtual void finalize() = 0;
};

// The transports this build has, e.g. "local, shm, mpi".
WEFT_API std::string available_transports();
// A transport by name; a name this build lacks is a clear error (exit 2).
WEFT_API std::unique_ptr<transport> create_transport(const std::string& name);

}  // namespace weft::net
