// lb::instance's helpers: node count, loads under a plan, the well-formed
// check every strategy call starts with (strategy.hpp's run()).
#include "weft/lb/instance.hpp"
#include <cmath>

namespace weft::lb {

int instance::num_nodes() const {
  int n = 0;
  for (const pe_info& p : pes) n = p.node + 1 > n ? p.node + 1 : n;
  return n;
}

std::vector<double> instance::pe_loads() const {
  return lb::pe_loads(*this, current_placement(*this));
}

plan current_placement(const instance& inst) {
  plan p(inst.objects.size());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = inst.objects[i].pe;
  return p;
}

std::vector<double> pe_loads(const instance& inst, const plan& p) {
  std::vector<double> loads(inst.pes.size());
  for (std::size_t i = 0; i < loads.size(); ++i) loads[i] = inst.pes[i].background;
  for (std::size_t i = 0; i < p.size(); ++i)
    loads[static_cast<std::size_t>(p[i])] += inst.objects[i].load;
  return loads;
}

std::string check_instance(const instance& inst) {
  const int np = inst.num_pes();
  for (std::size_t i = 0; i < inst.pes.size(); ++i) {
    const pe_info& pe = inst.pes[i];
    if (pe.node < 0) return "PE " + std::to_string(i) + " has node " + std::to_string(pe.node);
    if (!std::isfinite(pe.background) || pe.background < 0)
      return "PE " + std::to_string(i) + " has background load " + std::to_string(pe.background);
  }
  for (std::size_t i = 0; i < inst.objects.size(); ++i) {
    const object_info& o = inst.objects[i];
    if (o.pe < 0 || o.pe >= np)
      return "object " + std::to_string(i) + " is on PE " + std::to_string(o.pe) + " of " +
             std::to_string(np);
    if (!std::isfinite(o.load) || o.load < 0)
      return "object " + std::to_string(i) + " has load " + std::to_string(o.load);
  }
  for (std::size_t i = 0; i < inst.edges.size(); ++i) {
    const edge& e = inst.edges[i];
    if (e.a >= inst.objects.size() || e.b >= inst.objects.size())
      return "edge " + std::to_string(i) + " names an object beyond " +
             std::to_string(inst.objects.size());
  }
  return "";
}

}  // namespace weft::lb
