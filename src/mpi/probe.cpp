// Probe and matched probe: MPI_Probe, MPI_Iprobe, MPI_Mprobe, MPI_Improbe,
// MPI_Mrecv, MPI_Imrecv.
//
// A message a rank has not received yet is in its unexpected list
// (p2p.cpp), in arrival order: a probe takes the first that matches
// (context, then source and tag, each possibly a wildcard), which is, of
// one sender's messages, the first sent (non-overtaking). A blocking probe
// that finds none waits with `probing` set, so that the handler that adds
// a message to the list wakes it to look again. A matched probe removes
// the message from the list into a message handle of the rank, so no
// receive can take it any more; it counts as matched then, so a
// synchronous send's acknowledgement goes back at once.
#include <cstring>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft;
using namespace weft::mpi;

namespace {

struct key {
  int source, tag;
  std::int64_t context;
};

// What a probe of (source, tag) in `comm` matches; its arguments checked
// as a receive's.
key probe_key(const char* call, int source, int tag, MPI_Comm comm) {
  // An intercommunicator's sources are its remote group's ranks.
  const int size = peer_group_size(view(call, self(call), comm));
  if (source != MPI_ANY_SOURCE && source != MPI_PROC_NULL && (source < 0 || source >= size))
    fail(call, MPI_ERR_RANK,
         "source %d is not in the communicator (size %d), MPI_ANY_SOURCE or MPI_PROC_NULL", source,
         size);
  if ((tag < 0 || tag > MPI_TAG_UB_VALUE) && tag != MPI_ANY_TAG)
    fail(call, MPI_ERR_TAG, "tag %d is not in 0..%d (or MPI_ANY_TAG)", tag, MPI_TAG_UB_VALUE);
  return key{source, tag, context_of(view(call, self(call), comm))};
}

header header_of(const unexpected& u) {
  header h;
  std::memcpy(&h, u.msg->data(), sizeof h);
  return h;
}

std::deque<unexpected>::iterator find(rank_state& me, const key& k) {
  auto it = me.early.begin();
  for (; it != me.early.end(); ++it)
    if (it->context == k.context && (k.source == MPI_ANY_SOURCE || it->source == k.source) &&
        (k.tag == MPI_ANY_TAG || it->tag == k.tag))
      break;
  return it;
}

// The first matching message, waiting for one.
std::deque<unexpected>::iterator wait_for(rank_state& me, const char* call, const key& k) {
  auto it = find(me, k);
  if (it != me.early.end()) return it;
  me.probing = true;
  wait_until(me, call, k.source, k.tag, [&] {
    it = find(me, k);
    return it != me.early.end();
  });
  me.probing = false;
  return it;
}

// The first matching message, or (after one yield, as MPI_Test) none.
std::deque<unexpected>::iterator look(rank_state& me, const key& k) {
  auto it = find(me, k);
  if (it != me.early.end()) return it;
  // Let the PE deliver what is on its way, and the other ranks run.
  yield_rank();
  return find(me, k);
}

void fill(MPI_Status* status, const header& h) {
  if (status == MPI_STATUS_IGNORE) return;
  *status = MPI_Status{};
  status->MPI_SOURCE = h.source;
  status->MPI_TAG = h.tag;
  status->MPI_ERROR = MPI_SUCCESS;
  status->weft_bytes = static_cast<long long>(h.bytes);
}

void fill_proc_null(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  *status = MPI_Status{};
  status->MPI_SOURCE = MPI_PROC_NULL;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
}

// Moves message `it` out of the unexpected list into a message handle.
MPI_Message take(rank_state& me, std::deque<unexpected>::iterator it, MPI_Status* status) {
  message_ptr m = std::move(it->msg);
  me.early.erase(it);
  header h;
  std::memcpy(&h, m->data(), sizeof h);
  fill(status, h);
  // A synchronous send completes at its match, which this is. A lent one
  // (p2p.cpp) must wait for MPI_Mrecv's copy from its buffer: the delivery
  // acknowledges it then.
  if (h.lent == 0) {
    acknowledge(h);
    h.ack_handle = 0;  // matched now: MPI_Mrecv's delivery acknowledges nothing
    std::memcpy(m->data(), &h, sizeof h);
  }
  std::size_t slot = 0;
  while (slot < me.matched.size() && me.matched[slot] != nullptr) ++slot;
  if (slot == me.matched.size()) me.matched.emplace_back();
  me.matched[slot] = std::move(m);
  return MPI_Message(slot + 1);
}

// The message of handle `message`, left in place; MPI_ERR_REQUEST naming
// `call` if it is not one of the rank's.
message_ptr& message_at(const char* call, rank_state& me, MPI_Message message) {
  if (message == MPI_MESSAGE_NULL)
    fail(call, MPI_ERR_REQUEST, "MPI_MESSAGE_NULL is not a message (MPI_Mprobe gives one)");
  if (message < 0 || std::size_t(message) > me.matched.size() ||
      me.matched[std::size_t(message - 1)] == nullptr)
    fail(call, MPI_ERR_REQUEST,
         "message %d is not a message of this rank that MPI_Mprobe or MPI_Improbe gave and no "
         "receive took yet",
         message);
  return me.matched[std::size_t(message - 1)];
}

// Receives message *message into (buf, count, type): a complete request,
// its status possibly MPI_ERR_TRUNCATE; *message becomes MPI_MESSAGE_NULL.
int receive(const char* call, void* buf, int count, MPI_Datatype type, MPI_Message* message) {
  rank_state& me = self(call);
  if (message == nullptr) fail(call, MPI_ERR_ARG, "a null MPI_Message pointer");
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
  const layout l = layout_of(call, type, count);
  const std::size_t capacity = l.bytes;
  if (*message == MPI_MESSAGE_NO_PROC) {
    const int handle = new_request(me, request::recv);
    request& q = at(me, handle);
    fill_proc_null(&q.status);
    q.complete = true;
    *message = MPI_MESSAGE_NULL;
    return handle;
  }
  message_ptr& slot = message_at(call, me, *message);
  if (capacity != 0 && buf == nullptr && l.map == nullptr)
    fail(call, MPI_ERR_BUFFER, "a null buffer of %zu bytes", capacity);
  message_ptr m = std::move(slot);
  *message = MPI_MESSAGE_NULL;
  const int handle = new_request(me, request::recv);
  request& q = at(me, handle);
  q.buf = buf;
  q.capacity = capacity;
  if (l.map != nullptr) {
    retain(l.map);
    q.map = l.map;
    q.count = count;
  }
  header h;
  std::memcpy(&h, m->data(), sizeof h);
  deliver(q, h, reinterpret_cast<const unsigned char*>(m->data()) + sizeof h);
  return handle;
}

}  // namespace

WEFT_MPI_API int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Probe";
    rank_state& me = self(call);
    const key k = probe_key(call, source, tag, comm);
    if (source == MPI_PROC_NULL) return fill_proc_null(status);
    fill(status, header_of(*wait_for(me, call, k)));
  });
}

WEFT_MPI_API int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Iprobe";
    rank_state& me = self(call);
    const key k = probe_key(call, source, tag, comm);
    *flag = 1;
    if (source == MPI_PROC_NULL) return fill_proc_null(status);
    const auto it = look(me, k);
    if (it == me.early.end()) {
      *flag = 0;
      return;
    }
    fill(status, header_of(*it));
  });
}

WEFT_MPI_API int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message,
                            MPI_Status* status) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Mprobe";
    rank_state& me = self(call);
    const key k = probe_key(call, source, tag, comm);
    if (source == MPI_PROC_NULL) {
      *message = MPI_MESSAGE_NO_PROC;
      return fill_proc_null(status);
    }
    *message = take(me, wait_for(me, call, k), status);
  });
}

WEFT_MPI_API int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                             MPI_Status* status) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Improbe";
    rank_state& me = self(call);
    const key k = probe_key(call, source, tag, comm);
    *flag = 1;
    if (source == MPI_PROC_NULL) {
      *message = MPI_MESSAGE_NO_PROC;
      return fill_proc_null(status);
    }
    const auto it = look(me, k);
    if (it == me.early.end()) {
      *flag = 0;
      return;
    }
    *message = take(me, it, status);
  });
}

WEFT_MPI_API int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message,
                           MPI_Status* status) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    int q = receive("MPI_Mrecv", buf, count, datatype, message);
    finish("MPI_Mrecv", &q, status, true);
  });
}

WEFT_MPI_API int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message,
                            MPI_Request* request) {
  return guard(__func__, MPI_COMM_WORLD,
               [&] { *request = receive("MPI_Imrecv", buf, count, datatype, message); });
}
