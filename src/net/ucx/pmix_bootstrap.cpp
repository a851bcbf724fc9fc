// The ucx transport's PMIx bootstrap (pmix_bootstrap.hpp says what it does).
// Every PMIx call whose completion is awaited is the non-blocking one,
// polled here with a deadline: Open MPI 4.1's server does not promise to
// honour PMIX_TIMEOUT, and a node that never arrives must become an error
// naming it, not a hang.
#include "pmix_bootstrap.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include "weft/base/error.hpp"

namespace weft::net::ucx {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// A PMIx operation completed on PMIx's own thread.
struct pmix_completion {
  std::atomic<bool> done{false};
  std::atomic<int> status{PMIX_SUCCESS};
  pmix_info_t info[1];
  std::size_t ninfo = 0;
};

void on_pmix_op_done(pmix_status_t status, void* cbdata) {
  auto* w = static_cast<pmix_completion*>(cbdata);
  w->status.store(status);
  w->done.store(true, std::memory_order_release);
}

void on_pmix_value(pmix_status_t status, pmix_value_t* kv, void* cbdata) {
  (void)kv;  // owned by PMIx in the callback
  on_pmix_op_done(status, cbdata);
}

}  // namespace

void pmix_bootstrap::start(const launch_info& launch) {
  pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    base::fatal(
        "ucx transport: PMIx_Init: %s: this process was started by %s, but the ucx transport "
        "needs a PMIx server (Open MPI's mpirun, or srun --mpi=pmix)",
        PMIx_Error_string(rc), launch.launcher.c_str());
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* v = nullptr;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS || v == nullptr || v->type != PMIX_UINT32)
    base::fatal("ucx transport: PMIx_Get(%s): %s", PMIX_JOB_SIZE, PMIx_Error_string(rc));
  rank_ = int(me_.rank);
  size_ = int(v->data.uint32);
  PMIX_VALUE_RELEASE(v);
  // Which peers share this host: PEER error handling costs them shared memory
  // (see ucx_options::detect_local_peer_failure). Unknown: all are remote.
  local_.assign(std::size_t(size_), false);
  v = nullptr;
  rc = PMIx_Get(&job, PMIX_LOCAL_PEERS, nullptr, 0, &v);
  if (rc == PMIX_SUCCESS && v != nullptr && v->type == PMIX_STRING && v->data.string != nullptr) {
    for (const char* at = v->data.string; *at != '\0';) {
      char* end = nullptr;
      long r = std::strtol(at, &end, 10);
      if (end == at) break;
      if (r >= 0 && r < size_) local_[std::size_t(r)] = true;
      at = *end == ',' ? end + 1 : end;
    }
  }
  if (v != nullptr) PMIX_VALUE_RELEASE(v);
  // A PMIx-only launcher may not export the job size (launch.size is then a
  // guess): only the rank is compared.
  if (launch.rank != rank_ || (launch.launcher != "pmix" && launch.size != size_))
    base::fatal(
        "ucx transport: PMIx says this process is rank %d of %d, but the launcher's environment "
        "(%s) says rank %d of %d",
        rank_, size_, launch.launcher.c_str(), launch.rank, launch.size);
}

void pmix_bootstrap::put(const char* key, const void* bytes, std::size_t n) {
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_BYTE_OBJECT;
  v.data.bo.bytes = static_cast<char*>(const_cast<void*>(bytes));
  v.data.bo.size = n;
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);  // copies the value
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Put(%s): %s", rank_, key, PMIx_Error_string(rc));
}

void pmix_bootstrap::commit() {
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Commit: %s", rank_, PMIx_Error_string(rc));
}

std::vector<std::byte> pmix_bootstrap::get(int node, const char* key) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, me_.nspace, pmix_rank_t(node));
  pmix_value_t* v = nullptr;
  pmix_status_t rc = PMIx_Get(&p, key, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS || v == nullptr || v->type != PMIX_BYTE_OBJECT)
    base::fatal("ucx transport (node %d): PMIx_Get(%s) of node %d: %s", rank_, key, node,
                rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "not a byte object");
  auto* b = reinterpret_cast<const std::byte*>(v->data.bo.bytes);
  std::vector<std::byte> out(b, b + v->data.bo.size);
  PMIX_VALUE_RELEASE(v);
  return out;
}

// On a time-out the completion record is left to PMIx, which may still call
// back.
bool pmix_bootstrap::fence(bool collect, double timeout_s,
                           const std::function<void()>& wait_a_little) {
  auto* w = new pmix_completion;
  if (collect) {
    PMIX_INFO_CONSTRUCT(&w->info[0]);
    bool yes = true;
    PMIx_Info_load(&w->info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    w->ninfo = 1;
  }
  pmix_status_t rc =
      PMIx_Fence_nb(nullptr, 0, w->ninfo ? w->info : nullptr, w->ninfo, &on_pmix_op_done, w);
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Fence_nb: %s", rank_, PMIx_Error_string(rc));
  auto t0 = clock_type::now();
  while (!w->done.load(std::memory_order_acquire)) {
    if (timeout_s > 0 && seconds_since(t0) > timeout_s) return false;
    wait_a_little();
  }
  rc = w->status.load();
  if (w->ninfo) PMIX_INFO_DESTRUCT(&w->info[0]);
  delete w;
  if (rc != PMIX_SUCCESS)
    base::fatal("ucx transport (node %d): PMIx_Fence: %s", rank_, PMIx_Error_string(rc));
  return true;
}

// Asks the server for each peer's key with a short wait; the peers whose
// data cannot be had are the ones that did not arrive.
void pmix_bootstrap::name_missing_peers(const char* key, double timeout_s) {
  std::vector<pmix_completion*> waits(std::size_t(size_), nullptr);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    auto* w = new pmix_completion;  // left to PMIx: it may call back after we exit
    PMIX_INFO_CONSTRUCT(&w->info[0]);
    int secs = 2;
    PMIx_Info_load(&w->info[0], PMIX_TIMEOUT, &secs, PMIX_INT);
    w->ninfo = 1;
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, me_.nspace, pmix_rank_t(p));
    if (PMIx_Get_nb(&proc, key, w->info, 1, &on_pmix_value, w) == PMIX_SUCCESS)
      waits[std::size_t(p)] = w;
  }
  auto t0 = clock_type::now();
  while (seconds_since(t0) < 3) {
    bool all = true;
    for (pmix_completion* w : waits)
      if (w != nullptr && !w->done.load(std::memory_order_acquire)) all = false;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string missing;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    pmix_completion* w = waits[std::size_t(p)];
    if (w == nullptr || !w->done.load(std::memory_order_acquire) ||
        w->status.load() != PMIX_SUCCESS)
      missing += (missing.empty() ? "" : ", ") + std::to_string(p);
  }
  if (missing.empty())
    base::fatal(
        "ucx transport (node %d): the bootstrap PMIx fence did not complete within %.0f s "
        "(--weft startup timeout), although every node published its address",
        rank_, timeout_s);
  base::fatal(
      "ucx transport (node %d): node(s) %s did not arrive within %.0f s (startup timeout): "
      "no UCX address published through PMIx",
      rank_, missing.c_str(), timeout_s);
}

void pmix_bootstrap::abort(int code, const char* why) {
  PMIx_Abort(code, why, nullptr, 0);
}

void pmix_bootstrap::finalize() {
  PMIx_Finalize(nullptr, 0);
}

}  // namespace weft::net::ucx
