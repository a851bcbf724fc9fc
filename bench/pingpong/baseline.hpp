// What mpi_pingpong and ucx_pingpong (mpi.cpp, ucx.cpp), the plain baselines
// of the ping-pong across processes, share: MPI's start and their flags
// (--bytes, --iters, --touch and the harness's), the same in both so that
// run_all.sh passes them the same arguments.
#pragma once
#include <mpi.h>
#include <cstdio>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "common/nodes.hpp"

namespace weft::bench {

struct baseline_job {
  int rank = 0, size = 1;
  cli args;
  bool touch = false;
  long iters = 0;
  std::vector<long> sizes;
};

// MPI_Init, then the flags. False, after MPI_Finalize, for a bad size or a
// job of fewer than 2 ranks (main then returns 2): every rank must end
// through MPI_Finalize, or mpirun reports the others as killed.
inline bool start_baseline(int& argc, char**& argv, const char* name, const char* about,
                           baseline_job& job) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job.size);
  job.args = parse_cli(argc, argv, about);
  reject_unknown(job.args, {"bytes", "iters", "touch"});
  job.touch = touch_arg(job.args, false);
  job.iters = positive_arg(job.args, "iters", 2000, 100000000);
  for (const std::string& item :
       split_list(arg(job.args, "bytes", "8,64,512,4096,32768,262144,1048576,4194304"))) {
    long b = 0;
    if (!parse_list_item("bytes", item, 1, 1l << 30, b)) {
      MPI_Finalize();
      return false;
    }
    job.sizes.push_back(b);
  }
  if (job.size < 2) {
    if (job.rank == 0)
      std::fprintf(stderr,
                   "error: %s needs at least 2 ranks (run it as mpirun -n 2 ...); this run has "
                   "%d\n",
                   name, job.size);
    MPI_Finalize();
    return false;
  }
  return true;
}

}  // namespace weft::bench
