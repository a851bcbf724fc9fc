// Private to the ucx transport: its bootstrap through the launcher's PMIx
// server (Open MPI's mpirun, srun --mpi=pmix).
//
// PMIx gives this process its rank, the job's size and which ranks share its
// host; the transport puts its UCP worker address and its send pool's rkey
// under keys of its own, one fence collects them, and it reads every other
// node's. PMIx is not used while the job runs (a fence is a trip through the
// launcher's daemons): the transport's allgather and barrier are active
// messages (collective.cpp). Finalize uses two more fences, around the
// closing of the endpoints (ucx_transport.cpp, finalize).
//
// Apart from the transport class so that UCP messaging and the launcher's
// protocol are read apart; it holds nothing of UCX. Not thread-safe: the
// thread that drives the transport calls it.
#pragma once
#include <pmix.h>
#include <cstddef>
#include <functional>
#include <vector>
#include "weft/net/transport.hpp"

namespace weft::net::ucx {

class pmix_bootstrap {
 public:
  // PMIx_Init, then this process's rank, the job's size and the ranks on
  // this host, checked against what the launcher's environment says
  // (launch). Fatal when there is no PMIx server or they disagree.
  void start(const launch_info& launch);
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether node n shares this host (false for all when PMIx does not say).
  bool is_local(int n) const { return local_[std::size_t(n)]; }

  // Publishes n bytes under key for the other nodes (PMIx copies them).
  void put(const char* key, const void* bytes, std::size_t n);
  // Makes what was put visible to the fence.
  void commit();
  // What node put under key; fatal when it is not there.
  std::vector<std::byte> get(int node, const char* key);
  // A fence over the whole job, collecting what was committed when collect
  // is set. Waits at most timeout_s (<= 0: no limit) whatever the server
  // does with PMIX_TIMEOUT, calling wait_a_little between looks; false on
  // a time-out.
  bool fence(bool collect, double timeout_s, const std::function<void()>& wait_a_little);
  // After a fence that timed out: names the nodes whose `key` cannot be had
  // (those that did not arrive) in a fatal error.
  [[noreturn]] void name_missing_peers(const char* key, double timeout_s);

  // PMIx_Abort: asks the launcher to end the whole job. May return.
  void abort(int code, const char* why);
  void finalize();

 private:
  pmix_proc_t me_{};
  int rank_ = 0, size_ = 1;
  std::vector<bool> local_;
};

}  // namespace weft::net::ucx
