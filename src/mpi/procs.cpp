// The job across processes: its end, its deadlock report, MPI_Abort.
//
// Under a launcher every process of the job is a weft node, and the ranks
// are spread over the job's PEs (ranks.cpp): a rank of another process is
// one weft::send away (rank_pe), so point-to-point needs nothing of its own
// here. What spans the processes is the job's end:
//  - exit code: each process tells PE 0 of the job when its last rank has
//    returned, with the first non-zero code one of them returned; once
//    every process has, PE 0 ends the job (weft::exit) with the first
//    non-zero code it heard, and every process exits with it;
//  - deadlock: quiescence detection spans the job, so when every rank
//    waits and nothing is in flight anywhere, PE 0 of the job asks every
//    process what its ranks wait in and prints one report, in rank order;
//  - MPI_Abort: the transport's abort ends every process at once, whatever
//    their ranks are doing (weft::exit would wait for each PE's current
//    handler, which a rank that computes and never waits does not end).
// All of it runs on PE 0 of the job (and on the first PE of each process
// for the report), so it needs no lock.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "mpi/mpi_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"

namespace weft::mpi {

namespace {

handler_id h_finished = 0, h_report_ask = 0, h_report_lines = 0;

// On PE 0 of the job: processes whose ranks have all returned, and the
// first non-zero code among theirs.
int g_finished = 0;
int g_code = 0;

void on_finished(message_ptr m) {
  int code = 0;
  std::memcpy(&code, m->data(), sizeof code);
  if (g_code == 0) g_code = code;
  if (++g_finished == weft::num_nodes()) weft::exit(g_code);
}

// One line of the deadlock report, as it travels between processes (the
// call's name is copied: a pointer means nothing in another process).
struct waiting_rank {
  int rank, pe, peer, tag;
  char call[40];
};

// On PE 0 of the job: the report being gathered.
std::vector<waiting_rank> g_lines;
int g_replies = 0;

// The ranks of this process that wait, and in what. At quiescence every
// PE is idle and every rank suspended, so the ranks of the other PEs of the
// process hold still while one PE reads them.
std::vector<waiting_rank> waiting_here() {
  std::vector<waiting_rank> out;
  for (auto& r : world().ranks) {
    const char* call = r == nullptr ? nullptr : r->call.load(std::memory_order_relaxed);
    if (call == nullptr) continue;
    waiting_rank w{r->rank,
                   rank_pe(r->rank),
                   r->peer.load(std::memory_order_relaxed),
                   r->tag.load(std::memory_order_relaxed),
                   {}};
    std::snprintf(w.call, sizeof w.call, "%s", call);
    out.push_back(w);
  }
  return out;
}

void print_report() {
  std::sort(g_lines.begin(), g_lines.end(),
            [](const waiting_rank& a, const waiting_rank& b) { return a.rank < b.rank; });
  std::fprintf(stderr,
               "weft: MPI deadlock: %zu of %d rank(s) wait and no message is in flight; "
               "what each waits in:\n",
               g_lines.size(), world().size);
  const bool several = weft::num_nodes() > 1;
  for (const waiting_rank& w : g_lines) {
    if (several)
      std::fprintf(stderr, "  rank %d (PE %d, process %d): %s", w.rank, w.pe, weft::node_of(w.pe),
                   w.call);
    else
      std::fprintf(stderr, "  rank %d (PE %d): %s", w.rank, w.pe, w.call);
    if (w.peer == MPI_ANY_SOURCE)
      std::fprintf(stderr, " from any source");
    else if (w.peer >= 0)
      std::fprintf(stderr, " peer %d", w.peer);
    if (w.tag == MPI_ANY_TAG)
      std::fprintf(stderr, ", any tag\n");
    else
      std::fprintf(stderr, ", tag %d\n", w.tag);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // Every process ends with the code: its PEs stop after their current
  // handler, and weft_mpi_run leaves at once, its ranks being suspended
  // for good.
  weft::exit(base::exit_quiescent);
}

// On the first PE of a process: its ranks' lines, to PE 0 of the job.
void on_report_ask(message_ptr) {
  const std::vector<waiting_rank> lines = waiting_here();
  message_ptr m = make_message(h_report_lines, lines.size() * sizeof(waiting_rank));
  if (!lines.empty()) std::memcpy(m->data(), lines.data(), lines.size() * sizeof(waiting_rank));
  weft::send(0, std::move(m));
}

void on_report_lines(message_ptr m) {
  const std::size_t n = m->size / sizeof(waiting_rank);
  g_lines.resize(g_lines.size() + n);
  if (n != 0) std::memcpy(&g_lines[g_lines.size() - n], m->data(), n * sizeof(waiting_rank));
  if (++g_replies == weft::num_nodes() - 1) print_report();
}

const bool registered = [] {
  h_finished = register_handler("mpi.process_finished", &on_finished);
  h_report_ask = register_handler("mpi.report_ask", &on_report_ask);
  h_report_lines = register_handler("mpi.report_lines", &on_report_lines);
  return true;
}();

}  // namespace

void process_finished(int code) {
  weft::send(0, make_message_with(h_finished, code));
}

void report_deadlock() {
  g_lines = waiting_here();
  g_replies = 0;
  if (weft::num_nodes() == 1) {
    print_report();
    return;
  }
  for (int node = 1; node < weft::num_nodes(); ++node)
    weft::send(node * weft::node_size(), make_message(h_report_ask, 0));
}

void abort_job(int rank, MPI_Comm comm, int code) {
  std::fprintf(stderr, "weft: MPI_Abort(communicator %d, %d) on rank %d: the job ends\n", comm,
               code, rank);
  std::fflush(stdout);
  std::fflush(stderr);
  const int exit_code = code != 0 ? code : 1;
  if (weft::num_nodes() > 1) {
    char why[160];
    std::snprintf(why, sizeof why, "MPI_Abort(communicator %d, %d) on rank %d: every process ends",
                  comm, code, rank);
    weft::detail::abort_job(exit_code, why);
  }
  // One process: at once, as MPI_Abort ends an MPI job: other ranks may be
  // anywhere, and none is to run on.
  std::_Exit(exit_code);
}

}  // namespace weft::mpi
