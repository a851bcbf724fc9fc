// hierarchical: a tree PE -> node -> group of options::group_size nodes ->
// root (paper 001, §V; Charm++'s TreeLB). Each level sees only its
// children's summaries (load, PE count): a child above tolerance * its
// share sheds the excess as a pool of objects (chosen by the child from
// its own objects: a group asks its nodes above their share, all at once,
// a node picks from its own list), the pool goes heaviest first to the child with the least
// load per PE, and each child then does the same below with what it
// received. The lowest level balances a node's PEs with options::inner
// (comm: METIS on the edges between the objects the node places, those
// there and those arriving; edges to objects on other nodes are not that
// level's to keep).
// No level handles more than its children's summaries plus the objects
// that move through it: the shape that scales to 10^5 PEs in the runtime.
// Here, in one process, the levels run one after the other.
#include <algorithm>
#include <functional>
#include "builtin.hpp"
#include "placement.hpp"
#include "tree.hpp"

namespace weft::lb::detail {
namespace {

class hierarchical final : public strategy {
 public:
  plan balance(const instance& inst, const options& opts) override {
    check_inner("hierarchical", opts.inner);
    inst_ = &inst;
    opts_ = &opts;
    plan p = current_placement(inst);
    const int nn = inst.num_nodes();
    const int gs = std::max(1, opts.group_size);
    const std::size_t ng = static_cast<std::size_t>((nn + gs - 1) / gs);
    node_totals nodes = totals_by_node(inst);
    node_pes_ = std::move(nodes.pes);
    node_load_ = std::move(nodes.load);
    node_cap_ = std::move(nodes.cap);
    node_objs_.assign(static_cast<std::size_t>(nn), {});
    node_sorted_.assign(static_cast<std::size_t>(nn), false);
    gone_.assign(inst.objects.size(), false);
    for (std::size_t i = 0; i < inst.objects.size(); ++i)
      if (inst.objects[i].migratable)
        node_objs_[static_cast<std::size_t>(
                       inst.pes[static_cast<std::size_t>(inst.objects[i].pe)].node)]
            .push_back(static_cast<std::uint32_t>(i));

    // Root: its children are the groups.
    std::vector<double> gload(ng, 0.0), gcap(ng, 0.0);
    for (std::size_t n = 0; n < node_load_.size(); ++n) {
      gload[n / static_cast<std::size_t>(gs)] += node_load_[n];
      gcap[n / static_cast<std::size_t>(gs)] += node_cap_[n];
    }
    std::vector<item> pool;
    auto to_groups =
        level(gload, gcap, pool, [&](std::size_t g, double amount, std::vector<item>& out) {
          shed_group(g, static_cast<std::size_t>(gs), amount, out);
        });
    // Each group: its children are its nodes.
    const std::vector<double> fixed = fixed_loads(inst);
    std::vector<std::vector<std::uint32_t>> by_object;
    if (opts.inner == "comm") by_object = edges_by_object(inst);
    for (std::size_t g = 0; g < ng; ++g) {
      const std::size_t first = g * static_cast<std::size_t>(gs);
      const std::size_t last = std::min(node_load_.size(), first + static_cast<std::size_t>(gs));
      std::vector<double> nload(node_load_.begin() + static_cast<std::ptrdiff_t>(first),
                                node_load_.begin() + static_cast<std::ptrdiff_t>(last));
      std::vector<double> ncap(node_cap_.begin() + static_cast<std::ptrdiff_t>(first),
                               node_cap_.begin() + static_cast<std::ptrdiff_t>(last));
      auto to_nodes = level(nload, ncap, to_groups[g],
                            [&](std::size_t c, double amount, std::vector<item>& out) {
                              shed_node(first + c, amount, out);
                            });
      // Each node: its PEs, with the inner strategy.
      for (std::size_t c = 0; c < to_nodes.size(); ++c) {
        const std::size_t n = first + c;
        std::vector<std::uint32_t> ids;
        for (std::uint32_t id : node_objs_[n])
          if (!gone_[id]) ids.push_back(id);
        for (const item& it : to_nodes[c]) ids.push_back(it.id);
        balance_node(inst, node_pes_[n], ids, fixed, opts, p,
                     opts.inner == "comm" ? &by_object : nullptr);
      }
    }
    return p;
  }

 private:
  // One level: children with loads and PE counts, a pool arriving from
  // above. Children above tolerance * their share shed into the pool; the
  // pool goes heaviest first to the child with the least load per PE.
  // Returns what each child receives.
  template <class Shed>
  std::vector<std::vector<item>> level(std::vector<double>& load, const std::vector<double>& cap,
                                       std::vector<item>& pool, Shed shed) {
    double incoming = 0, pes = 0;
    for (const item& it : pool) incoming += it.load;
    for (double c : cap) pes += c;
    if (pes == 0) return std::vector<std::vector<item>>(load.size());
    const std::vector<double> amount = shed_amounts(load, cap, incoming, opts_->tolerance);
    for (std::size_t c = 0; c < load.size(); ++c) {
      if (amount[c] <= 0) continue;
      const std::size_t before = pool.size();
      shed(c, amount[c], pool);
      for (std::size_t k = before; k < pool.size(); ++k) load[c] -= pool[k].load;
    }
    return share_pool(load, cap, pool);
  }

  // A group gives `amount`, asked of its nodes all at once (split_shed, as
  // the group's leader does at run time).
  void shed_group(std::size_t g, std::size_t gs, double amount, std::vector<item>& out) {
    const std::size_t first = g * gs, last = std::min(node_load_.size(), first + gs);
    const auto b = node_load_.begin();
    const std::vector<double> ask =
        split_shed(std::vector<double>(b + std::ptrdiff_t(first), b + std::ptrdiff_t(last)),
                   std::vector<double>(node_cap_.begin() + std::ptrdiff_t(first),
                                       node_cap_.begin() + std::ptrdiff_t(last)),
                   amount);
    for (std::size_t n = first; n < last; ++n)
      if (ask[n - first] > 0) shed_node(n, ask[n - first], out);
  }

  // A node gives about `amount` from its own objects, heaviest first that
  // do not overshoot by more than half their load. Returns what it gave.
  double shed_node(std::size_t n, double amount, std::vector<item>& out) {
    std::vector<std::uint32_t>& objs = node_objs_[n];
    if (!node_sorted_[n]) {
      std::sort(objs.begin(), objs.end(), [&](std::uint32_t a, std::uint32_t b) {
        const double la = inst_->objects[a].load, lb = inst_->objects[b].load;
        return la > lb || (la == lb && a < b);
      });
      node_sorted_[n] = true;
    }
    const std::size_t before = out.size();
    const double gave = shed_heaviest(
        objs, [&](std::uint32_t id) { return gone_[id] ? -1.0 : inst_->objects[id].load; }, amount,
        out);
    for (std::size_t k = before; k < out.size(); ++k) gone_[out[k].id] = true;
    node_load_[n] -= gave;
    return gave;
  }

  const instance* inst_ = nullptr;
  const options* opts_ = nullptr;
  std::vector<std::vector<int>> node_pes_;
  std::vector<double> node_load_, node_cap_;
  std::vector<std::vector<std::uint32_t>> node_objs_;
  std::vector<bool> node_sorted_, gone_;
};

}  // namespace

std::unique_ptr<strategy> make_hierarchical() {
  return std::make_unique<hierarchical>();
}

}  // namespace weft::lb::detail
