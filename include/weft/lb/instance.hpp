// The load snapshot a balancing strategy sees, and the plan it returns.
//
// An lb::instance is what the load database holds at a balancing step
// (issue 27): per PE its background load (time not spent in migratable
// objects) and its node; per object its measured load, its current PE,
// whether it may move and how many bytes a move carries; optionally the
// communication graph between objects. Strategies read it and return a
// plan: one new PE per object. The runtime (a later increment) fills it
// from measurements; the simulator (tools/weft-lbsim) generates it.
//
// Plain data, no runtime: the strategies run on one thread, anywhere.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "weft/base/export.hpp"

namespace weft::lb {

struct pe_info {
  double background = 0;  // load that no strategy can move (seconds or any unit)
  int node = 0;           // the node (process) the PE belongs to; 0..num_nodes-1
};

struct object_info {
  double load = 0;          // measured (or estimated) load of the object
  int pe = 0;               // its current PE
  bool migratable = true;   // false: it stays on `pe` and counts there
  std::uint64_t bytes = 0;  // its packed size: what a migration moves
};

// Objects `a` and `b` exchanged `messages` messages of `bytes` bytes in all
// (either direction; the graph is undirected for placement).
struct edge {
  std::uint32_t a = 0, b = 0;
  std::uint64_t messages = 0, bytes = 0;
};

struct instance {
  std::vector<pe_info> pes;
  std::vector<object_info> objects;
  std::vector<edge> edges;  // may be empty

  int num_pes() const { return static_cast<int>(pes.size()); }
  // Nodes are numbered 0..num_nodes()-1: one more than the largest pe.node.
  WEFT_API int num_nodes() const;
  // The load of each PE with the objects where they are now.
  WEFT_API std::vector<double> pe_loads() const;
};

// A plan: plan[i] is the new PE of object i (its old PE if it stays).
using plan = std::vector<int>;

// The identity plan: every object where it is.
WEFT_API plan current_placement(const instance& inst);

// Loads per PE under `p` (background plus the objects placed there).
WEFT_API std::vector<double> pe_loads(const instance& inst, const plan& p);

// An instance is well formed: every object's PE and every edge's ends exist,
// loads are finite and not negative, node numbers are not negative. Returns
// "" or what is wrong (the first problem found).
WEFT_API std::string check_instance(const instance& inst);

}  // namespace weft::lb
