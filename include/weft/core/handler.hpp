// The handler table. A handler is a plain function that consumes a message on
// a PE. Handlers are registered before weft::run starts (static
// initialisation or main); ids are dense indices in registration order, so
// every process of a job built from the same program has the same table.
#pragma once
#include <cstdint>
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

namespace detail {
// Hooks of a layer built on core (objects, tasks, ...), so that its per-PE
// and per-node state lives exactly as long as the node. Registered before
// weft::run, like handlers; each hook may be null.
//  node_start: on the thread in weft::run, before any PE starts;
//  pe_start:   on each PE thread, before its scheduler (and main_fn) runs;
//  pe_stop:    on each PE thread, after its scheduler stopped (other PEs may
//              still be finishing their last handler);
//  node_stop:  on the thread in weft::run, after every PE stopped;
//  main_returned: on PE 0 of node 0, when the main function returned (a
//              coroutine main: when it first suspended), before PE 0 takes
//              its first message; other nodes learn of it only through
//              what the layer sends;
//  fingerprint: a hash of the layer's own registration tables, compared
//              between the processes of a job at startup with core's
//              handler table (processes of different builds refuse to run).
struct layer_hooks {
  const char* name;
  void (*node_start)();
  void (*pe_start)();
  void (*pe_stop)();
  void (*node_stop)();
  void (*main_returned)() = nullptr;
  std::uint64_t (*fingerprint)() = nullptr;
};
WEFT_API void register_layer(const layer_hooks& hooks);
}  // namespace detail

}  // namespace weft
