// The schemes by message: broadcast and static_blocks, and the message that
// ends an asynchronous loop on its caller's PE (docs/tasks.md).
//
// One message per PE names the loop; broadcast has every PE grab chunks by
// atomic increment, static_blocks gives each PE one block. Messages, not
// tasks, because these schemes mean "when that PE's scheduler gets to it".
// Each message holds a reference to the loop (loop.hpp): it may arrive
// after the loop ended.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include "base/op_count.hpp"
#include "loop.hpp"
#include "weft/base/error.hpp"
#include "weft/core/message.hpp"

namespace weft::tasks::internal {

namespace {
handler_id h_broadcast = 0, h_block = 0, h_done = 0;
}  // namespace

std::uint64_t grab_chunks(loop& l) {
  std::uint64_t done = 0;
  for (;;) {
    base::count(base::op::shared_rmw);
    const std::uint64_t c = l.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (c >= l.chunks) return done;
    const std::uint64_t lo = c * l.grain, hi = std::min(l.n, lo + l.grain);
    if (!l.failed.load(std::memory_order_relaxed)) run_body(l, lo, hi);
    done += hi - lo;
  }
}

namespace {

// Block b of pes equal blocks: b * (n / pes) plus the first (n % pes) blocks
// one longer (no overflow for any n).
std::uint64_t block_begin(const loop& l, int b) {
  const std::uint64_t p = std::uint64_t(l.pes), q = l.n / p, rem = l.n % p, ub = std::uint64_t(b);
  return ub * q + std::min(ub, rem);
}

}  // namespace

// Claims block b and runs it; returns the iterations accounted (0 if another
// PE had claimed it).
std::uint64_t run_block(loop& l, int b) {
  std::atomic<bool>& claim = l.claimed[std::size_t(b)];
  if (claim.load(std::memory_order_relaxed)) return 0;
  base::count(base::op::shared_rmw);
  if (claim.exchange(true, std::memory_order_acq_rel)) return 0;
  return run_chunks(l, block_begin(l, b), block_begin(l, b + 1));
}

namespace {

struct block_payload {
  loop* l;
  int block;
};

void on_broadcast(message_ptr m) {
  loop* l = m->as<loop*>();
  account(*l, grab_chunks(*l));
  release(l);
}

void on_block(message_ptr m) {
  const block_payload p = m->as<block_payload>();
  account(*p.l, run_block(*p.l, p.block));
  release(p.l);
}

void on_done(message_ptr m) {
  loop* l = m->as<loop*>();
  if (l->failed.load(std::memory_order_acquire)) {
    try {
      std::rethrow_exception(l->error);
    } catch (const std::exception& e) {
      base::fatal(
          "a body of weft::parallel_for_async threw %s (an asynchronous loop has nobody "
          "to rethrow it to)",
          e.what());
    } catch (...) {
      base::fatal(
          "a body of weft::parallel_for_async threw an exception not derived from "
          "std::exception");
    }
  }
  weft::detail::pending_work_end();
  // finish() may throw: core reports it as this handler's exception.
  struct releaser {
    loop* l;
    ~releaser() { release(l); }
  } r{l};
  l->async->finish();
}

}  // namespace

void send_done(int pe, loop* l) {
  send(pe, make_message_with(h_done, l));
}

// Sends the messages of a broadcast or static loop to the PEs of the node
// but `skip_rank`, one reference each.
void send_to_pes(loop& l, int skip_rank, bool blocks) {
  const int pes = g_node->pes;
  auto skipped = [&](int r) {
    return r == skip_rank || (blocks && block_begin(l, r) == block_begin(l, r + 1));  // empty
  };
  // The references of all the messages at once: one read-modify-write of
  // the loop's line, not one per PE.
  int messages = 0;
  for (int r = 0; r < pes; ++r) messages += skipped(r) ? 0 : 1;
  base::count(base::op::shared_rmw);
  l.refs.fetch_add(messages, std::memory_order_relaxed);
  for (int r = 0; r < pes; ++r) {
    if (skipped(r)) continue;
    if (blocks)
      send(my_node() * node_size() + r, make_message_with(h_block, block_payload{&l, r}));
    else
      send(my_node() * node_size() + r, make_message_with(h_broadcast, &l));
  }
}

void prepare_blocks(loop& l) {
  if (l.claimed_size < l.pes) {
    l.claimed = std::make_unique<std::atomic<bool>[]>(std::size_t(l.pes));
    l.claimed_size = l.pes;
  }
  for (int b = 0; b < l.pes; ++b) l.claimed[std::size_t(b)].store(false, std::memory_order_relaxed);
}

void register_handlers() {
  h_broadcast = register_handler("tasks.broadcast", &on_broadcast);
  h_block = register_handler("tasks.block", &on_block);
  h_done = register_handler("tasks.done", &on_done);
}

}  // namespace weft::tasks::internal
