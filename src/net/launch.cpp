// Bootstrap from the launcher's environment. weft never starts processes
// itself: mpirun or srun did, and told each process where it stands.
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include "weft/base/error.hpp"
#include "weft/net/transport.hpp"

namespace weft::net {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// A non-negative integer from the environment variable `name`, or -1 when it
// is not set. A value that is not a number is a clear error: it means the
// launcher and weft disagree about what the variable holds.
int env_int(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return -1;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < 0 || x > 1'000'000)
    base::usage_error("%s=%s: expected a process number (0..1000000) from the launcher", name, v);
  return int(x);
}

}  // namespace

launch_info launch_from_environment() {
  launch_info l;
  l.launcher = "none";
  struct source {
    const char *launcher, *rank, *size, *local_rank, *local_size;
  };
  // In order of preference: the most specific variables first.
  static const source sources[] = {
      {"open-mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      // SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: only srun's tasks have it,
      // so a program run from the batch script itself is one process.
      {"slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
  };
  for (const source& s : sources) {
    int rank = env_int(s.rank), size = env_int(s.size);
    if (rank < 0 && size < 0) continue;
    if (rank < 0 || size < 1 || rank >= size)
      base::usage_error("launcher environment (%s): %s=%s and %s=%s do not name a process of a job",
                        s.launcher, s.rank, env(s.rank) ? env(s.rank) : "(unset)", s.size,
                        env(s.size) ? env(s.size) : "(unset)");
    l.launcher = s.launcher;
    l.rank = rank;
    l.size = size;
    // Slurm says how many tasks each host has only as a pattern ("2(x3)")
    // that does not say which host this is: the local size is then unknown
    // (0), and the job does not assume one host.
    int lr = env_int(s.local_rank);
    int ls = s.local_size != nullptr ? env_int(s.local_size) : -1;
    l.local_rank = lr >= 0 ? lr : 0;
    l.local_size = ls >= 1 ? ls : 0;
    break;
  }
  if (l.launcher == std::string("none")) {
    // PMIx alone (a launcher other than Open MPI's that speaks PMIx).
    int rank = env_int("PMIX_RANK");
    if (rank >= 0) {
      l.launcher = "pmix";
      l.rank = rank;
      int size = env_int("PMIX_SIZE");  // not always set: then a transport must ask PMIx
      l.size = size >= 1 ? size : rank + 1;
      l.local_size = 0;  // unknown
    }
  }
  // A job id shared by every process of the job and by no other job: the
  // launcher's, else this process's parent (one launcher process per job).
  if (const char* ns = env("PMIX_NAMESPACE"))
    l.job_id = ns;
  else if (const char* ompi = env("OMPI_MCA_ess_base_jobid"))
    l.job_id = ompi;
  else if (const char* job = env("SLURM_JOB_ID"))
    l.job_id = std::string(job) + "." + (env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : "0");
  else if (const char* kvs = env("PMI_KVSNAME"))
    l.job_id = kvs;
  else
    l.job_id = "ppid" + std::to_string(::getppid());
  return l;
}

}  // namespace weft::net
