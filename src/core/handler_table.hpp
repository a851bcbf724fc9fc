// The handler table behind register_handler. Written only before a node runs
// (registration takes the mutex); frozen while it runs, so PEs read it with
// no lock.
#pragma once
#include <atomic>
#include <mutex>
#include <vector>
#include "weft/core/handler.hpp"

namespace weft::core {

struct handler_entry {
  const char* name;
  handler_fn fn;
};

struct handler_table {
  std::mutex mutex;
  std::vector<handler_entry> entries;
  std::vector<detail::layer_hooks> layers;  // in registration order
  detail::scheduler_hooks sched;            // the tasks layer's, if linked
  std::atomic<bool> frozen{false};
};

handler_table& handlers();

}  // namespace weft::core
