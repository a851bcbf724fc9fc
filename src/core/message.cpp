#include "weft/core/message.hpp"

#include <cstring>
#include <new>
#include "weft/base/error.hpp"
#include "weft/base/memory.hpp"

namespace weft {

message_ptr make_message(handler_id handler, std::size_t payload_bytes) {
  if (payload_bytes > 0xffffffffu)
    base::fatal("message payload of %zu bytes exceeds the 4 GiB limit", payload_bytes);
  std::uint8_t cls = 0;
  void* block = base::block_alloc(sizeof(message) + payload_bytes, cls);
  auto* m = new (block) message;
  m->handler = handler;
  m->size = std::uint32_t(payload_bytes);
  m->size_class = cls;
  return message_ptr(m);
}

message_ptr copy_message(const message& src) {
  message_ptr m = make_message(src.handler, src.size);
  std::uint8_t cls = m->size_class;
  std::memcpy(static_cast<void*>(m.get()), &src, sizeof(message) + src.size);
  m->size_class = cls;
  m->link.next.store(nullptr, std::memory_order_relaxed);
  return m;
}

void message_deleter::operator()(message* m) const noexcept {
  std::uint8_t cls = m->size_class;
  m->~message();
  base::block_free(m, cls);
}

}  // namespace weft
