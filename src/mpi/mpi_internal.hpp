// The mpi layer's state (docs/mpi.md, docs/design/mpi.md): the world of
// ranks of this process, each a logical thread (weft::threads::ult) on a
// PE, and each rank's matching lists and requests.
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
#include <vector>
#include "weft/core/message.hpp"
#include "weft/mpi/mpi.h"
#include "weft/threads/ult.hpp"

namespace weft::mpi {

// Communicator contexts: a message matches a receive of its context only.
// MPI_COMM_WORLD and MPI_COMM_SELF have their own (the collectives of a
// later increment get a hidden one beside each).
inline constexpr int context_of(MPI_Comm comm) {
  return comm;
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
  int pe = 0;  // node-local
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
};

struct world_state {
  int size = 0;
  std::vector<std::unique_ptr<rank_state>> ranks;
  int (*main_fn)(int, char**, char**) = nullptr;
  char** envp = nullptr;
};

world_state& world();
// The rank the calling logical thread is, or null.
rank_state* current_rank() noexcept;
// The rank the calling logical thread is; a fatal error naming `call` off
// a rank (a thread of the program's own, or a program not linked by
// weft-mpicc).
rank_state& self(const char* call);

// Reports an error of `call` by the calling rank as MPI_ERRORS_ARE_FATAL
// does: the message names the call, the rank and the problem; the job
// exits non-zero.
[[noreturn]] void fail(const char* call, int error_class, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
// The same for rank `rank`'s call, found by a handler working for it.
[[noreturn]] void fail_on(int rank, const char* call, int error_class, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The size of `comm` (MPI_COMM_WORLD or MPI_COMM_SELF); a fatal error
// naming `call` for any other communicator.
int comm_size(const char* call, MPI_Comm comm);

// The calls of p2p.cpp that api.cpp's entry points share: each returns a
// request handle, or completes one.
int isend(const char* call, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm comm);
int irecv(const char* call, void* buf, int count, MPI_Datatype type, int source, int tag,
          MPI_Comm comm);
bool finish(const char* call, int* handle, MPI_Status* status, bool block);
bool complete(const char* call, int handle);
void wait_any(const char* call, int count, const int* handles);
void free_request(const char* call, int* handle);
// Lets the calling rank's PE run its messages and other ranks for a moment.
inline void yield_rank() {
  threads::yield();
}

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
