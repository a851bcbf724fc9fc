// The MPI library's functions the mpi transport (mpi.cpp) calls, looked
// up in the library itself: in a program of weft's own MPI (libweft-mpi.so)
// the process's MPI_* and PMPI_* names are weft's, so a call by name would
// reach weft, not the library. Included by mpi.cpp only, after <mpi.h>:
// the calls there keep the standard's PMPI_ names, which the macros at the
// end turn into calls through the table.
#pragma once

#include <dlfcn.h>
#include <mutex>
#include "weft/base/error.hpp"

namespace weft::net {

// The library's functions this transport calls, by their PMPI_ names.
// One call a line:
// clang-format off
#define WEFT_MPI_LIBRARY_CALLS(X) \
  X(Abort) \
  X(Comm_dup) \
  X(Comm_free) \
  X(Comm_rank) \
  X(Comm_set_errhandler) \
  X(Comm_size) \
  X(Error_class) \
  X(Error_string) \
  X(Finalize) \
  X(Finalized) \
  X(Get_count) \
  X(Iallgather) \
  X(Ialltoall) \
  X(Ibarrier) \
  X(Improbe) \
  X(Imrecv) \
  X(Init_thread) \
  X(Initialized) \
  X(Irecv) \
  X(Isend) \
  X(Issend) \
  X(Query_thread) \
  X(Test) \
  X(Testsome)
// clang-format on

struct library_calls {
#define WEFT_MPI_POINTER(name) decltype(&::PMPI_##name) name = nullptr;
  WEFT_MPI_LIBRARY_CALLS(WEFT_MPI_POINTER)
#undef WEFT_MPI_POINTER
};
inline library_calls g_library;

// Looks every call up in the MPI library this module was linked with
// (WEFT_MPI_C_LIBRARY, already loaded as its dependency). Once, before
// the first call.
inline void bind_library() {
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = dlopen(WEFT_MPI_C_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) library = dlopen(WEFT_MPI_C_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr)
      base::fatal("--weft:transport=mpi: cannot open the MPI library %s: %s", WEFT_MPI_C_LIBRARY,
                  dlerror());
#define WEFT_MPI_BIND(name)                                                                   \
  g_library.name = reinterpret_cast<decltype(g_library.name)>(dlsym(library, "PMPI_" #name)); \
  if (g_library.name == nullptr)                                                              \
    base::fatal("--weft:transport=mpi: the MPI library %s has no PMPI_" #name, WEFT_MPI_C_LIBRARY);
    WEFT_MPI_LIBRARY_CALLS(WEFT_MPI_BIND)
#undef WEFT_MPI_BIND
  });
}

}  // namespace weft::net

// The calls below, written with the standard's names, are the library's.
#define PMPI_Abort weft::net::g_library.Abort
#define PMPI_Comm_dup weft::net::g_library.Comm_dup
#define PMPI_Comm_free weft::net::g_library.Comm_free
#define PMPI_Comm_rank weft::net::g_library.Comm_rank
#define PMPI_Comm_set_errhandler weft::net::g_library.Comm_set_errhandler
#define PMPI_Comm_size weft::net::g_library.Comm_size
#define PMPI_Error_class weft::net::g_library.Error_class
#define PMPI_Error_string weft::net::g_library.Error_string
#define PMPI_Finalize weft::net::g_library.Finalize
#define PMPI_Finalized weft::net::g_library.Finalized
#define PMPI_Get_count weft::net::g_library.Get_count
#define PMPI_Iallgather weft::net::g_library.Iallgather
#define PMPI_Ialltoall weft::net::g_library.Ialltoall
#define PMPI_Ibarrier weft::net::g_library.Ibarrier
#define PMPI_Improbe weft::net::g_library.Improbe
#define PMPI_Imrecv weft::net::g_library.Imrecv
#define PMPI_Init_thread weft::net::g_library.Init_thread
#define PMPI_Initialized weft::net::g_library.Initialized
#define PMPI_Irecv weft::net::g_library.Irecv
#define PMPI_Isend weft::net::g_library.Isend
#define PMPI_Issend weft::net::g_library.Issend
#define PMPI_Query_thread weft::net::g_library.Query_thread
#define PMPI_Test weft::net::g_library.Test
#define PMPI_Testsome weft::net::g_library.Testsome
