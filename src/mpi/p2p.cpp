// Point-to-point: matching, sends, receives and their requests.
//
// A send is one weft message to the destination rank's PE carrying the
// data (eager), so the send request is complete once the message is made;
// from lend_bytes to a rank of this process it carries the buffer's
// address instead, and the send completes when the receive that matched
// it has copied from there (a rendezvous: one copy, not two). Its handler, on the destination's
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
//
// A synchronous send's message names its request; whatever matches it (a
// receive, MPI_Mprobe) sends an acknowledgement back to the sender's PE,
// which completes the request. A receive the message is too long for takes
// what fits and completes with MPI_ERR_TRUNCATE in its status: the handler
// cannot raise an error on the rank, so the rank's wait or test does.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include "mpi/mpi_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/send.hpp"

namespace weft::mpi {

namespace {

handler_id h_message = 0;
handler_id h_ack = 0;

// What a synchronous send's acknowledgement carries.
struct ack {
  int rank, handle;
};

bool matches(const request& q, int source, int tag, std::int64_t context) {
  return q.context == context && (q.source == MPI_ANY_SOURCE || q.source == source) &&
         (q.tag == MPI_ANY_TAG || q.tag == tag);
}

}  // namespace

void bad_request(const char* call, int handle) {
  fail(call, MPI_ERR_REQUEST, "request %d is not an active request of this rank", handle);
}

void acknowledge(const header& h) {
  if (h.ack_handle == 0) return;
  message_ptr m = make_message(h_ack, sizeof(ack));
  const ack a{h.ack_rank, h.ack_handle};
  std::memcpy(m->data(), &a, sizeof a);
  weft::send(rank_pe(h.ack_rank), std::move(m));
}

namespace {

// deliver(), inlined where messages are matched.
inline void deliver_here(request& q, const header& h, const unsigned char* data) {
  if (h.lent != 0) std::memcpy(&data, data, sizeof data);  // the sender's buffer
  std::uint64_t bytes = h.bytes;
  q.status.MPI_ERROR = MPI_SUCCESS;
  if (bytes > q.capacity) {
    q.sent_bytes = bytes;
    bytes = q.capacity;
    q.status.MPI_ERROR = MPI_ERR_TRUNCATE;
  }
  if (q.map != nullptr) {
    unpack_map(q.map, q.count, data, bytes, q.buf);
    release(q.map);
    q.map = nullptr;
  } else if (bytes != 0) {
    std::memcpy(q.buf, data, bytes);
  }
  q.status.MPI_SOURCE = h.source;
  q.status.MPI_TAG = h.tag;
  q.status.weft_bytes = static_cast<long long>(bytes);
  q.complete = true;
  acknowledge(h);
}

}  // namespace

void deliver(request& q, const header& h, const unsigned char* data) {
  deliver_here(q, h, data);
}

namespace {

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
    // Most often the oldest receive matches: pop_front, not the general
    // erase (a hundred instructions a message in the ping-pong).
    if (it == r.posted.begin())
      r.posted.pop_front();
    else
      r.posted.erase(it);
    deliver_here(q, h, reinterpret_cast<const unsigned char*>(m->data()) + sizeof h);
    if (q.freed) release(r, int(&q - r.requests.data()) + 1);
    wake(r);
    return;
  }
  r.early.push_back(unexpected{h.source, h.tag, h.context, std::move(m)});
  if (r.probing) wake(r);
}

// A synchronous send's receive matched: its request completes.
void on_ack(message_ptr m) {
  ack a;
  std::memcpy(&a, m->data(), sizeof a);
  rank_state& r = *world().ranks[std::size_t(a.rank)];
  request& q = at(r, a.handle);
  q.complete = true;
  if (q.freed) release(r, a.handle);
  wake(r);
}

const bool registered = [] {
  h_message = register_handler("mpi.message", &on_message);
  h_ack = register_handler("mpi.ack", &on_ack);
  return true;
}();

// The world rank of `rank` in communicator `c` (checked against its size):
// of its remote group for an intercommunicator.
int world_rank(const char* call, const comm_view& c, int rank, bool any_ok) {
  const std::vector<int>& group = c.remote != nullptr ? *c.remote : c.core->members;
  const int size = int(group.size());
  if (rank == MPI_PROC_NULL || (any_ok && rank == MPI_ANY_SOURCE)) return rank;
  if (rank < 0 || rank >= size) [[unlikely]]
    fail(call, MPI_ERR_RANK, "rank %d is not in the communicator%s (size %d)", rank,
         c.remote != nullptr ? "'s remote group" : "", size);
  return group[std::size_t(rank)];
}

void check_count(const char* call, int count) {
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
}

void check_tag(const char* call, int tag, bool any_ok) {
  if ((tag < 0 || tag > MPI_TAG_UB_VALUE) && !(any_ok && tag == MPI_ANY_TAG))
    fail(call, MPI_ERR_TAG, "tag %d is not in 0..%d%s", tag, MPI_TAG_UB_VALUE,
         any_ok ? " (or MPI_ANY_TAG)" : "");
}

void proc_null_status(request& q) {
  q.status.MPI_SOURCE = MPI_PROC_NULL;
  q.status.MPI_TAG = MPI_ANY_TAG;
  q.status.MPI_ERROR = MPI_SUCCESS;
  q.status.weft_bytes = 0;
  q.complete = true;
}

}  // namespace

int isend(rank_state& me, const char* call, const void* buf, int count, MPI_Datatype type, int dest,
          int tag, MPI_Comm comm, bool collective, bool synchronous, bool may_lend,
          bool eager_null) {
  const comm_view& c = view(call, me, comm);
  check_count(call, count);
  if (!collective) check_tag(call, tag, false);
  const int to = world_rank(call, c, dest, false);
  const layout l = layout_of(call, type, count);
  const std::size_t bytes = l.bytes;
  // Every check before the request is made: an error (MPI_ERRORS_RETURN)
  // must leave no request behind.
  if (to != MPI_PROC_NULL && bytes != 0 && buf == nullptr && l.map == nullptr)
    fail(call, MPI_ERR_BUFFER, "a null buffer of %zu bytes", bytes);
  // A rendezvous inside the process (lend_bytes); a rank of another
  // process has no state here, and the transport has its own.
  const bool lend = to != MPI_PROC_NULL && may_lend && bytes >= lend_bytes && l.map == nullptr &&
                    world().ranks[std::size_t(to)] != nullptr;
  if (!collective) trace_operation(me, dest, tag, bytes);
  // MPI_Send of a message that travels whole (eager_null) is complete once
  // sent: no request to make and release (a tenth of the 8-byte
  // ping-pong's instructions). Every other send has one.
  const bool acked = synchronous || lend;
  int handle = MPI_REQUEST_NULL;
  request* q = nullptr;
  if (!eager_null || acked) {
    handle = new_request(me, request::send);
    q = &at(me, handle);
    q->owner = comm;
    q->complete = true;
  }
  if (to == MPI_PROC_NULL) return handle;
  message_ptr m = make_message(h_message, sizeof(header) + (lend ? sizeof buf : bytes));
  // The header is written in place, field by field: built on the stack and
  // copied, its 16-byte loads waited for the narrower stores before them
  // (a failed store forward, a third of isend's time in the ping-pong).
  header& h = *new (m->data()) header;
  h.context = context_of(c, collective);
  h.source = c.rank;
  h.dest = to;
  h.tag = tag;
  h.bytes = bytes;
  h.ack_rank = 0;
  h.ack_handle = 0;
  h.lent = lend ? 1 : 0;
  if (acked) {
    // Pending until the acknowledgement; what it waits for (the deadlock
    // report) and where its message went (MPI_Cancel).
    q->complete = false;
    q->source = dest;
    q->tag = tag;
    q->dest = to;
    h.ack_rank = me.rank;
    h.ack_handle = handle;
  }
  unsigned char* payload = reinterpret_cast<unsigned char*>(m->data()) + sizeof h;
  if (lend)
    std::memcpy(payload, &buf, sizeof buf);
  else if (l.map != nullptr)
    pack_map(l.map, count, buf, payload);
  else if (bytes != 0)
    std::memcpy(payload, buf, bytes);
  weft::send(rank_pe(to), std::move(m));
  return handle;
}

int irecv(rank_state& me, const char* call, void* buf, int count, MPI_Datatype type, int source,
          int tag, MPI_Comm comm, bool collective) {
  const comm_view& c = view(call, me, comm);
  check_count(call, count);
  if (!collective) check_tag(call, tag, true);
  const int from = world_rank(call, c, source, true);
  // Every check before the request is made (see isend).
  const layout l = layout_of(call, type, count);
  if (from != MPI_PROC_NULL && l.bytes != 0 && buf == nullptr && l.map == nullptr)
    fail(call, MPI_ERR_BUFFER, "a null buffer of %zu bytes", l.bytes);
  const int handle = new_request(me, request::recv);
  request& q = at(me, handle);
  q.owner = comm;
  if (!collective) trace_operation(me, source, tag, l.bytes);
  if (from == MPI_PROC_NULL) {
    proc_null_status(q);
    return handle;
  }
  q.buf = buf;
  q.capacity = l.bytes;
  // Matched by the sender's rank in the communicator, which the message
  // carries.
  q.source = source;
  q.tag = tag;
  q.context = context_of(c, collective);
  if (l.map != nullptr) {
    retain(l.map);
    q.map = l.map;
    q.count = count;
  }
  for (auto it = me.early.begin(); it != me.early.end(); ++it) {
    if (!matches(q, it->source, it->tag, it->context)) continue;
    header h;
    std::memcpy(&h, it->msg->data(), sizeof h);
    deliver_here(q, h, reinterpret_cast<const unsigned char*>(it->msg->data()) + sizeof h);
    if (it == me.early.begin())
      me.early.pop_front();
    else
      me.early.erase(it);
    return handle;
  }
  me.posted.push_back(handle);
  return handle;
}

void empty_status(MPI_Status& st) {
  st = MPI_Status{};
  st.MPI_SOURCE = MPI_ANY_SOURCE;
  st.MPI_TAG = MPI_ANY_TAG;
}

namespace {

// Whether plain (not persistent) request `h` is complete, waiting for it
// when `block`.
inline bool await(const char* call, rank_state& me, int h, bool block) {
  if (at(me, h).complete) return true;
  if (!block) {
    // A rank that polls (MPI_Test in a loop) lets its PE run its messages
    // and the other ranks between polls, or it would starve them.
    threads::yield();
    return at(me, h).complete;
  }
  const request& q = at(me, h);
  wait_until(me, call, q.source, q.tag, [&] { return at(me, h).complete; });
  return true;
}

// Completes plain request `h` (see await) and frees it.
bool settle_one(const char* call, rank_state& me, int h, MPI_Status& st, std::uint64_t& sent,
                bool block) {
  if (!await(call, me, h, block)) return false;
  st = at(me, h).status;
  sent = at(me, h).sent_bytes;
  release(me, h);
  return true;
}

}  // namespace

bool settle(const char* call, int* handle, MPI_Status& st, std::uint64_t& sent, bool block) {
  rank_state& me = self(call);
  const int h = *handle;
  if (h == MPI_REQUEST_NULL) {
    empty_status(st);
    return true;
  }
  request& q = check_request(call, me, h);
  if (!q.persistent) {
    if (!settle_one(call, me, h, st, sent, block)) return false;
    *handle = MPI_REQUEST_NULL;
    return true;
  }
  // A persistent request: inactive, or its operation completes and leaves
  // it inactive; the handle stays the program's.
  if (!q.active) {
    empty_status(st);
    return true;
  }
  if (!settle_one(call, me, q.inner, st, sent, block)) return false;
  at(me, h).active = false;
  at(me, h).inner = 0;
  return true;
}

void describe(const MPI_Status& st, std::uint64_t sent, char* out, std::size_t size) {
  if (describe_collective(sent, out, size)) return;
  if (st.MPI_ERROR == MPI_ERR_TRUNCATE)
    std::snprintf(out, size,
                  "a message of %llu bytes from rank %d, tag %d, is longer than the receive's %lld",
                  static_cast<unsigned long long>(sent), st.MPI_SOURCE, st.MPI_TAG, st.weft_bytes);
  else
    std::snprintf(out, size, "the request completed with error class %d", st.MPI_ERROR);
}

void raise_status(const char* call, const MPI_Status& st, std::uint64_t sent) {
  char what[320];
  describe(st, sent, what, sizeof what);
  fail(call, st.MPI_ERROR, "%s", what);
}

bool finish(rank_state& me, const char* call, int* handle, MPI_Status* status, bool block) {
  // A plain request that succeeds (every MPI_Send and MPI_Recv): the
  // status straight from the request.
  const int h = *handle;
  if (h != MPI_REQUEST_NULL && !check_request(call, me, h).persistent) {
    if (!await(call, me, h, block)) return false;
    const request& q = at(me, h);
    if (q.status.MPI_ERROR == MPI_SUCCESS) {
      if (status != MPI_STATUS_IGNORE) *status = q.status;
      release(me, h);
      *handle = MPI_REQUEST_NULL;
      return true;
    }
  }
  MPI_Status st;
  std::uint64_t sent = 0;
  if (!settle(call, handle, st, sent, block)) return false;
  if (status != MPI_STATUS_IGNORE) *status = st;
  if (st.MPI_ERROR != MPI_SUCCESS) raise_status(call, st, sent);
  return true;
}

bool active(const char* call, int handle) {
  if (handle == MPI_REQUEST_NULL) return false;
  const request& q = check_request(call, self(call), handle);
  return !q.persistent || q.active;
}

bool ready(const char* call, int handle) {
  if (!active(call, handle)) return false;
  rank_state& me = self(call);
  const request& q = at(me, handle);
  return q.persistent ? at(me, q.inner).complete : q.complete;
}

bool complete(const char* call, int handle) {
  return !active(call, handle) || ready(call, handle);
}

// Waits for any of `handles` (at least one active) to complete.
void wait_any(const char* call, int count, const int* handles) {
  rank_state& me = self(call);
  int peer = MPI_ANY_SOURCE, tag = MPI_ANY_TAG, live = 0;
  for (int i = 0; i < count; ++i)
    if (active(call, handles[i]) && live++ == 0) {
      const request& q = at(me, handles[i]);
      const request& op = q.persistent ? at(me, q.inner) : q;
      peer = op.source;
      tag = op.tag;
    }
  if (live != 1) peer = -3;  // several: no one peer to name
  wait_until(me, call, peer, tag, [&] {
    for (int i = 0; i < count; ++i)
      if (ready(call, handles[i])) return true;
    return live == 0;
  });
}

int new_collective_request(rank_state& r) {
  const int handle = new_request(r, request::coll);
  at(r, handle).source = -3;  // no one peer (the deadlock report)
  at(r, handle).tag = MPI_ANY_TAG;
  return handle;
}

void complete_collective_request(rank_state& r, int handle, int error_class,
                                 std::uint64_t error_key) {
  request& q = at(r, handle);
  q.status.MPI_SOURCE = MPI_ANY_SOURCE;
  q.status.MPI_TAG = MPI_ANY_TAG;
  q.status.MPI_ERROR = error_class;
  q.sent_bytes = error_key;
  q.complete = true;
  wake(r);
}

void free_request(const char* call, int* handle) {
  rank_state& me = self(call);
  if (*handle == MPI_REQUEST_NULL) fail(call, MPI_ERR_REQUEST, "MPI_REQUEST_NULL");
  request& q = check_request(call, me, *handle);
  if (q.kind == request::coll)
    fail(call, MPI_ERR_REQUEST,
         "request %d is a non-blocking collective's, which cannot be freed (MPI 3.1, 5.12): "
         "complete it with MPI_Wait or MPI_Test",
         *handle);
  if (q.persistent) release_persistent(me, q);
  if (q.persistent && q.active) {
    // Its operation goes on, and is released when it completes.
    request& op = at(me, q.inner);
    if (op.complete)
      release(me, q.inner);
    else
      op.freed = true;
    release(me, *handle);
  } else if (q.complete || q.persistent) {
    release(me, *handle);
  } else {
    q.freed = true;
  }
  *handle = MPI_REQUEST_NULL;
}

}  // namespace weft::mpi
