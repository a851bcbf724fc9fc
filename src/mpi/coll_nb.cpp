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
  for (std::size_t i = 2; i < me.comms.size(); ++i)
    if (me.comms[i].core == nullptr) {
      me.comms[i] = std::move(v);
      return MPI_Comm(i + 1);
    }
  me.comms.push_back(std::move(v));
  return MPI_Comm(me.comms.size());
}

void collective_helper(threads::ult* u) {
  helper* h = static_cast<helper*>(u->arg);
  try {
    h->body(h->c);
  } catch (const raised& e) {
    // No call of the program's to return the error to: the
    // communicator's handler has it (fatal for now).
    handle_error(h->c.comm, e);
  }
  for (MPI_Datatype t : h->types) drop_type(t);
  drop_comm(*h->rank, h->c.comm);
  complete_collective_request(*h->rank, h->handle);
}

namespace coll {

held::~held() {
  for (MPI_Datatype t : types_) drop_type(t);
}

MPI_Datatype held::type(const char* call, MPI_Datatype type) {
  if (!on_ || (type > 0 && type <= MPI_PACKED)) return type;
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
