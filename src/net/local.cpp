// The "local" transport: one node, no network. Every message is intra-node,
// so core never calls send(); a call is a program error and says so.
#include <cstdlib>
#include <cstring>
#include "weft/base/error.hpp"
#include "weft/net/transport.hpp"

namespace weft::net {

namespace {
class local_transport final : public transport {
 public:
  const char* name() const override { return "local"; }
  void init(const launch_info& launch, const hooks&, double) override {
    // Asked for by name: this process runs alone whatever the environment
    // says (a program started from inside another job's task, say).
    if (launch.size > 1)
      base::warn(
          "%s says this process is rank %d of %d, but --weft:transport=local runs it as a job "
          "of its own (--weft:transport=auto|shm|mpi|ucx joins the others)",
          launch.launcher.c_str(), launch.rank, launch.size);
  }
  int node_rank() const override { return 0; }
  int num_nodes() const override { return 1; }
  void send(int node, void*, std::size_t) override {
    base::fatal("message to node %d, but this is a one-node run (--weft:transport=local)", node);
  }
  int progress() override { return 0; }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    std::memcpy(all, mine, bytes);
  }
  void barrier() override {}
  [[noreturn]] void abort(int code, const char*) override { std::_Exit(code); }
  void finalize() override {}
};
}  // namespace

std::unique_ptr<transport> make_local_transport() {
  return std::make_unique<local_transport>();
}

}  // namespace weft::net
