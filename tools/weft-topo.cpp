// weft-topo: prints the machine topology as weft sees it, then the PE -> CPU
// placement that a set of --weft: options would produce, without starting a
// node. It answers "where will my PEs run?" before a long job, and shows what
// a taskset / cgroup / batch-system binding leaves to the runtime.
//
// The options go through weft::parse_options, the very function
// weft::run uses, so --weft:help, WEFT_* variables, errors and exit codes
// (2 for a bad option) are those of any weft application; the placement
// printed is the one weft::run would apply.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <weft/base/topology.hpp>
#include <weft/weft.hpp>

namespace {

constexpr const char* about =
    "usage: weft-topo [--weft:name=value ...]\n"
    "\n"
    "Prints the machine topology (packages, NUMA nodes, caches, cores, hardware\n"
    "threads and this process's inherited CPU set), then one line per PE with the\n"
    "CPU that the given weft options place it on, e.g.\n"
    "  weft-topo --weft:threads=4 --weft:bind=scatter\n"
    "Run it under taskset or inside a batch job to see the placement there.\n"
    "Options and WEFT_* variables are those of every weft program (--weft:help\n"
    "lists them); --weft:print-config also prints the effective configuration.\n"
    "Exit code 0, or 2 for a bad option.\n";

std::string field(int v) {
  return v >= 0 ? std::to_string(v) : std::string("?");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(about, stdout);
      return 0;
    }
  }
  const weft::runtime_config cfg = weft::parse_options(argc, argv);
  if (argc > 1) {
    std::fprintf(stderr, "weft-topo: error: unexpected argument '%s' (see --help)\n", argv[1]);
    return 2;
  }

  const weft::base::topology& topo = weft::base::topology::get();
  std::fputs(topo.describe().c_str(), stdout);
  if (cfg.print_config) std::fputs(cfg.config_text.c_str(), stdout);

  std::map<int, const weft::base::cpu_info*> by_os;
  for (const weft::base::cpu_info& c : topo.allowed()) by_os[c.os_index] = &c;

  std::printf("placement: %d PE%s, bind=%s\n", cfg.threads, cfg.threads == 1 ? "" : "s",
              cfg.bind.c_str());
  std::map<int, int> pes_on_cpu;
  for (std::size_t pe = 0; pe < cfg.pe_cpus.size(); ++pe) {
    const int cpu = cfg.pe_cpus[pe];
    if (cpu < 0) {
      std::printf("PE %zu -> any CPU of the set (not bound; the OS schedules it)\n", pe);
      continue;
    }
    ++pes_on_cpu[cpu];
    auto it = by_os.find(cpu);
    if (it == by_os.end()) {
      // place() only returns CPUs of the inherited set; say so if that breaks.
      std::printf("PE %zu -> CPU %d (not in the inherited set)\n", pe, cpu);
      continue;
    }
    const weft::base::cpu_info& c = *it->second;
    std::printf("PE %zu -> CPU %d (L%d, core %s, package %s, NUMA %s, L3 %s)\n", pe, cpu,
                c.logical_index, field(c.core).c_str(), field(c.package).c_str(),
                field(c.numa).c_str(), field(c.l3).c_str());
  }

  // An explicit CPU list shorter than threads puts PEs on one CPU even when
  // the set has CPUs to spare, so sharing is judged on the map itself.
  const int set_cpus = int(topo.allowed().size());
  const int used_cpus = pes_on_cpu.empty() ? set_cpus : int(pes_on_cpu.size());
  int most = 0;
  for (auto& [cpu, n] : pes_on_cpu) most = std::max(most, n);
  if (pes_on_cpu.empty()) most = (cfg.threads + set_cpus - 1) / set_cpus;  // unbound
  if (cfg.oversubscribed || most > 1)
    std::printf(
        "warning: %d PEs on %d CPU%s: the run is oversubscribed (up to %d PEs share a "
        "CPU)\n",
        cfg.threads, used_cpus, used_cpus == 1 ? "" : "s", most);
  return 0;
}
