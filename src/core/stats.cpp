// --weft:stats: a per-PE table at exit. Busy is time inside handlers, idle is
// time in the back-off (spinning, yielding or asleep), overhead is the rest
// of the PE's wall time (scheduler, queues, timers). CPU changes are counted
// only for unbound PEs, by sampling sched_getcpu once per scheduler turn.
// The counters table (perf_event: --weft:counters) follows when the kernel
// gave any counter (the node said at startup which ones it refused).
// The topology line says whether this process discovered the machine or
// loaded what local rank 0 of its host discovered.
#include <cstdio>
#include "core/handler_table.hpp"
#include "core/node.hpp"
#include "weft/base/timer.hpp"
#include "weft/base/topology.hpp"
#include "weft/trace/session.hpp"

namespace weft::core {

void print_stats(node_state& node) {
  std::FILE* out = stdout;
  const bool unbound = node.cfg.bind == "none";
  std::fprintf(out, "weft stats: node %d, %zu PEs, %.3f s\n", node.node_id, node.pes.size(),
               double(base::wall_ns() - node.start_ns) * 1e-9);
  std::fprintf(out, "topology: %s\n", base::topology::get().origin().c_str());
  std::fprintf(out, "%4s %5s %10s %10s %10s %6s %12s %12s %8s %s\n", "PE", "cpu", "busy_ms",
               "idle_ms", "ovh_ms", "busy%", "sent", "handled", "mem_node",
               unbound ? "cpu_changes" : "");
  std::uint64_t tot_sent = 0, tot_done = 0;
  for (auto& pe : node.pes) {
    double wall = base::cycles_to_ns(pe->end_cycles - pe->start_cycles) * 1e-6;
    double busy = base::cycles_to_ns(pe->busy_cycles) * 1e-6;
    double idle = base::cycles_to_ns(pe->idle_cycles) * 1e-6;
    double ovh = wall - busy - idle;
    if (ovh < 0) ovh = 0;
    std::uint64_t sent = pe->sent.load(), done = pe->processed.load();
    tot_sent += sent;
    tot_done += done;
    int cpu = node.cfg.pe_cpus[std::size_t(pe->rank)];
    char cpu_text[16];
    if (cpu < 0)
      std::snprintf(cpu_text, sizeof cpu_text, "*");
    else
      std::snprintf(cpu_text, sizeof cpu_text, "%d", cpu);
    char changes[32] = "";
    if (unbound)
      std::snprintf(changes, sizeof changes, "%llu", (unsigned long long)pe->cpu_changes);
    char mem_node[16] = "?";
    if (pe->mem_node >= 0) std::snprintf(mem_node, sizeof mem_node, "%d", pe->mem_node);
    std::fprintf(out, "%4d %5s %10.2f %10.2f %10.2f %6.1f %12llu %12llu %8s %s\n",
                 node.first_pe + pe->rank, cpu_text, busy, idle, ovh,
                 wall > 0 ? 100.0 * busy / wall : 0.0, (unsigned long long)sent,
                 (unsigned long long)done, mem_node, changes);
  }
  std::fprintf(out, "total sent %llu, handled %llu (sends, timers and main count alike)\n",
               (unsigned long long)tot_sent, (unsigned long long)tot_done);
  // NUMA: where the PEs' blocks are (mem_node above, under --weft:mem) and
  // the kernel's page counters over the run, machine-wide (other
  // processes count too), where it offers them.
  std::fprintf(out, "memory: %s\n", base::topology::get().describe_mem(node.cfg.mem).c_str());
  const std::vector<base::numa_counts> numa_now = base::numa_counters();
  if (numa_now.empty() || node.numa_at_start.empty()) {
    std::fprintf(out,
                 "numa counters: not offered by this kernel (no "
                 "/sys/devices/system/node/node*/numastat)\n");
  } else {
    for (const base::numa_counts& now : numa_now)
      for (const base::numa_counts& then : node.numa_at_start)
        if (then.node == now.node)
          std::fprintf(out,
                       "numa node %d: +%llu pages local_node, +%llu other_node (machine-wide, "
                       "numastat)\n",
                       now.node, now.local - then.local, now.other - then.other);
  }
  const std::vector<std::string> names = trace::session_counter_names();
  if (!names.empty()) {
    std::size_t cycles = names.size(), instructions = names.size();
    std::fprintf(out, "%4s", "PE");
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::fprintf(out, " %16s", names[i].c_str());
      if (names[i].rfind("cycles", 0) == 0) cycles = i;
      if (names[i].rfind("instructions", 0) == 0) instructions = i;
    }
    const bool ipc = cycles < names.size() && instructions < names.size();
    std::fprintf(out, "%s\n", ipc ? "    IPC" : "");
    for (auto& pe : node.pes) {
      std::fprintf(out, "%4d", node.first_pe + pe->rank);
      const auto& v = pe->counter_values;
      for (std::size_t i = 0; i < names.size(); ++i)
        std::fprintf(out, " %16llu", i < v.size() ? (unsigned long long)v[i] : 0ull);
      if (ipc && v.size() == names.size() && v[cycles] != 0)
        std::fprintf(out, " %6.2f", double(v[instructions]) / double(v[cycles]));
      std::fprintf(out, "\n");
    }
  }
  for (const auto& l : handlers().layers)
    if (l.stats) l.stats(out);
  std::fflush(out);
}

}  // namespace weft::core
