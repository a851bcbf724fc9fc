// Non-blocking collectives: the blocking algorithm run by a helper logical
// thread that acts for the rank.
//
// The helper is a ULT of the rank's own PE, of a family of its own so that
// it shares the PE's OS thread with the rank as a fiber: like the rank, it
// touches the rank's state on that thread only, and needs no lock. Its
// `local` names the rank, so that self() inside the algorithm resolves to
// the rank (ranks.cpp): its messages are the rank's, its waits are on the
// rank's completions (wait_until, wake). The rank's request completes when
// the algorithm has returned, and MPI_Wait/Test complete it as any other.
//
// The sequence number is taken by the rank at the call, so collectives
// keep the order the program called them in whatever order their helpers
// run. What the standard fixes at the call stays as it was then, whatever
// the program does with its handles meanwhile: the helper has handles of
// its own on the communicator (hold_comm) and on the derived datatypes
// (coll::held), and the op is resolved at the call (coll::op_ref).
//
// Errors. An error the algorithm raises (a block longer than its receive,
// any fail()) has no call of the program's to return to, and must not end
// the job from here whatever the error handler: the helper turns the
// receives it left posted into ones that discard what comes (their buffers
// may be its own, freed as it unwinds; a large sender waits for its
// message to be taken), and completes the request with the error in its
// status. The wait or test that completes it reports it as it reports a
// failed receive's (MPI_ERR_IN_STATUS from the forms that take several),
// under that call's error handler (MPI_COMM_WORLD's, as for any request).
// The text of the error, naming the collective and the problem, is kept
// here for that report.
#include <cstdio>
#include <mutex>
#include "mpi/coll.hpp"
#include "mpi/datatype.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/send.hpp"

namespace weft::mpi {

namespace {

struct helper {
  threads::ult u;
  rank_state* rank;
  int handle;
  coll::ctx c;
  std::function<void(const coll::ctx&)> body;
  std::vector<MPI_Datatype> types;  // held (hold_type), dropped at the end
};

handler_id h_start = 0;

// The errors of the last helpers that failed, by key (the failed request's
// sent_bytes, which describe() passes back): a ring, so that the errors no
// wait ever reports (statuses the program reads itself) cost nothing for
// good; one pushed out before its wait is reported by its class alone.
// Helpers of every PE write here, hence the lock (errors only).
constexpr std::uint64_t kErrorKey = std::uint64_t(1) << 63;
constexpr std::size_t kKept = 64;
struct kept_error {
  std::uint64_t key = 0;
  raised e;
};
std::mutex g_errors_mutex;
kept_error g_errors[kKept];
std::uint64_t g_errors_kept = 0;

std::uint64_t keep_error(const raised& e) {
  std::lock_guard<std::mutex> lock(g_errors_mutex);
  const std::uint64_t key = kErrorKey | ++g_errors_kept;
  g_errors[key % kKept] = kept_error{key, e};
  return key;
}

// Lets go of what the failed collective `c` left of its receives: those
// complete but never waited for are released; those still posted take
// their message into nothing (capacity 0, acknowledging a lent one) and
// release themselves then, as a freed request does. Its receives are the
// rank's receives in the communicator's hidden context with `c`'s number
// in their tags (coll::ctx::tag), which no other collective in flight has.
void withdraw(rank_state& me, const coll::ctx& c) {
  const std::int64_t context = context_of(view(c.call, me, c.comm), true);
  const int seq = int(c.seq & 0x7fffffu);
  for (std::size_t i = 0; i < me.requests.size(); ++i) {
    request& q = me.requests[i];
    if (q.kind != request::recv || q.persistent || q.freed || q.context != context || q.tag < 0 ||
        (q.tag >> 8) != seq)
      continue;
    if (q.complete) {
      release(me, int(i + 1));
      continue;
    }
    if (q.map != nullptr) release(q.map);
    q.map = nullptr;
    q.capacity = 0;
    q.freed = true;
  }
}

void helper_finished(threads::ult* u) {
  delete static_cast<helper*>(u->arg);
}

// On the rank's PE: the helper runs now, until it first waits.
void on_start(message_ptr m) {
  helper* h = m->as<helper*>();
  if (threads::claim(&h->u)) threads::start_here(&h->u);
}

const bool registered = [] {
  h_start = register_handler("mpi.collective_helper", &on_start);
  return true;
}();

}  // namespace

// A view of the same communicator, in a free slot of the rank's handles as
// comm.cpp fills them. A collective pending when the program frees its
// handle is to complete normally (MPI 3.1, 6.4.3), and so is a persistent
// request started after (MPICH and Open MPI keep the communicator with the
// request).
MPI_Comm hold_comm(const char* call, rank_state& me, MPI_Comm comm) {
  comm_view v = view(call, me, comm);
  v.name.clear();
  v.attributes.clear();
  return store_comm(me, std::move(v));
}

bool describe_collective(std::uint64_t key, char* out, std::size_t size) {
  if ((key & kErrorKey) == 0) return false;
  std::lock_guard<std::mutex> lock(g_errors_mutex);
  const kept_error& k = g_errors[key % kKept];
  if (k.key != key) return false;
  std::snprintf(out, size, "%s: %s", k.e.call, k.e.what);
  return true;
}

void collective_helper(threads::ult* u) {
  helper* h = static_cast<helper*>(u->arg);
  rank_state& me = *h->rank;
  int error = MPI_SUCCESS;
  std::uint64_t key = 0;
  try {
    h->body(h->c);
  } catch (const raised& e) {
    withdraw(me, h->c);
    error = e.error_class;
    key = keep_error(e);
  }
  for (MPI_Datatype t : h->types) drop_type(t);
  drop_comm(me, h->c.comm);
  complete_collective_request(me, h->handle, error, key);
}

namespace coll {

held::~held() {
  for (MPI_Datatype t : types_) drop_type(t);
}

MPI_Datatype held::type(const char* call, MPI_Datatype type) {
  if (!on_ || is_predefined(type)) return type;
  for (std::size_t i = 0; i < from_.size(); ++i)
    if (from_[i] == type) return types_[i];
  const MPI_Datatype t = hold_type(call, type);
  from_.push_back(type);
  types_.push_back(t);
  return t;
}

void launch_helper(const ctx& c, MPI_Request* request, std::function<void(const ctx&)> body,
                   std::vector<MPI_Datatype> types) {
  rank_state& me = self(c.call);
  auto* h = new helper{};
  h->rank = &me;
  h->handle = new_collective_request(me);
  at(me, h->handle).owner = c.comm;
  h->c = c;
  h->c.comm = hold_comm(c.call, me, c.comm);
  h->body = std::move(body);
  h->types = std::move(types);
  h->u.body = &collective_helper;
  h->u.finished = &helper_finished;
  h->u.arg = h;
  h->u.local = &me;
  h->u.family = h;  // its own: it shares the PE's thread with the rank
  // Algorithms keep their buffers on the heap; the stack holds frames and
  // a user op's locals.
  h->u.stack_bytes = std::size_t(1) << 20;
  h->u.label = "the non-blocking collective helper of MPI rank";
  h->u.label_id = me.rank;
  *request = h->handle;
  // Started by a message to the PE rather than from here: a ULT starts
  // from a handler of its PE, not from inside another ULT.
  weft::send(threads::job_pe(me.pe), make_message_with(h_start, h));
}

}  // namespace coll

}  // namespace weft::mpi
