// create_transport: the backend named by --weft:transport. The backends
// this build has are in backends.hpp; in the shared libraries mpi and ucx
// come from plugins (plugin_loader.cpp), loaded the first time a run needs
// one.
#include <string>
#include "backends.hpp"
#include "composite.hpp"
#include "weft/base/error.hpp"
#include "weft/net/transport.hpp"

namespace weft::net {

std::string available_transports() {
  std::string s = "local";
#if WEFT_HAVE_SHM_TRANSPORT
  s += ", shm";
#endif
#if WEFT_HAVE_MPI_TRANSPORT
  s += ", mpi";
#endif
#if WEFT_HAVE_UCX_TRANSPORT
  s += ", ucx";
#endif
  // The composites: shm inside each host, the named backend between hosts.
#if WEFT_HAVE_SHM_TRANSPORT && WEFT_HAVE_MPI_TRANSPORT
  s += ", shm+mpi";
#endif
  return s;
}

std::unique_ptr<transport> create_transport(const std::string& name) {
  if (name == "local") return make_local_transport();
#if WEFT_HAVE_SHM_TRANSPORT
  if (name == "shm") return make_shm_transport();
#endif
#if WEFT_HAVE_MPI_TRANSPORT
  if (name == "mpi") return make_mpi_transport();
#endif
#if WEFT_HAVE_UCX_TRANSPORT
  if (name == "ucx") return make_ucx_transport();
#endif
  // A composite whose inter-host backend is missing is named by that backend.
  if (name == "shm+mpi") return make_composite_transport("mpi");
  if (name == "shm+ucx") return make_composite_transport("ucx");
  if (name == "shm" || name == "mpi" || name == "ucx")
    base::usage_error("--weft:transport=%s: this build of weft has no %s transport (it has: %s)",
                      name.c_str(), name.c_str(), available_transports().c_str());
  base::usage_error(
      "--weft:transport=%s: unknown transport; accepted: local, shm, mpi, ucx, shm+mpi, shm+ucx",
      name.c_str());
}

}  // namespace weft::net
