// Carriers (carrier.hpp).
#include "threads/carrier.hpp"

#include <sched.h>
#include <exception>
#include "weft/base/error.hpp"
#include "weft/base/memory.hpp"
#include "weft/base/topology.hpp"
#include "weft/core/handler.hpp"

namespace weft::threads {

namespace {
thread_local carrier* t_carrier = nullptr;
}  // namespace

carrier::carrier(carrier_pool& pool, int pe, int slot, int cpu)
    : pool_(pool), pe_(pe), slot_(slot), thread_([this, cpu] { main(cpu); }) {}

carrier::~carrier() {
  stop_.store(true, std::memory_order_release);
  tokens_.fetch_add(1, std::memory_order_release);
  tokens_.notify_one();
  if (thread_.joinable()) thread_.join();
}

carrier* carrier::current() noexcept {
  return t_carrier;
}

void carrier::start(ult* u) noexcept {
  job_.store(u, std::memory_order_release);
  post();
}

void carrier::post() noexcept {
  tokens_.fetch_add(1, std::memory_order_seq_cst);
  if (asleep_.exchange(false, std::memory_order_seq_cst)) weft::detail::add_pe_guests(pe_, +1);
  tokens_.notify_one();
}

bool carrier::take_token() noexcept {
  for (;;) {
    if (stop_.load(std::memory_order_acquire)) return false;
    int t = tokens_.load(std::memory_order_acquire);
    while (t > 0)
      if (tokens_.compare_exchange_weak(t, t - 1, std::memory_order_acq_rel)) return true;
    // Going to sleep: no longer a guest of the PE. A post that comes now
    // sees asleep_ (seq_cst on both sides) and counts the carrier back.
    asleep_.store(true, std::memory_order_seq_cst);
    weft::detail::add_pe_guests(pe_, -1);
    if (tokens_.load(std::memory_order_seq_cst) == 0) tokens_.wait(0, std::memory_order_acquire);
    if (asleep_.exchange(false, std::memory_order_seq_cst)) weft::detail::add_pe_guests(pe_, +1);
  }
}

void carrier::main(int cpu) {
  t_carrier = this;
  base::topology::get().bind_this_thread(cpu);
  // The code it runs sees the PE it works for (weft::my_pe, my_rank,
  // node_size), as it would on the PE's own thread.
  weft::detail::enter_guest(pe_);
  // Running from the start (the first take_token counts it out).
  weft::detail::add_pe_guests(pe_, +1);
  while (take_token())
    if (ult* u = job_.exchange(nullptr, std::memory_order_acq_rel)) run(u);
  if (!asleep_.load(std::memory_order_relaxed)) weft::detail::add_pe_guests(pe_, -1);
  // The thread ends with the node: what it cached goes back.
  release_stack_cache();
  base::block_cache_release();
  weft::detail::leave_guest();
  t_carrier = nullptr;
}

void carrier::run(ult* u) {
  u->f = fiber::create(&detail::ult_entry, u, u->stack_bytes);
  u->f->set_label(u->label, u->label_id);
  if (u->private_tls) u->f->give_private_tls();
  detail::set_current(u);
  for (;;) {
    bool done = false;
    try {
      if (trace::on()) detail::trace_switch(trace::kind::ult_begin, u);
      done = u->f->resume();
      if (trace::on()) detail::trace_switch(trace::kind::ult_end, u);
    } catch (const std::exception& e) {
      base::fatal("an exception escaped a logical thread of PE %d (on a carrier): %s", pe_,
                  e.what());
    } catch (...) {
      base::fatal("an exception not derived from std::exception escaped a logical thread of PE %d",
                  pe_);
    }
    if (done) break;
    // Suspended: wait for its resume. A node that ends meanwhile leaves it
    // suspended (its owner frees what it holds).
    if (!take_token()) {
      detail::set_current(nullptr);
      return;
    }
  }
  fiber::destroy(u->f);
  u->f = nullptr;
  detail::set_current(nullptr);
  // Free before the owner hears of the end: a caller that waits for the
  // ULT's end and then places the same logical thread in the same slot
  // finds this carrier free (threadprivate data persists so).
  pool_.release(this);
  u->finished(u);
}

carrier* carrier_pool::acquire(int pe, int slot, int cpu, bool& created) {
  std::lock_guard<std::mutex> lock(mutex_);
  created = false;
  if (slot < 1) slot = 1;
  if (std::size_t(slot) >= slots_.size()) {
    slots_.resize(std::size_t(slot) + 1);
    busy_.resize(std::size_t(slot) + 1, 0);
  }
  std::size_t at = std::size_t(slot);
  if (slots_[at] && busy_[at]) {
    // Taken: the lowest free one, else the lowest empty slot, else a new one.
    at = 0;
    for (std::size_t i = 1; i < slots_.size() && at == 0; ++i)
      if (slots_[i] && !busy_[i]) at = i;
    for (std::size_t i = 1; i < slots_.size() && at == 0; ++i)
      if (!slots_[i]) at = i;
    if (at == 0) {
      at = slots_.size();
      slots_.emplace_back();
      busy_.push_back(0);
    }
  }
  if (!slots_[at]) {
    slots_[at] = std::make_unique<carrier>(*this, pe, int(at), cpu);
    created = true;
  }
  busy_[at] = 1;
  return slots_[at].get();
}

void carrier_pool::release(carrier* c) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  // (After stop_all the slots are gone: nothing to free.)
  if (std::size_t(c->slot()) < busy_.size()) busy_[std::size_t(c->slot())] = 0;
}

void carrier_pool::stop_all() noexcept {
  std::vector<std::unique_ptr<carrier>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all.swap(slots_);
    busy_.clear();
  }
  all.clear();  // each destructor stops and joins its thread
}

}  // namespace weft::threads
