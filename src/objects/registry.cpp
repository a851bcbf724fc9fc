// The objects layer's registration tables (entries, element types, reducers,
// maps). Filled during static initialisation; read without locks while a
// node runs, when registering is an error (a late registration would give
// ids that differ between processes).
#include <atomic>
#include <mutex>
#include <string>
#include <vector>
#include "objects/state.hpp"
#include "weft/base/error.hpp"

namespace weft::objects::detail {

namespace {
struct tables {
  std::mutex mutex;
  std::vector<entry_info> entries;
  std::vector<element_type_info> types;
  std::vector<reducer_info> reducers;
  std::vector<std::pair<map_fn, std::string>> maps;
  std::vector<readonly_entry> readonlies;  // in construction order
};
tables& reg() {
  static tables t;
  return t;
}
std::atomic<bool> g_frozen{false};

void check_open(const std::string& what) {
  if (g_frozen.load(std::memory_order_acquire))
    base::fatal(
        "%s was registered while a node runs: its id would differ between processes (a "
        "weft template was first instantiated in code that static initialisation does not "
        "reach; please report this)",
        what.c_str());
}
}  // namespace

void freeze_registries(bool frozen) {
  g_frozen.store(frozen, std::memory_order_release);
}

std::uint32_t register_entry(entry_info info) {
  check_open("entry method " + info.name);
  std::lock_guard<std::mutex> lock(reg().mutex);
  reg().entries.push_back(std::move(info));
  return std::uint32_t(reg().entries.size() - 1);
}

const entry_info& entry(std::uint32_t id) noexcept {
  auto& e = reg().entries;
  if (id >= e.size())
    base::fatal("a message names entry method id %u; only %zu are registered", id, e.size());
  return e[id];
}

std::span<const entry_info> entry_table() noexcept {
  return reg().entries;
}

std::uint32_t element_type_count() noexcept {
  return std::uint32_t(reg().types.size());
}

bool mark_awaited(std::uint32_t id) {
  std::lock_guard<std::mutex> lock(reg().mutex);
  reg().entries.at(id).awaited = true;
  return true;
}

std::uint32_t register_element_type(element_type_info info) {
  check_open("element type " + info.name);
  std::lock_guard<std::mutex> lock(reg().mutex);
  reg().types.push_back(std::move(info));
  return std::uint32_t(reg().types.size() - 1);
}

const element_type_info& element_type(std::uint32_t id) noexcept {
  auto& t = reg().types;
  if (id >= t.size())
    base::fatal("a message names element type id %u; only %zu are registered", id, t.size());
  return t[id];
}

std::uint32_t register_reducer(reducer_info info) {
  check_open("reduction op " + info.name);
  std::lock_guard<std::mutex> lock(reg().mutex);
  reg().reducers.push_back(std::move(info));
  return std::uint32_t(reg().reducers.size() - 1);
}

const reducer_info& reducer(std::uint32_t id) {
  auto& r = reg().reducers;
  if (id >= r.size())
    base::fatal("a reduction names op id %u; only %zu are registered", id, r.size());
  return r[id];
}

std::uint32_t register_map(map_fn fn, std::string name) {
  check_open("array map " + name);
  std::lock_guard<std::mutex> lock(reg().mutex);
  reg().maps.emplace_back(fn, std::move(name));
  return std::uint32_t(reg().maps.size() - 1);
}

map_fn user_map(std::uint32_t id) {
  auto& m = reg().maps;
  if (id >= m.size())
    base::fatal("an array names map id %u; only %zu are registered", id, m.size());
  return m[id].first;
}

// FNV-1a over every table's names in order (the ids messages carry), and
// the readonlies' types.
std::uint64_t registry_fingerprint() {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (char c : s) {
      h ^= std::uint8_t(c);
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  std::lock_guard<std::mutex> lock(reg().mutex);
  for (const auto& e : reg().entries) mix(e.name);
  for (const auto& t : reg().types) mix(t.name);
  for (const auto& r : reg().reducers) mix(r.name);
  for (const auto& m : reg().maps) mix(m.second);
  for (const auto& r : reg().readonlies) mix(r.type);
  return h;
}

// Readonlies are not frozen: a program may make one before each run (its
// processes still make them in the same order).
void register_readonly(void* self, readonly_pup_fn pup, std::string_view type) {
  std::lock_guard<std::mutex> lock(reg().mutex);
  reg().readonlies.push_back({self, pup, std::string(type)});
}

void unregister_readonly(void* self) noexcept {
  std::lock_guard<std::mutex> lock(reg().mutex);
  auto& r = reg().readonlies;
  for (auto it = r.begin(); it != r.end(); ++it)
    if (it->self == self) {
      r.erase(it);
      return;
    }
}

std::vector<readonly_entry> readonly_table() {
  std::lock_guard<std::mutex> lock(reg().mutex);
  return reg().readonlies;
}

}  // namespace weft::objects::detail
