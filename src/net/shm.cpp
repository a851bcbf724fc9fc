// Placeholder until the shm backend lands.
#include "weft/base/error.hpp"
#include "weft/net/transport.hpp"

namespace weft::net {
std::unique_ptr<transport> make_shm_transport() {
  base::usage_error("not implemented: --weft:transport=shm");
}
}  // namespace weft::net
