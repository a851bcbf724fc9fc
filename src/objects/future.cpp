// Futures and coroutine bookkeeping. A future lives on the PE that made it
// (a slot by id); future_set sends its value there (op_future_set), which
// resumes the coroutine awaiting it. Suspended entry-method coroutines
// belong to their element (destroyed with it, and an element with one
// cannot migrate); main's belong to the PE. A coroutine resumed for an
// element is followed by what its entry asked for (after_entry), as an
// entry call is.
#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include "objects/internal.hpp"
#include "weft/objects/collections.hpp"

namespace weft::objects::detail {

void adopt_task(element_record* owner, std::coroutine_handle<> h, promise_base& p,
                const char* what) {
  p.owner = owner;
  p.what = what;
  p.self = h;
  if (owner == nullptr) {
    this_pe_objects().main_tasks.push_back(h);
    return;
  }
  if (owner->ref.kind == collection_kind::nodegroup) {
    // Every PE of the node may run the nodegroup's coroutines.
    auto lock = lock_node_objects();
    owner->extras().coroutines.push_back(h);
    return;
  }
  owner->extras().coroutines.push_back(h);
}

namespace {

// A resumed coroutine's run in the trace: the entry method whose call made
// it (entry_begin/entry_end with the method's id, element type and index, as
// its first part has), or main (handler_begin/handler_end of the main
// handler, as main's first part has). Without this the work after each
// co_await would show as the runtime handler that resumed it
// (objects.control, objects.element).
class resumed_span {
 public:
  explicit resumed_span(const promise_base* p) {
    if (p == nullptr) return;
    while (p->parent != nullptr) p = p->parent;
    if (!p->detached) return;  // not the runtime's: nothing to name it after
    if (p->owner != nullptr && p->entry != promise_base::no_entry) {
      end_ = trace::kind::entry_end;
      id_ = p->entry;
      trace::detail::emit(trace::kind::entry_begin, id_, p->owner->ref.type,
                          std::uint32_t(p->owner->key.w[0]), 0);
    } else if (p->owner == nullptr) {
      end_ = trace::kind::handler_end;
      id_ = trace::main_handler;
      trace::detail::emit(trace::kind::handler_begin, id_, std::uint32_t(-1), 0, 0);
    }
  }
  // The frame, even the element, may be gone by now: only what was copied.
  ~resumed_span() {
    if (end_ != trace::kind{} && trace::on()) trace::detail::emit(end_, id_, 0, 0, 0);
  }
  resumed_span(const resumed_span&) = delete;
  resumed_span& operator=(const resumed_span&) = delete;

 private:
  trace::kind end_{};
  std::uint32_t id_ = 0;
};

void resume_run(element_record* owner, std::coroutine_handle<> h) {
  if (owner != nullptr && owner->ref.kind == collection_kind::nodegroup) {
    // A nodegroup neither reduces nor migrates: nothing to do after it.
    h.resume();
    return;
  }
  if (owner != nullptr) owner->contributed_now = false;
  const std::uint64_t t0 = owner != nullptr && owner->measured ? begin_load(*owner) : 0;
  // Decided before: the coroutine may destroy the element.
  const bool counted = owner != nullptr && owner->comm;
  element_record* const outer_sender = counted ? comm_enter(*owner) : nullptr;
  h.resume();
  if (counted) comm_leave(outer_sender);
  // The element may be gone (the coroutine destroyed it): its record too.
  if (owner != nullptr && owner->obj != nullptr) {
    if (t0 != 0) end_load(*owner, t0);
    after_entry(*owner);
  }
}

[[gnu::noinline]] void resume_traced(element_record* owner, std::coroutine_handle<> h,
                                     const promise_base* p) {
  const resumed_span span(p);
  resume_run(owner, h);
}

}  // namespace

void resume(element_record* owner, std::coroutine_handle<> h, const promise_base* p) {
  if (trace::on()) [[unlikely]]
    resume_traced(owner, h, p);
  else
    resume_run(owner, h);
}

void promise_base::finished_detached(promise_base& p) noexcept {
  if (t_pe_objects == nullptr) return;
  auto erase = [&p](std::vector<std::coroutine_handle<>>& list) {
    auto it = std::find(list.begin(), list.end(), p.self);
    if (it != list.end()) list.erase(it);
  };
  if (p.owner != nullptr && p.owner->ref.kind == collection_kind::nodegroup) {
    auto lock = lock_node_objects();
    erase(p.owner->extras().coroutines);
    return;
  }
  erase(p.owner != nullptr ? p.owner->extras().coroutines : t_pe_objects->main_tasks);
}

void promise_base::fail_detached(promise_base& p, std::exception_ptr e) noexcept {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    what = ex.what();
  } catch (...) {
  }
  std::string where = p.owner != nullptr ? " of " + element_name(*p.owner) : std::string();
  base::fatal("%s%s on PE %d threw %s", p.what, where.c_str(), my_pe(), what.c_str());
}

std::uint64_t future_new() {
  pe_objects& s = this_pe_objects();
  const std::uint64_t id = ++s.future_counter;
  s.futures.emplace(id, future_slot{});
  return id;
}

void future_set(int pe, std::uint64_t id, std::vector<std::byte> value) {
  const int pes = num_pes();
  if (pe < 0 || pe >= pes)
    object_error("set of a weft::future owned by PE " + std::to_string(pe) +
                 ", which does not exist (an unset or corrupt future)");
  message_ptr m = new_control_message(collection_ref{}, index_key{}, op_future_set, value.size());
  header_of(*m).args.future_id = id;
  if (!value.empty()) std::memcpy(args_of(*m), value.data(), value.size());
  send_object_to_pe(pe, std::move(m));
}

bool future_take(std::uint64_t id, std::vector<std::byte>& out) {
  pe_objects& s = this_pe_objects();
  auto it = s.futures.find(id);
  if (it == s.futures.end())
    object_error("a weft::future of PE " + std::to_string(my_pe()) +
                 " is awaited twice (a future gives its value once)");
  if (!it->second.has) return false;
  out = std::move(it->second.value);
  s.futures.erase(it);
  return true;
}

void future_wait(std::uint64_t id, std::coroutine_handle<> h, promise_base* waiter) {
  pe_objects& s = this_pe_objects();
  future_slot& f = s.futures[id];
  if (f.h) object_error("a weft::future is awaited by two coroutines at once");
  f.h = h;
  f.waiter = waiter;
}

void future_cancel(std::uint64_t id) noexcept {
  if (t_pe_objects == nullptr) return;
  auto it = t_pe_objects->futures.find(id);
  if (it != t_pe_objects->futures.end()) it->second.h = {};
}

// A future's value, at its owner PE.
void receive_future_value(message_ptr m) {
  const obj_header& h = header_of(*m);
  pe_objects& s = this_pe_objects();
  auto it = s.futures.find(h.args.future_id);
  if (it == s.futures.end() || it->second.has)
    object_error("a weft::future of PE " + std::to_string(my_pe()) +
                 " was set twice (or after its value was taken)");
  future_slot& f = it->second;
  f.has = true;
  f.value.assign(args_of(*m), args_of(*m) + args_size(*m));
  if (f.h)
    resume(f.waiter ? f.waiter->effective_owner() : nullptr, std::exchange(f.h, {}), f.waiter);
}

}  // namespace weft::objects::detail
