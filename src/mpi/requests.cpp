// Requests beyond a single operation's: persistent requests, cancel, and
// the completion forms that take several (MPI_Waitall's errors,
// MPI_Testany, MPI_Waitsome, MPI_Testsome), MPI_Request_get_status and
// the status setters.
//
// A persistent request keeps its arguments; each MPI_Start starts an
// operation of its own with them (a request of the pool, `inner`), and
// the completion of that operation leaves the persistent request inactive
// (p2p.cpp's settle), ready for the next MPI_Start. The datatype and the
// communicator are the ones of the init, whatever the program does with
// its handles afterwards (MPI_Type_free: "any communication that is
// currently using this datatype will complete normally"; MPICH and Open
// MPI keep both with the request): the request holds handles of its own
// on them (hold_type, hold_comm) until MPI_Request_free. The forms that
// complete any or some of several requests skip null and inactive ones,
// as the standard says.
//
// Cancel: a receive still posted is taken off the rank's posted list and
// completes cancelled. A standard, buffered or ready send is complete once
// made (its message, with its data, has left and may have been received
// already): it is not cancelled, and MPI_Test_cancelled says false, as
// Open MPI does for an eager send. A synchronous send that still waits for
// its acknowledgement asks the receiver's PE to take its message back out
// of the unexpected list: the answer is "cancelled", or "matched" -- the
// acknowledgement then left before the answer, and one PE's messages to
// another arrive in order. Either way MPI_Wait after MPI_Cancel returns
// whatever the receiver does, as the standard requires.
#include <algorithm>
#include <cstring>
#include "mpi/datatype.hpp"
#include "mpi/mpi_internal.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/send.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft;
using namespace weft::mpi;
// `request` names the entry points' argument.
using op = weft::mpi::request;

namespace {

// A synchronous send's cancel: the question to the receiver's PE, and its
// answer back.
struct cancel_ask {
  int sender, handle, dest, cancelled;
};

handler_id h_cancel_ask = 0;
handler_id h_cancel_answer = 0;

void post(handler_id handler, int rank, const cancel_ask& a) {
  message_ptr m = make_message(handler, sizeof a);
  std::memcpy(m->data(), &a, sizeof a);
  weft::send(rank_pe(rank), std::move(m));
}

void on_cancel_ask(message_ptr m) {
  cancel_ask a;
  std::memcpy(&a, m->data(), sizeof a);
  rank_state& r = *world().ranks[std::size_t(a.dest)];
  a.cancelled = 0;
  for (auto it = r.early.begin(); it != r.early.end(); ++it) {
    header h;
    std::memcpy(&h, it->msg->data(), sizeof h);
    if (h.ack_rank == a.sender && h.ack_handle == a.handle) {
      r.early.erase(it);
      a.cancelled = 1;
      break;
    }
  }
  post(h_cancel_answer, a.sender, a);
}

// "Matched": the acknowledgement came first and completed the request
// (which may be another by now): nothing to do.
void on_cancel_answer(message_ptr m) {
  cancel_ask a;
  std::memcpy(&a, m->data(), sizeof a);
  if (a.cancelled == 0) return;
  rank_state& r = *world().ranks[std::size_t(a.sender)];
  request& q = at(r, a.handle);
  q.status = MPI_Status{};
  q.status.MPI_SOURCE = q.source;
  q.status.MPI_TAG = q.tag;
  q.status.weft_cancelled = 1;
  q.complete = true;
  if (q.freed) release(r, a.handle);
  wake(r);
}

const bool registered = [] {
  h_cancel_ask = register_handler("mpi.cancel_ask", &on_cancel_ask);
  h_cancel_answer = register_handler("mpi.cancel_answer", &on_cancel_answer);
  return true;
}();

// Checks what MPI_Send_init and the others are given (as the operation
// would: each MPI_Start checks again) and makes the inactive request.
int init(const char* call, request::kind_t kind, request::mode_t mode, const void* buf, int count,
         MPI_Datatype type, int peer, int tag, MPI_Comm comm) {
  rank_state& me = self(call);
  const int size = peer_group_size(view(call, me, comm));  // the remote group's: intercomm.cpp
  const bool recv = kind == op::recv;
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
  const layout l = layout_of(call, type, count);
  const std::size_t bytes = l.map == nullptr ? l.bytes : 0;  // a derived type may use MPI_BOTTOM
  if (peer != MPI_PROC_NULL && !(recv && peer == MPI_ANY_SOURCE) && (peer < 0 || peer >= size))
    fail(call, MPI_ERR_RANK, "rank %d is not in the communicator (size %d)", peer, size);
  if ((tag < 0 || tag > MPI_TAG_UB_VALUE) && !(recv && tag == MPI_ANY_TAG))
    fail(call, MPI_ERR_TAG, "tag %d is not in 0..%d%s", tag, MPI_TAG_UB_VALUE,
         recv ? " (or MPI_ANY_TAG)" : "");
  if (bytes != 0 && buf == nullptr) fail(call, MPI_ERR_BUFFER, "a null buffer of %zu bytes", bytes);
  const MPI_Datatype held_type = hold_type(call, type);
  const MPI_Comm held_comm = hold_comm(call, me, comm);
  const int handle = new_request(me, kind);
  request& q = at(me, handle);
  q.persistent = true;
  q.mode = mode;
  q.buf = const_cast<void*>(buf);
  q.count = count;
  q.type = held_type;
  q.source = peer;
  q.tag = tag;
  q.comm = held_comm;
  q.owner = comm;
  return handle;
}

void start(const char* call, MPI_Request* handle) {
  rank_state& me = self(call);
  if (handle == nullptr) fail(call, MPI_ERR_ARG, "a null request pointer");
  const int h = *handle;
  if (h == MPI_REQUEST_NULL) fail(call, MPI_ERR_REQUEST, "MPI_REQUEST_NULL is not a request");
  const request q = check_request(call, me, h);  // a copy: starting adds requests
  if (!q.persistent)
    fail(call, MPI_ERR_REQUEST,
         "request %d is not a persistent request (MPI_Send_init, MPI_Recv_init, ... make those)",
         h);
  if (q.active)
    fail(call, MPI_ERR_REQUEST,
         "request %d is active: complete it (MPI_Wait, MPI_Test, ...) before starting it again", h);
  const int inner = q.kind == op::recv
                        ? irecv(call, q.buf, q.count, q.type, q.source, q.tag, q.comm)
                        : isend_mode(call, q.mode, q.buf, q.count, q.type, q.source, q.tag, q.comm);
  request& p = at(me, h);
  p.inner = inner;
  p.active = true;
}

// Completes the requests of `handles` that are ready (all if `all`):
// their indices and statuses out, and MPI_ERR_IN_STATUS raised (naming
// the first that failed) once all are done. -1 in *outcount: none active.
void collect(const char* call, int count, int* handles, int* outcount, int* indices,
             MPI_Status* statuses) {
  int n = 0, live = 0, failed = -1;
  MPI_Status first{};
  std::uint64_t first_sent = 0;
  for (int i = 0; i < count; ++i) {
    if (!active(call, handles[i])) continue;
    ++live;
    if (!ready(call, handles[i])) continue;
    MPI_Status st;
    std::uint64_t sent = 0;
    settle(call, &handles[i], st, sent, true);
    if (statuses != MPI_STATUSES_IGNORE) statuses[n] = st;
    if (indices != nullptr) indices[n] = i;
    if (st.MPI_ERROR != MPI_SUCCESS && failed < 0) {
      failed = i;
      first = st;
      first_sent = sent;
    }
    ++n;
  }
  *outcount = live == 0 ? MPI_UNDEFINED : n;
  if (failed >= 0) {
    char what[320];
    describe(first, first_sent, what, sizeof what);
    fail(call, MPI_ERR_IN_STATUS, "request %d (index %d): %s (each status holds its error)",
         handles[failed], failed, what);
  }
}

// Whether any of `handles` is ready, or none is active.
bool any_ready(const char* call, int count, const int* handles) {
  bool live = false;
  for (int i = 0; i < count; ++i) {
    if (!active(call, handles[i])) continue;
    if (ready(call, handles[i])) return true;
    live = true;
  }
  return !live;
}

void check_array(const char* call, int count, const void* handles) {
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
  if (count > 0 && handles == nullptr) fail(call, MPI_ERR_ARG, "a null array of requests");
}

}  // namespace

namespace weft::mpi {

void release_persistent(rank_state& me, const request& q) {
  drop_type(q.type);
  drop_comm(me, q.comm);
}

void settle_all(const char* call, int count, int* handles, MPI_Status* statuses) {
  check_array(call, count, handles);
  int failed = -1, failed_handle = 0;
  MPI_Status first{};
  std::uint64_t first_sent = 0;
  for (int i = 0; i < count; ++i) {
    MPI_Status st;
    std::uint64_t sent = 0;
    const int handle = handles[i];
    settle(call, &handles[i], st, sent, true);
    if (statuses != MPI_STATUSES_IGNORE) statuses[i] = st;
    if (st.MPI_ERROR != MPI_SUCCESS && failed < 0) {
      failed = i;
      failed_handle = handle;
      first = st;
      first_sent = sent;
    }
  }
  if (failed >= 0) {
    char what[320];
    describe(first, first_sent, what, sizeof what);
    fail(call, MPI_ERR_IN_STATUS, "request %d (index %d): %s (each status holds its error)",
         failed_handle, failed, what);
  }
}

}  // namespace weft::mpi

WEFT_MPI_API int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                               MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request = init("MPI_Send_init", op::send, op::standard, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest,
                                int tag, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request =
        init("MPI_Ssend_init", op::send, op::synchronous, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest,
                                int tag, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request =
        init("MPI_Bsend_init", op::send, op::buffered, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest,
                                int tag, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request = init("MPI_Rsend_init", op::send, op::ready, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag,
                               MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request =
        init("MPI_Recv_init", op::recv, op::standard, buf, count, datatype, source, tag, comm);
  });
}

WEFT_MPI_API int MPI_Start(MPI_Request* request) {
  return guard(__func__, MPI_COMM_WORLD, [&] { start("MPI_Start", request); });
}

WEFT_MPI_API int MPI_Startall(int count, MPI_Request requests[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_array("MPI_Startall", count, requests);
    for (int i = 0; i < count; ++i) start("MPI_Startall", &requests[i]);
  });
}

WEFT_MPI_API int MPI_Cancel(MPI_Request* request) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Cancel";
    rank_state& me = self(call);
    if (request == nullptr) fail(call, MPI_ERR_ARG, "a null request pointer");
    if (*request == MPI_REQUEST_NULL)
      fail(call, MPI_ERR_REQUEST, "MPI_REQUEST_NULL is not a request");
    const op& q = check_request(call, me, *request);
    if (q.persistent && !q.active)
      fail(call, MPI_ERR_REQUEST,
           "request %d is an inactive persistent request: nothing to cancel (MPI_Start it first)",
           *request);
    const int h = q.persistent ? q.inner : *request;
    op& o = at(me, h);
    if (o.complete) return;
    if (o.kind == op::send) {
      post(h_cancel_ask, o.dest, cancel_ask{me.rank, h, o.dest, 0});
      return;
    }
    const auto it = std::find(me.posted.begin(), me.posted.end(), h);
    if (it == me.posted.end()) return;
    me.posted.erase(it);
    if (o.map != nullptr) {  // the map a derived receive held
      release(o.map);
      o.map = nullptr;
    }
    o.status = MPI_Status{};
    o.status.MPI_SOURCE = o.source;
    o.status.MPI_TAG = o.tag;
    o.status.weft_cancelled = 1;
    o.complete = true;
  });
}

WEFT_MPI_API int MPI_Test_cancelled(const MPI_Status* status, int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (status == MPI_STATUS_IGNORE || flag == nullptr)
      fail("MPI_Test_cancelled", MPI_ERR_ARG, "a null status or flag");
    *flag = status->weft_cancelled != 0 ? 1 : 0;
  });
}

WEFT_MPI_API int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag,
                             MPI_Status* status) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Testany";
    check_array(call, count, requests);
    *index = MPI_UNDEFINED;
    *flag = 0;
    // Looks, lets the PE deliver and the other ranks run (as MPI_Test),
    // and looks again.
    for (int pass = 0; pass < 2; ++pass) {
      bool live = false;
      for (int i = 0; i < count; ++i) {
        if (!active(call, requests[i])) continue;
        live = true;
        if (!ready(call, requests[i])) continue;
        *index = i;
        *flag = 1;
        finish(call, &requests[i], status, true);
        return;
      }
      if (!live) {
        *flag = 1;
        if (status != MPI_STATUS_IGNORE) empty_status(*status);
        return;
      }
      if (pass == 0) yield_rank();
    }
  });
}

WEFT_MPI_API int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                              MPI_Status statuses[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_array("MPI_Waitsome", incount, requests);
    wait_any("MPI_Waitsome", incount, requests);
    collect("MPI_Waitsome", incount, requests, outcount, indices, statuses);
  });
}

WEFT_MPI_API int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                              MPI_Status statuses[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_array("MPI_Testsome", incount, requests);
    if (!any_ready("MPI_Testsome", incount, requests)) yield_rank();
    collect("MPI_Testsome", incount, requests, outcount, indices, statuses);
  });
}

// As MPI_Test, but the request stays as it is (not freed, nor made
// inactive); a failed one's error is in the status, raised by the wait or
// test that completes it.
WEFT_MPI_API int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Request_get_status";
    *flag = 1;
    if (!active(call, request)) {
      if (status != MPI_STATUS_IGNORE) empty_status(*status);
      return;
    }
    if (!ready(call, request)) yield_rank();
    if (!ready(call, request)) {
      *flag = 0;
      return;
    }
    rank_state& me = self(call);
    const weft::mpi::request& q = at(me, request);
    if (status != MPI_STATUS_IGNORE) *status = (q.persistent ? at(me, q.inner) : q).status;
  });
}

WEFT_MPI_API int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Status_set_elements";
    if (status == MPI_STATUS_IGNORE) fail(call, MPI_ERR_ARG, "a null status");
    if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
    status->weft_bytes = static_cast<long long>(std::size_t(count) * type_size(call, datatype));
  });
}

WEFT_MPI_API int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype,
                                           MPI_Count count) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Status_set_elements_x";
    if (status == MPI_STATUS_IGNORE) fail(call, MPI_ERR_ARG, "a null status");
    if (count < 0) fail(call, MPI_ERR_COUNT, "count %lld is negative", count);
    status->weft_bytes = static_cast<long long>(std::size_t(count) * type_size(call, datatype));
  });
}

WEFT_MPI_API int MPI_Status_set_cancelled(MPI_Status* status, int flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (status == MPI_STATUS_IGNORE) fail("MPI_Status_set_cancelled", MPI_ERR_ARG, "a null status");
    status->weft_cancelled = flag != 0 ? 1 : 0;
  });
}
