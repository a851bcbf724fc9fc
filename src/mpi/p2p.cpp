// Point-to-point: matching, sends, receives and their requests.
//
// A send is one weft message to the destination rank's PE carrying the
// data (eager: this increment has no rendezvous yet), so the send request
// is complete once the message is made. Its handler, on the destination's
// PE, matches the message against the rank's posted receives in the order
// they were posted -- context, then source and tag, each possibly a
// wildcard -- and copies the data into the first that matches, or keeps the
// message in the rank's unexpected list, in arrival order, for a later
// receive. Non-overtaking: all of a rank's sends leave from its PE and weft
// delivers the messages of one PE to another in order -- across processes
// too, as every transport keeps the order per pair of processes -- so two
// messages of one sender that a receive could both match are matched in
// the order sent (tests/mpi/p2p.c and procs.c check it across PEs and
// processes). A rank of another process is one weft::send away, as one of
// this process is: rank_pe names its PE, wherever it is.
#include <algorithm>
#include <cstring>
#include "mpi/mpi_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/send.hpp"

namespace weft::mpi {

namespace {

struct header {
  int context, source, dest, tag;
  std::uint64_t bytes;
};

handler_id h_message = 0;

bool matches(const request& q, int source, int tag, int context) {
  return q.context == context && (q.source == MPI_ANY_SOURCE || q.source == source) &&
         (q.tag == MPI_ANY_TAG || q.tag == tag);
}

request& at(rank_state& r, int handle) {
  return r.requests[std::size_t(handle - 1)];
}

int new_request(rank_state& r, request::kind_t kind) {
  int handle;
  if (!r.unused.empty()) {
    handle = r.unused.back();
    r.unused.pop_back();
  } else {
    r.requests.emplace_back();
    handle = int(r.requests.size());
  }
  request& q = at(r, handle);
  q = request{};
  q.kind = kind;
  return handle;
}

void release(rank_state& r, int handle) {
  at(r, handle).kind = request::unused;
  r.unused.push_back(handle);
}

// Copies a message's data into receive `q` of rank `h.dest` and completes it.
void deliver(const char* call, request& q, const header& h, const unsigned char* data) {
  if (h.bytes > q.capacity)
    fail_on(h.dest, call, MPI_ERR_TRUNCATE,
            "a message of %llu bytes from rank %d, tag %d, is longer than the receive's %zu",
            static_cast<unsigned long long>(h.bytes), h.source, h.tag, q.capacity);
  if (h.bytes != 0) std::memcpy(q.buf, data, h.bytes);
  q.status.MPI_SOURCE = h.source;
  q.status.MPI_TAG = h.tag;
  q.status.MPI_ERROR = MPI_SUCCESS;
  q.status.weft_bytes = static_cast<long long>(h.bytes);
  q.complete = true;
}

void on_message(message_ptr m) {
  header h;
  std::memcpy(&h, m->data(), sizeof h);
  rank_state* here = world().ranks[std::size_t(h.dest)].get();
  if (here == nullptr) [[unlikely]]
    base::fatal(
        "a message for MPI rank %d reached process %d, which does not run it: the processes "
        "disagree about the world (give every process the same --weft:vp, --weft:rank-map and "
        "--weft:threads)",
        h.dest, weft::my_node());
  rank_state& r = *here;
  for (auto it = r.posted.begin(); it != r.posted.end(); ++it) {
    request& q = at(r, *it);
    if (!matches(q, h.source, h.tag, h.context)) continue;
    r.posted.erase(it);
    deliver("MPI_Recv", q, h, reinterpret_cast<const unsigned char*>(m->data()) + sizeof h);
    if (q.freed) release(r, int(&q - r.requests.data()) + 1);
    wake(r);
    return;
  }
  r.early.push_back(unexpected{h.source, h.tag, h.context, std::move(m)});
}

const bool registered = [] {
  h_message = register_handler("mpi.message", &on_message);
  return true;
}();

// The world rank of `rank` in `comm` (rank checked against its size).
int world_rank(const char* call, rank_state& me, MPI_Comm comm, int rank, bool any_ok) {
  const int size = comm_size(call, comm);
  if (rank == MPI_PROC_NULL || (any_ok && rank == MPI_ANY_SOURCE)) return rank;
  if (rank < 0 || rank >= size)
    fail(call, MPI_ERR_RANK, "rank %d is not in the communicator (size %d)", rank, size);
  return comm == MPI_COMM_SELF ? me.rank : rank;
}

void check_count(const char* call, int count) {
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
}

void check_tag(const char* call, int tag, bool any_ok) {
  if ((tag < 0 || tag > MPI_TAG_UB_VALUE) && !(any_ok && tag == MPI_ANY_TAG))
    fail(call, MPI_ERR_TAG, "tag %d is not in 0..%d%s", tag, MPI_TAG_UB_VALUE,
         any_ok ? " (or MPI_ANY_TAG)" : "");
}

void fill(MPI_Status* status, const request& q) {
  if (status != MPI_STATUS_IGNORE) *status = q.status;
}

void proc_null_status(request& q) {
  q.status.MPI_SOURCE = MPI_PROC_NULL;
  q.status.MPI_TAG = MPI_ANY_TAG;
  q.status.MPI_ERROR = MPI_SUCCESS;
  q.status.weft_bytes = 0;
  q.complete = true;
}

}  // namespace

int comm_size(const char* call, MPI_Comm comm) {
  if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF)
    fail(call, MPI_ERR_COMM,
         "communicator %d is not MPI_COMM_WORLD or MPI_COMM_SELF (others are not implemented "
         "yet: docs/mpi.md)",
         comm);
  return comm == MPI_COMM_WORLD ? world().size : 1;
}

int comm_rank(const char* call, MPI_Comm comm) {
  rank_state& me = self(call);
  comm_size(call, comm);
  return comm == MPI_COMM_WORLD ? me.rank : 0;
}

std::uint32_t next_collective(rank_state& me, MPI_Comm comm) {
  return me.collectives[comm]++;
}

int isend(const char* call, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm comm, bool collective) {
  rank_state& me = self(call);
  check_count(call, count);
  if (!collective) check_tag(call, tag, false);
  const int to = world_rank(call, me, comm, dest, false);
  const std::size_t bytes = std::size_t(count) * type_bytes(call, type);
  const int handle = new_request(me, request::send);
  request& q = at(me, handle);
  q.complete = true;
  if (to == MPI_PROC_NULL) return handle;
  if (bytes != 0 && buf == nullptr) fail(call, MPI_ERR_BUFFER, "a null buffer of %zu bytes", bytes);
  message_ptr m = make_message(h_message, sizeof(header) + bytes);
  const header h{context_of(comm, collective), comm == MPI_COMM_SELF ? 0 : me.rank, to, tag, bytes};
  std::memcpy(m->data(), &h, sizeof h);
  if (bytes != 0) std::memcpy(reinterpret_cast<unsigned char*>(m->data()) + sizeof h, buf, bytes);
  weft::send(rank_pe(to), std::move(m));
  return handle;
}

int irecv(const char* call, void* buf, int count, MPI_Datatype type, int source, int tag,
          MPI_Comm comm, bool collective) {
  rank_state& me = self(call);
  check_count(call, count);
  if (!collective) check_tag(call, tag, true);
  const int from = world_rank(call, me, comm, source, true);
  const int handle = new_request(me, request::recv);
  request& q = at(me, handle);
  if (from == MPI_PROC_NULL) {
    proc_null_status(q);
    return handle;
  }
  q.buf = buf;
  q.capacity = std::size_t(count) * type_bytes(call, type);
  // In MPI_COMM_SELF the only source is rank 0 (the caller itself).
  q.source = comm == MPI_COMM_SELF && from != MPI_ANY_SOURCE ? 0 : from;
  q.tag = tag;
  q.context = context_of(comm, collective);
  if (q.capacity != 0 && buf == nullptr)
    fail(call, MPI_ERR_BUFFER, "a null buffer of %zu bytes", q.capacity);
  for (auto it = me.early.begin(); it != me.early.end(); ++it) {
    if (!matches(q, it->source, it->tag, it->context)) continue;
    header h;
    std::memcpy(&h, it->msg->data(), sizeof h);
    deliver(call, q, h, reinterpret_cast<const unsigned char*>(it->msg->data()) + sizeof h);
    me.early.erase(it);
    return handle;
  }
  me.posted.push_back(handle);
  return handle;
}

// Completes request *handle (waiting when `block`), fills `status` and
// frees it (*handle = MPI_REQUEST_NULL). False: not complete (only
// without `block`).
bool finish(const char* call, int* handle, MPI_Status* status, bool block) {
  rank_state& me = self(call);
  if (*handle == MPI_REQUEST_NULL) {
    if (status != MPI_STATUS_IGNORE) {
      *status = MPI_Status{};
      status->MPI_SOURCE = MPI_ANY_SOURCE;
      status->MPI_TAG = MPI_ANY_TAG;
    }
    return true;
  }
  if (*handle < 0 || std::size_t(*handle) > me.requests.size() ||
      at(me, *handle).kind == request::unused || at(me, *handle).freed)
    fail(call, MPI_ERR_REQUEST, "request %d is not an active request of this rank", *handle);
  const int h = *handle;
  if (!at(me, h).complete && !block) {
    // A rank that polls (MPI_Test in a loop) lets its PE run its messages
    // and the other ranks between polls, or it would starve them.
    threads::yield();
    if (!at(me, h).complete) return false;
  }
  if (!at(me, h).complete) {
    const request& q = at(me, h);
    wait_until(me, call, q.source, q.tag, [&] { return at(me, h).complete; });
  }
  fill(status, at(me, h));
  release(me, h);
  *handle = MPI_REQUEST_NULL;
  return true;
}

bool complete(const char* call, int handle) {
  rank_state& me = self(call);
  return handle == MPI_REQUEST_NULL || at(me, handle).complete;
}

// Waits for any of `handles` (at least one active) to complete.
void wait_any(const char* call, int count, const int* handles) {
  rank_state& me = self(call);
  int peer = MPI_ANY_SOURCE, tag = MPI_ANY_TAG, active = 0;
  for (int i = 0; i < count; ++i)
    if (handles[i] != MPI_REQUEST_NULL) {
      if (handles[i] < 0 || std::size_t(handles[i]) > me.requests.size() ||
          at(me, handles[i]).kind == request::unused)
        fail(call, MPI_ERR_REQUEST, "request %d (index %d) is not an active request", handles[i],
             i);
      if (active++ == 0) {
        peer = at(me, handles[i]).source;
        tag = at(me, handles[i]).tag;
      }
    }
  if (active != 1) peer = -3;  // several: no one peer to name
  wait_until(me, call, peer, tag, [&] {
    for (int i = 0; i < count; ++i)
      if (handles[i] != MPI_REQUEST_NULL && at(me, handles[i]).complete) return true;
    return active == 0;
  });
}

void free_request(const char* call, int* handle) {
  rank_state& me = self(call);
  if (*handle == MPI_REQUEST_NULL) fail(call, MPI_ERR_REQUEST, "MPI_REQUEST_NULL");
  if (*handle < 0 || std::size_t(*handle) > me.requests.size() ||
      at(me, *handle).kind == request::unused)
    fail(call, MPI_ERR_REQUEST, "request %d is not an active request of this rank", *handle);
  request& q = at(me, *handle);
  if (q.complete)
    release(me, *handle);
  else
    q.freed = true;
  *handle = MPI_REQUEST_NULL;
}

}  // namespace weft::mpi
