// nqueens: counts the placements of N queens on an N x N board, none
// attacking another, by a parallel state-space search (the N-Queens
// benchmark of the Charm++ uGNI paper, after the seed-based state-space
// search framework it cites).
//
// A search state is a partial board: the queens of rows 0..row-1, kept as
// three bitmasks (attacked columns and the two diagonals). The first
// THRESHOLD rows are explored by chares: a chare takes one state, tries every
// column of its row, and for each safe one creates a child chare for the next
// row (weft::create lets the runtime place it: the processes of the job take
// turns, and inside one the first PE free takes it) — or, on the last
// parallel row, counts the completions of that board itself with a
// sequential bitmask backtracker. Then it destroys itself. Small THRESHOLD:
// few, large tasks; large THRESHOLD: many small ones.
//
// Nobody knows in advance how many chares the search creates, so the main
// function learns that it is over by quiescence detection (no message in
// flight, every PE idle), then sums the per-PE tallies with a reduction.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <weft/weft.hpp>

namespace {

// Solutions and chares counted on one PE, one element per PE.
struct Tally : weft::group_element<Tally> {
  std::int64_t solutions = 0;
  std::int64_t tasks = 0;

  // {solutions, tasks} summed over the PEs.
  void report(weft::callback<std::vector<std::int64_t>> cb) {
    contribute(std::vector<std::int64_t>{solutions, tasks}, weft::op::sum, cb);
  }
};

// Set by the main function before it first suspends; read on every PE.
weft::readonly<weft::group_proxy<Tally>> tally;
weft::readonly<int> board_size;
weft::readonly<int> threshold;

// Completions of a board whose attacked columns and diagonals (seen from the
// next row) are `cols`, `left`, `right`; `all` has one bit per column.
std::int64_t count_completions(std::uint32_t all, std::uint32_t cols, std::uint32_t left,
                               std::uint32_t right) {
  if (cols == all) return 1;
  std::int64_t n = 0;
  std::uint32_t free = all & ~(cols | left | right);
  while (free != 0) {
    const std::uint32_t bit = free & (0u - free);
    free ^= bit;
    n += count_completions(all, cols | bit, ((left | bit) << 1) & all, (right | bit) >> 1);
  }
  return n;
}

// One state of the search: queens placed on rows 0..row-1. All its work is
// done in its constructor, after which it is destroyed.
struct Queen : weft::chare<Queen> {
  Queen(int row, std::uint32_t cols, std::uint32_t left, std::uint32_t right) {
    const int n = *board_size;
    const std::uint32_t all = (1u << n) - 1u;  // n <= 31
    Tally& t = *tally->local();
    ++t.tasks;
    std::uint32_t free = all & ~(cols | left | right);
    while (free != 0) {
      const std::uint32_t bit = free & (0u - free);
      free ^= bit;
      const std::uint32_t c = cols | bit, l = ((left | bit) << 1) & all, r = (right | bit) >> 1;
      if (row + 1 < *threshold && row + 1 < n)
        weft::create<Queen>(row + 1, c, l, r);  // placed by the runtime
      else
        t.solutions += count_completions(all, c, l, r);
    }
    destroy();  // once the constructor returns
  }
};

// Known solution counts (OEIS A000170) for N = 4..14.
std::int64_t known_solutions(int n) {
  static const std::int64_t known[] = {2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596};
  return n >= 4 && n <= 14 ? known[n - 4] : -1;
}

bool parse_int(const char* s, long lo, long hi, int& out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = int(v);
  return true;
}

// What is wrong with the program's own arguments ("" when nothing is).
std::string check_arguments(int argc, char** argv, int& n, int& thr) {
  if (argc != 3) return "expected 2 arguments, got " + std::to_string(argc - 1);
  if (!parse_int(argv[1], 1, 31, n))
    return std::string("N must be an integer in 1..31, not '") + argv[1] + "'";
  if (!parse_int(argv[2], 1, n, thr))
    return "THRESHOLD must be an integer in 1..N (1.." + std::to_string(n) + "), not '" +
           argv[2] + "'";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // The arguments are checked before the runtime starts (parse_options takes
  // the --weft: ones out): a usage error is the only thing printed.
  const weft::runtime_config config = weft::parse_options(argc, argv);
  {
    int n = 0, thr = 0;
    if (const std::string problem = check_arguments(argc, argv, n, thr); !problem.empty()) {
      std::fprintf(stderr, "usage: nqueens N THRESHOLD [--weft:options]: %s\n", problem.c_str());
      return 2;
    }
  }
  return weft::run(config, argc, argv, [](weft::args a) -> weft::task<> {
    int n = 0, thr = 0;
    check_arguments(a.argc, a.argv, n, thr);
    board_size = n;
    threshold = thr;
    tally = weft::group_proxy<Tally>::create();

    auto quiet = weft::make_future<int>();
    const auto t0 = std::chrono::steady_clock::now();
    weft::on_quiescence([quiet] { quiet.set(0); });
    weft::create<Queen>(0, 0u, 0u, 0u);
    co_await quiet;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    auto totals = weft::make_future<std::vector<std::int64_t>>();
    tally->broadcast<&Tally::report>(weft::callback<std::vector<std::int64_t>>(totals));
    const std::vector<std::int64_t> sum = co_await totals;
    std::printf("solutions=%lld tasks=%lld time_s=%.6f\n", static_cast<long long>(sum[0]),
                static_cast<long long>(sum[1]), secs);
    const std::int64_t want = known_solutions(n);
    if (want >= 0 && sum[0] != want) {
      std::fprintf(stderr, "nqueens: %d queens have %lld solutions, counted %lld\n", n,
                   static_cast<long long>(want), static_cast<long long>(sum[0]));
      weft::exit(1);
      co_return;
    }
    weft::exit(0);
  });
}
