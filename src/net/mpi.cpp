// Placeholder until the mpi backend lands.
#include "weft/base/error.hpp"
#include "weft/net/transport.hpp"

namespace weft::net {
std::unique_ptr<transport> make_mpi_transport() {
  base::usage_error("not implemented: --weft:transport=mpi");
}
}  // namespace weft::net
