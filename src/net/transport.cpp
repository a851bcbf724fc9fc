// The defaults of the transport interface. Compiled into weft_net and into
// each transport plugin (plugin.hpp), which needs them and nothing else of
// weft_net; create.cpp chooses the backend.
#include "weft/net/transport.hpp"

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

}  // namespace weft::net
