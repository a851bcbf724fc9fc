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
  // A send's mode (a persistent send starts in it).
  enum mode_t : std::uint8_t { standard, synchronous, buffered, ready };
  kind_t kind = unused;
  bool complete = false;
  bool freed = false;  // MPI_Request_free: released when it completes
  // Persistent (MPI_Send_init, MPI_Recv_init, ...): each MPI_Start starts
  // an operation of its own, `inner`; completing it leaves this one
  // inactive, not freed (requests.cpp).
  bool persistent = false;
  bool active = false;
  mode_t mode = standard;
  int inner = 0;
  // A receive: where and what it takes (a send: its peer and tag, for the
  // deadlock report; a persistent one: its arguments).
  void* buf = nullptr;
  std::size_t capacity = 0;  // bytes
  int source = 0, tag = 0, context = 0;
  int dest = 0;  // a send: the world rank it goes to (MPI_Cancel asks there)
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  // A truncated receive (status.MPI_ERROR MPI_ERR_TRUNCATE): the length of
  // the message, of which the receive took what fitted.
  std::uint64_t sent_bytes = 0;
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
  // Collectives called so far, per communicator (next_collective).
  std::unordered_map<MPI_Comm, std::uint32_t> collectives;
  // Point-to-point extras (probe.cpp, modes.cpp). In MPI_Probe or
  // MPI_Mprobe: a message that goes to `early` wakes the rank.
  bool probing = false;
  // The messages MPI_Mprobe took, by MPI_Message handle - 1 (null: free).
  std::vector<message_ptr> matched;
  // MPI_Buffer_attach's buffer (MPI_Bsend's space).
  void* bsend_buffer = nullptr;
  int bsend_size = 0;
  bool bsend_attached = false;
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
// `synchronous`: MPI_Issend's: the request completes when the receiver has
// matched the message (an acknowledgement from its PE).
int isend(const char* call, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm comm, bool collective = false, bool synchronous = false);
int irecv(const char* call, void* buf, int count, MPI_Datatype type, int source, int tag,
          MPI_Comm comm, bool collective = false);
// Completes *handle (waiting when `block`); false: not complete (only
// without `block`). A request that failed (a truncated receive) raises its
// error with fail() once completed and freed.
bool finish(const char* call, int* handle, MPI_Status* status, bool block);
// As finish, but a failed request's error is left in st.MPI_ERROR (and a
// truncated message's length in `sent`) for the caller to report: the
// forms that complete several (MPI_ERR_IN_STATUS).
bool settle(const char* call, int* handle, MPI_Status& st, std::uint64_t& sent, bool block);
// Raises the error of a request settle() completed (`st`, `sent`), or
// writes what it is into out[size].
[[noreturn]] void raise_status(const char* call, const MPI_Status& st, std::uint64_t sent);
void describe(const MPI_Status& st, std::uint64_t sent, char* out, std::size_t size);
// Null, an inactive persistent request, or complete: what MPI_Testall
// waits for.
bool complete(const char* call, int handle);
// Active (not null nor an inactive persistent request) and complete: what
// the forms that complete any or some take.
bool ready(const char* call, int handle);
// Active: neither null nor an inactive persistent request.
bool active(const char* call, int handle);
void wait_any(const char* call, int count, const int* handles);
// Completes all of `handles` (MPI_Waitall; MPI_Testall once all are
// complete): a request that failed leaves its error in its status and
// raises MPI_ERR_IN_STATUS once all are done (requests.cpp).
void settle_all(const char* call, int count, int* handles, MPI_Status* statuses);
void free_request(const char* call, int* handle);
// An empty status (a null or inactive request's, MPI_PROC_NULL's without
// its source).
void empty_status(MPI_Status& st);

// The rank's request pool (inline: every send and receive takes one).
inline request& at(rank_state& r, int handle) {
  return r.requests[std::size_t(handle - 1)];
}
inline int new_request(rank_state& r, request::kind_t kind) {
  int handle;
  if (!r.unused.empty()) {
    handle = r.unused.back();
    r.unused.pop_back();
  } else {
    r.requests.emplace_back();
    handle = int(r.requests.size());
  }
  // Reset: what any request reads before the call that takes it sets it
  // (isend, irecv, the persistent inits, MPI_Imrecv set the rest they
  // read). Not `q = request{}`: 96 bytes compile to `rep stos`, whose
  // start-up cost showed in the 8-byte ping-pong.
  request& q = at(r, handle);
  q.kind = kind;
  q.complete = q.freed = q.persistent = q.active = false;
  q.status = MPI_Status{};
  return handle;
}
inline void release(rank_state& r, int handle) {
  at(r, handle).kind = request::unused;
  r.unused.push_back(handle);
}
// Raises MPI_ERR_REQUEST: `handle` is not a request of the rank in use.
[[noreturn]] void bad_request(const char* call, int handle);
// Request `handle` of the calling rank, in use (not free, nor freed).
inline request& check_request(const char* call, rank_state& me, int handle) {
  if (handle <= 0 || std::size_t(handle) > me.requests.size() ||
      at(me, handle).kind == request::unused || at(me, handle).freed)
    bad_request(call, handle);
  return at(me, handle);
}

// The header of a point-to-point message; its data follows.
struct header {
  int context, source, dest, tag;
  std::uint64_t bytes;
  // A synchronous send: the world rank and request handle to acknowledge
  // when a receive matches it (0: none).
  int ack_rank, ack_handle;
};
// Completes receive `q` with the message (`h`, then its data): copies what
// fits; a longer message leaves MPI_ERR_TRUNCATE in its status. Answers a
// synchronous send's acknowledgement.
void deliver(request& q, const header& h, const unsigned char* data);
// Sends the acknowledgement a synchronous send waits for, if `h` asks one.
void acknowledge(const header& h);
// A send in `mode` (modes.cpp): MPI_Bsend's check of the attached buffer,
// MPI_Ssend's acknowledgement; its request handle.
int isend_mode(const char* call, request::mode_t mode, const void* buf, int count,
               MPI_Datatype type, int dest, int tag, MPI_Comm comm);
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
