// The ucx transport's class (ucx_transport.hpp has the design and the map
// of its files): init, the UCP context and worker, the send pool's mapping,
// the work deferred from UCX's callbacks, waiting for events, teardown, and
// the factories the rest of weft calls.
//
// Lifecycle. init: PMIx identity (pmix_bootstrap), the UCP context and a
// serialized worker with the active-message handlers, the send pool; then,
// with more than one node, the address exchange, the endpoints, and a
// startup allgather that proves every pair can talk and carries the peer
// watch's records. finalize: sends settled, everything sent to this node
// delivered, a barrier, then the endpoints closed between two PMIx fences
// (a peer must not drop its worker while another still flushes towards it).
#include "ucx_transport.hpp"
#include <poll.h>
#include <sys/mman.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

namespace weft::net::ucx {

// ------------------------------------------------------------------ setting up

void ucx_transport::init(const launch_info& launch, const hooks& h, double startup_timeout_s) {
  if (initialized_) base::fatal("ucx transport: init called twice");
  if (h.alloc == nullptr || h.deliver == nullptr || h.release == nullptr)
    base::fatal("ucx transport: init needs the alloc, deliver and release hooks");
  hooks_ = h;
  // Without a launcher there is no PMIx server to ask: a one-node job.
  use_pmix_ = launch.launcher != "none";
  if (use_pmix_) {
    pmix_.start(launch);
    rank_ = pmix_.rank();
    size_ = pmix_.size();
  }
  create_worker();
  peers_.resize(std::size_t(size_));
  for (int p = 0; p < size_; ++p) peers_[std::size_t(p)] = peer{this, p, nullptr, nullptr};
  register_am_handlers();
  fatal_unless_ok(ucp_worker_get_efd(worker_, &event_fd_), "ucp_worker_get_efd");
  signal_worker_.store(worker_, std::memory_order_release);
  if (opt_.pooled && opt_.pool_bytes > 0 && size_ > 1) map_send_pool();
  next_seq_out_.assign(std::size_t(size_), 0);
  notes_due_.assign(std::size_t(size_), 0);
  windows_.resize(std::size_t(size_));
  incoming_channels_.resize(std::size_t(size_));
  if (size_ > 1) {
    publish_and_connect(startup_timeout_s);
    // Endpoints connect lazily; a round of messages proves every pair can
    // talk before init returns. It carries the peer watch's records.
    const peer_watch::record mine = peer_watch::mine();
    std::vector<peer_watch::record> all(static_cast<std::size_t>(size_));
    allgather_within(&mine, sizeof mine, all.data(), startup_timeout_s, "startup barrier");
    if (opt_.watch_local_peers) watch_.start(all.data(), size_, rank_, hooks_.node_lost, "ucx");
  }
  initialized_ = true;
}

void ucx_transport::create_worker() {
  ucp_config_t* config = nullptr;
  fatal_unless_ok(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = std::size_t(size_);
  params.mt_workers_shared = 0;
  ucs_status_t s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  fatal_unless_ok(s, "ucp_init");

  // Serialized, not single: core calls from one thread at a time, but not
  // always the same one (a comm thread, or whichever PE holds the lock).
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  fatal_unless_ok(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create");
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  fatal_unless_ok(ucp_worker_query(worker_, &wa), "ucp_worker_query");
  if (wa.max_am_header < sizeof(am_header))
    base::fatal("ucx transport: UCX allows %zu-byte active message headers, weft needs %zu",
                std::size_t(wa.max_am_header), sizeof(am_header));
  if (wa.thread_mode == UCS_THREAD_MODE_SINGLE)
    base::warn(
        "ucx transport: UCX gave a single-thread worker; calls from several threads "
        "(one at a time) rely on this UCX build not checking the caller");
}

// The send pool (rendezvous.cpp): mapped here and registered with UCX once.
void ucx_transport::map_send_pool() {
  const std::size_t bytes = opt_.pool_bytes;
  // mmap and munmap directly: base/os has no call for anonymous memory.
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    base::fatal_sys(errno, "mmap", "for the ucx transport's send pool of %zu bytes (node %d)",
                    bytes, rank_);
  // Core's blocks from the rendezvous size on: they leave in place.
  pool_ = new message_pool(mem, bytes, opt_.eager_max + 1, opt_.eager_max + 1,
                           [mem, bytes] { ::munmap(mem, bytes); });
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = pool_->base();
  mp.length = pool_->bytes();
  fatal_unless_ok(ucp_mem_map(context_, &mp, &pool_memh_), "ucp_mem_map (send pool)");
}

// Publishes this worker's address and the send pool's record through PMIx,
// fences, and creates an endpoint to every other node from theirs.
void ucx_transport::publish_and_connect(double timeout_s) {
  ucp_address_t* address = nullptr;
  std::size_t address_len = 0;
  fatal_unless_ok(ucp_worker_get_address(worker_, &address, &address_len),
                  "ucp_worker_get_address");
  pmix_.put(key_worker_address, address, address_len);
  ucp_worker_release_address(worker_, address);

  // The pool record: its base address, then its packed rkey (no rkey: this
  // node sends every large message from a buffer registered for it).
  std::vector<std::byte> pool(8);
  std::uint64_t base = reinterpret_cast<std::uintptr_t>(pool_ != nullptr ? pool_->base() : nullptr);
  std::memcpy(pool.data(), &base, 8);
  if (pool_memh_ != nullptr) {
    std::vector<std::byte> rkey = pack_rkey(pool_memh_, -1);
    pool.insert(pool.end(), rkey.begin(), rkey.end());
  }
  pmix_.put(key_send_pool, pool.data(), pool.size());
  pmix_.commit();
  if (!pmix_.fence(true, timeout_s,
                   [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); }))
    pmix_.name_missing_peers(key_worker_address, timeout_s);

  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    peer& pr = peers_[std::size_t(p)];
    std::vector<std::byte> addr = pmix_.get(p, key_worker_address);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(addr.data());
    // Peer mode: a peer that dies is reported (node_lost) instead of hanging
    // us; not on this host by default (see ucx_options).
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    if (!pmix_.is_local(p) || opt_.detect_local_peer_failure) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &on_endpoint_error;
      ep.err_handler.arg = &pr;
    }
    fatal_unless_ok(ucp_ep_create(worker_, &ep, &pr.ep), "ucp_ep_create", p);
    std::vector<std::byte> rec = pmix_.get(p, key_send_pool);
    if (rec.size() > 8)
      fatal_unless_ok(ucp_ep_rkey_unpack(pr.ep, rec.data() + 8, &pr.pool_rkey),
                      "ucp_ep_rkey_unpack (send pool)", p);
  }
}

std::vector<std::byte> ucx_transport::pack_rkey(ucp_mem_h memh, int node) {
  void* buf = nullptr;
  std::size_t n = 0;
  fatal_unless_ok(ucp_rkey_pack(context_, memh, &buf, &n), "ucp_rkey_pack", node);
  auto* b = static_cast<const std::byte*>(buf);
  std::vector<std::byte> out(b, b + n);
  ucp_rkey_buffer_release(buf);
  return out;
}

// ------------------------------------------------ work deferred from callbacks

void ucx_transport::perform(deferred_work& w) {
  switch (w.kind) {
    case deferred_work::start_get:
      start_get(w);
      break;
    case deferred_work::rendezvous_acked:
      finish_rendezvous_send(w.node, w.hdr.cookie);
      break;
    case deferred_work::open_channel:
      open_incoming_channel(w);
      break;
    case deferred_work::channel_ready:
      connect_outgoing_channel(w);
      break;
    case deferred_work::return_credit:
      send_channel_credit(w.node, w.hdr.cookie);
      break;
    case deferred_work::release_buffer:
      hooks_.release(w.buffer);
      break;
  }
}

void ucx_transport::complete_request(request* r) {
  if (r->status != UCS_OK) {
    if (r->rkey != nullptr) ucp_rkey_destroy(r->rkey);
    // During teardown a peer that already left cancels what was still queued.
    if (!closing_) {
      const char* what = r->kind == request_kind::rendezvous_get  ? "rendezvous GET"
                         : r->kind == request_kind::channel_flush ? "persistent-channel PUT"
                                                                  : "active message";
      if (peer_failure(r->status)) report_lost(r->node, what, r->status);
      fatal_unless_ok(r->status, what, r->node);
    }
    free_request(r);
    return;
  }
  switch (r->kind) {
    case request_kind::message_send:
      hooks_.release(r->buffer);
      break;
    case request_kind::control_send:
      break;
    case request_kind::rendezvous_get:
      complete_get(r);
      break;
    case request_kind::channel_flush:
      complete_channel_flush(r);
      break;
  }
  free_request(r);
}

// The deferred work and the completed requests, until neither has more
// (each may add to the other).
int ucx_transport::handle_callback_work() {
  int n = 0;
  while (!deferred_.empty() || !completed_.empty()) {
    deferred_now_.clear();
    deferred_now_.swap(deferred_);
    for (deferred_work& w : deferred_now_) perform(w);
    n += int(deferred_now_.size());
    completed_now_.clear();
    completed_now_.swap(completed_);
    for (request* r : completed_now_) complete_request(r);
    n += int(completed_now_.size());
  }
  return n;
}

void ucx_transport::report_lost(int node, const char* what, ucs_status_t s) {
  if (closing_) return;  // peers leave at different moments during teardown
  char why[256];
  std::snprintf(why, sizeof why, "ucx transport: %s: %s", what, ucs_status_string(s));
  if (hooks_.node_lost != nullptr) hooks_.node_lost(node, why);
  base::fatal("node %d lost (seen from node %d): %s", node, rank_, why);
}

// ------------------------------------------------------------------- waiting

// ppoll directly: the fd is UCX's, armed by ucp_worker_arm just before. A
// signal ends the sleep early, as a timeout does: the callers check again.
void ucx_transport::sleep_on_event_fd(std::uint64_t timeout_ns) {
  pollfd pfd{event_fd_, POLLIN, 0};
  timespec ts{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  int r = ::ppoll(&pfd, 1, &ts, nullptr);
  if (r < 0 && errno != EINTR)
    base::fatal_sys(errno, "ppoll", "on the UCX worker's event fd %d (ucx transport, node %d)",
                    event_fd_, rank_);
}

void ucx_transport::wait_for_events(std::uint64_t timeout_ns) {
  if (has_work()) return;
  ucs_status_t s = ucp_worker_arm(worker_);
  if (s == UCS_ERR_BUSY) return;  // events arrived meanwhile: progress first
  fatal_unless_ok(s, "ucp_worker_arm");
  sleep_on_event_fd(timeout_ns);
}

void ucx_transport::wait_for_incoming(std::uint64_t timeout_ns) {
  if (wake_requested_.exchange(false, std::memory_order_acq_rel)) return;
  if (has_work()) return;
  if (ucp_worker_progress(worker_) != 0) return;  // the caller's progress() takes it
  ucs_status_t s = ucp_worker_arm(worker_);
  if (s == UCS_ERR_BUSY) return;
  fatal_unless_ok(s, "ucp_worker_arm");
  // A wake_waiter() between the first check and the arm may have had its
  // signal drained by the arm; its flag is still set.
  if (wake_requested_.exchange(false, std::memory_order_acq_rel)) return;
  sleep_on_event_fd(timeout_ns);
  // The flag stays set if a wake came during the wait: the next wait then
  // returns at once, a spurious wake-up instead of a lost one.
}

void ucx_transport::wake_waiter() {
  wake_requested_.store(true, std::memory_order_release);
  // ucp_worker_signal is documented safe from any thread in any thread mode.
  if (ucp_worker_h w = signal_worker_.load(std::memory_order_acquire)) ucp_worker_signal(w);
}

// ------------------------------------------------------------------ teardown

[[noreturn]] void ucx_transport::abort(int code, const char* why) {
  std::fflush(stdout);
  std::fprintf(stderr, "weft: fatal: %s\n", why != nullptr ? why : "(no reason given)");
  std::fflush(stderr);
  if (use_pmix_) pmix_.abort(code, why);
  std::_Exit(code);
}

bool ucx_transport::sends_settled() const {
  if (requests_in_flight_ != 0 || rendezvous_sends_live_ != 0 || !completed_.empty() ||
      !deferred_.empty())
    return false;
  for (const outgoing_channel& c : outgoing_channels_)
    if (!c.ready || c.busy) return false;
  return true;
}

void ucx_transport::close_endpoints() {
  std::vector<ucs_status_ptr_t> pending;
  for (peer& p : peers_) {
    if (p.ep == nullptr) continue;
    ucp_request_param_t prm{};  // no FORCE flag: flush what is queued, then close
    ucs_status_ptr_t r = ucp_ep_close_nbx(p.ep, &prm);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) pending.push_back(r);
    p.ep = nullptr;
  }
  auto t0 = clock_type::now();
  while (!pending.empty()) {
    ucp_worker_progress(worker_);
    for (std::size_t i = 0; i < pending.size();) {
      if (ucp_request_check_status(pending[i]) != UCS_INPROGRESS) {
        ucp_request_free(pending[i]);
        pending[i] = pending.back();
        pending.pop_back();
      } else {
        ++i;
      }
    }
    if (seconds_since(t0) > 30) {
      base::warn("ucx transport (node %d): %zu endpoint(s) did not close within 30 s", rank_,
                 pending.size());
      break;
    }
  }
}

void ucx_transport::finalize() {
  if (!initialized_ || finalized_) return;
  finalized_ = true;
  watch_.stop();
  if (size_ > 1) {
    // 1. Everything this node sent has left: buffers released, rendezvous
    //    acks in, channels settled.
    progress_until([&] { return sends_settled(); });
    // 2. Everything sent to this node is delivered: the counts each node sent
    //    to each other node, against what arrived here.
    std::vector<std::uint64_t> all(std::size_t(size_) * std::size_t(size_));
    allgather_within(next_seq_out_.data(), next_seq_out_.size() * sizeof(std::uint64_t), all.data(),
                     0, "finalize");
    progress_until([&] {
      for (int src = 0; src < size_; ++src)
        if (src != rank_ && windows_[std::size_t(src)].next_seq !=
                                all[std::size_t(src) * std::size_t(size_) + std::size_t(rank_)])
          return false;
      return true;
    });
    barrier();
    progress_until(
        [&] { return requests_in_flight_ == 0 && completed_.empty() && deferred_.empty(); });
    // 3. Leave. Errors from peers that close first are expected from here on,
    //    and a peer must not drop its worker while another still flushes
    //    towards it: a fence before and after the endpoints close, progressing
    //    UCX while waiting.
    closing_ = true;
    auto progress_ucx = [this] {
      if (progress() == 0) wait_for_events(200'000);
    };
    if (use_pmix_ && !pmix_.fence(false, 60, progress_ucx))
      base::warn(
          "ucx transport (node %d): finalize: the PMIx fence before closing did not "
          "complete within 60 s; closing anyway",
          rank_);
    for (peer& p : peers_)
      if (p.pool_rkey != nullptr) ucp_rkey_destroy(std::exchange(p.pool_rkey, nullptr));
    for (outgoing_channel& c : outgoing_channels_)
      if (c.rkey != nullptr) ucp_rkey_destroy(std::exchange(c.rkey, nullptr));
    close_endpoints();
    if (use_pmix_ && !pmix_.fence(false, 60, progress_ucx))
      base::warn(
          "ucx transport (node %d): finalize: the PMIx fence after closing did not "
          "complete within 60 s",
          rank_);
    handle_callback_work();
  }
  for (auto& channels : incoming_channels_)
    for (auto& [id, c] : channels) ucp_mem_unmap(context_, c.memh);
  incoming_channels_.clear();
  if (pool_memh_ != nullptr) ucp_mem_unmap(context_, std::exchange(pool_memh_, nullptr));
  if (pool_ != nullptr) std::exchange(pool_, nullptr)->retire();
  signal_worker_.store(nullptr, std::memory_order_release);
  ucp_worker_destroy(std::exchange(worker_, nullptr));
  ucp_cleanup(std::exchange(context_, nullptr));
  if (use_pmix_) pmix_.finalize();
}

// open_memstream directly: ucp_ep_print_info writes to a FILE*. A stream
// that cannot be opened gives an empty text (the lanes are for reports).
std::string ucx_transport::describe_lanes(int node) const {
  if (node < 0 || node >= size_ || peers_.empty() || peers_[std::size_t(node)].ep == nullptr)
    return {};
  char* text = nullptr;
  std::size_t len = 0;
  FILE* f = ::open_memstream(&text, &len);
  if (f == nullptr) return {};
  ucp_ep_print_info(peers_[std::size_t(node)].ep, f);
  std::fclose(f);
  std::string out(text, len);
  std::free(text);
  return out;
}

}  // namespace weft::net::ucx

namespace weft::net {

std::unique_ptr<transport> make_ucx_transport(const ucx_options& options) {
  return std::make_unique<ucx::ucx_transport>(options);
}

std::unique_ptr<transport> make_ucx_transport() {
  return make_ucx_transport(ucx_options{});
}

const ucx_counters* ucx_counters_of(const transport& t) {
  auto* u = dynamic_cast<const ucx::ucx_transport*>(&t);
  return u != nullptr ? &u->counters() : nullptr;
}

std::string ucx_describe_lanes(const transport& t, int node) {
  auto* u = dynamic_cast<const ucx::ucx_transport*>(&t);
  return u != nullptr ? u->describe_lanes(node) : std::string();
}

}  // namespace weft::net
