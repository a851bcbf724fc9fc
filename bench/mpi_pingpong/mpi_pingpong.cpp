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
#include "common/harness.hpp"
#include "common/nodes.hpp"

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
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  weft::bench::cli cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(cli, {"bytes", "iters", "touch"});
  const bool touch = weft::bench::touch_arg(cli, false);
  const long iters = weft::bench::positive_arg(cli, "iters", 2000, 100000000);
  // Not int_list_arg: a bad size must end every rank through MPI_Finalize.
  std::vector<long> sizes;
  for (const std::string& item : weft::bench::split_list(
           weft::bench::arg(cli, "bytes", "8,64,512,4096,32768,262144,1048576,4194304"))) {
    long b = 0;
    if (!weft::bench::parse_list_item("bytes", item, 1, 1l << 30, b)) {
      MPI_Finalize();
      return 2;
    }
    sizes.push_back(b);
  }
  if (size < 2) {
    if (rank == 0)
      std::fprintf(stderr,
                   "error: mpi_pingpong needs at least 2 ranks (run it as mpirun -n 2 ...); "
                   "this run has %d\n",
                   size);
    MPI_Finalize();
    return 2;
  }

  const long largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> buf(static_cast<std::size_t>(largest), 1);
  unsigned char fill = 1;
  // --touch: reads what came in, writes what goes out.
  auto touch_payload = [&](long bytes) {
    if (!touch) return;
    if (!weft::bench::payload_is_whole(buf.data(), std::size_t(bytes)))
      fail(1, "a torn payload arrived");
    weft::bench::fill_payload(buf.data(), std::size_t(bytes), ++fill);
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
          if (touch) weft::bench::fill_payload(buf.data(), std::size_t(bytes), ++fill);
          if (MPI_Send(buf.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
              MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                  MPI_SUCCESS)
            fail(1, "an MPI call failed on rank 0");
          if (touch && !weft::bench::payload_is_whole(buf.data(), std::size_t(bytes)))
            fail(1, "a torn payload arrived");
        }
      } else if (rank == 1) {
        for (long i = 0; i < n; ++i) {
          if (MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
              MPI_SUCCESS)
            fail(1, "an MPI call failed on rank 1");
          touch_payload(bytes);
          if (MPI_Send(buf.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            fail(1, "an MPI call failed on rank 1");
        }
      }
      const double elapsed = MPI_Wtime() - t0;
      if (r >= 0) oneway_ns.push_back(elapsed * 1e9 / double(2 * n));
    }
    if (rank != 0) continue;
    weft::bench::latency_bandwidth_rows(
        out, {{"transport", "plain-mpi"}, {"ranks", size}, {"touch", touch}, {"bytes", bytes}}, bytes, oneway_ns);
  }
  if (rank == 0) out.flush();
  MPI_Finalize();
  return 0;
}
