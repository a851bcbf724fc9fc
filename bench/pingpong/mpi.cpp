// mpi_pingpong: the plain MPI baseline for weft's cross-node pingpong (issue
// 4). Ranks 0 and 1 bounce a message of each size with MPI_Send/MPI_Recv;
// the one-way time is half a round trip. It uses no weft runtime at all,
// only the benchmark harness for its flags and its output, so that weft's
// transports can be compared with the MPI library they run over, in the
// same run and with the same MPI. With --touch=true each rank reads the
// whole message it received and writes it whole before sending it back, as
// weft's pingpong --touch=true does.
//
//   mpirun -n 2 build/release/bench/mpi_pingpong --json
//
// Every rank takes part in the start and end barriers; ranks above 1 only
// wait, so the program runs under any -n >= 2.
#include <mpi.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "pingpong/baseline.hpp"

namespace {

const char* about =
    "mpi_pingpong: one-way latency and bandwidth between MPI ranks 0 and 1 with plain\n"
    "MPI_Send/MPI_Recv (the baseline for weft's transports; run under mpirun with -n 2 or\n"
    "more). Flags:\n"
    "  --bytes=LIST   message sizes (default 8,64,512,4096,32768,262144,1048576,4194304)\n"
    "  --iters=N      round trips per measurement for small messages (default 2000; fewer\n"
    "                 for large ones, at least 20, about 64 MiB moved per measurement)\n"
    "  --touch=BOOL   true: the receiver reads every byte (and checks it) and the sender\n"
    "                 writes every byte before each send (default false)";

[[noreturn]] void fail(int code, const char* what) {
  std::fprintf(stderr, "mpi_pingpong: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // not reached: MPI_Abort ends every rank
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::baseline_job job;
  if (!weft::bench::start_baseline(argc, argv, "mpi_pingpong", about, job)) return 2;
  const int rank = job.rank, size = job.size;
  const bool touch = job.touch;
  const long iters = job.iters;
  const std::vector<long>& sizes = job.sizes;
  const weft::bench::cli& cli = job.args;

  const long largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> buf(static_cast<std::size_t>(largest), 1);
  unsigned char fill = 1;
  // --touch: the receiver reads what came in (and checks it)...
  auto check_received = [&](long bytes) {
    if (touch && !weft::bench::payload_is_whole(buf.data(), std::size_t(bytes)))
      fail(1, "a torn payload arrived");
  };
  // ...and the sender writes what goes out.
  auto fill_outgoing = [&](long bytes) {
    if (touch) weft::bench::fill_payload(buf.data(), std::size_t(bytes), ++fill);
  };
  weft::bench::reporter out("mpi_pingpong", cli.json);
  MPI_Barrier(MPI_COMM_WORLD);
  for (long bytes : sizes) {
    const long n = weft::bench::round_trips(iters, bytes);
    std::vector<double> oneway_ns;
    for (int r = -1; r < cli.repeat; ++r) {  // r = -1: warm-up
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (rank == 0) {
        for (long i = 0; i < n; ++i) {
          fill_outgoing(bytes);
          if (MPI_Send(buf.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
              MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                  MPI_SUCCESS)
            fail(1, "an MPI call failed on rank 0");
          check_received(bytes);
        }
      } else if (rank == 1) {
        for (long i = 0; i < n; ++i) {
          if (MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
              MPI_SUCCESS)
            fail(1, "an MPI call failed on rank 1");
          check_received(bytes);
          fill_outgoing(bytes);
          if (MPI_Send(buf.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            fail(1, "an MPI call failed on rank 1");
        }
      }
      const double elapsed = MPI_Wtime() - t0;
      if (r >= 0) oneway_ns.push_back(elapsed * 1e9 / double(2 * n));
    }
    if (rank != 0) continue;
    weft::bench::latency_bandwidth_rows(
        out, {{"transport", "plain-mpi"}, {"ranks", size}, {"touch", touch}, {"bytes", bytes}},
        bytes, oneway_ns);
  }
  if (rank == 0) out.flush();
  MPI_Finalize();
  return 0;
}
