// The "mpi" transport: the nodes are the processes of MPI_COMM_WORLD, and a
// message between them is one MPI point-to-point message on a communicator of
// our own (a duplicate of MPI_COMM_WORLD, so an application that also uses MPI
// can never match our messages, and so errors can be made to return to us).
//
// Sending is zero copy: send() starts an MPI_Isend on core's buffer and hands
// the buffer back (hooks.release) once MPI has finished with it.
//
// Receiving cannot pre-post receives, because core allocates each buffer for
// the exact size of its message. progress() therefore asks MPI what has
// arrived (MPI_Improbe from any source), allocates that many bytes and matches
// the message into them (MPI_Imrecv). A matched probe removes the message from
// MPI's queue, so nothing else can steal it, and the receive it starts may stay
// in flight: a 4 MiB message being copied does not stop progress() from
// matching and delivering what other nodes sent (lesson 9: the seeds' blocking
// receive of large messages halved kNeighbor throughput).
//
// Order. MPI matches the messages of one source in send order, but a large
// receive finishes after the small ones matched behind it. Each source thus has
// a FIFO of matched receives, and a receive is delivered only when everything
// matched before it from that source has been delivered. Other sources never
// wait for it.
//
// Flow control. MPI does not promise to buffer messages that the receiver
// has not matched yet, and a node that floods another (elements that never
// wait, while the other node's PEs are paused or busy) would otherwise leave
// any number of them inside MPI. Open MPI 4.1 shows why that matters: ob1
// numbers the messages to one peer in 16 bits and keeps those that arrive
// out of order in a list sorted by that number. Under such a burst some do
// arrive out of order, and once more than 65536 of one peer's messages wait
// there the numbers repeat and the one ob1 expects is never found again:
// every PE of both nodes idle, ~70,000 messages inside MPI, until the
// timeout (mp_objects case flood; ob1's own dump showed message 11382
// expected, 68,626 waiting from 11413 on, 11382 among them twice). So at
// most kMaxUnmatched messages to one node may be unmatched: every
// kSyncEvery-th is an MPI_Issend, whose completion says the receiver matched
// it and, since MPI matches one sender's messages in order, every one
// before it; messages past the bound wait here, in order, and start as
// those sends complete.
//
// Shutdown. finalize() must not leave a message in flight: nodes exchange how
// many messages each sent to each other (MPI_Ialltoall) and progress until
// every one of them has been delivered, then meet at a barrier.
//
// Persistent channels are not specialised here (the base class sends them
// through send()): MPI_Send_init binds one buffer and one count, while
// send_persistent passes a new buffer of a new size each time, so a persistent
// request would have to be created per message; and Open MPI runs its eager or
// rendezvous protocol on every MPI_Start anyway, so there is no handshake to
// skip. What MPI_Start would save over MPI_Isend is one request allocation from
// a free list.
//
// Threads: core serialises every call except abort() (see transport.hpp), so
// MPI_THREAD_SERIALIZED is enough and nothing here takes a lock.
// Every call goes to the library's PMPI_ function, looked up in the library
// itself (dlsym on its handle: mpi_library.hpp), not by name in the
// process: in a program linked with libweft-mpi.so, weft's own MPI, the
// process finds weft's MPI_* and PMPI_* first, so this module's MPI_Isend
// or PMPI_Isend would be weft's (a job of MPI ranks across processes over
// this transport once called weft's MPI_Finalized off a rank).
#include <mpi.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
#include "peer_watch.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/net/transport.hpp"

#include "mpi_library.hpp"

namespace weft::net {

namespace {

// Tags on our private communicator: ordinary messages, and the start-up
// handshake (a separate tag so that it never meets an early data message).
constexpr int kTagData = 1;
constexpr int kTagHello = 2;

// Pending sends tested per progress() call. MPI_Testsome looks at every
// request it is given, so a burst of thousands of sends would make each call
// cost thousands of checks; the oldest kSendWindow are tested, the rest wait
// in a backlog (MPI progresses them all the same: testing only reports).
constexpr std::size_t kSendWindow = 256;
// Flow control (top of the file): at most this many messages to one node
// that it has not matched, a synchronous send every kSyncEvery-th. The
// bound is far below ob1's 65536, and leaves 16 synchronous sends in flight
// so that a receiver that keeps up never holds a sender back.
constexpr std::uint64_t kSyncEvery = 256;
constexpr std::uint64_t kMaxUnmatched = 4096;
static_assert(kMaxUnmatched >= 2 * kSyncEvery && kMaxUnmatched < 32768,
              "the bound must cover synchronous sends and stay far below 16-bit numbers");
// Messages matched per progress() call, so that a flood from other nodes
// cannot keep the caller (a PE, or the comm thread) inside progress().
constexpr int kMatchesPerCall = 64;

// Peers named in error messages when a call has no single peer.
constexpr int kAnyNode = -1;
constexpr int kEveryNode = -2;

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown thread level";
  }
}

// Error classes that mean a peer process is gone. Only MPI libraries with the
// fault-tolerance extension (ULFM) report them; without it, a process of
// this host that dies is seen by the peer watch (peer_watch.hpp), one on
// another host by the launcher.
bool means_peer_lost(int error_class) {
#if defined(MPIX_ERR_PROC_FAILED) && defined(MPIX_ERR_REVOKED)
  return error_class == MPIX_ERR_PROC_FAILED || error_class == MPIX_ERR_REVOKED;
#else
  (void)error_class;
  return false;
#endif
}

// MPI_Init cannot be interrupted, and in Open MPI it waits for every process
// of the job. If one never starts, this turns the hang into a fatal error
// after the start-up timeout. It cannot name the missing process: MPI does
// not say whom it waits for.
class init_watchdog {
 public:
  init_watchdog(double seconds, const launch_info& launch) {
    if (seconds <= 0) return;
    thread_ = std::thread([this, seconds, size = launch.size] {
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; }))
        base::fatal(
            "MPI_Init did not return within %g s: some process of the job (%d "
            "processes) did not start or is stuck before MPI_Init (--weft:startup-timeout=SEC)",
            seconds, size);
    });
  }
  ~init_watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  init_watchdog(const init_watchdog&) = delete;
  init_watchdog& operator=(const init_watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

class mpi_transport final : public transport {
 public:
  explicit mpi_transport(bool watch_local_peers) : watch_local_peers_(watch_local_peers) {}
  const char* name() const override { return "mpi"; }
  void init(const launch_info& launch, const hooks& h, double startup_timeout_s) override;
  int node_rank() const override { return rank_; }
  int num_nodes() const override { return size_; }
  void send(int node, void* buffer, std::size_t bytes) override;
  int progress() override;
  void allgather(const void* mine, std::size_t bytes, void* all) override;
  void barrier() override;
  [[noreturn]] void abort(int code, const char* why) override;
  void finalize() override;

 private:
  enum class state : int { created, running, finalized };

  struct sent_message {
    void* buffer;
    int node;
  };
  struct matched_receive {
    MPI_Request request;
    void* buffer;
    std::size_t bytes;
  };
  // A synchronous send (flow control), and `count`: the messages to its
  // node up to and including it, all matched once it completes.
  struct sync_send {
    MPI_Request request;
    void* buffer;
    std::uint64_t count;
  };
  // A message past the bound, not yet handed to MPI.
  struct held_send {
    void* buffer;
    std::size_t bytes;
  };
  // A FIFO (matched receives per source, flow control per destination). A
  // vector with a moving head: the queue of a node that never sends costs no
  // memory (std::deque allocates even when empty), and a drained queue keeps
  // its capacity for the next burst.
  template <class T>
  struct vector_fifo {
    std::vector<T> items;
    std::size_t head = 0;
    bool empty() const { return head == items.size(); }
    T& front() { return items[head]; }
    void push(const T& r) { items.push_back(r); }
    void pop() {
      if (++head == items.size()) {
        items.clear();
        head = 0;
      } else if (head >= 64 && head * 2 >= items.size()) {
        items.erase(items.begin(), items.begin() + std::ptrdiff_t(head));
        head = 0;
      }
    }
  };
  using receive_fifo = vector_fifo<matched_receive>;
  // Flow control towards one node: how many of our messages it is known to
  // have matched, its synchronous sends in flight and the messages held
  // back, oldest first; `listed` while it is in syncing_nodes_.
  struct peer_flow {
    std::uint64_t matched = 0;
    vector_fifo<sync_send> syncs;
    vector_fifo<held_send> held;
    bool listed = false;
  };

  void check(int rc, const char* call, int peer) {
    if (rc != MPI_SUCCESS) [[unlikely]]
      fail(rc, call, peer);
  }
  [[noreturn]] void fail(int rc, const char* call, int peer);
  void check_launch(const launch_info& launch) const;
  void handshake(double timeout_s);
  // Progresses (and so delivers) until `request` completes.
  void wait(MPI_Request& request, const char* what);
  // Start-up only: waits for `request` without progress(), so that nothing
  // is delivered before init() returns; past `deadline_ns` (0: never), a
  // fatal error names `what`.
  void wait_startup(MPI_Request& request, const char* what, int peer, std::uint64_t deadline_ns,
                    double timeout_s);
  template <class Done>
  void progress_until(Done done);
  void start_send(int node, void* buffer, std::size_t bytes);
  int complete_sends();
  int complete_syncs();
  int complete_receives();
  int match_incoming();
  void deliver(int src, void* buffer, std::size_t bytes) {
    ++delivered_from_[std::size_t(src)];
    hooks_.deliver(src, buffer, bytes);
  }

  // abort() reads it from any thread; everything else belongs to the one
  // thread that core lets call at a time.
  std::atomic<state> state_{state::created};
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool we_initialised_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  hooks hooks_;

  // Sends: the window is what MPI_Testsome sees (parallel arrays, because
  // MPI wants the requests contiguous); the backlog holds started sends that
  // do not fit in it yet, oldest first.
  std::vector<MPI_Request> window_requests_;
  std::vector<sent_message> window_messages_;
  std::deque<std::pair<MPI_Request, sent_message>> backlog_;
  std::vector<int> done_indices_;
  std::vector<MPI_Status> done_statuses_;

  // Flow control: per node, and the nodes with synchronous sends in flight
  // (only those are looked at; a node with messages held back is one).
  std::vector<peer_flow> flows_;
  std::vector<int> syncing_nodes_;

  // Receives: one FIFO per source node, and the sources whose FIFO is not
  // empty, so that an idle progress() looks at none of them.
  std::vector<receive_fifo> fifos_;
  std::vector<int> busy_sources_;

  // Per node, for finalize(): how many messages we sent to it and how many
  // from it we delivered.
  std::vector<std::uint64_t> sent_to_;
  std::vector<std::uint64_t> delivered_from_;

  // The processes of this host (MPI reports none that dies); stopped before
  // finalize's collectives, after which peers may leave.
  bool watch_local_peers_;
  peer_watch watch_;
};

void mpi_transport::fail(int rc, const char* call, int peer) {
  char text[MPI_MAX_ERROR_STRING + 1] = "";
  int len = 0;
  if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "MPI error code %d", rc);
  int error_class = 0;
  if (PMPI_Error_class(rc, &error_class) != MPI_SUCCESS) error_class = MPI_ERR_UNKNOWN;
  char who[48];
  if (peer == kAnyNode)
    std::snprintf(who, sizeof who, "any node");
  else if (peer == kEveryNode)
    std::snprintf(who, sizeof who, "every node");
  else
    std::snprintf(who, sizeof who, "node %d", peer);
  if (peer >= 0 && means_peer_lost(error_class) && hooks_.node_lost != nullptr) {
    char why[MPI_MAX_ERROR_STRING + 128];
    std::snprintf(why, sizeof why, "%s on node %d failed: %s", call, peer, text);
    hooks_.node_lost(peer, why);
  }
  base::fatal("%s (peer: %s) failed: %s", call, who, text);
}

void mpi_transport::init(const launch_info& launch, const hooks& h, double startup_timeout_s) {
  if (state_.load() != state::created)
    base::fatal("mpi transport: init() called twice (or after finalize())");
  if (h.alloc == nullptr || h.deliver == nullptr || h.release == nullptr)
    base::fatal("mpi transport: init() needs the alloc, deliver and release hooks");
  hooks_ = h;
  bind_library();

  int initialised = 0, finalised = 0;
  PMPI_Initialized(&initialised);
  PMPI_Finalized(&finalised);
  if (finalised)
    base::fatal(
        "--weft:transport=mpi: MPI was already finalised in this process and cannot be "
        "started again; finalise MPI after weft ends");
  int provided = MPI_THREAD_SINGLE;
  if (!initialised) {
    init_watchdog watchdog(startup_timeout_s, launch);
    int rc = PMPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) base::fatal("MPI_Init_thread failed (error code %d)", rc);
    we_initialised_mpi_ = true;
  } else if (int rc = PMPI_Query_thread(&provided); rc != MPI_SUCCESS) {
    base::fatal("MPI_Query_thread failed (error code %d)", rc);
  }
  // Everything MPI does from here on may run on any thread that core picks
  // (one at a time), so a lower level is not a performance choice but a bug.
  if (provided < MPI_THREAD_SERIALIZED)
    base::fatal(
        "--weft:transport=mpi needs MPI_THREAD_SERIALIZED or higher (weft calls MPI from "
        "several threads, one at a time), but the MPI library provides %s%s",
        thread_level_name(provided),
        we_initialised_mpi_ ? ""
                            : " (MPI was initialised by the application: initialise it with "
                              "MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...))");

  // We own MPI_COMM_WORLD's error handler only when we started MPI; it
  // matters for the one call below that uses it.
  if (we_initialised_mpi_) PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(PMPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup(MPI_COMM_WORLD)", kEveryNode);
  check(PMPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", kEveryNode);
  check(PMPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", kEveryNode);
  check(PMPI_Comm_size(comm_, &size_), "MPI_Comm_size", kEveryNode);
  state_.store(state::running);
  check_launch(launch);

  window_requests_.reserve(kSendWindow);
  window_messages_.reserve(kSendWindow);
  done_indices_.resize(kSendWindow);
  done_statuses_.resize(kSendWindow);
  fifos_.resize(std::size_t(size_));
  flows_.resize(std::size_t(size_));
  sent_to_.assign(std::size_t(size_), 0);
  delivered_from_.assign(std::size_t(size_), 0);

  handshake(startup_timeout_s);
}

void mpi_transport::check_launch(const launch_info& launch) const {
  if (launch.launcher == "none") return;
  // A PMIx launcher does not always export the job size (launch.cpp then
  // guesses rank + 1), so only the rank is comparable there.
  bool size_known = launch.launcher != "pmix";
  if (launch.rank != rank_ || (size_known && launch.size != size_))
    base::fatal(
        "the launcher (%s) says this process is rank %d of %d, but MPI_COMM_WORLD says "
        "rank %d of %d: is the program linked against the MPI library of the mpirun (or srun "
        "--mpi=...) that started it?",
        launch.launcher.c_str(), launch.rank, launch.size, rank_, size_);
}

// Proves that point-to-point works between every node before init()
// returns, and names a node that does not answer: each node greets the next
// one on a ring, so a silent predecessor is the node to blame. Then an
// allgather (of the peer watch's records) makes init() return only once all
// have arrived.
void mpi_transport::handshake(double timeout_s) {
  if (size_ == 1) return;
  std::uint64_t deadline = timeout_s > 0 ? base::wall_ns() + std::uint64_t(timeout_s * 1e9) : 0;
  int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  int greeting = rank_, heard = -1;
  MPI_Request greet_out, greet_in;
  check(PMPI_Irecv(&heard, 1, MPI_INT, prev, kTagHello, comm_, &greet_in), "MPI_Irecv (start-up)",
        prev);
  check(PMPI_Isend(&greeting, 1, MPI_INT, next, kTagHello, comm_, &greet_out),
        "MPI_Isend (start-up)", next);
  char what[96];
  std::snprintf(what, sizeof what, "the start-up greeting of node %d", prev);
  wait_startup(greet_in, what, prev, deadline, timeout_s);
  if (heard != prev) base::fatal("start-up greeting from node %d carried %d", prev, heard);
  std::snprintf(what, sizeof what, "the start-up greeting to node %d", next);
  wait_startup(greet_out, what, next, deadline, timeout_s);
  // Every node's record for the peer watch; its completion also says that
  // all have arrived (the start-up barrier).
  const peer_watch::record mine = peer_watch::mine();
  std::vector<peer_watch::record> all(static_cast<std::size_t>(size_));
  MPI_Request all_arrived;
  check(PMPI_Iallgather(&mine, int(sizeof mine), MPI_BYTE, all.data(), int(sizeof mine), MPI_BYTE,
                        comm_, &all_arrived),
        "MPI_Iallgather (start-up)", kEveryNode);
  wait_startup(all_arrived, "the start-up exchange of all nodes", kEveryNode, deadline, timeout_s);
  if (watch_local_peers_) watch_.start(all.data(), size_, rank_, hooks_.node_lost, "mpi");
}

void mpi_transport::wait(MPI_Request& request, const char* what) {
  for (int idle = 0;;) {
    int done = 0;
    check(PMPI_Test(&request, &done, MPI_STATUS_IGNORE), what, kEveryNode);
    if (done) return;
    if (progress() != 0)
      idle = 0;
    else if (++idle >= 64)
      std::this_thread::yield();  // the node we wait for may need this core
  }
}

void mpi_transport::wait_startup(MPI_Request& request, const char* what, int peer,
                                 std::uint64_t deadline_ns, double timeout_s) {
  for (int spins = 0;;) {
    int done = 0;
    check(PMPI_Test(&request, &done, MPI_STATUS_IGNORE), what, peer);
    if (done) return;
    if (++spins < 64) continue;
    std::this_thread::yield();
    if (deadline_ns != 0 && base::wall_ns() > deadline_ns)
      base::fatal("%s did not complete within %g s (--weft:startup-timeout=SEC)", what, timeout_s);
  }
}

template <class Done>
void mpi_transport::progress_until(Done done) {
  for (int idle = 0; !done();) {
    if (progress() != 0)
      idle = 0;
    else if (++idle >= 64)
      std::this_thread::yield();
  }
}

void mpi_transport::send(int node, void* buffer, std::size_t bytes) {
  if (node < 0 || node >= size_ || node == rank_)
    base::fatal("mpi transport: send to node %d; the nodes are 0..%d and never this one", node,
                size_ - 1);
  // MPI counts in int; a message this large would need a derived datatype,
  // and no weft message comes near it.
  if (bytes > std::size_t(INT_MAX))
    base::fatal("message of %zu bytes to node %d: the mpi transport sends at most %d bytes", bytes,
                node, INT_MAX);
  peer_flow& f = flows_[std::size_t(node)];
  if (!f.held.empty() || sent_to_[std::size_t(node)] - f.matched >= kMaxUnmatched) [[unlikely]] {
    f.held.push({buffer, bytes});
    return;
  }
  start_send(node, buffer, bytes);
}

void mpi_transport::start_send(int node, void* buffer, std::size_t bytes) {
  MPI_Request request;
  const std::uint64_t count = ++sent_to_[std::size_t(node)];
  if (count % kSyncEvery == 0) [[unlikely]] {
    check(PMPI_Issend(buffer, int(bytes), MPI_BYTE, node, kTagData, comm_, &request), "MPI_Issend",
          node);
    peer_flow& f = flows_[std::size_t(node)];
    f.syncs.push({request, buffer, count});
    if (!f.listed) {
      f.listed = true;
      syncing_nodes_.push_back(node);
    }
    return;
  }
  check(PMPI_Isend(buffer, int(bytes), MPI_BYTE, node, kTagData, comm_, &request), "MPI_Isend",
        node);
  if (window_requests_.size() < kSendWindow && backlog_.empty()) {
    window_requests_.push_back(request);
    window_messages_.push_back({buffer, node});
  } else {
    backlog_.emplace_back(request, sent_message{buffer, node});
  }
}

int mpi_transport::progress() {
  int did = complete_receives();
  did += match_incoming();
  did += complete_sends();
  if (!syncing_nodes_.empty()) [[unlikely]]
    did += complete_syncs();
  return did;
}

int mpi_transport::complete_sends() {
  if (window_requests_.empty()) return 0;
  int completed = 0;
  int rc = PMPI_Testsome(int(window_requests_.size()), window_requests_.data(), &completed,
                         done_indices_.data(), done_statuses_.data());
  if (rc != MPI_SUCCESS) {
    // MPI_ERR_IN_STATUS: the failed requests carry their own error and tell
    // us which node they were for.
    if (rc == MPI_ERR_IN_STATUS)
      for (int k = 0; k < completed; ++k) {
        const MPI_Status& s = done_statuses_[std::size_t(k)];
        if (s.MPI_ERROR != MPI_SUCCESS)
          fail(s.MPI_ERROR, "MPI_Isend (completion)",
               window_messages_[std::size_t(done_indices_[std::size_t(k)])].node);
      }
    fail(rc, "MPI_Testsome (sends)", kAnyNode);
  }
  if (completed <= 0) return 0;  // MPI_UNDEFINED cannot happen: no null requests
  for (int k = 0; k < completed; ++k)
    hooks_.release(window_messages_[std::size_t(done_indices_[std::size_t(k)])].buffer);
  // MPI set the completed requests to MPI_REQUEST_NULL; close the gaps,
  // keeping the oldest first, then top up from the backlog.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < window_requests_.size(); ++i)
    if (window_requests_[i] != MPI_REQUEST_NULL) {
      window_requests_[kept] = window_requests_[i];
      window_messages_[kept] = window_messages_[i];
      ++kept;
    }
  window_requests_.resize(kept);
  window_messages_.resize(kept);
  while (window_requests_.size() < kSendWindow && !backlog_.empty()) {
    window_requests_.push_back(backlog_.front().first);
    window_messages_.push_back(backlog_.front().second);
    backlog_.pop_front();
  }
  return completed;
}

int mpi_transport::complete_syncs() {
  int did = 0;
  for (std::size_t k = 0; k < syncing_nodes_.size();) {
    const int node = syncing_nodes_[k];
    peer_flow& f = flows_[std::size_t(node)];
    // They complete in order (the node matches our messages in order): only
    // the oldest can free the bound.
    while (!f.syncs.empty()) {
      int done = 0;
      check(PMPI_Test(&f.syncs.front().request, &done, MPI_STATUS_IGNORE),
            "MPI_Issend (completion)", node);
      if (!done) break;
      f.matched = f.syncs.front().count;
      hooks_.release(f.syncs.front().buffer);
      f.syncs.pop();
      ++did;
    }
    while (!f.held.empty() && sent_to_[std::size_t(node)] - f.matched < kMaxUnmatched) {
      const held_send h = f.held.front();
      f.held.pop();
      start_send(node, h.buffer, h.bytes);
      ++did;
    }
    // Held messages imply a synchronous send in flight: past the bound, one
    // of the unmatched messages is one.
    if (f.syncs.empty()) {
      f.listed = false;
      syncing_nodes_[k] = syncing_nodes_.back();
      syncing_nodes_.pop_back();
    } else {
      ++k;
    }
  }
  return did;
}

int mpi_transport::complete_receives() {
  int did = 0;
  for (std::size_t b = 0; b < busy_sources_.size();) {
    int src = busy_sources_[b];
    receive_fifo& fifo = fifos_[std::size_t(src)];
    // Only the head matters: later receives may finish first, but they are
    // not deliverable before it.
    while (!fifo.empty()) {
      int done = 0;
      check(PMPI_Test(&fifo.front().request, &done, MPI_STATUS_IGNORE), "MPI_Imrecv (completion)",
            src);
      if (!done) break;
      matched_receive r = fifo.front();
      fifo.pop();
      deliver(src, r.buffer, r.bytes);
      ++did;
    }
    if (fifo.empty()) {
      busy_sources_[b] = busy_sources_.back();
      busy_sources_.pop_back();
    } else {
      ++b;
    }
  }
  return did;
}

int mpi_transport::match_incoming() {
  int did = 0;
  for (; did < kMatchesPerCall; ++did) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    check(PMPI_Improbe(MPI_ANY_SOURCE, kTagData, comm_, &found, &message, &status), "MPI_Improbe",
          kAnyNode);
    if (!found) break;
    int src = status.MPI_SOURCE, count = 0;
    check(PMPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count", src);
    void* buffer = hooks_.alloc(std::size_t(count));
    if (buffer == nullptr && count > 0)
      base::fatal("no buffer for a message of %d bytes from node %d", count, src);
    MPI_Request request;
    check(PMPI_Imrecv(buffer, count, MPI_BYTE, &message, &request), "MPI_Imrecv", src);
    receive_fifo& fifo = fifos_[std::size_t(src)];
    if (fifo.empty()) {
      // Most messages are eager and already complete: deliver them without
      // a trip through the FIFO.
      int done = 0;
      check(PMPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Imrecv (completion)", src);
      if (done) {
        deliver(src, buffer, std::size_t(count));
        continue;
      }
      busy_sources_.push_back(src);
    }
    fifo.push({request, buffer, std::size_t(count)});
  }
  return did;
}

void mpi_transport::allgather(const void* mine, std::size_t bytes, void* all) {
  if (bytes > std::size_t(INT_MAX / size_))
    base::fatal("allgather of %zu bytes per node is more than MPI counts in an int", bytes);
  MPI_Request request;
  check(PMPI_Iallgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE, comm_, &request),
        "MPI_Iallgather", kEveryNode);
  wait(request, "MPI_Iallgather");
}

void mpi_transport::barrier() {
  MPI_Request request;
  check(PMPI_Ibarrier(comm_, &request), "MPI_Ibarrier", kEveryNode);
  wait(request, "MPI_Ibarrier");
}

void mpi_transport::abort(int code, const char* why) {
  char line[1024];
  int n = std::snprintf(line, sizeof line, "weft: fatal: %s\n", why != nullptr ? why : "abort");
  if (n > 0) {
    // Unchecked: the process is ending, and a failed write to stderr has
    // nowhere to be reported.
    ssize_t w = ::write(STDERR_FILENO, line, std::min(std::size_t(n), sizeof line - 1));
    (void)w;
  }
  // MPI_Abort from a thread other than the one in an MPI call breaks
  // MPI_THREAD_SERIALIZED's letter, but it is the only way to end every
  // process, and the process is ending anyway.
  if (state_.load() == state::running) PMPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void mpi_transport::finalize() {
  if (state_.load() != state::running) return;
  watch_.stop();
  progress_until(
      [this] { return window_requests_.empty() && backlog_.empty() && syncing_nodes_.empty(); });

  // Every message sent to us must be delivered before the communicator goes:
  // learn how many each node sent us, and progress until we have them all.
  std::vector<std::uint64_t> expected(std::size_t(size_), 0);
  MPI_Request request;
  check(PMPI_Ialltoall(sent_to_.data(), 1, MPI_UINT64_T, expected.data(), 1, MPI_UINT64_T, comm_,
                       &request),
        "MPI_Ialltoall (finalize)", kEveryNode);
  wait(request, "MPI_Ialltoall (finalize)");
  for (int src = 0; src < size_; ++src)
    if (delivered_from_[std::size_t(src)] > expected[std::size_t(src)])
      base::fatal("delivered %llu messages from node %d, which says it sent %llu",
                  (unsigned long long)delivered_from_[std::size_t(src)], src,
                  (unsigned long long)expected[std::size_t(src)]);
  progress_until([&] { return delivered_from_ == expected; });

  barrier();
  check(PMPI_Comm_free(&comm_), "MPI_Comm_free", kEveryNode);
  state_.store(state::finalized);
  if (we_initialised_mpi_) {
    int rc = PMPI_Finalize();
    if (rc != MPI_SUCCESS) base::fatal("MPI_Finalize failed (error code %d)", rc);
  }
}

}  // namespace

std::unique_ptr<transport> make_mpi_transport(bool watch_local_peers) {
  return std::make_unique<mpi_transport>(watch_local_peers);
}

}  // namespace weft::net
