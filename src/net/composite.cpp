// The composite transports "shm+mpi" and "shm+ucx": shared memory between the
// processes of one host, mpi or ucx between hosts, the split found from the
// host layout at init.
//
// Two backends. The inter-host one (mpi or ucx) is initialised over the whole
// job: its node numbers are the job's, and it carries the collectives
// (allgather, barrier) and abort for everybody. The shm one is initialised
// over the processes of this host only (its "host group"), with a launch of
// its own: rank = index in the group, size = group size, and a job id that
// names the group, so that the segments of two groups never collide on a
// /dev/shm they share (network or UTS namespaces on one machine, as the
// two-hosts test makes). A group of one process has no shm backend at all.
//
// Host layout. Each process allgathers a host key through the inter backend:
// the hostname (so processes in different UTS namespaces are different
// hosts, as Open MPI also counts them), the boot id, the /dev/shm mount, the
// pid namespace and the user. Processes whose keys are equal can map each
// other's segments and watch each other's pids; they form a group, in node
// order. Every process computes the same groups from the same table.
//
// Routing. A message to a node of the own group goes to shm, any other to
// the inter backend; a pair of nodes always uses one path, so the order per
// pair is the backend's. shm numbers nodes within the group: the hooks
// translate them (plain function pointers, so a file-static pointer to the
// one composite of the process serves its trampolines).
//
// Waiting. A comm thread can sleep in one backend only (shm: a futex; ucx:
// the worker's fd; mpi: not at all). When every peer is in the group the
// inter backend carries no message, so waits go to shm; with a group of one,
// to the inter backend; otherwise can_wait() is false and core naps between
// polls, as over mpi.
//
// Collectives run in the inter backend, which progresses only itself while it
// waits; the host's nodes first settle their shm sends and meet at shm's
// barrier (settle_shm), so no node waits in the collective on shm messages
// that another holds queued.
//
// Shutdown. finalize() finalises shm first, then the inter backend. shm's
// finalize involves the group only: every member flushes, meets the others at
// the group's barrier and drains its rings, so every message sent through shm
// is delivered; it waits only for the group's nodes, which are all in their own
// shm finalize (or still running, and so progressing) since every node
// finalises shm before the inter backend; it needs nothing of the inter
// backend, so it never waits for a node busy in the inter finalize. It
// progresses the inter backend while it waits all the same, so that what
// this node queued there keeps leaving for peers that still wait for it. Then the
// inter backend's finalize delivers everything sent through it (mpi and ucx
// count the messages per pair). Core sends nothing once it calls finalize
// (net_closed), so no message can enter shm after its finalize. Messages that
// arrive meanwhile go to core as usual.
//
// Rejected: routing by the launcher's local ranks (OMPI_COMM_WORLD_LOCAL_*
// say how many share this host, not which ranks; Slurm says less); a third,
// backend-neutral bootstrap (the inter backend already has one); running the
// inter collective on a helper thread while the caller progresses shm (core
// hooks would then run on two threads at once).
#include "composite.hpp"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "backends.hpp"
#include "shm/shm.hpp"
#if WEFT_HAVE_UCX_TRANSPORT
#include "ucx/ucx.hpp"
#endif
#include "weft/base/error.hpp"

namespace weft::net {

namespace {

// Bytes of a host key in the allgather: a hostname has at most 64, the rest
// about 80.
constexpr std::size_t key_bytes = 256;

// A file that cannot be read or looked at gives an empty or "-" part of the
// host key instead of an error (the hostname and the other parts still go
// into it).
std::string read_first_line(const char* path) {
  std::string s;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[128];
    if (std::fgets(buf, sizeof buf, f) != nullptr) s = buf;
    std::fclose(f);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string file_id(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return "-";
  return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(st.st_ino));
}

// What two processes must share to use the shm transport between them.
std::string system_host_key() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
  return std::string(host) + " boot=" + read_first_line("/proc/sys/kernel/random/boot_id") +
         " shm=" + file_id("/dev/shm") + " pidns=" + file_id("/proc/self/ns/pid") +
         " uid=" + std::to_string(::getuid());
}

class composite_transport;
// The composite whose shm backend the trampolines serve (hooks are plain
// function pointers); one per process, set by init.
composite_transport* g_composite = nullptr;

struct held_message {
  int src;
  void* buffer;
  std::size_t bytes;
  bool in_place;  // by deliver_block
};

struct channel {
  bool shm;
  int handle;
};

class composite_transport final : public transport {
 public:
  composite_transport(std::unique_ptr<transport> inter, std::string name,
                      const composite_options& o)
      : inter_(std::move(inter)), name_(std::move(name)), opts_(o) {}
  ~composite_transport() override {
    if (g_composite == this) g_composite = nullptr;
  }

  const char* name() const override { return name_.c_str(); }
  int node_rank() const override { return rank_; }
  int num_nodes() const override { return size_; }

  void init(const launch_info& launch, const hooks& h, double startup_timeout_s) override;
  void send(int node, void* buffer, std::size_t bytes) override;
  int progress() override;
  int create_persistent(int node, std::size_t max_bytes) override;
  void send_persistent(int channel, void* buffer, std::size_t bytes) override;
  void wait_for_incoming(std::uint64_t timeout_ns) override {
    if (waiter_ != nullptr) waiter_->wait_for_incoming(timeout_ns);
  }
  bool can_wait() const override { return waiter_ != nullptr && waiter_->can_wait(); }
  // The host's shm backend, polled in the same loop, wants the pause.
  bool pause_between_polls() const override {
    return shm_ != nullptr ? shm_->pause_between_polls() : inter_->pause_between_polls();
  }
  void wake_waiter() override {
    if (waiter_ != nullptr) waiter_->wake_waiter();
  }
  // One memory for core's large blocks: the inter backend's if it has one
  // (ucx; shm copies a message from elsewhere into its ring, as before),
  // else shm's (with mpi between hosts, messages to this host's processes
  // then leave from the shm pool).
  base::registered_memory* message_memory() override {
    if (base::registered_memory* m = inter_->message_memory()) return m;
    return shm_ != nullptr ? shm_->message_memory() : nullptr;
  }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    settle_shm();
    inter_->allgather(mine, bytes, all);
  }
  void barrier() override {
    settle_shm();
    inter_->barrier();
  }
  [[noreturn]] void abort(int code, const char* why) override {
    inter_->abort(code, why);
    std::_Exit(code);  // not reached: the compiler does not see through the virtual call
  }
  void finalize() override;

  const composite_counters& counters() const { return counters_; }
  const std::vector<int>& group() const { return group_; }

 private:
  static void inter_deliver(int src, void* buffer, std::size_t bytes);
  static void shm_deliver(int src, void* buffer, std::size_t bytes);
  static void shm_deliver_block(int src, void* buffer, std::size_t bytes);
  static void shm_release(void* buffer);
  [[noreturn]] static void shm_node_lost(int node, const char* why);
  void deliver(int src, void* buffer, std::size_t bytes, bool in_place = false) {
    if (holding_) {
      held_.push_back({src, buffer, bytes, in_place});
      return;
    }
    (in_place ? hooks_.deliver_block : hooks_.deliver)(src, buffer, bytes);
  }
  void deliver_held();
  void settle_shm();
  void check_node(int node, const char* what) const {
    if (node < 0 || node >= size_ || node == rank_)
      base::fatal("%s transport: %s to node %d; the nodes are 0..%d and never this one (%d)",
                  name_.c_str(), what, node, size_ - 1, rank_);
  }

  std::unique_ptr<transport> inter_;
  std::unique_ptr<transport> shm_;  // null when this host runs one process of the job
  transport* waiter_ = nullptr;     // the backend wait_for_incoming sleeps in, if any
  std::string name_;
  composite_options opts_;
  hooks hooks_{};
  int rank_ = 0;
  int size_ = 1;
  bool initialised_ = false;
  bool finalised_ = false;
  std::vector<int> group_;     // job node of each group member, in node order
  std::vector<int> in_group_;  // by job node: index in the group, or -1
  std::vector<channel> channels_;
  std::uint64_t shm_unreleased_ = 0;  // given to shm, not yet released by it
  // Messages the inter backend delivered while init() ran its allgather or
  // waited in shm's init (a node already through init may send): core gets
  // them once init has returned, before anything later from the same node.
  bool holding_ = false;
  std::vector<held_message> held_;
  composite_counters counters_;
};

void composite_transport::inter_deliver(int src, void* buffer, std::size_t bytes) {
  composite_transport* self = g_composite;
  ++self->counters_.inter_delivered;
  self->deliver(src, buffer, bytes);
}

void composite_transport::shm_deliver(int src, void* buffer, std::size_t bytes) {
  composite_transport* self = g_composite;
  ++self->counters_.shm_delivered;
  self->deliver(self->group_[std::size_t(src)], buffer, bytes);
}

void composite_transport::shm_deliver_block(int src, void* buffer, std::size_t bytes) {
  composite_transport* self = g_composite;
  ++self->counters_.shm_delivered;
  self->deliver(self->group_[std::size_t(src)], buffer, bytes, true);
}

void composite_transport::shm_release(void* buffer) {
  composite_transport* self = g_composite;
  --self->shm_unreleased_;
  self->hooks_.release(buffer);
}

void composite_transport::shm_node_lost(int node, const char* why) {
  composite_transport* self = g_composite;
  const int job_node = self->group_[std::size_t(node)];
  // shm names the peer by its number in the group, "(node L)": say the
  // job's number instead.
  char local[32], buf[512];
  std::snprintf(local, sizeof local, "(node %d)", node);
  const char* at = why != nullptr ? std::strstr(why, local) : nullptr;
  if (at != nullptr)
    std::snprintf(buf, sizeof buf, "%.*s(node %d)%s", int(at - why), why, job_node,
                  at + std::strlen(local));
  else
    std::snprintf(buf, sizeof buf, "%s", why != nullptr ? why : "lost (shm transport)");
  if (self->hooks_.node_lost != nullptr) self->hooks_.node_lost(job_node, buf);
  base::fatal("node %d lost: %s", job_node, buf);
}

void composite_transport::init(const launch_info& launch, const hooks& h,
                               double startup_timeout_s) {
  if (initialised_) base::fatal("%s transport: init() called twice", name_.c_str());
  if (g_composite != nullptr && g_composite != this)
    base::fatal("%s transport: a process runs one composite transport at a time", name_.c_str());
  if (h.alloc == nullptr || h.deliver == nullptr || h.release == nullptr)
    base::fatal("%s transport: init() needs the alloc, deliver and release hooks", name_.c_str());
  g_composite = this;
  hooks_ = h;
  holding_ = true;

  hooks inter_hooks = h;
  inter_hooks.deliver = inter_deliver;
  inter_hooks.deliver_block = nullptr;  // only shm leaves messages in place
  inter_->init(launch, inter_hooks, startup_timeout_s);
  rank_ = inter_->node_rank();
  size_ = inter_->num_nodes();

  // The host layout.
  char mine[key_bytes] = {};
  const std::string key = opts_.host_key.empty() ? system_host_key() : opts_.host_key;
  std::snprintf(mine, sizeof mine, "%s", key.c_str());
  std::vector<char> keys(key_bytes * std::size_t(size_));
  inter_->allgather(mine, key_bytes, keys.data());
  in_group_.assign(std::size_t(size_), -1);
  for (int n = 0; n < size_; ++n)
    if (std::memcmp(&keys[key_bytes * std::size_t(n)], mine, key_bytes) == 0) {
      in_group_[std::size_t(n)] = int(group_.size());
      group_.push_back(n);
    }

  if (group_.size() > 1) {
    launch_info local;
    local.rank = in_group_[std::size_t(rank_)];
    local.size = int(group_.size());
    local.local_rank = local.rank;
    local.local_size = local.size;
    // The group's first node tells it apart from the job's other groups.
    local.job_id = launch.job_id + "-h" + std::to_string(group_.front());
    local.launcher = launch.launcher;
    hooks shm_hooks = h;
    shm_hooks.deliver = shm_deliver;
    shm_hooks.deliver_block = h.deliver_block != nullptr ? shm_deliver_block : nullptr;
    shm_hooks.release = shm_release;
    shm_hooks.node_lost = h.node_lost != nullptr ? shm_node_lost : nullptr;
    shm_options shm_opts;
    // inter_ outlives shm_ (finalize ends shm first); see settle_shm. In
    // shm's init this keeps our part of the host-key allgather moving
    // towards a peer that still waits for it (its FIFO was full).
    shm_opts.while_waiting = [inter = inter_.get()] { inter->progress(); };
    shm_ = make_shm_transport(shm_opts);
    shm_->init(local, shm_hooks, startup_timeout_s);
  } else {
    in_group_[std::size_t(rank_)] = -1;  // nothing goes through shm
  }
  if (shm_ != nullptr && int(group_.size()) == size_)
    waiter_ = shm_.get();  // the inter backend carries no message
  else if (shm_ == nullptr)
    waiter_ = inter_.get();
  initialised_ = true;
  holding_ = false;
}

void composite_transport::deliver_held() {
  if (held_.empty()) return;
  std::vector<held_message> held;
  held.swap(held_);
  for (const held_message& m : held)
    (m.in_place ? hooks_.deliver_block : hooks_.deliver)(m.src, m.buffer, m.bytes);
}

// Before a collective of the inter backend, which progresses only itself:
// a node waiting in it cannot push what its shm queues still hold (a ring
// was full), and a peer of its host waiting for those messages before it
// joins the collective would wait forever. So every node of the host first
// gets every shm send it made released (in the peer's ring, or read by it),
// progressing both backends meanwhile, then the host's nodes meet at shm's
// barrier, which drains the rings and progresses the inter backend while it
// waits (shm_options::while_waiting): a node of the host may still wait for
// a message from another host whose sender has it queued in its inter
// backend (a UCX send waiting for room in our FIFO), and that sender, in its
// own host's barrier, must keep pushing it. Only then does any of them enter
// the inter collective. No node sends while inside a collective
// call, so nothing refills the queues; messages left in the rings are
// delivered by the next progress().
void composite_transport::settle_shm() {
  deliver_held();
  if (shm_ == nullptr) return;
  for (unsigned idle = 0; shm_unreleased_ != 0;) {
    if (progress() != 0)
      idle = 0;
    else if (++idle >= 64)
      sched_yield();  // the peer we wait for may need this core
  }
  shm_->barrier();
}

void composite_transport::send(int node, void* buffer, std::size_t bytes) {
  check_node(node, "send");
  if (const int local = in_group_[std::size_t(node)]; local >= 0) {
    ++counters_.shm_sent;
    counters_.shm_sent_bytes += bytes;
    ++shm_unreleased_;
    shm_->send(local, buffer, bytes);
  } else {
    ++counters_.inter_sent;
    counters_.inter_sent_bytes += bytes;
    inter_->send(node, buffer, bytes);
  }
}

int composite_transport::progress() {
  int n = 0;
  if (!held_.empty()) {
    n += int(held_.size());
    deliver_held();
  }
  if (shm_ != nullptr) n += shm_->progress();
  return n + inter_->progress();
}

int composite_transport::create_persistent(int node, std::size_t max_bytes) {
  check_node(node, "create_persistent");
  const int local = in_group_[std::size_t(node)];
  const channel c = local >= 0 ? channel{true, shm_->create_persistent(local, max_bytes)}
                               : channel{false, inter_->create_persistent(node, max_bytes)};
  channels_.push_back(c);
  return int(channels_.size()) - 1;
}

void composite_transport::send_persistent(int ch, void* buffer, std::size_t bytes) {
  if (ch < 0 || std::size_t(ch) >= channels_.size())
    base::fatal("%s transport: send_persistent on channel %d, which was never created",
                name_.c_str(), ch);
  const channel c = channels_[std::size_t(ch)];
  if (c.shm) {
    ++counters_.shm_sent;
    counters_.shm_sent_bytes += bytes;
    ++shm_unreleased_;
    shm_->send_persistent(c.handle, buffer, bytes);
  } else {
    ++counters_.inter_sent;
    counters_.inter_sent_bytes += bytes;
    inter_->send_persistent(c.handle, buffer, bytes);
  }
}

void composite_transport::finalize() {
  if (!initialised_ || finalised_) return;
  finalised_ = true;
  deliver_held();
  // shm first: it involves this host's group only and needs nothing from
  // the inter backend (see the top of this file).
  if (shm_ != nullptr) shm_->finalize();
  inter_->finalize();
}

}  // namespace

std::unique_ptr<transport> make_composite_transport(const std::string& inter,
                                                    const composite_options& options) {
  const std::string name = "shm+" + inter;
  // The inter backend's own watch on this host's processes is off: shm
  // watches the host group, and reports a loss by job node number.
#if WEFT_HAVE_MPI_TRANSPORT
  if (inter == "mpi")
    return std::make_unique<composite_transport>(make_mpi_transport(false), name, options);
#endif
#if WEFT_HAVE_UCX_TRANSPORT
  if (inter == "ucx") {
    ucx_options ucx;
    ucx.watch_local_peers = false;
    return std::make_unique<composite_transport>(make_ucx_transport(ucx), name, options);
  }
#endif
  if (inter == "mpi" || inter == "ucx")
    base::usage_error("--weft:transport=%s: this build of weft has no %s transport (it has: %s)",
                      name.c_str(), inter.c_str(), available_transports().c_str());
  base::usage_error("--weft:transport=%s: unknown transport; accepted: %s", name.c_str(),
                    "shm+mpi, shm+ucx");
}

std::unique_ptr<transport> make_composite_transport(const std::string& inter) {
  return make_composite_transport(inter, composite_options{});
}

const composite_counters* composite_counters_of(const transport& t) {
  auto* c = dynamic_cast<const composite_transport*>(&t);
  return c != nullptr ? &c->counters() : nullptr;
}

std::vector<int> composite_host_group(const transport& t) {
  auto* c = dynamic_cast<const composite_transport*>(&t);
  return c != nullptr ? c->group() : std::vector<int>{};
}

}  // namespace weft::net
