// Plan evaluation (evaluate.hpp): loads, spread, migrations, bytes moved
// and the communication a placement leaves between PEs and nodes.
#include "weft/lb/evaluate.hpp"
#include <algorithm>
#include <cmath>

namespace weft::lb {

double lower_bound(const instance& inst) {
  if (inst.pes.empty()) return 0;
  std::vector<double> fixed(inst.pes.size());
  double total = 0, heaviest = 0;
  for (std::size_t i = 0; i < fixed.size(); ++i) {
    fixed[i] = inst.pes[i].background;
    total += fixed[i];
  }
  for (const object_info& o : inst.objects) {
    total += o.load;
    if (o.migratable)
      heaviest = std::max(heaviest, o.load);
    else
      fixed[static_cast<std::size_t>(o.pe)] += o.load;
  }
  double bound = std::max(total / static_cast<double>(inst.pes.size()), heaviest);
  for (double f : fixed) bound = std::max(bound, f);
  return bound;
}

metrics evaluate(const instance& inst, const plan& p, double strategy_seconds) {
  metrics m;
  m.strategy_seconds = strategy_seconds;
  if (inst.pes.empty()) return m;
  const std::vector<double> loads = pe_loads(inst, p);
  double sum = 0;
  m.max_load = loads[0];
  m.min_load = loads[0];
  for (double l : loads) {
    sum += l;
    m.max_load = std::max(m.max_load, l);
    m.min_load = std::min(m.min_load, l);
  }
  const double n = static_cast<double>(loads.size());
  m.avg_load = sum / n;
  double sq = 0;
  for (double l : loads) sq += (l - m.avg_load) * (l - m.avg_load);
  m.stddev = std::sqrt(sq / n);
  m.lower_bound = lower_bound(inst);
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != inst.objects[i].pe) {
      ++m.migrations;
      m.bytes_moved += inst.objects[i].bytes;
    }
  }
  for (const edge& e : inst.edges) {
    const int pa = p[e.a], pb = p[e.b];
    if (pa == pb) continue;
    m.off_pe_messages += e.messages;
    m.off_pe_bytes += e.bytes;
    if (inst.pes[static_cast<std::size_t>(pa)].node !=
        inst.pes[static_cast<std::size_t>(pb)].node) {
      m.off_node_messages += e.messages;
      m.off_node_bytes += e.bytes;
    }
  }
  return m;
}

}  // namespace weft::lb
