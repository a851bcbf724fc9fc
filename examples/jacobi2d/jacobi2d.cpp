// jacobi2d: a 5-point Jacobi relaxation over an N x N grid cut into B x B
// blocks, one element of a 2-D chare array per block.
//
// Each block runs one coroutine entry method, run(): every iteration it
// sends its edge rows and columns to its (up to) four neighbours, awaits
// theirs with co_await next<&Block::ghost>(k) (messages that arrive early
// wait in the element's mailbox), relaxes its interior, and awaits the
// maximum change over the whole grid with co_await all_reduce(...). When that
// falls below the tolerance, or after the maximum number of iterations, the
// blocks send their interiors to the main function with a `set` reduction.
// Every LB_EVERY iterations the blocks co_await at_sync(): with
// --weft:lb=NAME the balancer may move them (in one process a block moves
// with its suspended coroutine; across processes a block in a coroutine
// stays), and the result must not change.
// The main function then repeats the computation serially, with the same
// kernel and number of iterations, and compares: the two must agree to the
// last bit.
//
// Boundary conditions are fixed: the row above the grid is 1.0, the other
// three edges 0.0; the interior starts at 0.0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <weft/weft.hpp>

namespace {

constexpr double top_value = 1.0;  // the fixed row above the grid; the other edges are 0

// One Jacobi sweep over rows 1..rows and columns 1..cols of `u` (row stride
// `stride`, ghost cells around), written to `v`. Returns the largest change.
// The blocks and the serial reference use this very function, so their
// results agree bit for bit.
double sweep(const double* u, double* v, int rows, int cols, int stride) {
  double change = 0.0;
  for (int i = 1; i <= rows; ++i) {
    for (int j = 1; j <= cols; ++j) {
      const int c = i * stride + j;
      const double x = 0.25 * (u[c - stride] + u[c + stride] + u[c - 1] + u[c + 1]);
      change = std::max(change, std::fabs(x - u[c]));
      v[c] = x;
    }
  }
  return change;
}

enum side : int { north = 0, south = 1, west = 2, east = 3 };

side opposite(side s) {
  switch (s) {
    case north:
      return south;
    case south:
      return north;
    case west:
      return east;
    default:
      return west;
  }
}

// What each block hands back at the end.
struct block_result {
  int iterations = 0;
  double residual = 0.0;
  std::vector<double> values;  // the block's interior, row by row
  void pup(weft::pupper& p) { p | iterations | residual | values; }
};
using gathered = std::vector<std::pair<weft::index2d, block_result>>;

// Index (x, y) = (block row, block column).
struct Block : weft::array_element<Block, weft::index2d> {
  Block() = default;  // for migration
  void pup(weft::pupper& p) { p | n_ | blocks_ | u_ | v_; }

  Block(int n, int blocks) : n_(n / blocks), blocks_(blocks) {
    const std::size_t cells = std::size_t(n_ + 2) * std::size_t(n_ + 2);
    u_.assign(cells, 0.0);
    if (this_index().x == 0)  // the grid's top edge is this block's north ghost row
      for (int j = 0; j < n_ + 2; ++j) u_[std::size_t(j)] = top_value;
    v_ = u_;  // both buffers carry the fixed boundary
  }

  // A neighbour's edge values for the ghost cells on side `s` of this block,
  // sent in iteration `iter`. Only ever awaited with next<> in run(), so the
  // body never runs.
  void ghost(int /*s*/, int /*iter*/, std::vector<double> /*edge*/) {}

  weft::task<> run(int max_iter, double tol, int lb_every, weft::callback<gathered> done) {
    std::vector<side> sides;
    for (side s : {north, south, west, east})
      if (has_neighbour(s)) sides.push_back(s);
    int iter = 0;
    double residual = 0.0;
    while (iter < max_iter) {
      for (side s : sides)
        this_proxy()[neighbour(s)].send<&Block::ghost>(int(opposite(s)), iter, edge(s));
      for (auto& [s, it, e] : co_await next<&Block::ghost>(sides.size())) {
        if (it != iter) {
          std::fprintf(stderr, "jacobi2d: block [%d,%d] got a ghost of iteration %d in %d\n",
                       this_index().x, this_index().y, it, iter);
          std::abort();
        }
        set_ghost(side(s), e);
      }
      const double change = sweep(u_.data(), v_.data(), n_, n_, n_ + 2);
      std::swap(u_, v_);
      ++iter;
      residual = co_await all_reduce(change, weft::op::max);
      if (residual < tol) break;
      if (lb_every > 0 && iter % lb_every == 0) co_await at_sync();  // let the balancer move blocks
    }
    contribute(block_result{iter, residual, interior()}, weft::op::set, done);
  }

 private:
  bool has_neighbour(side s) const {
    const weft::index2d me = this_index();
    switch (s) {
      case north:
        return me.x > 0;
      case south:
        return me.x + 1 < blocks_;
      case west:
        return me.y > 0;
      default:
        return me.y + 1 < blocks_;
    }
  }
  weft::index2d neighbour(side s) const {
    const weft::index2d me = this_index();
    switch (s) {
      case north:
        return {me.x - 1, me.y};
      case south:
        return {me.x + 1, me.y};
      case west:
        return {me.x, me.y - 1};
      default:
        return {me.x, me.y + 1};
    }
  }
  double& at(int i, int j) { return u_[std::size_t(i) * std::size_t(n_ + 2) + std::size_t(j)]; }

  // This block's outermost interior row or column on side s.
  std::vector<double> edge(side s) {
    std::vector<double> e(static_cast<std::size_t>(n_), 0.0);
    for (int k = 0; k < n_; ++k) {
      switch (s) {
        case north:
          e[std::size_t(k)] = at(1, k + 1);
          break;
        case south:
          e[std::size_t(k)] = at(n_, k + 1);
          break;
        case west:
          e[std::size_t(k)] = at(k + 1, 1);
          break;
        case east:
          e[std::size_t(k)] = at(k + 1, n_);
          break;
      }
    }
    return e;
  }
  void set_ghost(side s, const std::vector<double>& e) {
    for (int k = 0; k < n_; ++k) {
      switch (s) {
        case north:
          at(0, k + 1) = e[std::size_t(k)];
          break;
        case south:
          at(n_ + 1, k + 1) = e[std::size_t(k)];
          break;
        case west:
          at(k + 1, 0) = e[std::size_t(k)];
          break;
        case east:
          at(k + 1, n_ + 1) = e[std::size_t(k)];
          break;
      }
    }
  }
  std::vector<double> interior() {
    std::vector<double> out;
    out.reserve(std::size_t(n_) * std::size_t(n_));
    for (int i = 1; i <= n_; ++i)
      for (int j = 1; j <= n_; ++j) out.push_back(at(i, j));
    return out;
  }

  int n_ = 0;       // interior points per side of this block
  int blocks_ = 0;  // blocks per side of the grid
  std::vector<double> u_, v_;
};

// The same relaxation on one (N+2)^2 grid, for exactly `iterations` sweeps.
// Returns the interior and sets `residual` to the last sweep's change.
std::vector<double> serial_jacobi(int n, int iterations, double& residual) {
  const int stride = n + 2;
  std::vector<double> u(std::size_t(stride) * std::size_t(stride), 0.0);
  for (int j = 0; j < stride; ++j) u[std::size_t(j)] = top_value;
  std::vector<double> v = u;
  residual = 0.0;
  for (int k = 0; k < iterations; ++k) {
    residual = sweep(u.data(), v.data(), n, n, stride);
    std::swap(u, v);
  }
  std::vector<double> out;
  out.reserve(std::size_t(n) * std::size_t(n));
  for (int i = 1; i <= n; ++i)
    for (int j = 1; j <= n; ++j)
      out.push_back(u[std::size_t(i) * std::size_t(stride) + std::size_t(j)]);
  return out;
}

bool parse_int(const char* s, int& out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > 100'000) return false;
  out = int(v);
  return true;
}

bool parse_tolerance(const char* s, double& out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= 0.0)) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return weft::run(argc, argv, [](weft::args a) -> weft::task<> {
    int n = 64, b = 4, max_iter = 200, lb_every = 25;
    double tol = 1e-8;
    std::string problem;
    if (a.argc > 6)
      problem = "too many arguments";
    else if (a.argc > 1 && !parse_int(a.argv[1], n))
      problem = std::string("N must be an integer in 1..100000, not '") + a.argv[1] + "'";
    else if (a.argc > 2 && !parse_int(a.argv[2], b))
      problem = std::string("BLOCKS must be an integer in 1..100000, not '") + a.argv[2] + "'";
    else if (a.argc > 3 && !parse_int(a.argv[3], max_iter))
      problem = std::string("MAX_ITER must be an integer in 1..100000, not '") + a.argv[3] + "'";
    else if (a.argc > 4 && !parse_tolerance(a.argv[4], tol))
      problem = std::string("TOL must be a number >= 0, not '") + a.argv[4] + "'";
    else if (a.argc > 5 && std::string(a.argv[5]) == "0")
      lb_every = 0;
    else if (a.argc > 5 && !parse_int(a.argv[5], lb_every))
      problem = std::string("LB_EVERY must be an integer in 0..100000 (0: never), not '") +
                a.argv[5] + "'";
    else if (n % b != 0)
      problem = "BLOCKS (" + std::to_string(b) + ") does not divide N (" + std::to_string(n) + ")";
    if (!problem.empty()) {
      std::fprintf(
          stderr, "usage: jacobi2d [N [BLOCKS [MAX_ITER [TOL [LB_EVERY]]]]] [--weft:options]: %s\n",
          problem.c_str());
      weft::exit(2);
      co_return;
    }
    std::printf("jacobi2d: %dx%d grid in %dx%d blocks of %dx%d on %d PEs\n", n, n, b, b, n / b,
                n / b, weft::num_pes());

    const auto t0 = std::chrono::steady_clock::now();
    auto blocks = weft::array<Block>::create(weft::index2d{b, b}, n, b);
    auto done = weft::make_future<gathered>();
    blocks.broadcast<&Block::run>(max_iter, tol, lb_every, weft::callback<gathered>(done));
    gathered parts = co_await done;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Assemble the grid from the blocks' interiors.
    const int bs = n / b;
    std::vector<double> grid(std::size_t(n) * std::size_t(n), 0.0);
    int iterations = -1;
    double residual = 0.0;
    bool consistent = parts.size() == std::size_t(b) * std::size_t(b);
    for (auto& [idx, r] : parts) {
      if (iterations < 0) iterations = r.iterations, residual = r.residual;
      consistent = consistent && r.iterations == iterations && r.residual == residual &&
                   r.values.size() == std::size_t(bs) * std::size_t(bs);
      if (!consistent) break;
      for (int i = 0; i < bs; ++i)
        for (int j = 0; j < bs; ++j)
          grid[std::size_t(idx.x * bs + i) * std::size_t(n) + std::size_t(idx.y * bs + j)] =
              r.values[std::size_t(i) * std::size_t(bs) + std::size_t(j)];
    }
    if (!consistent) {
      std::fprintf(stderr, "jacobi2d: the blocks' results do not fit together (%zu parts)\n",
                   parts.size());
      weft::exit(1);
      co_return;
    }

    double serial_residual = 0.0;
    std::vector<double> reference = serial_jacobi(n, iterations, serial_residual);
    double max_diff = std::fabs(residual - serial_residual);
    for (std::size_t k = 0; k < grid.size(); ++k)
      max_diff = std::max(max_diff, std::fabs(grid[k] - reference[k]));

    std::printf("jacobi2d: iterations=%d residual=%.6e max_diff_vs_serial=%g\n", iterations,
                residual, max_diff);
    std::printf("jacobi2d: parallel part took %.3f s\n", secs);
    weft::exit(max_diff > 1e-12 ? 1 : 0);
  });
}
