// The handler table. A handler is a plain function that consumes a message on
// a PE. Handlers are registered before weft::run starts (static
// initialisation or main); ids are dense indices in registration order, so
// every process of a job built from the same program has the same table.
#pragma once
#include <string>
#include "weft/base/export.hpp"
#include "weft/core/message.hpp"

namespace weft {

using handler_fn = void (*)(message_ptr);

// Registers `fn` under `name` (shown in stats, dumps and traces). Any thread,
// before weft::run; registering while a node runs is a fatal error.
WEFT_API handler_id register_handler(const char* name, handler_fn fn);

// Number of registered handlers, and a handler's name ("?" if out of range).
WEFT_API std::size_t num_handlers();
WEFT_API const char* handler_name(handler_id id);

}  // namespace weft
