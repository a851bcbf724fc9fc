// The MPI entry points of libweft-mpi (include/weft/mpi/mpi.h): the
// environment, the predefined communicators and datatypes, and
// point-to-point (p2p.cpp does the work). Errors are fatal
// (MPI_ERRORS_ARE_FATAL, the default): the message names the call, the
// rank and the problem, and the job exits non-zero.
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "mpi/mpi_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/core/run.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;

namespace {

void copy_out(const char* text, char* out, int* len, int max) {
  const int n = int(std::min<std::size_t>(std::strlen(text), std::size_t(max - 1)));
  std::memcpy(out, text, std::size_t(n));
  out[n] = '\0';
  *len = n;
}

}  // namespace

const char* weft::mpi::predefined_error_text(int c) {
  switch (c) {
    case MPI_SUCCESS:
      return "MPI_SUCCESS: no error";
    case MPI_ERR_BUFFER:
      return "MPI_ERR_BUFFER: invalid buffer pointer";
    case MPI_ERR_COUNT:
      return "MPI_ERR_COUNT: invalid count argument";
    case MPI_ERR_TYPE:
      return "MPI_ERR_TYPE: invalid datatype";
    case MPI_ERR_TAG:
      return "MPI_ERR_TAG: invalid tag";
    case MPI_ERR_COMM:
      return "MPI_ERR_COMM: invalid communicator";
    case MPI_ERR_RANK:
      return "MPI_ERR_RANK: invalid rank";
    case MPI_ERR_ROOT:
      return "MPI_ERR_ROOT: invalid root";
    case MPI_ERR_OP:
      return "MPI_ERR_OP: invalid reduce operation";
    case MPI_ERR_REQUEST:
      return "MPI_ERR_REQUEST: invalid request";
    case MPI_ERR_ARG:
      return "MPI_ERR_ARG: invalid argument";
    case MPI_ERR_TRUNCATE:
      return "MPI_ERR_TRUNCATE: message truncated";
    case MPI_ERR_OTHER:
      return "MPI_ERR_OTHER: other error";
    case MPI_ERR_INTERN:
      return "MPI_ERR_INTERN: internal error";
    case MPI_ERR_IN_STATUS:
      return "MPI_ERR_IN_STATUS: error code is in status";
    case MPI_ERR_PENDING:
      return "MPI_ERR_PENDING: pending request";
    case MPI_ERR_UNKNOWN:
      return "MPI_ERR_UNKNOWN: unknown error";
    case MPI_ERR_NO_MEM:
      return "MPI_ERR_NO_MEM: out of memory";
    case MPI_ERR_GROUP:
      return "MPI_ERR_GROUP: invalid group";
    case MPI_ERR_KEYVAL:
      return "MPI_ERR_KEYVAL: invalid keyval";
    case MPI_ERR_TOPOLOGY:
      return "MPI_ERR_TOPOLOGY: invalid topology";
    case MPI_ERR_DIMS:
      return "MPI_ERR_DIMS: invalid dimensions";
    case MPI_ERR_INFO:
      return "MPI_ERR_INFO: invalid info object";
    case MPI_ERR_INFO_KEY:
      return "MPI_ERR_INFO_KEY: invalid info key";
    case MPI_ERR_INFO_VALUE:
      return "MPI_ERR_INFO_VALUE: invalid info value";
    case MPI_ERR_INFO_NOKEY:
      return "MPI_ERR_INFO_NOKEY: no such info key";
    default:
      return nullptr;
  }
}

WEFT_MPI_API int MPI_Init(int*, char***) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Init");
    if (me.initialized) fail("MPI_Init", MPI_ERR_OTHER, "MPI_Init was called before on this rank");
    me.initialized = true;
  });
}

// Ranks share their PE's OS thread and each runs on one logical thread:
// MPI_THREAD_FUNNELED is what holds (a rank's other threads must not call
// MPI), and what is reported whatever is asked.
WEFT_MPI_API int MPI_Init_thread(int* argc, char*** argv, int, int* provided) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    MPI_Init(argc, argv);
    *provided = MPI_THREAD_FUNNELED;
  });
}

WEFT_MPI_API int MPI_Query_thread(int* provided) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Query_thread");
    *provided = MPI_THREAD_FUNNELED;
  });
}

WEFT_MPI_API int MPI_Is_thread_main(int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Is_thread_main");
    *flag = 1;
  });
}

WEFT_MPI_API int MPI_Initialized(int* flag) {
  const rank_state* me = current_rank();
  *flag = me != nullptr && me->initialized ? 1 : 0;
  return MPI_SUCCESS;
}

WEFT_MPI_API int MPI_Finalize(void) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Finalize");
    if (!me.initialized || me.finalized)
      fail("MPI_Finalize", MPI_ERR_OTHER, "%s",
           me.finalized ? "MPI_Finalize was called before" : "MPI_Init was not called");
    me.finalized = true;
  });
}

WEFT_MPI_API int MPI_Finalized(int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] { *flag = self("MPI_Finalized").finalized ? 1 : 0; });
}

WEFT_MPI_API int MPI_Abort(MPI_Comm comm, int errorcode) {
  abort_job(self("MPI_Abort").rank, comm, errorcode);
}

WEFT_MPI_API double MPI_Wtime(void) {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

WEFT_MPI_API double MPI_Wtick(void) {
  return 1e-9;
}

WEFT_MPI_API int MPI_Get_processor_name(char* name, int* resultlen) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    char host[MPI_MAX_PROCESSOR_NAME];
    if (gethostname(host, sizeof host) != 0) std::strcpy(host, "unknown");
    host[sizeof host - 1] = '\0';
    copy_out(host, name, resultlen, MPI_MAX_PROCESSOR_NAME);
  });
}

WEFT_MPI_API int MPI_Get_version(int* version, int* subversion) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
  });
}

WEFT_MPI_API int MPI_Get_library_version(char* version, int* resultlen) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    copy_out("weft MPI (ranks as logical threads; docs/mpi.md)", version, resultlen,
             MPI_MAX_LIBRARY_VERSION_STRING);
  });
}

WEFT_MPI_API int MPI_Error_class(int errorcode, int* errorclass) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (predefined_error_text(errorcode) != nullptr) {
      *errorclass = errorcode;
    } else if (!added_error(errorcode, errorclass, nullptr)) {
      fail("MPI_Error_class", MPI_ERR_ARG, "%d is not an error code", errorcode);
    }
  });
}

WEFT_MPI_API int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    std::string added;
    const char* text = predefined_error_text(errorcode);
    if (text == nullptr) {
      if (!added_error(errorcode, nullptr, &added))
        fail("MPI_Error_string", MPI_ERR_ARG, "%d is not an error code", errorcode);
      text = added.c_str();  // "" until MPI_Add_error_string
    }
    copy_out(text, string, resultlen, MPI_MAX_ERROR_STRING);
  });
}

WEFT_MPI_API int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                           MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm,
               [&] { *request = isend("MPI_Isend", buf, count, datatype, dest, tag, comm); });
}

WEFT_MPI_API int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag,
                           MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm,
               [&] { *request = irecv("MPI_Irecv", buf, count, datatype, source, tag, comm); });
}

WEFT_MPI_API int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                          MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    rank_state& me = self("MPI_Send");
    int q = isend(me, "MPI_Send", buf, count, datatype, dest, tag, comm, false, false, true, true);
    if (q != MPI_REQUEST_NULL) finish(me, "MPI_Send", &q, MPI_STATUS_IGNORE, true);
  });
}

WEFT_MPI_API int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag,
                          MPI_Comm comm, MPI_Status* status) {
  return guard(__func__, comm, [&] {
    rank_state& me = self("MPI_Recv");
    int q = irecv(me, "MPI_Recv", buf, count, datatype, source, tag, comm);
    finish(me, "MPI_Recv", &q, status, true);
  });
}

WEFT_MPI_API int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                              int sendtag, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                              int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return guard(__func__, comm, [&] {
    int r = irecv("MPI_Sendrecv", recvbuf, recvcount, recvtype, source, recvtag, comm);
    int s = isend("MPI_Sendrecv", sendbuf, sendcount, sendtype, dest, sendtag, comm);
    finish("MPI_Sendrecv", &s, MPI_STATUS_IGNORE, true);
    finish("MPI_Sendrecv", &r, status, true);
  });
}

namespace {

// The communicator whose error handler a completion of *request applies
// (MPI 3.1 8.3: the request's); MPI_COMM_WORLD for a handle that is none.
MPI_Comm owner_of(const MPI_Request* request) {
  const rank_state* me = current_rank();
  if (me == nullptr || request == nullptr) return MPI_COMM_WORLD;
  const int h = *request;
  if (h <= 0 || std::size_t(h) > me->requests.size()) return MPI_COMM_WORLD;
  return me->requests[std::size_t(h - 1)].owner;
}

}  // namespace

WEFT_MPI_API int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return guard_for(
      __func__, [&] { return owner_of(request); },
      [&] { finish("MPI_Wait", request, status, true); });
}

WEFT_MPI_API int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return guard_for(
      __func__, [&] { return owner_of(request); },
      [&] { *flag = finish("MPI_Test", request, status, false) ? 1 : 0; });
}

WEFT_MPI_API int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return guard(__func__, MPI_COMM_WORLD,
               [&] { settle_all("MPI_Waitall", count, requests, statuses); });
}

WEFT_MPI_API int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    for (int pass = 0; pass < 2; ++pass) {
      bool all = true;
      for (int i = 0; i < count && all; ++i) all = complete("MPI_Testall", requests[i]);
      if (all) break;
      if (pass == 1) {
        *flag = 0;
        return;
      }
      yield_rank();  // let the PE deliver (see finish in p2p.cpp)
    }
    *flag = 1;
    settle_all("MPI_Testall", count, requests, statuses);
  });
}

WEFT_MPI_API int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    wait_any("MPI_Waitany", count, requests);
    for (int i = 0; i < count; ++i)
      if (ready("MPI_Waitany", requests[i])) {
        *index = i;
        finish("MPI_Waitany", &requests[i], status, true);
        return;
      }
    // Every request was null or inactive: MPI_UNDEFINED and an empty status.
    *index = MPI_UNDEFINED;
    if (status != MPI_STATUS_IGNORE) empty_status(*status);
  });
}

WEFT_MPI_API int MPI_Request_free(MPI_Request* request) {
  return guard(__func__, MPI_COMM_WORLD, [&] { free_request("MPI_Request_free", request); });
}

// Plain heap memory: weft's transports need no registered memory from the
// program (they register their own buffers).
WEFT_MPI_API int MPI_Alloc_mem(MPI_Aint size, MPI_Info, void* baseptr) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (size < 0) fail("MPI_Alloc_mem", MPI_ERR_ARG, "size %ld is negative", size);
    void* p = std::malloc(size == 0 ? 1 : std::size_t(size));
    if (p == nullptr) fail("MPI_Alloc_mem", MPI_ERR_NO_MEM, "no memory for %ld bytes", size);
    *static_cast<void**>(baseptr) = p;
  });
}

WEFT_MPI_API int MPI_Free_mem(void* base) {
  std::free(base);
  return MPI_SUCCESS;
}
