// mpi-test rank_tls_cxx: a C++ thread_local object with a constructor and a
// destructor is each rank's own: built on the rank's first use, destroyed
// once when the rank ends, on the rank's copy (the destructor finds what
// its rank stored), never at the PE thread's exit on another copy. The
// check runs at the process's exit (a static object's destructor), after
// every rank has ended.
#include <mpi.h>
#include <atomic>
#include <cstdio>
#include <vector>

namespace {

constexpr int max_ranks = 64;
std::atomic<int> g_built{0}, g_destroyed{0}, g_wrong{0}, g_ranks{0};
std::atomic<int> g_destroyed_for[max_ranks];

struct per_rank {
  int owner = -1;
  std::vector<int> data;
  per_rank() { g_built.fetch_add(1); }
  ~per_rank() {
    g_destroyed.fetch_add(1);
    if (owner < 0 || owner >= max_ranks || data.size() != 1000 || data[0] != owner ||
        data[999] != owner)
      g_wrong.fetch_add(1);
    else
      g_destroyed_for[owner].fetch_add(1);
  }
};
thread_local per_rank t_state;

struct exit_check {
  ~exit_check() {
    const int n = g_ranks.load();
    int once = 0;
    for (int r = 0; r < n && r < max_ranks; ++r) once += g_destroyed_for[r].load() == 1;
    if (n > 0 && g_built.load() == n && g_destroyed.load() == n && g_wrong.load() == 0 && once == n)
      std::printf("rank_tls_cxx: ok %d ranks, %d destructors\n", n, g_destroyed.load());
    else
      std::printf(
          "FAIL rank_tls_cxx: %d ranks, built %d, destroyed %d, %d on a wrong copy, "
          "%d destroyed exactly once\n",
          n, g_built.load(), g_destroyed.load(), g_wrong.load(), once);
    std::fflush(stdout);
  }
} g_exit_check;

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) g_ranks.store(size);
  t_state.owner = rank;
  t_state.data.assign(1000, rank);
  for (int round = 0; round < 10; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_state.owner != rank || t_state.data[500] != rank) g_wrong.fetch_add(1);
  }
  MPI_Finalize();
  return 0;
}
