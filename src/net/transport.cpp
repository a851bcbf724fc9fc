#include "weft/net/transport.hpp"

#include <string>
#include "backends.hpp"
#include "composite.hpp"
#include "weft/base/error.hpp"

namespace weft::net {

transport::~transport() = default;

// Backends without a cheaper persistent path send through the ordinary one;
// the handle is the destination node.
int transport::create_persistent(int node, std::size_t) {
  return node;
}
void transport::send_persistent(int channel, void* buffer, std::size_t bytes) {
  send(channel, buffer, bytes);
}
void transport::wait_for_incoming(std::uint64_t) {}
bool transport::can_wait() const {
  return false;
}
void transport::wake_waiter() {}
bool transport::pause_between_polls() const {
  return true;
}
base::registered_memory* transport::message_memory() {
  return nullptr;
}

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
