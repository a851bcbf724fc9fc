// The mpi layer's state (docs/mpi.md, docs/design/mpi.md): the world of
// ranks of the job, where each runs (process and PE), and, for the ranks of
// this process, each a logical thread (weft::threads::ult) on a PE, its
// matching lists and requests.
//
// Ownership. A rank never moves, and runs as a fiber on its PE's own OS
// thread (every rank is a family of its own: ranks share their PE's
// thread, switching as fibers). So the rank's lists and requests are
// touched only on that thread -- by the rank's own calls and by the
// handlers of messages for it -- and need no lock. A rank that waits
// suspends; the handler that completes what it waits for resumes it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"
#include "weft/mpi/mpi.h"
#include "weft/threads/ult.hpp"
#include "weft/trace/hooks.hpp"

namespace weft::mpi {

// The shared-memory collectives' state of a communicator's members in this
// process (coll_shm.cpp): made by the first member that needs it, freed
// with the communicator.
struct shm_coll;
void destroy(shm_coll* s) noexcept;
struct shm_slot {
  std::atomic<shm_coll*> made{nullptr};
  shm_slot() = default;
  // A copy starts empty: the state belongs to one comm_core.
  shm_slot(const shm_slot&) noexcept {}
  shm_slot& operator=(const shm_slot&) = delete;
  ~shm_slot() {
    if (shm_coll* s = made.load(std::memory_order_acquire)) destroy(s);
  }
};

// A communicator as its members agree on it: its context and its members.
// Messages match receives of their context only; a communicator has two
// contexts, `context` for the program's point-to-point messages and
// `context + 1`, hidden, for the collectives' own, so that a collective
// never takes a message the program sent, whatever its tag. The ranks of a
// process that are members share one (comm.cpp registers it by context);
// it never changes once made.
struct comm_core {
  std::int64_t context = 0;
  std::vector<int> members;  // world ranks, by rank in the communicator
  // A Cartesian topology (topo.cpp): the extent of each dimension and
  // whether it wraps; empty for none.
  std::vector<int> dims;
  std::vector<char> periods;
  mutable shm_slot shm;
};

// A graph topology (topo_graph.cpp): MPI_Graph_create's or
// MPI_Dist_graph_create's. What a neighbourhood collective uses is the
// rank's own: the ranks (in the communicator) it receives from and sends to,
// in order.
struct graph_topology {
  int kind = 0;  // MPI_GRAPH or MPI_DIST_GRAPH
  std::vector<int> sources, destinations;
  std::vector<int> source_weights, destination_weights;
  bool weighted = false;
  std::vector<int> index, edges;  // MPI_GRAPH: the whole graph (MPI_Graph_get)
};

// A rank's handle on a communicator: what MPI keeps per process (its name,
// attributes and error handler are the rank's own, as they are a
// process's own in MPI).
struct comm_view {
  std::shared_ptr<const comm_core> core;  // null: a freed handle
  int rank = 0;                           // the rank's rank in it
  MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;
  std::string name;
  std::map<int, void*> attributes;  // by keyval (attr.cpp)
  // MPI_Comm_set_info's hints, in the order set (info.cpp).
  std::vector<std::pair<std::string, std::string>> hints;
  // Shared-memory collectives the rank has called on it (coll_shm.cpp):
  // the same sequence at every member, as next_collective's.
  std::uint32_t shm_collectives = 0;
  // A graph topology: the rank's neighbours (a dup keeps it).
  std::shared_ptr<const graph_topology> graph;
  // An intercommunicator's remote group (world ranks, by rank in it);
  // null for an intracommunicator. core->members is the local group, so
  // size, rank and MPI_Comm_group mean the local group's, and the ranks of
  // point-to-point calls are the remote group's (intercomm.cpp).
  std::shared_ptr<const std::vector<int>> remote;
};

// The predefined datatypes are 1..kLastPredefined (mpi.h), derived ones
// from datatype.hpp's kFirstDerived.
inline constexpr MPI_Datatype kLastPredefined = MPI_CXX_LONG_DOUBLE_COMPLEX;
inline bool is_predefined(MPI_Datatype t) {
  return t > 0 && t <= kLastPredefined;
}

// How many ranks point-to-point calls on `c` may name: its remote group's
// for an intercommunicator, else its own.
inline int peer_group_size(const comm_view& c) {
  return int(c.remote != nullptr ? c.remote->size() : c.core->members.size());
}

// The context of `comm` for a message: the program's, or the hidden one
// of the collectives.
inline std::int64_t context_of(const comm_view& c, bool collective = false) {
  return c.core->context + (collective ? 1 : 0);
}

struct datatype;  // datatype.cpp

struct request {
  // coll: a non-blocking collective's, completed by its helper (coll_nb.cpp).
  enum kind_t : std::uint8_t { unused, send, recv, coll };
  // A send's mode (a persistent send starts in it).
  enum mode_t : std::uint8_t { standard, synchronous, buffered, ready };
  kind_t kind = unused;
  bool complete = false;
  bool freed = false;  // MPI_Request_free: released when it completes
  // Persistent (MPI_Send_init, MPI_Recv_init, ...): each MPI_Start starts
  // an operation of its own, `inner`; completing it leaves this one
  // inactive, not freed (requests.cpp).
  bool persistent = false;
  bool active = false;
  mode_t mode = standard;
  int inner = 0;
  // A receive: where and what it takes (a send: its peer and tag, for the
  // deadlock report; a persistent one: its arguments).
  void* buf = nullptr;
  std::size_t capacity = 0;  // bytes
  int source = 0, tag = 0;
  std::int64_t context = 0;
  int dest = 0;  // a send: the world rank it goes to (MPI_Cancel asks there)
  // Elements: of `map` for a receive of a derived type; a persistent
  // request's argument.
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  // The program's handle of the communicator the operation was called on:
  // its error handler is the one MPI_Wait and MPI_Test apply to the
  // request's error (MPI_COMM_WORLD's where it names none, or is freed).
  MPI_Comm owner = MPI_COMM_WORLD;
  // A truncated receive (status.MPI_ERROR MPI_ERR_TRUNCATE): the length of
  // the message, of which the receive took what fitted.
  std::uint64_t sent_bytes = 0;
  MPI_Status status{};
  // A receive of a derived type that is not one contiguous run: its map,
  // held until the receive is delivered; null for the others.
  const datatype* map = nullptr;
};

// A message that arrived before its receive was posted.
struct unexpected {
  int source, tag;
  std::int64_t context;
  message_ptr msg;  // its payload: the header, then the data
};

struct rank_state {
  int rank = 0;
  int pe = 0;  // node-local (rank_pe(rank) is the job-wide one)
  threads::ult u;
  std::vector<std::string> args;
  std::vector<char*> argv;
  // Requests by handle - 1; handles of unused ones to reuse.
  std::vector<request> requests;
  std::vector<int> unused;
  std::deque<int> posted;  // receive handles, in the order posted
  std::deque<unexpected> early;
  bool blocked = false;  // suspended in a wait; a completion resumes it
  // Its waits that ended while it served its PE (--weft:rank-wait=serve),
  // and those that suspended (--weft:stats sums them at the rank's end).
  std::uint64_t waits_served = 0, waits_suspended = 0;
  // What it waits in (the deadlock report).
  // Atomics (relaxed): --weft:timeout's dump reads them from its own
  // thread while the rank may run.
  std::atomic<const char*> call{nullptr};
  std::atomic<int> peer{0}, tag{0};
  std::atomic<bool> ended{false};  // its main returned
  // A shared-memory collective it waits in (coll_shm.cpp): the context of
  // its communicator (-1: none) and its number, which the wake-up names.
  std::int64_t shm_context = -1;
  std::uint32_t shm_gen = 0;
  // With --weft:trace: the call under way's operation (trace_operation).
  int trace_peer = 0, trace_tag = 0;
  std::uint64_t trace_bytes = 0;
  bool initialized = false, finalized = false;
  // Collectives called so far, per communicator (next_collective).
  std::unordered_map<MPI_Comm, std::uint32_t> collectives;
  // Communicators by handle - 1 (MPI_COMM_WORLD and MPI_COMM_SELF first);
  // groups by handle - 2 (MPI_GROUP_EMPTY is 1). Handles are the rank's
  // own, as an MPI process's are its own.
  std::vector<comm_view> comms;
  std::vector<std::shared_ptr<const std::vector<int>>> groups;  // world ranks
  // Contexts this rank has proposed for new communicators (comm.cpp).
  std::uint32_t contexts_proposed = 0;
  // Helpers acting for the rank (non-blocking collectives, coll_nb.cpp)
  // that wait: a completion resumes them as it resumes the rank.
  std::vector<threads::ult*> helpers_waiting;
  // MPI_Type_set_name's names, the rank's own (names.cpp): a predefined
  // type without one is called by its MPI name, a derived one "".
  std::unordered_map<MPI_Datatype, std::string> type_names;
  // Attributes on datatypes, by type and keyval (type_attr.cpp).
  std::unordered_map<MPI_Datatype, std::map<int, void*>> type_attributes;
  // Point-to-point extras (probe.cpp, modes.cpp). In MPI_Probe or
  // MPI_Mprobe: a message that goes to `early` wakes the rank.
  bool probing = false;
  // The messages MPI_Mprobe took, by MPI_Message handle - 1 (null: free).
  std::vector<message_ptr> matched;
  // MPI_Buffer_attach's buffer (MPI_Bsend's space).
  void* bsend_buffer = nullptr;
  int bsend_size = 0;
  bool bsend_attached = false;
  // --weft:rank-domain=node: MPI calls under way (an entry point may call
  // another); the rank may move away only as the outermost ends.
  int domain_depth = 0;
  // Its last move away (base::wall_ns) and how many of its next calls'
  // ends stay home: a rank whose stays away are shorter than a move is
  // worth lets its next moves go, twice as many each time (domains.cpp).
  std::uint64_t domain_left_ns = 0;
  std::uint32_t domain_skip = 0, domain_skip_left = 0;
};

struct world_state {
  int size = 0;
  // Every process knows where every rank runs: the job-wide PE of each
  // (weft::send's PE numbers), 4 bytes a rank; the state of a rank exists
  // only in its own process (null for the others' ranks).
  std::vector<int> pes;
  std::vector<std::unique_ptr<rank_state>> ranks;
  int (*main_fn)(int, char**, char**) = nullptr;
  char** envp = nullptr;
};

world_state& world();
// The job-wide PE world rank `world_rank` runs on (weft::send's number; its
// process is weft::node_of of it): what a message to the rank is sent to,
// from any process.
inline int rank_pe(int world_rank) {
  return world().pes[std::size_t(world_rank)];
}
// The rank the calling logical thread is, or null.
rank_state* current_rank() noexcept;

// The job across processes (procs.cpp).
// Every rank of this process has returned, the first non-zero code one
// returned being `code` (0 if none): the job ends once every process has
// said so, with the first non-zero code said.
void process_finished(int code);
// At quiescence (every rank waits, nothing in flight), on PE 0 of the job:
// ends the job with the report of what each rank waits in, from every
// process.
void report_deadlock();
// MPI_Abort: ends every process of the job with `code` (1 for 0), at once.
[[noreturn]] void abort_job(int rank, MPI_Comm comm, int code);
// The rank the calling logical thread is; a fatal error naming `call` off
// a rank (a thread of the program's own, or a program not linked by
// weft-mpicc).
rank_state& self(const char* call);

// Raises an error of `call` on the calling rank (`raised`, caught by the
// entry point's guard): the message names the call, the rank and the
// problem. Only inside an entry point's guard, on the rank's own stack.
[[noreturn]] void fail(const char* call, int error_class, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Ends the job for rank `rank`'s call with an error a handler working for
// it found (MPI_ERRORS_ARE_FATAL: a handler cannot return to the rank).
[[noreturn]] void fail_on(int rank, const char* call, int error_class, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Raises MPI_ERR_COMM: `comm` is not a communicator of the rank's.
[[noreturn]] void bad_comm(const char* call, MPI_Comm comm);
// The calling rank's view of `comm`; an error (MPI_ERR_COMM) naming `call`
// if it is not a communicator of the rank's. Inline: every send and
// receive looks one up.
inline comm_view& view(const char* call, rank_state& me, MPI_Comm comm) {
  const std::size_t i = std::size_t(comm) - 1;  // MPI_COMM_NULL (0) and negatives: out of range
  if (i >= me.comms.size() || me.comms[i].core == nullptr) [[unlikely]]
    bad_comm(call, comm);
  return me.comms[i];
}
// view() for the calls that take an intracommunicator only (collectives,
// creations, topologies): "not implemented" (MPI_ERR_COMM) for an
// intercommunicator, naming `call`.
comm_view& intra_view(const char* call, rank_state& me, MPI_Comm comm);
// Communicator creation's parts that intercomm.cpp shares (comm.cpp): a
// context proposal of the calling rank's (unique in the job), the tag of a
// creation's exchange number `seq` in round `round` (192 and up: rounds no
// collective uses), and the new communicator of `members` (world ranks, in
// rank order; the caller is one) with `context`.
std::int64_t propose_context(const char* call, rank_state& me);
int creation_tag(std::uint32_t seq, int round = 192);
MPI_Comm make_comm(rank_state& me, MPI_Errhandler errhandler, std::int64_t context,
                   std::vector<int> members, std::vector<int> dims = {},
                   std::vector<char> periods = {});
// A binomial broadcast of `bytes` at `data` from `root` of intracommunicator
// `comm`, in its hidden context with tag `tag`.
void broadcast_from(const char* call, MPI_Comm comm, int root, int tag, void* data,
                    std::size_t bytes);
// A new handle of the rank's for `v` (its freed handles are reused first).
MPI_Comm store_comm(rank_state& me, comm_view v);
// MPI_COMM_WORLD and MPI_COMM_SELF for a new rank (comm.cpp).
void make_predefined_comms(rank_state& r, int world_size);
// MPI_Comm_split's work, for topo.cpp too: the new communicator of the
// ranks of `comm` of the caller's color, ordered by key (then rank), with
// the Cartesian topology `dims`/`periods` (empty: none); MPI_COMM_NULL for
// color MPI_UNDEFINED. Collective over `comm`.
MPI_Comm split_comm(const char* call, MPI_Comm comm, int color, int key, std::vector<int> dims = {},
                    std::vector<char> periods = {});
// Drops the rank's handle `comm` (MPI_Comm_free).
void drop_comm(rank_state& me, MPI_Comm comm);
// A handle of the rank's on the communicator `comm` names, for an
// operation that runs after its call (a non-blocking collective, a
// persistent request): the program may free its handle meanwhile, and get
// it back for another communicator. Dropped with drop_comm (coll_nb.cpp).
MPI_Comm hold_comm(const char* call, rank_state& me, MPI_Comm comm);
// The world ranks of `group`, in its order (group.cpp).
std::vector<int> group_members(const char* call, rank_state& me, MPI_Group group);
// The attributes of `from` that their keyvals' copy functions keep, set on
// `to` (MPI_Comm_dup); every attribute of `comm` deleted through its
// delete function (MPI_Comm_free). attr.cpp.
void copy_attributes(const char* call, rank_state& me, MPI_Comm from, MPI_Comm to);
void delete_attributes(const char* call, rank_state& me, MPI_Comm comm);
// MPI_UNIVERSE_SIZE and the like, before the ranks start.
void set_predefined_attributes(int world_size);
// The size of `comm`; an error (MPI_ERR_COMM) naming `call` if it is not
// a communicator.
int comm_size(const char* call, MPI_Comm comm);
// The calling rank's rank in `comm`.
int comm_rank(const char* call, MPI_Comm comm);
// The sequence number of the calling rank's next collective on `comm`.
// Every member calls a communicator's collectives in the same order, so
// the n-th collective has number n at every member: collectives put it in
// their tags, so that two of them in flight at once (a non-blocking one
// and the next) never take each other's messages.
std::uint32_t next_collective(rank_state& me, MPI_Comm comm);

// An error raised by fail(): the entry point's guard hands it to the
// communicator's error handler (MPI_ERRORS_ARE_FATAL: the job ends with
// the message; MPI_ERRORS_RETURN: the call returns the class).
struct raised {
  const char* call;
  int error_class;
  char what[480];
};
// The text of predefined error class `c` ("MPI_ERR_RANK: invalid rank"),
// or null if `c` is not one (api.cpp).
const char* predefined_error_text(int c);
// Whether `code` is a class or code the program added (error_codes.cpp),
// and then its class and its string ("" until MPI_Add_error_string).
bool added_error(int code, int* error_class, std::string* text);
// MPI_LASTUSEDCODE's value (an attribute of MPI_COMM_WORLD).
int* last_used_code();

// Attributes on datatypes (type_attr.cpp): those of `from` that their
// keyvals' copy functions keep, set on `to` (MPI_Type_dup); every one of
// `type` deleted through its delete function (MPI_Type_free).
void copy_type_attributes(const char* call, rank_state& me, MPI_Datatype from, MPI_Datatype to);
void delete_type_attributes(const char* call, rank_state& me, MPI_Datatype type);

// What an entry point returns for `e` under `comm`'s error handler (it
// does not return under MPI_ERRORS_ARE_FATAL).
int handle_error(MPI_Comm comm, const raised& e);

// Tracing of MPI calls (tracing.cpp; docs/tracing.md "MPI"): the id of a
// call's name in the trace's "mpi" names, and the span of a call of the
// calling rank (nothing off a rank).
std::uint32_t trace_call_id(const char* call);
void trace_call_begin(std::uint32_t id, MPI_Comm comm) noexcept;
void trace_call_end() noexcept;
// A wait of the calling rank inside a call begins (suspends) or ends.
void trace_wait(rank_state& r, bool begins) noexcept;
// What the call under way sends or receives: its peer (rank in the
// communicator), tag and bytes, for its span's end.
inline void trace_operation(rank_state& r, int peer, int tag, std::size_t bytes) noexcept {
  if (trace::on()) [[unlikely]] {
    r.trace_peer = peer;
    r.trace_tag = tag;
    r.trace_bytes = bytes;
  }
}

// Scheduling domains (domains.cpp): with --weft:rank-domain=node a rank
// runs its MPI calls at home and may run the program's code between them on
// a free PE of its process.
extern bool g_domain_node;
// --weft:rank-wait=serve, where it can hold (ranks.cpp): see wait_until.
extern bool g_wait_serve;
void domains_start(int pes, const std::vector<int>& homed);
void domain_enter();  // an entry point begins: home first
void domain_leave();  // it ends: maybe to a free PE
void domain_wait(rank_state& r, bool waiting);
void domain_rank_ended(rank_state& r);

// Runs an entry point's body: MPI_SUCCESS, or the error fail() raised in
// it, as `comm`'s error handler wants it (MPI_COMM_WORLD's for calls that
// name no communicator, as the standard says). Every MPI_* function is
// written `return guard(comm, [&] { ... });`, so that fail() never
// unwinds through the program's frames.
//
// With --weft:trace, the call is a span of the rank's (tracing.cpp): its
// name (`call`, the entry point's __func__), communicator, peer, tag and
// bytes, and the time it waits inside.
// guard_for: the communicator comes from comm_of(), called once the rank is
// home (a request's owner: its state is its home's).
template <class CommOf, class Body>
int guard_for(const char* call, CommOf comm_of, Body body) {
  if (g_domain_node) [[unlikely]]
    domain_enter();
  const MPI_Comm comm = comm_of();
  std::uint32_t traced = 0;
  if (trace::on()) [[unlikely]] {
    // One per entry point (each instantiates guard with a lambda of its
    // own): the name is interned once.
    static std::atomic<std::uint32_t> id{0};
    traced = id.load(std::memory_order_relaxed);
    if (traced == 0) {
      traced = trace_call_id(call) + 1;
      id.store(traced, std::memory_order_relaxed);
    }
    trace_call_begin(traced - 1, comm);
  }
  int rc = MPI_SUCCESS;
  try {
    body();
  } catch (const raised& e) {
    rc = handle_error(comm, e);
  }
  if (traced != 0) [[unlikely]]
    trace_call_end();
  if (g_domain_node) [[unlikely]]
    domain_leave();
  return rc;
}

template <class Body>
int guard(const char* call, MPI_Comm comm, Body body) {
  return guard_for(
      call, [comm] { return comm; }, body);
}

// The calls of p2p.cpp that api.cpp's entry points share: each returns a
// request handle, or completes one.
// `collective`: a collective's own message, in the communicator's hidden
// context; its tag is not checked against the program's range.
// `synchronous`: MPI_Issend's: the request completes when the receiver has
// matched the message (an acknowledgement from its PE).
// `may_lend`: false where the call must be done with `buf` when it
// returns (a buffered send, MPI_Sendrecv_replace), so no rendezvous.
// `eager_null`: a blocking send's: MPI_REQUEST_NULL where the send is
// complete once its message is sent (no acknowledgement to wait for).
// The forms that take the calling rank (`me`, self(call)) save the entry
// points that already have it a thread-local lookup per call.
int isend(rank_state& me, const char* call, const void* buf, int count, MPI_Datatype type, int dest,
          int tag, MPI_Comm comm, bool collective = false, bool synchronous = false,
          bool may_lend = true, bool eager_null = false);
inline int isend(const char* call, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                 MPI_Comm comm, bool collective = false, bool synchronous = false,
                 bool may_lend = true, bool eager_null = false) {
  return isend(self(call), call, buf, count, type, dest, tag, comm, collective, synchronous,
               may_lend, eager_null);
}
int irecv(rank_state& me, const char* call, void* buf, int count, MPI_Datatype type, int source,
          int tag, MPI_Comm comm, bool collective = false);
inline int irecv(const char* call, void* buf, int count, MPI_Datatype type, int source, int tag,
                 MPI_Comm comm, bool collective = false) {
  return irecv(self(call), call, buf, count, type, source, tag, comm, collective);
}
// Completes *handle (waiting when `block`); false: not complete (only
// without `block`). A request that failed (a truncated receive) raises its
// error with fail() once completed and freed.
bool finish(rank_state& me, const char* call, int* handle, MPI_Status* status, bool block);
inline bool finish(const char* call, int* handle, MPI_Status* status, bool block) {
  return finish(self(call), call, handle, status, block);
}
// As finish, but a failed request's error is left in st.MPI_ERROR (and a
// truncated message's length in `sent`) for the caller to report: the
// forms that complete several (MPI_ERR_IN_STATUS).
bool settle(const char* call, int* handle, MPI_Status& st, std::uint64_t& sent, bool block);
// Raises the error of a request settle() completed (`st`, `sent`), or
// writes what it is into out[size].
[[noreturn]] void raise_status(const char* call, const MPI_Status& st, std::uint64_t sent);
void describe(const MPI_Status& st, std::uint64_t sent, char* out, std::size_t size);
// Null, an inactive persistent request, or complete: what MPI_Testall
// waits for.
bool complete(const char* call, int handle);
// Active (not null nor an inactive persistent request) and complete: what
// the forms that complete any or some take.
bool ready(const char* call, int handle);
// Active: neither null nor an inactive persistent request.
bool active(const char* call, int handle);
void wait_any(const char* call, int count, const int* handles);
// Completes all of `handles` (MPI_Waitall; MPI_Testall once all are
// complete): a request that failed leaves its error in its status and
// raises MPI_ERR_IN_STATUS once all are done (requests.cpp).
void settle_all(const char* call, int count, int* handles, MPI_Status* statuses);
void free_request(const char* call, int* handle);
// An empty status (a null or inactive request's, MPI_PROC_NULL's without
// its source).
void empty_status(MPI_Status& st);

// The rank's request pool (inline: every send and receive takes one).
inline request& at(rank_state& r, int handle) {
  return r.requests[std::size_t(handle - 1)];
}
inline int new_request(rank_state& r, request::kind_t kind) {
  int handle;
  if (!r.unused.empty()) {
    handle = r.unused.back();
    r.unused.pop_back();
  } else {
    r.requests.emplace_back();
    handle = int(r.requests.size());
  }
  // Reset: what any request reads before the call that takes it sets it
  // (isend, irecv, the persistent inits, MPI_Imrecv set the rest they
  // read). Not `q = request{}`: 96 bytes compile to `rep stos`, whose
  // start-up cost showed in the 8-byte ping-pong.
  request& q = at(r, handle);
  q.kind = kind;
  q.complete = q.freed = q.persistent = q.active = false;
  q.map = nullptr;
  q.owner = MPI_COMM_WORLD;
  q.status = MPI_Status{};
  return handle;
}
inline void release(rank_state& r, int handle) {
  at(r, handle).kind = request::unused;
  r.unused.push_back(handle);
}
// Raises MPI_ERR_REQUEST: `handle` is not a request of the rank in use.
[[noreturn]] void bad_request(const char* call, int handle);
// Request `handle` of the calling rank, in use (not free, nor freed).
inline request& check_request(const char* call, rank_state& me, int handle) {
  if (handle <= 0 || std::size_t(handle) > me.requests.size() ||
      at(me, handle).kind == request::unused || at(me, handle).freed)
    bad_request(call, handle);
  return at(me, handle);
}

// The header of a point-to-point message; its data follows.
struct header {
  std::int64_t context;
  int source, dest, tag;  // source: the sender's rank in the communicator
  std::uint64_t bytes;
  // A synchronous send: the world rank and request handle to acknowledge
  // when a receive matches it (0: none).
  int ack_rank, ack_handle;
  // 1: the payload is the address of the sender's buffer, which the
  // receive copies from (a large send inside the process: lend_bytes).
  int lent;
};
// Sends of at least this many bytes to a rank of the same process lend
// their buffer: the message carries its address and the receive copies
// straight from it -- one copy, not two -- and acknowledges, which
// completes the send (a rendezvous). Below it the data travels in the
// message: the send completes at once, and the copies are in cache. At
// 64 KiB a copy costs several microseconds, the acknowledgement a fraction
// of one (docs/mpi.md, "Messages").
inline constexpr std::size_t lend_bytes = std::size_t(64) << 10;
// Completes receive `q` with the message (`h`, then its data): copies what
// fits; a longer message leaves MPI_ERR_TRUNCATE in its status. Answers a
// synchronous send's acknowledgement.
void deliver(request& q, const header& h, const unsigned char* data);
// Sends the acknowledgement a synchronous send waits for, if `h` asks one.
void acknowledge(const header& h);
// A send in `mode` (modes.cpp): MPI_Bsend's check of the attached buffer,
// MPI_Ssend's acknowledgement; its request handle.
int isend_mode(const char* call, request::mode_t mode, const void* buf, int count,
               MPI_Datatype type, int dest, int tag, MPI_Comm comm);
// Lets the calling rank's PE run its messages and other ranks for a moment.
inline void yield_rank() {
  threads::yield();
}

// The layout of MPI_FLOAT_INT, MPI_DOUBLE_INT, ... (MPI_MAXLOC's pairs).
template <class T>
struct value_int {
  T value;
  int index;
};

// Bytes of one element of a predefined datatype in memory (its extent:
// the pairs of MPI_MAXLOC with their padding); an error (MPI_ERR_TYPE)
// naming `call` for any other handle (derived types: type_size,
// type_extent, pack and unpack below).
std::size_t type_bytes(const char* call, MPI_Datatype type);

// Derived datatypes (datatype.cpp; docs/design/mpi.md "Datatypes"). Every
// function takes any datatype, predefined or derived, and raises
// MPI_ERR_TYPE naming `call` for MPI_DATATYPE_NULL, a freed handle, or a
// derived type not committed (MPI_Type_commit).
//
// How `count` elements of `type` travel: `bytes` of data, packed in the
// type map's order. map == null for the predefined types: the data lies
// at buf, a memcpy (the MAXLOC pairs whole, padding included, as
// type_bytes has them); else pack_map/unpack_map walk the map (one
// memcpy too for a derived type whose elements abut).
struct layout {
  std::size_t bytes;
  const datatype* map;
};
layout derived_layout(const char* call, MPI_Datatype type, int count);
inline layout layout_of(const char* call, MPI_Datatype type, int count) {
  // Predefined types inline: the 8-byte ping-pong pays no more than the
  // size's lookup it paid before derived types.
  if (is_predefined(type) && count >= 0)
    return layout{std::size_t(count) * type_bytes(call, type), nullptr};
  return derived_layout(call, type, count);
}
// `count` elements of `map` at `buf` into `out` (layout.bytes bytes).
void pack_map(const datatype* map, int count, const void* buf, unsigned char* out);
// The first `bytes` (at most `count` elements' worth) of packed data into
// `count` elements of `map` at `buf`: a shorter message fills the leading
// elements, the rest of `buf` is left as it was.
void unpack_map(const datatype* map, int count, const unsigned char* in, std::size_t bytes,
                void* buf);
// A pending receive keeps its map alive across MPI_Type_free.
void retain(const datatype* map);
void release(const datatype* map);

// For gather- and scatter-like code: `count` elements of `type` at `src`
// packed into `dst` (type_size * count bytes), and back.
void pack(const char* call, MPI_Datatype type, int count, const void* src, void* dst);
void unpack(const char* call, MPI_Datatype type, int count, const void* src, void* dst);
// Bytes of data in one element of `type` (MPI_Type_size), and its extent
// (the stride of consecutive elements in a buffer; MPI_Type_get_extent).
std::size_t type_size(const char* call, MPI_Datatype type);
std::ptrdiff_t type_extent(const char* call, MPI_Datatype type);
// For reductions: true when every element of `type` is `*per_element`
// values of one predefined type `*basic` (a predefined type itself, with
// 1; MPI_DOUBLE_INT and the other MAXLOC pairs count as one value). Then
// `count` elements packed (pack above) are count * per_element values of
// `basic` side by side, type_bytes(basic) each, for the operation to
// combine; false for a type mixing predefined types (a struct of an int
// and a double). Raises as above for a handle that is not a committed
// datatype.
bool basic_of(const char* call, MPI_Datatype type, MPI_Datatype* basic, int* per_element);

// The body of the logical threads that act for a rank (a non-blocking
// collective's helper, coll_nb.cpp): their `local` is the rank_state.
void collective_helper(threads::ult* u);
// A request for a non-blocking collective of `r`, and its completion:
// `error_class` in its status, and `error_key` (its sent_bytes) for
// describe_collective to name the error.
int new_collective_request(rank_state& r);
void complete_collective_request(rank_state& r, int handle, int error_class,
                                 std::uint64_t error_key);
// The error of a failed non-blocking collective whose request's
// sent_bytes is `key`, into out[size]; false for any other request.
bool describe_collective(std::uint64_t key, char* out, std::size_t size);
// Lets go of what persistent request `q` holds (requests.cpp), when
// MPI_Request_free releases it.
void release_persistent(rank_state& me, const request& q);

// Rounds of serve_while_waiting a rank makes before it suspends: a few
// microseconds, about as long as a PE's quick spin (more with the network).
constexpr int wait_serve_rounds = 256;

// Suspends the calling rank, or a helper acting for it, until `done()` (a
// completion resumes it). A rank alone on its PE (--weft:rank-wait=serve)
// first serves the PE's messages and the network itself, on its own stack:
// what it waits for, if it comes within that time, is matched by a handler
// nested in the wait, and the rank goes on with no context switch, no turn
// of the scheduler's loop and none of the returns a switch leaves the
// return-address predictor wrong about (docs/mpi.md, "Waiting": the 8-byte
// ping-pong a sixth faster in a process and across two). Not while
// tracing, whose record of the time blocked in a call is the suspension's.
template <class Done>
void wait_until(rank_state& r, const char* call, int peer, int tag, Done done) {
  if (threads::ult* u = threads::current(); u != &r.u) {
    // A helper acting for r: r's own wait state (the deadlock report's)
    // stays the rank's.
    while (!done()) {
      r.helpers_waiting.push_back(u);
      threads::suspend();
    }
    return;
  }
  if (done()) return;
  if (g_wait_serve && !trace::on() && threads::hosted_here() == 1) {
    for (int round = 0; round < wait_serve_rounds && !done(); ++round)
      // One message a round: the wait ends as soon as the handler of what
      // it waits for has run, without polling the queue once more (the
      // 8-byte ping-pong 3% faster across two PEs).
      if (weft::detail::serve_while_waiting(1) < 0) break;
    if (done()) {
      ++r.waits_served;
      return;
    }
  }
  ++r.waits_suspended;
  while (!done()) {
    r.call.store(call, std::memory_order_relaxed);
    r.peer.store(peer, std::memory_order_relaxed);
    r.tag.store(tag, std::memory_order_relaxed);
    r.blocked = true;
    if (g_domain_node) [[unlikely]]
      domain_wait(r, true);
    if (trace::on()) [[unlikely]] {
      trace_wait(r, true);
      threads::suspend();
      trace_wait(r, false);
    } else {
      threads::suspend();
    }
    if (g_domain_node) [[unlikely]]
      domain_wait(r, false);
  }
  r.call.store(nullptr, std::memory_order_relaxed);
}

// Wakes `r` if it waits (on its PE). From a handler the rank runs at once,
// inside it, until it waits again: a resume message to its own PE cost a
// second message per receive (ping-pong at 8 B: 1.55x Open MPI's time).
inline void wake(rank_state& r) {
  if (r.blocked) {
    r.blocked = false;
    threads::resume_here(&r.u);
  }
  // Each helper looks again, and waits again if what it waits for is not
  // there yet.
  if (!r.helpers_waiting.empty()) {
    std::vector<threads::ult*> waiting;
    waiting.swap(r.helpers_waiting);
    for (threads::ult* u : waiting) threads::resume_here(u);
  }
}

}  // namespace weft::mpi
