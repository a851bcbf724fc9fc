// The shm transport's message path: the send side (a record pushed into the
// peer's ring, or queued until it has room) and the receive side (each
// peer's ring drained in order, one handler per record kind). ring.hpp has
// the record format and the doorbell protocol.
//
// Kept in one translation unit, with the eager and chunk handlers forced
// inline into drain and drain and flush into poll_once, as they were when
// the transport was one file: these are every message's instructions
// (callgrind counts them). The handlers of the large messages (rendezvous,
// pool loans, acks) are calls into rendezvous.cpp, marked unlikely so that
// the eager case keeps its registers; a call is nothing beside 16 KiB or
// more. drain passes the ring's size to the inline handlers because a
// value reloaded from the peer after each hook call costs instructions on
// every message.
//
// Send never blocks: when the ring is full the message waits in a per-peer
// FIFO that progress() pushes later. The receiver handles one sender's
// records in order, so order per pair holds whatever the mix of sizes.
//
// Rejected: one shared ring per receiver (needs an atomic per send and lets
// one sender starve the others); a table of handler pointers instead of the
// switch (an indirect call per record, where the switch is a jump the
// predictor learns).
#include <cstdarg>
#include <cstdio>
#include "transport.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::net::shm {

void ring_corrupt(int node, const char* fmt, ...) {
  char what[256] = "";
  if (fmt != nullptr) {
    std::snprintf(what, sizeof what, " (");
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(what + 2, sizeof what - 3, fmt, ap);
    va_end(ap);
    std::snprintf(what + std::strlen(what), sizeof what - std::strlen(what), ")");
  }
  base::fatal("shm transport: ring from node %d is corrupt%s", node, what);
}

// ------------------------------------------------------------- send side

// Copies one record into p's ring; false (nothing written) if it does not fit.
inline bool shm_transport::try_push(peer& p, std::uint32_t kind, const descriptor* prefix,
                                    const void* data, std::size_t data_bytes) {
  const std::size_t payload = (prefix != nullptr ? 16 : 0) + data_bytes;
  const std::uint64_t len = record_bytes(payload);
  const std::uint64_t cap = p.tx_mask + 1;
  const std::uint64_t pos = p.tx_tail;
  // + 16: the header after this record must be free too (it gets zeroed).
  if (pos + len + 16 - p.tx_head_seen > cap) {
    p.tx_head_seen = p.tx_ctl->head.load(std::memory_order_acquire);
    if (pos + len + 16 - p.tx_head_seen > cap) return false;
  }
  std::uint64_t at = pos + 16;
  if (prefix != nullptr) {
    copy_in(p.tx_data, p.tx_mask, at, prefix, 16);
    at += 16;
  }
  if (data_bytes != 0) copy_in(p.tx_data, p.tx_mask, at, data, data_bytes);
  auto* next = reinterpret_cast<record*>(p.tx_data + ((pos + len) & p.tx_mask));
  next->stamp.store(0, std::memory_order_relaxed);
  auto* r = reinterpret_cast<record*>(p.tx_data + (pos & p.tx_mask));
  r->bytes = std::uint32_t(payload);
  r->kind = kind;
  r->stamp.store(pos + 1, std::memory_order_release);
  p.tx_tail = pos + len;
  return true;
}

// Pushes as much of q as fits; true when q is fully in the ring (and its
// buffer released, or awaiting its rendezvous ack).
bool shm_transport::push_pending(peer& p, pending& q) {
  if (q.kind == k_eager) {
    if (!try_push(p, k_eager, nullptr, q.buffer, q.bytes)) return false;
    hooks_.release(q.buffer);
    return true;
  }
  if (q.kind == k_rndv) {
    const descriptor d{reinterpret_cast<std::uint64_t>(q.buffer), q.bytes};
    if (!try_push(p, q.kind, &d, nullptr, 0)) return false;
    ++outstanding_;
    return true;
  }
  if (q.kind == k_pool || q.kind == k_return) {
    // Lent, or handed back: either way core let go of it in send().
    const std::uint64_t addr =
        q.kind == k_pool ? reinterpret_cast<std::uint64_t>(q.buffer) : p.view->remote(q.buffer);
    const descriptor d{addr, q.bytes};
    return try_push(p, q.kind, &d, nullptr, 0);
  }
  while (q.offset < q.bytes) {
    const std::size_t n = std::min(q.bytes - q.offset, p.chunk_limit);
    const unsigned char* src = static_cast<const unsigned char*>(q.buffer) + q.offset;
    bool ok;
    if (q.offset == 0) {
      const descriptor first{q.bytes, 0};
      ok = try_push(p, k_chunk_first, &first, src, n);
    } else {
      ok = try_push(p, k_chunk, nullptr, src, n);
    }
    if (!ok) return false;
    q.offset += n;
  }
  hooks_.release(q.buffer);
  return true;
}

[[gnu::always_inline]] inline void shm_transport::enqueue(peer& p, const pending& q) {
  p.fifo.push_back(q);
  if (!p.queued) {
    p.queued = true;
    ++queued_peers_;
  }
}

void shm_transport::send(int node, void* buffer, std::size_t bytes) {
  if (node < 0 || node >= size_ || node == rank_ || !initialised_ || finalised_)
    base::fatal("shm transport: send to node %d from node %d of %d%s", node, rank_, size_,
                !initialised_ ? " before init()"
                : finalised_  ? " after finalize()"
                              : "");
  peer& p = peers_[std::size_t(node)];
  // A block of p's own pool that core held in place goes back as a
  // descriptor: no copy either way (a ping-pong of large messages).
  // Written in our pool (core's large blocks): lent to p, which reads it in
  // place or copies it out, and gives it back. Else, below cma_min the
  // chunked path wins: both sides copy at once while the data is still in
  // cache, and no ack round trip is needed.
  const bool returning = p.view != nullptr && p.view->contains(buffer);
  const bool use_cma = cma_ && bytes >= opts_.cma_min;
  const bool in_pool = bytes > p.eager_limit && pool_ != nullptr && pool_->contains(buffer);
  pending q{returning                ? k_return
            : bytes <= p.eager_limit ? k_eager
            : in_pool                ? k_pool
            : use_cma                ? k_rndv
                                     : k_chunk_first,
            buffer, bytes, 0};
  ++(q.kind == k_eager    ? counters_.eager
     : q.kind == k_pool   ? counters_.pooled
     : q.kind == k_return ? counters_.returned
     : q.kind == k_rndv   ? counters_.cma
                          : counters_.chunked);
  // Core lets go of the block now (its class and our allocator's word are
  // read by the free, before p can touch them); the loan keeps the slot.
  if (q.kind == k_pool) {
    pool_->lend(buffer);
    hooks_.release(buffer);
  } else if (q.kind == k_return) {
    p.view->hand_back(buffer);
  }
  if (!p.fifo.empty()) {
    enqueue(p, q);
    return;
  }
  const std::uint64_t tail_before = p.tx_tail;
  const bool done = push_pending(p, q);
  if (p.tx_tail != tail_before) ring_doorbell(p.hdr, light_doorbells_);
  if (!done) enqueue(p, q);
}

void shm_transport::owe_ack(peer& p, std::uint64_t addr) {
  const descriptor d{addr, 0};
  if (p.acks.empty() && try_push(p, k_ack, &d, nullptr, 0)) {
    ring_doorbell(p.hdr, light_doorbells_);
    return;
  }
  p.acks.push_back(addr);
  if (!p.queued) {
    p.queued = true;
    ++queued_peers_;
  }
}

// Pushes what waits for p's ring. Acks first: they are not ordered with the
// messages, and a peer's finalize waits for them.
[[gnu::always_inline]] inline int shm_transport::flush(peer& p) {
  int n = 0;
  const std::uint64_t tail_before = p.tx_tail;
  while (!p.acks.empty()) {
    const descriptor d{p.acks.front(), 0};
    if (!try_push(p, k_ack, &d, nullptr, 0)) break;
    p.acks.pop_front();
    ++n;
  }
  while (!p.fifo.empty()) {
    pending& q = p.fifo.front();
    if (!push_pending(p, q)) break;
    p.fifo.pop_front();
    ++n;
  }
  if (p.tx_tail != tail_before) {
    ring_doorbell(p.hdr, light_doorbells_);
    if (n == 0) n = 1;  // a chunked message moved on
  }
  if (p.fifo.empty() && p.acks.empty()) {
    p.queued = false;
    --queued_peers_;
  }
  return n;
}

// ---------------------------------------------------------- receive side

// Makes the consumed part of p's ring available to p again, and wakes p if
// it sleeps waiting for room (Dekker pair with wait_for_incoming's
// space_wanted store).
void shm_transport::publish_head(peer& p) {
  p.rx_ctl->head.store(p.rx_head, std::memory_order_release);
  p.rx_published = p.rx_head;
  doorbell_fence(light_doorbells_);
  if (p.rx_ctl->space_wanted.load(std::memory_order_seq_cst) != 0 &&
      p.rx_ctl->space_wanted.exchange(0, std::memory_order_seq_cst) != 0)
    ring_doorbell(p.hdr, light_doorbells_);
}

void shm_transport::start_receive(peer& p, rx_mode mode, std::uint64_t remote, std::size_t total) {
  p.rx = mode;
  p.rx_remote = remote;
  p.rx_total = total;
  p.rx_done = 0;
  p.rx_buf = static_cast<unsigned char*>(hooks_.alloc(total));
}

// k_eager: the whole message, copied out into a buffer of core's.
[[gnu::always_inline]] inline bool shm_transport::on_eager(peer& p, std::uint64_t at,
                                                           std::size_t bytes, std::uint64_t cap) {
  void* buf = hooks_.alloc(bytes);
  copy_out(buf, p.rx_data, p.rx_mask, at, bytes);
  publish_head_lazily(p, cap);
  hooks_.deliver(p.node, buf, bytes);
  return true;
}

// k_chunk_first, k_chunk: the next piece of a message too large for one
// record, copied out where it goes; delivered with its last piece.
[[gnu::always_inline]] inline bool shm_transport::on_chunk(peer& p, std::uint32_t kind,
                                                           std::uint64_t at, std::size_t bytes,
                                                           std::uint64_t cap) {
  std::size_t piece = bytes;
  std::uint64_t from = at;
  if (kind == k_chunk_first) {
    const descriptor first = read_descriptor(p, at);
    if (p.rx != rx_mode::idle) ring_corrupt(p.node);
    start_receive(p, rx_mode::chunks, 0, std::size_t(first.addr));
    piece -= 16;
    from += 16;
  }
  if (p.rx != rx_mode::chunks || p.rx_done + piece > p.rx_total)
    ring_corrupt(p.node, "stray chunk");
  copy_out(p.rx_buf + p.rx_done, p.rx_data, p.rx_mask, from, piece);
  p.rx_done += piece;
  publish_head_lazily(p, cap);
  if (p.rx_done == p.rx_total) {
    p.rx = rx_mode::idle;
    hooks_.deliver(p.node, p.rx_buf, p.rx_total);
  }
  return true;
}

// Takes what p has put in our ring, in order.
[[gnu::always_inline]] inline int shm_transport::drain(peer& p) {
  int n = 0;
  if (p.rx == rx_mode::cma) {
    ++n;
    if (!continue_cma(p)) return n;
  }
  if (p.rx == rx_mode::pool) {
    ++n;
    if (!continue_pool(p)) return n;
  }
  const std::uint64_t cap = p.rx_mask + 1;
  for (int i = 0; i < drain_batch; ++i) {
    const std::uint64_t h = p.rx_head;
    auto* r = reinterpret_cast<record*>(p.rx_data + (h & p.rx_mask));
    const std::uint64_t s = r->stamp.load(std::memory_order_acquire);
    if (s != h + 1) {
      if (s != 0)
        ring_corrupt(p.node, "stamp %llu at %llu", static_cast<unsigned long long>(s),
                     static_cast<unsigned long long>(h));
      break;
    }
    const std::size_t bytes = r->bytes;
    const std::uint32_t kind = r->kind;
    if (bytes > cap / 4 + 16) ring_corrupt(p.node, "record of %zu bytes", bytes);
    const std::uint64_t at = h + 16;
    p.rx_head = h + record_bytes(bytes);
    ++n;
    bool more;
    switch (kind) {
      case k_eager:
        [[likely]] more = on_eager(p, at, bytes, cap);
        break;
      case k_ack:
        [[unlikely]] more = on_ack(p, at);
        break;
      case k_rndv:
        [[unlikely]] more = on_rndv(p, at);
        break;
      case k_pool:
        [[unlikely]] more = on_pool(p, at);
        break;
      case k_return:
        [[unlikely]] more = on_return(p, at);
        break;
      case k_chunk_first:
      case k_chunk:
        more = on_chunk(p, kind, at, bytes, cap);
        break;
      default:
        ring_corrupt(p.node, "record kind %u", kind);
    }
    if (!more) {
      publish_head(p);
      return n;  // later records of p wait behind this message
    }
  }
  if (p.rx_head != p.rx_published) publish_head(p);
  return n;
}

int shm_transport::poll_once() {
  int n = 0;
  if (freed_pending_.load(std::memory_order_relaxed)) n += give_back_freed();
  if (queued_peers_ != 0)
    for (peer* p : others_)
      if (p->queued) n += flush(*p);
  for (peer* p : others_) n += drain(*p);
  return n;
}

int shm_transport::progress() {
  if (!initialised_ || finalised_) return 0;
  const int n = poll_once();
  // Even the time-stamp counter costs more than an idle poll: read it on
  // every 32nd call only.
  if (--clock_countdown_ == 0) {
    clock_countdown_ = 32;
    if (base::cycles() >= next_check_) check_liveness();
  }
  return n;
}

// True if progress() has something to do right now.
bool shm_transport::work_ready() {
  if (wake_pending_.load(std::memory_order_seq_cst) != 0) return true;
  if (freed_pending_.load(std::memory_order_seq_cst)) return true;
  for (peer* p : others_) {
    if (p->rx != rx_mode::idle) return true;
    auto* r = reinterpret_cast<record*>(p->rx_data + (p->rx_head & p->rx_mask));
    if (r->stamp.load(std::memory_order_seq_cst) != 0) return true;
    if (p->queued) {
      // Room for the largest record (a quarter ring) plus the next header.
      const std::uint64_t cap = p->tx_mask + 1;
      const std::uint64_t used = p->tx_tail - p->tx_ctl->head.load(std::memory_order_seq_cst);
      if (cap - used >= cap / 4 + 32) return true;
    }
  }
  return false;
}

}  // namespace weft::net::shm
