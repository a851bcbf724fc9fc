#include "weft/net/transport.hpp"

#include "weft/base/error.hpp"

namespace weft::net {

std::unique_ptr<transport> make_local_transport();  // local.cpp

transport::~transport() = default;

std::string available_transports() {
  return "local";
}

std::unique_ptr<transport> create_transport(const std::string& name) {
  if (name == "local") return make_local_transport();
  if (name == "shm" || name == "mpi" || name == "ucx")
    base::usage_error("not implemented: --weft:transport=%s (this build has: %s)", name.c_str(),
                      available_transports().c_str());
  base::usage_error("--weft:transport=%s: unknown transport; accepted: local, shm, mpi, ucx",
                    name.c_str());
}

}  // namespace weft::net
