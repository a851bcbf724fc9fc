#include "weft/core/handler.hpp"

#include <mutex>
#include <vector>
#include "core/handler_table.hpp"
#include "weft/base/error.hpp"

namespace weft {

namespace core {
handler_table& handlers() {
  static handler_table table;
  return table;
}
}  // namespace core

handler_id register_handler(const char* name, handler_fn fn) {
  core::handler_table& t = core::handlers();
  if (t.frozen.load(std::memory_order_acquire))
    base::fatal("register_handler(\"%s\") while a node runs: register handlers before weft::run",
                name);
  if (fn == nullptr) base::fatal("register_handler(\"%s\"): null function", name);
  std::lock_guard<std::mutex> lock(t.mutex);
  t.entries.push_back({name, fn});
  return handler_id(t.entries.size() - 1);
}

void detail::register_layer(const layer_hooks& hooks) {
  core::handler_table& t = core::handlers();
  if (t.frozen.load(std::memory_order_acquire))
    base::fatal("register_layer(\"%s\") while a node runs", hooks.name);
  std::lock_guard<std::mutex> lock(t.mutex);
  t.layers.push_back(hooks);
}

void detail::set_scheduler_hooks(const scheduler_hooks& hooks) {
  core::handler_table& t = core::handlers();
  if (t.frozen.load(std::memory_order_acquire))
    base::fatal("set_scheduler_hooks while a node runs");
  if (hooks.run_tasks == nullptr || hooks.tasks_visible == nullptr)
    base::fatal("set_scheduler_hooks: both run_tasks and tasks_visible are required");
  std::lock_guard<std::mutex> lock(t.mutex);
  t.sched = hooks;
}

std::size_t num_handlers() {
  return core::handlers().entries.size();
}

const char* handler_name(handler_id id) {
  auto& e = core::handlers().entries;
  return id < e.size() ? e[id].name : "?";
}

}  // namespace weft
