// Nodegroups: one element per node, run by whichever PE of the node takes
// its message (send_node), so its state is shared by the node's PEs; an
// exclusive entry never runs beside another exclusive one (a PE that finds
// one running requeues its message rather than block). Messages that come
// before this node built the instance wait in it.
#include <exception>
#include <mutex>
#include <string>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

namespace {

// This node's instance of nodegroup `id` (made on first use, built later by
// create_nodegroup_here: on another node than the creator's, messages may
// come before the creation message). Under the node's lock.
nodegroup_instance& nodegroup_instance_locked(node_objects& n, std::uint64_t id) {
  auto& g = n.nodegroups[id];
  if (!g) {
    g = std::make_unique<nodegroup_instance>();
    g->rec = std::make_unique<element_record>();
    g->rec->ref.id = id;
    g->rec->key = index_key::of(my_node());
  }
  return *g;
}

nodegroup_instance& nodegroup_instance_of(const collection_ref& ref) {
  auto lock = lock_node_objects();
  return nodegroup_instance_locked(*g_node_objects, ref.id);
}

}  // namespace

void on_nodegroup_message(message_ptr m) {
  if (this_pe_objects().gated) [[unlikely]] {
    hold_until_setup(std::move(m));
    return;
  }
  obj_header& h = header_of(*m);
  nodegroup_instance* found;
  {
    auto lock = lock_node_objects();
    nodegroup_instance& g = nodegroup_instance_locked(*g_node_objects, h.collection);
    if (!g.created) {
      g.waiting.push_back(m.release());
      return;
    }
    found = &g;
  }
  nodegroup_instance& g = *found;
  if (h.op == op_destroy)
    object_error("destroy of " + collection_name(g.rec->ref) +
                 ": nodegroups live as long as the run");
  const entry_info& e = checked_entry(h.entry);
  element_record& rec = *g.rec;
  std::unique_lock<std::mutex> excl(g.exclusive, std::defer_lock);
  if (e.exclusive && !excl.try_lock()) {
    // Another PE runs an exclusive entry: requeue rather than block this PE.
    send_node(std::move(m));
    return;
  }
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_begin, h.entry, rec.ref.type, 0, 0);
  try {
    e.invoke(*rec.obj, *m);
  } catch (const std::exception& ex) {
    base::fatal("entry method %s of %s on PE %d threw %s", e.name.c_str(),
                collection_name(rec.ref).c_str(), my_pe(), ex.what());
  }
  if (trace::on()) [[unlikely]]
    trace::detail::emit(trace::kind::entry_end, h.entry, 0, 0, 0);
}

void create_nodegroup_here(const collection_ref& ref, std::uint32_t ctor, const std::byte* args,
                           std::size_t n) {
  nodegroup_instance& g = nodegroup_instance_of(ref);
  {
    auto lock = lock_node_objects();
    if (g.created || g.rec->obj != nullptr) return;  // made by an earlier creation message
    g.rec->ref = ref;
  }
  const entry_info& e = entry(ctor);
  pupper p = pupper::unpacker(args, n);
  t_constructing_record = g.rec.get();
  try {
    g.rec->obj = e.construct(p);
  } catch (const std::exception& ex) {
    t_constructing_record = nullptr;
    base::fatal("constructor of %s threw %s", collection_name(ref).c_str(), ex.what());
  }
  t_constructing_record = nullptr;
  std::vector<message*> waiting;
  {
    auto lock = lock_node_objects();
    g.created = true;
    waiting.swap(g.waiting);
  }
  for (message* w : waiting) send_node(message_ptr(w));
}

element_base* nodegroup_local_element(const collection_ref& ref) {
  nodegroup_instance& g = nodegroup_instance_of(ref);
  auto lock = lock_node_objects();
  return g.created ? g.rec->obj : nullptr;
}

}  // namespace weft::objects::detail
