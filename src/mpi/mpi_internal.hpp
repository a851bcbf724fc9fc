// The mpi layer's state (docs/mpi.md, docs/design/mpi.md): the world of
// ranks of the job, where each runs (process and PE), and, for the ranks of
// this process, each a logical thread (weft::threads::ult) on a PE, its
// matching lists and requests.
//
// Ownership. A rank never moves, and runs as a fiber on its PE's own OS
// thread (every rank is a family of its own: ranks share their PE's
// thread, switching as fibers). So the rank's lists and requests are
// touched only on that thread -- by the rank's own calls and by the
// handlers of messages for it -- and need no lock. A rank that waits
// suspends; the handler that completes what it waits for resumes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include "weft/core/message.hpp"
#include "weft/mpi/mpi.h"
#include "weft/threads/ult.hpp"

namespace weft::mpi {

// Communicator contexts: a message matches a receive of its context only.
// Each communicator has two: one for the program's point-to-point messages
// and a hidden one beside it for the collectives' own, so that a
// collective never takes a message the program sent, whatever its tag.
inline constexpr int context_of(MPI_Comm comm, bool collective = false) {
  return comm * 2 + (collective ? 1 : 0);
}

struct request {
  enum kind_t : std::uint8_t { unused, send, recv };
  kind_t kind = unused;
  bool complete = false;
  bool freed = false;  // MPI_Request_free: released when it completes
  // A receive: where and what it takes.
  void* buf = nullptr;
  std::size_t capacity = 0;  // bytes
  int source = 0, tag = 0, context = 0;
  MPI_Status status{};
};

// A message that arrived before its receive was posted.
struct unexpected {
  int source, tag, context;
  message_ptr msg;  // its payload: the header, then the data
};

struct rank_state {
  int rank = 0;
  int pe = 0;  // node-local (rank_pe(rank) is the job-wide one)
  threads::ult u;
  std::vector<std::string> args;
  std::vector<char*> argv;
  // Requests by handle - 1; handles of unused ones to reuse.
  std::vector<request> requests;
  std::vector<int> unused;
  std::deque<int> posted;  // receive handles, in the order posted
  std::deque<unexpected> early;
  bool blocked = false;  // suspended in a wait; a completion resumes it
  // What it waits in (the deadlock report).
  const char* call = nullptr;
  int peer = 0, tag = 0;
  bool initialized = false, finalized = false;
  // Collectives called so far, per communicator (next_collective).
  std::unordered_map<MPI_Comm, std::uint32_t> collectives;
};

struct world_state {
  int size = 0;
  // Every process knows where every rank runs: the job-wide PE of each
  // (weft::send's PE numbers), 4 bytes a rank; the state of a rank exists
  // only in its own process (null for the others' ranks).
  std::vector<int> pes;
  std::vector<std::unique_ptr<rank_state>> ranks;
  int (*main_fn)(int, char**, char**) = nullptr;
  char** envp = nullptr;
};

world_state& world();
// The job-wide PE world rank `world_rank` runs on (weft::send's number; its
// process is weft::node_of of it): what a message to the rank is sent to,
// from any process.
inline int rank_pe(int world_rank) {
  return world().pes[std::size_t(world_rank)];
}
// The rank the calling logical thread is, or null.
rank_state* current_rank() noexcept;

// The job across processes (procs.cpp).
// Every rank of this process has returned, the first non-zero code one
// returned being `code` (0 if none): the job ends once every process has
// said so, with the first non-zero code said.
void process_finished(int code);
// At quiescence (every rank waits, nothing in flight), on PE 0 of the job:
// ends the job with the report of what each rank waits in, from every
// process.
void report_deadlock();
// MPI_Abort: ends every process of the job with `code` (1 for 0), at once.
[[noreturn]] void abort_job(int rank, MPI_Comm comm, int code);
// The rank the calling logical thread is; a fatal error naming `call` off
// a rank (a thread of the program's own, or a program not linked by
// weft-mpicc).
rank_state& self(const char* call);

// Raises an error of `call` on the calling rank (`raised`, caught by the
// entry point's guard): the message names the call, the rank and the
// problem. Only inside an entry point's guard, on the rank's own stack.
[[noreturn]] void fail(const char* call, int error_class, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Ends the job for rank `rank`'s call with an error a handler working for
// it found (MPI_ERRORS_ARE_FATAL: a handler cannot return to the rank).
[[noreturn]] void fail_on(int rank, const char* call, int error_class, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The size of `comm`; an error (MPI_ERR_COMM) naming `call` if it is not
// a communicator.
int comm_size(const char* call, MPI_Comm comm);
// The calling rank's rank in `comm`.
int comm_rank(const char* call, MPI_Comm comm);
// The sequence number of the calling rank's next collective on `comm`.
// Every member calls a communicator's collectives in the same order, so
// the n-th collective has number n at every member: collectives put it in
// their tags, so that two of them in flight at once (a non-blocking one
// and the next) never take each other's messages.
std::uint32_t next_collective(rank_state& me, MPI_Comm comm);

// An error raised by fail(): the entry point's guard hands it to the
// communicator's error handler (MPI_ERRORS_ARE_FATAL: the job ends with
// the message; MPI_ERRORS_RETURN: the call returns the class).
struct raised {
  const char* call;
  int error_class;
  char what[480];
};
// What an entry point returns for `e` under `comm`'s error handler (it
// does not return under MPI_ERRORS_ARE_FATAL).
int handle_error(MPI_Comm comm, const raised& e);

// Runs an entry point's body: MPI_SUCCESS, or the error fail() raised in
// it, as `comm`'s error handler wants it (MPI_COMM_WORLD's for calls that
// name no communicator, as the standard says). Every MPI_* function is
// written `return guard(comm, [&] { ... });`, so that fail() never
// unwinds through the program's frames.
template <class Body>
int guard(MPI_Comm comm, Body body) {
  try {
    body();
    return MPI_SUCCESS;
  } catch (const raised& e) {
    return handle_error(comm, e);
  }
}

// The calls of p2p.cpp that api.cpp's entry points share: each returns a
// request handle, or completes one.
// `collective`: a collective's own message, in the communicator's hidden
// context; its tag is not checked against the program's range.
int isend(const char* call, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm comm, bool collective = false);
int irecv(const char* call, void* buf, int count, MPI_Datatype type, int source, int tag,
          MPI_Comm comm, bool collective = false);
bool finish(const char* call, int* handle, MPI_Status* status, bool block);
bool complete(const char* call, int handle);
void wait_any(const char* call, int count, const int* handles);
void free_request(const char* call, int* handle);
// Lets the calling rank's PE run its messages and other ranks for a moment.
inline void yield_rank() {
  threads::yield();
}

// The layout of MPI_FLOAT_INT, MPI_DOUBLE_INT, ... (MPI_MAXLOC's pairs).
template <class T>
struct value_int {
  T value;
  int index;
};

// Bytes of one element of a predefined datatype; a fatal error naming
// `call` for any other handle.
std::size_t type_bytes(const char* call, MPI_Datatype type);

// Suspends the calling rank until `done()` (a completion resumes it).
template <class Done>
void wait_until(rank_state& r, const char* call, int peer, int tag, Done done) {
  while (!done()) {
    r.call = call;
    r.peer = peer;
    r.tag = tag;
    r.blocked = true;
    threads::suspend();
  }
  r.call = nullptr;
}

// Wakes `r` if it waits (on its PE). From a handler the rank runs at once,
// inside it, until it waits again: a resume message to its own PE cost a
// second message per receive (ping-pong at 8 B: 1.55x Open MPI's time).
inline void wake(rank_state& r) {
  if (r.blocked) {
    r.blocked = false;
    threads::resume_here(&r.u);
  }
}

}  // namespace weft::mpi
