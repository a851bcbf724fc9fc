// Synthetic instances (generate.hpp): block placement, seeded loads and
// communication graphs, for the simulator, the tests and the benchmark.
#include "weft/lb/generate.hpp"
#include <algorithm>
#include <cmath>
#include <random>

namespace weft::lb {

bool parse_graph(const std::string& s, graph_kind& out) {
  if (s == "ring")
    out = graph_kind::ring;
  else if (s == "mesh2d")
    out = graph_kind::mesh2d;
  else if (s == "random")
    out = graph_kind::random;
  else if (s == "none")
    out = graph_kind::none;
  else
    return false;
  return true;
}

bool parse_load(const std::string& s, load_kind& out) {
  if (s == "uniform")
    out = load_kind::uniform;
  else if (s == "lognormal")
    out = load_kind::lognormal;
  else if (s == "hotspot")
    out = load_kind::hotspot;
  else
    return false;
  return true;
}

instance generate(const generator& g) {
  instance inst;
  const int np = std::max(1, g.pes);
  const int per_node = std::max(1, g.pes_per_node);
  inst.pes.resize(static_cast<std::size_t>(np));
  for (int i = 0; i < np; ++i) inst.pes[static_cast<std::size_t>(i)] = {g.background, i / per_node};
  const std::uint64_t n = g.objects;
  inst.objects.resize(n);
  std::mt19937_64 rng(g.seed);
  std::uniform_real_distribution<double> uni(0.5, 1.5);
  std::lognormal_distribution<double> logn(0.0, 1.0);
  const int hot_pes = std::max(1, np / 10);
  for (std::uint64_t i = 0; i < n; ++i) {
    object_info& o = inst.objects[i];
    o.pe = static_cast<int>(i * static_cast<std::uint64_t>(np) / n);
    o.bytes = g.object_bytes;
    switch (g.load) {
      case load_kind::uniform:
        o.load = uni(rng);
        break;
      case load_kind::lognormal:
        o.load = logn(rng);
        break;
      case load_kind::hotspot:
        o.load = uni(rng) * (o.pe < hot_pes ? 10.0 : 1.0);
        break;
    }
  }
  if (n < 2) return inst;
  std::uniform_int_distribution<std::uint64_t> size(8, 4096);
  auto add = [&](std::uint64_t a, std::uint64_t b) {
    if (a == b) return;
    inst.edges.push_back(
        {static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b), 1, size(rng)});
  };
  switch (g.graph) {
    case graph_kind::none:
      break;
    case graph_kind::ring:
      for (std::uint64_t i = 0; i < n; ++i) add(i, (i + 1) % n);
      if (n == 2) inst.edges.pop_back();  // 0--1 and 1--0 are one edge
      break;
    case graph_kind::mesh2d: {
      const std::uint64_t w =
          std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::sqrt(static_cast<double>(n))));
      for (std::uint64_t i = 0; i < n; ++i) {
        if ((i + 1) % w != 0 && i + 1 < n) add(i, i + 1);
        if (i + w < n) add(i, i + w);
      }
      break;
    }
    case graph_kind::random: {
      std::uniform_int_distribution<std::uint64_t> pick(0, n - 1);
      for (std::uint64_t i = 0; i < n; ++i)
        for (int d = 0; d < g.random_degree; ++d) add(i, pick(rng));
      break;
    }
  }
  return inst;
}

}  // namespace weft::lb
