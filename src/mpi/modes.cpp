// The send modes beside the standard one, the buffer of buffered sends,
// and MPI_Sendrecv_replace.
//
// - Synchronous (MPI_Ssend, MPI_Issend): the message names its request,
//   and whatever matches it on the receiver's PE sends back an
//   acknowledgement that completes it (p2p.cpp), so the send completes
//   only once a receive (or MPI_Mprobe) has taken the message.
// - Buffered (MPI_Bsend, MPI_Ibsend): every send copies its data into its
//   message at once, so a buffered send completes at once and its space in
//   the attached buffer is free again when the call returns. The space is
//   still accounted as the standard says, so that a program that would
//   overflow its buffer under another MPI fails here too: a send needs its
//   data's size plus MPI_BSEND_OVERHEAD of the attached buffer, and
//   without an attached buffer it is MPI_ERR_BUFFER.
// - Ready (MPI_Rsend, MPI_Irsend): a standard send (a ready send whose
//   receive is not posted is erroneous; not checked).
#include <cstring>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

// A buffered message's headers (weft's and the mpi layer's) fit in what
// the standard lets the program reserve for them.
static_assert(sizeof(message) + sizeof(header) <= MPI_BSEND_OVERHEAD,
              "MPI_BSEND_OVERHEAD holds a message's headers");

namespace {

void check_buffered(const char* call, rank_state& me, int count, MPI_Datatype type, int dest) {
  if (dest == MPI_PROC_NULL || count < 0) return;  // no message (isend checks count)
  const std::size_t need = std::size_t(count) * type_size(call, type) + MPI_BSEND_OVERHEAD;
  if (!me.bsend_attached)
    fail(call, MPI_ERR_BUFFER,
         "no buffer is attached: a buffered send of %d element(s) needs %zu bytes of one "
         "(MPI_Buffer_attach; the data and MPI_BSEND_OVERHEAD, %d)",
         count, need, MPI_BSEND_OVERHEAD);
  if (need > std::size_t(me.bsend_size))
    fail(call, MPI_ERR_BUFFER,
         "a buffered send of %d element(s) needs %zu bytes of the attached buffer (the data and "
         "MPI_BSEND_OVERHEAD, %d), which has %d",
         count, need, MPI_BSEND_OVERHEAD, me.bsend_size);
}

}  // namespace

int isend_mode(const char* call, request::mode_t mode, const void* buf, int count,
               MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (mode == request::buffered) check_buffered(call, self(call), count, type, dest);
  // A buffered send is done with `buf` once it returns: never lent.
  return isend(call, buf, count, type, dest, tag, comm, false, mode == request::synchronous,
               mode != request::buffered);
}

}  // namespace weft::mpi

using namespace weft::mpi;
// `request` names the entry points' argument.
using op = weft::mpi::request;

WEFT_MPI_API int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                           MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    int q = isend_mode("MPI_Ssend", op::synchronous, buf, count, datatype, dest, tag, comm);
    finish("MPI_Ssend", &q, MPI_STATUS_IGNORE, true);
  });
}

WEFT_MPI_API int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                           MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    int q = isend_mode("MPI_Bsend", op::buffered, buf, count, datatype, dest, tag, comm);
    finish("MPI_Bsend", &q, MPI_STATUS_IGNORE, true);
  });
}

WEFT_MPI_API int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                           MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    int q = isend_mode("MPI_Rsend", op::ready, buf, count, datatype, dest, tag, comm);
    finish("MPI_Rsend", &q, MPI_STATUS_IGNORE, true);
  });
}

WEFT_MPI_API int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                            MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request = isend_mode("MPI_Issend", op::synchronous, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                            MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request = isend_mode("MPI_Ibsend", op::buffered, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                            MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    *request = isend_mode("MPI_Irsend", op::ready, buf, count, datatype, dest, tag, comm);
  });
}

WEFT_MPI_API int MPI_Buffer_attach(void* buffer, int size) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Buffer_attach");
    if (me.bsend_attached)
      fail("MPI_Buffer_attach", MPI_ERR_BUFFER,
           "a buffer of %d bytes is attached already (MPI_Buffer_detach it first)", me.bsend_size);
    if (size < 0) fail("MPI_Buffer_attach", MPI_ERR_ARG, "size %d is negative", size);
    if (size > 0 && buffer == nullptr)
      fail("MPI_Buffer_attach", MPI_ERR_BUFFER, "a null buffer of %d bytes", size);
    me.bsend_buffer = buffer;
    me.bsend_size = size;
    me.bsend_attached = true;
  });
}

// Buffered sends leave the buffer when they are made (see above), so
// there is never one to wait for here.
WEFT_MPI_API int MPI_Buffer_detach(void* buffer_addr, int* size) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Buffer_detach");
    if (buffer_addr == nullptr || size == nullptr)
      fail("MPI_Buffer_detach", MPI_ERR_ARG,
           "null argument: it takes the address of a pointer and of an int");
    if (!me.bsend_attached)
      fail("MPI_Buffer_detach", MPI_ERR_BUFFER, "no buffer is attached (MPI_Buffer_attach)");
    void* buffer = me.bsend_buffer;
    std::memcpy(buffer_addr, &buffer, sizeof buffer);
    *size = me.bsend_size;
    me.bsend_buffer = nullptr;
    me.bsend_size = 0;
    me.bsend_attached = false;
  });
}

// The send copies the data into its message when it is made (p2p.cpp;
// it is never lent here, whatever its size), so the receive may then take
// `buf`: one buffer, no temporary copy.
WEFT_MPI_API int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest,
                                      int sendtag, int source, int recvtag, MPI_Comm comm,
                                      MPI_Status* status) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Sendrecv_replace";
    // Not lent: the receive below may fill `buf` before the peer took it.
    int s = isend(call, buf, count, datatype, dest, sendtag, comm, false, false, false);
    int r = irecv(call, buf, count, datatype, source, recvtag, comm);
    finish(call, &s, MPI_STATUS_IGNORE, true);
    finish(call, &r, status, true);
  });
}
