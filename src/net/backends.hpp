// Private to weft_net: the constructors of the backends this build has
// (transport.cpp chooses among them by name; the composite builds two).
#pragma once
#include <memory>
#include "weft/net/transport.hpp"

namespace weft::net {

std::unique_ptr<transport> make_local_transport();  // local.cpp
#if WEFT_HAVE_SHM_TRANSPORT
std::unique_ptr<transport> make_shm_transport();  // shm/transport.cpp
#endif
#if WEFT_HAVE_MPI_TRANSPORT
// watch_local_peers: a thread reports a process of this host that dies
// (peer_watch.hpp); the composites turn it off, their shm watches the host.
std::unique_ptr<transport> make_mpi_transport(bool watch_local_peers = true);  // mpi.cpp
#endif
#if WEFT_HAVE_UCX_TRANSPORT
std::unique_ptr<transport> make_ucx_transport();  // ucx/ucx_transport.cpp
#endif

}  // namespace weft::net
