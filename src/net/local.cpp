// The "local" transport: one node, no network. Every message is intra-node,
// so core never calls send(); a call is a program error and says so.
#include <cstdlib>
#include "weft/base/error.hpp"
#include "weft/net/transport.hpp"

namespace weft::net {

namespace {
class local_transport final : public transport {
 public:
  const char* name() const override { return "local"; }
  void init(deliver_fn) override {}
  int node_rank() const override { return 0; }
  int num_nodes() const override { return 1; }
  void send(int node, void*, std::size_t) override {
    base::fatal("message to node %d, but this is a one-node run (--weft:transport=local)", node);
  }
  void progress() override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
  void finalize() override {}
};
}  // namespace

std::unique_ptr<transport> make_local_transport() {
  return std::make_unique<local_transport>();
}

}  // namespace weft::net
