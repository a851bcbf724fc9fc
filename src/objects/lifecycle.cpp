// The objects layer's life in a node: the layer's hooks (node and PE start
// and stop, main returned), the handlers' registration, main's setup gate
// on the other nodes (object messages wait until node 0's main function
// returned and its readonly values arrived), and the errors of calls made
// off a PE.
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "objects/internal.hpp"
#include "weft/core/handler.hpp"
#include "weft/objects/collections.hpp"
#include "weft/trace/session.hpp"

namespace weft::objects::detail {

node_objects* g_node_objects = nullptr;
handler_id nodegroup_handler_id = 0;
handler_id control_handler_id = 0;

namespace {

// What a call from a guest of a PE (layer threads: an OpenMP thread on a
// carrier) is told: it has the PE's numbers, not its state.
std::string guest_text() {
  return " on a guest of PE " + std::to_string(my_pe()) +
         ": an OpenMP thread that runs on a carrier thread, not on the PE (a thread beyond the "
         "node's PEs, or of a nested team); call it from thread 0 of the region, or after it";
}

}  // namespace

[[noreturn, gnu::cold, gnu::noinline]] void off_pe_error() {
  if (weft::detail::on_guest_thread())
    object_error("the weft objects API was called" + guest_text());
  object_error("the weft objects API was called off a PE (or while no node runs)");
}

void hold_until_setup(message_ptr m) {
  this_pe_objects().gate.push_back(m.release());
}

namespace {

// A group or array known to node 0 when main first suspended, as the
// setup-done message carries it.
struct setup_creation {
  std::vector<std::byte> ref_bytes;  // the collection_ref
  std::uint32_t ctor = 0;
  std::vector<std::byte> args;
};

std::vector<setup_creation> setup_creations() {
  std::vector<setup_creation> out;
  auto lock = lock_node_objects();
  for (const auto* made : {&g_node_objects->creations, &g_node_objects->nodegroup_creations}) {
    for (const auto& [id, info] : *made) {
      auto dir = g_node_objects->directory.find(id);
      if (dir == g_node_objects->directory.end()) continue;
      setup_creation sc;
      const auto* bytes = reinterpret_cast<const std::byte*>(&dir->second);
      sc.ref_bytes.assign(bytes, bytes + sizeof(collection_ref));
      sc.ctor = info->ctor;
      sc.args = info->args;
      out.push_back(std::move(sc));
    }
  }
  return out;
}

collection_ref ref_of(const setup_creation& sc) {
  collection_ref ref;
  if (sc.ref_bytes.size() != sizeof ref)
    base::fatal(
        "the setup-done message from node 0 names a collection in %zu bytes, not %zu: "
        "every process of a job must run the same program build",
        sc.ref_bytes.size(), sizeof ref);
  std::memcpy(&ref, sc.ref_bytes.data(), sizeof ref);
  return ref;
}

// Under g_node_objects->mutex: what receive_creation learns from a creation
// message (a group's or array's PEs build their parts at their first
// touch); the creation message itself, arriving later, then finds the
// collection known. A nodegroup is built by the caller once the lock is
// released (its constructor may use the runtime): it goes to `build`.
void learn_setup_creation(setup_creation&& sc, std::vector<setup_creation>& build) {
  const collection_ref ref = ref_of(sc);
  g_node_objects->directory.emplace(ref.id, ref);
  if (ref.kind == collection_kind::nodegroup) {
    build.push_back(std::move(sc));
    return;
  }
  auto info = std::make_shared<creation_info>();
  info->ctor = sc.ctor;
  info->args = std::move(sc.args);
  g_node_objects->creations.emplace(ref.id, std::move(info));
}

// PE 0 of node 0, when the main function returned (or first suspended):
// the readonly values go to every PE of the other nodes, which hold their
// object messages until then (the values are set before any element there
// runs, as on node 0).
void main_returned() {
  if (num_nodes() == 1) return;
  std::vector<readonly_entry> table = readonly_table();
  for (const readonly_entry& r : table)
    if (r.pup == nullptr)
      object_error("weft::readonly<" + r.type + "> cannot be sent to the other " +
                   std::to_string(num_nodes() - 1) +
                   " process(es) of this job: its type has no weft::pup; give it a pup "
                   "function or run in one process");
  // The groups and arrays created so far go too: a PE past the gate then
  // knows every collection main's setup made, whichever of its messages
  // reaches it first (a chare's constructor may call a group's local()
  // before this PE's creation message from the broadcast tree arrives).
  std::vector<setup_creation> created = setup_creations();
  auto pack = [&](pupper& p) {
    std::uint64_t n = table.size();
    p | n;
    for (const readonly_entry& r : table) r.pup(r.self, p);
    std::uint64_t c = created.size();
    p | c;
    for (setup_creation& sc : created) p | sc.ref_bytes | sc.ctor | sc.args;
  };
  pupper sizer = pupper::sizer();
  pack(sizer);
  message_ptr m = new_control_message(collection_ref{}, index_key{}, op_setup_done, sizer.offset());
  pupper packer = pupper::packer(args_of(*m), args_size(*m));
  pack(packer);
  weft::broadcast(std::move(m));
}

}  // namespace

void receive_setup_done(message_ptr m) {
  pe_objects& s = this_pe_objects();
  if (!s.gated) return;  // node 0
  // The first PE of the node to hear puts the setup in place: the readonly
  // values, the groups and arrays main's setup made, and its nodegroups,
  // built here. The others see it through the lock before they run
  // anything of the program; one that hears while the nodegroups are being
  // built asks again later, staying behind the gate (it must not block
  // inside a handler).
  std::vector<setup_creation> build;
  {
    auto lock = lock_node_objects();
    if (!g_node_objects->readonlies_set) {
      if (g_node_objects->setup_unpacking) {
        weft::send(my_pe(), std::move(m));
        return;
      }
      g_node_objects->setup_unpacking = true;
      std::vector<readonly_entry> table = readonly_table();
      pupper u = pupper::unpacker(args_of(*m), args_size(*m));
      try {
        std::uint64_t n = 0;
        u | n;
        if (n != table.size())
          base::fatal(
              "node 0 sent %llu readonly value(s) and this process has %zu weft::readonly "
              "globals: every process of a job must run the same program build",
              static_cast<unsigned long long>(n), table.size());
        for (const readonly_entry& r : table) r.pup(r.self, u);
        std::uint64_t c = 0;
        u | c;
        for (std::uint64_t k = 0; k < c; ++k) {
          setup_creation sc;
          u | sc.ref_bytes | sc.ctor | sc.args;
          learn_setup_creation(std::move(sc), build);
        }
      } catch (const serialization_error& ex) {
        base::fatal("the readonly values from node 0 do not unpack: %s", ex.what());
      }
      if (build.empty()) g_node_objects->readonlies_set = true;
    }
  }
  if (!build.empty()) {
    for (const setup_creation& sc : build)
      create_nodegroup_here(ref_of(sc), sc.ctor, sc.args.data(), sc.args.size());
    auto lock = lock_node_objects();
    g_node_objects->readonlies_set = true;
  }
  s.gated = false;
  std::vector<message*> held;
  held.swap(s.gate);
  for (message* h : held) dispatch_object_message(message_ptr(h));
}

// ---- lifetime ----------------------------------------------------------------------

namespace {

void node_start() {
  freeze_registries(true);
  g_entry_table = entry_table();
  g_node_objects = new node_objects;
  sync_node_start();
  // The trace names entry methods and collections (by element type).
  trace::set_name_source("entry", [] {
    std::vector<std::pair<std::uint32_t, std::string>> names;
    const std::span<const entry_info> table = entry_table();
    for (std::size_t i = 0; i < table.size(); ++i)
      names.emplace_back(std::uint32_t(i), table[i].name);
    return names;
  });
  trace::set_name_source("collection", [] {
    std::vector<std::pair<std::uint32_t, std::string>> names;
    for (std::uint32_t i = 0; i < element_type_count(); ++i)
      names.emplace_back(i, element_type(i).name);
    return names;
  });
}

void pe_start() {
  t_pe_objects = new pe_objects;
  t_pe_objects->gated = num_nodes() > 1 && my_node() != 0;
  sync_pe_start();
}

void pe_stop() {
  pe_objects* s = t_pe_objects;
  if (s == nullptr) return;
  for (auto h : s->main_tasks) h.destroy();
  s->main_tasks.clear();
  std::size_t stranded = s->gate.size();
  for (message* w : s->gate) message_ptr{w};
  for (auto& [id, msgs] : s->parked) {
    stranded += msgs.size();
    for (message* w : msgs) message_ptr{w};
  }
  if (stranded > 0)
    base::warn(
        "%zu object message(s) were not delivered: they came before the main function's setup "
        "ended or before this node learnt their collection, and the run ended first",
        stranded);
  for (auto& [id, lc] : s->collections) {
    for (const auto& [k, rec] : lc->local) destroy_frames(*rec);
  }
  for (auto& [id, lc] : s->collections) {
    std::size_t undelivered = 0;
    for (auto& [k, msgs] : lc->waiting) {
      undelivered += msgs.size();
      for (message* w : msgs) message_ptr{w};
    }
    if (undelivered > 0)
      base::warn("%zu message(s) to elements of %s that were never inserted were not delivered",
                 undelivered, collection_name(lc->ref).c_str());
    for (auto& [k, msgs] : lc->paused_msgs)
      for (message* w : msgs) message_ptr{w};
    for (message* w : lc->early) message_ptr{w};
    for (const auto& [k, rec] : lc->local) {
      element_base* obj = rec->obj;
      rec->obj = nullptr;
      delete obj;
    }
    lc->local.clear();
  }
  s->collections.clear();
  t_pe_objects = nullptr;
  delete s;
}

void node_stop() {
  node_objects* n = g_node_objects;
  g_node_objects = nullptr;
  if (n != nullptr) {
    for (auto& [id, g] : n->nodegroups) {
      for (message* w : g->waiting) message_ptr{w};
      if (g->rec) destroy_frames(*g->rec);  // coroutines still suspended at the end
      if (g->rec) {
        element_base* obj = g->rec->obj;
        g->rec->obj = nullptr;
        delete obj;
      }
    }
    delete n;
  }
  freeze_registries(false);
}

const bool registered = [] {
  element_handler_id = register_handler("objects.element", &on_element_message);
  nodegroup_handler_id = register_handler("objects.nodegroup", &on_nodegroup_message);
  control_handler_id = register_handler("objects.control", &on_control);
  weft::detail::register_layer({"objects", &node_start, &pe_start, &pe_stop, &node_stop,
                                &main_returned, &registry_fingerprint});
  return true;
}();

}  // namespace

void object_error(const std::string& what) {
  base::fatal("%s", what.c_str());
}

void require_pe(const char* what) {
  if (t_pe_objects == nullptr && weft::detail::on_guest_thread())
    object_error(std::string(what) + " was called" + guest_text());
  if (t_pe_objects == nullptr) object_error(std::string(what) + " was called off a PE");
}

}  // namespace weft::objects::detail
