// Synthetic instances for the simulator, the tests and the benchmark.
//
// Objects start in blocks (object i on PE i*P/N), as an array's default
// map places them; PEs are grouped pes_per_node to a node. Loads and the
// graph come from a seeded generator, so one seed gives one instance.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/lb/instance.hpp"

namespace weft::lb {

enum class graph_kind { none, ring, mesh2d, random };
enum class load_kind { uniform, lognormal, hotspot };

struct generator {
  std::uint64_t objects = 1000;
  int pes = 16;
  int pes_per_node = 4;
  graph_kind graph = graph_kind::ring;
  load_kind load = load_kind::lognormal;
  std::uint64_t seed = 1;
  double background = 0;              // per PE, added to every PE
  std::uint64_t object_bytes = 1024;  // each object's packed size
  int random_degree = 4;              // random graph: edges per object
};

// uniform: loads in [0.5, 1.5); lognormal: exp(N(0, 1)); hotspot: uniform,
// but the objects of the first 10% of PEs (at least one PE) are 10 times
// heavier. ring: i -- i+1; mesh2d: a sqrt(N)-wide grid, right and down
// neighbours; random: random_degree edges per object. Each edge carries
// one message of 8..4096 bytes (seeded).
WEFT_API instance generate(const generator& g);

// The names the simulator accepts, for its usage errors.
inline const char* graph_names() {
  return "ring, mesh2d, random, none";
}
inline const char* load_names() {
  return "uniform, lognormal, hotspot";
}
// Parses a name; false if unknown.
WEFT_API bool parse_graph(const std::string& s, graph_kind& out);
WEFT_API bool parse_load(const std::string& s, load_kind& out);

}  // namespace weft::lb
