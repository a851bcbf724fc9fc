// The control handler: every runtime-internal operation (op_kind) comes
// through on_control, which holds messages back until main's setup ended
// (other nodes) and until this node knows the collection they name, then
// calls the operation's function, one line per case. The protocols live
// with their concepts (collections, location, migration, broadcast,
// reduction, future, lifecycle).
#include <new>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

message_ptr new_control_message(const collection_ref& ref, const index_key& key, op_kind op,
                                std::size_t payload) {
  message_ptr m = make_message(control_handler_id, sizeof(obj_header) + payload);
  obj_header* h = new (m->data()) obj_header;
  h->collection = ref.id;
  h->key = key;
  h->op = op;
  h->origin_pe = my_pe();
  return m;
}

void on_control(message_ptr m) {
  obj_header& h = header_of(*m);
  if (h.op == op_setup_done) {
    receive_setup_done(std::move(m));
    return;
  }
  if (this_pe_objects().gated) [[unlikely]] {
    hold_until_setup(std::move(m));
    return;
  }
  // Messages about a collection this node has not learnt yet wait for it.
  const bool names_collection =
      h.op != op_create && h.op != op_allreduce_done && h.op != op_future_set;
  if (names_collection && local_collection_for(m) == nullptr) return;
  switch (h.op) {
    case op_create:
      return receive_creation(std::move(m));
    case op_insert:
      return receive_insert(std::move(m));
    case op_insert_home:
      return receive_insert_at_home(std::move(m));
    case op_insert_root:
      return receive_insert_at_root(std::move(m));
    case op_location:
      return receive_location(std::move(m));
    case op_migrate_in:
      return receive_migrating_element(std::move(m));
    case op_bcast_request:
      return receive_bcast_request(std::move(m));
    case op_bcast:
      return receive_bcast(std::move(m));
    case op_red_partial:
      return receive_reduction_partial(std::move(m));
    case op_red_up:
      return receive_reduction_up(std::move(m));
    case op_red_leave:
      return receive_element_left(std::move(m));
    case op_allreduce_done:
      return receive_allreduce_result(std::move(m));
    case op_future_set:
      return receive_future_value(std::move(m));
    case op_sync_plan:
      return receive_sync_plan(std::move(m));
    case op_sync_done:
      return receive_sync_done(std::move(m));
    case op_sync_resume:
      return receive_sync_resume(std::move(m));
    case op_sync_count:
      return receive_sync_count(std::move(m));
    case op_sync_counts:
      return receive_sync_counts(std::move(m));
    case op_lb_start:
      return receive_lb_start(std::move(m));
    case op_lb_collect:
      return receive_lb_collect(std::move(m));
    case op_lb_records:
      return receive_lb_records(std::move(m));
    case op_migrate_pointer:
      return receive_element_by_pointer(std::move(m));
    case op_tree_go:
      return receive_tree_go(std::move(m));
    case op_tree_records:
      return receive_tree_records(std::move(m));
    case op_tree_summary:
      return receive_tree_summary(std::move(m));
    case op_tree_quota:
      return receive_tree_quota(std::move(m));
    case op_tree_offer:
      return receive_tree_offer(std::move(m));
    case op_tree_assign:
      return receive_tree_assign(std::move(m));
    case op_tree_placed:
      return receive_tree_placed(std::move(m));
    case op_tree_moves:
      return receive_tree_moves(std::move(m));
    case op_tree_group_summary:
      return receive_tree_group_summary(std::move(m));
    case op_tree_group_quota:
      return receive_tree_group_quota(std::move(m));
    case op_tree_group_offer:
      return receive_tree_group_offer(std::move(m));
    case op_tree_group_assign:
      return receive_tree_group_assign(std::move(m));
    case op_tree_group_moves:
      return receive_tree_group_moves(std::move(m));
    case op_sync_group_join:
      return receive_group_join(std::move(m));
    case op_sync_group_records:
      return receive_group_records(std::move(m));
    case op_sync_group_plan:
      return receive_group_plan(std::move(m));
    case op_bcast_need:
      return receive_bcast_need(std::move(m));
    case op_bcast_forward:
      return receive_bcast_forward(std::move(m));
    default:
      base::fatal("objects: control message of unknown kind %d", int(h.op));
  }
}

// Any object message, to its handler (messages kept for later).
void dispatch_object_message(message_ptr m) {
  if (m->handler == element_handler_id)
    on_element_message(std::move(m));
  else if (m->handler == nodegroup_handler_id)
    on_nodegroup_message(std::move(m));
  else
    on_control(std::move(m));
}

}  // namespace weft::objects::detail
