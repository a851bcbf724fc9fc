// The effective runtime configuration of a node, built from the options of
// every layer (see --weft:help). One vocabulary for every mode: the same flag
// means the same thing in an SMP or non-SMP run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/base/options.hpp"

namespace weft {

enum class queue_kind { mpsc, spsc_pairs };
enum class alloc_kind { mimalloc, system };

struct runtime_config {
  int threads = 1;                  // PEs in this node
  std::string bind = "compact";     // none | compact | scatter | CPU list
  std::string mem = "first-touch";  // --weft:mem (base::topology::apply_mem)
  std::vector<int> pe_cpus;         // OS CPU per PE (-1: unbound)
  bool oversubscribed = false;      // more PEs than CPUs in the inherited set
  queue_kind queue = queue_kind::mpsc;
  alloc_kind alloc = alloc_kind::mimalloc;
  bool msg_pool = true;  // per-PE size-class free lists for messages
  std::string transport =
      "auto";        // auto | local | shm | mpi | ucx; in weft::config(): the one in use
  std::string comm;  // thread | workers | hybrid; "": chosen at startup
  int commap = -1;   // CPU of the comm thread (-1: unbound)
  double startup_timeout_s = 60;  // wait for the job's other processes
  bool stats = false;
  bool quiet = false;
  bool report_bindings = false;  // --weft:report-bindings
  bool print_config = false;
  double timeout_s = 0;  // 0: no watchdog
  // --weft:on-quiescence=wait: a job that is quiescent without weft::exit
  // waits for events from outside weft; error (false): it says so and ends
  // with base::exit_quiescent.
  bool quiescence_wait = false;
  long idle_spin_us = 0;               // idle back-off: spin this long,
  bool idle_spin_given = false;        // set by the user (else chosen from oversubscription)
  long idle_yield_us = 0;              //   then yield this long, then sleep
  bool wake_fence_membarrier = false;  // --weft:wake-fence resolved (base/fence.hpp)
  // Default scheme of weft::parallel_for (the tasks layer reads it; core
  // only validates the name, as it does for the transport).
  std::string tasks_scheme = "adaptive-idle";
  // MPI ranks of the job (0: one per PE of the job) and their map onto the
  // job's PEs (false: block, true: round robin); the mpi layer reads them.
  int mpi_vp = 0;
  bool mpi_rank_map_rr = false;
  bool mpi_rank_tls_private = true;   // --weft:rank-tls: each rank has its own thread-locals
  bool mpi_rank_domain_node = false;  // --weft:rank-domain=node: ranks run on any free PE
  bool mpi_rank_wait_serve = true;    // --weft:rank-wait=serve: a lone rank serves as it waits
  std::size_t ult_stack_kib = 0;      // --weft:ult-stack; 0: the layer's default
  // A logical thread (an OpenMP thread; layer threads) that waits this long
  // to start behind a PE that stays inside one handler starts on an OS
  // thread of its own (a carrier) instead.
  long ult_rescue_us = 500;
  // Which OpenMP threads never share an OS thread: those of one team and
  // the teams nested in it (false), or all of them (true: objects running
  // regions at once then get carrier threads for their members).
  bool ult_isolate_all = false;
  // How libweft-omp runs a loop scheduled static at run time
  // (schedule(runtime) or auto): static, idle or history (the omp layer
  // reads it; docs/omp.md, "Loop schemes").
  std::string omp_scheme = "static";
  // The trace (docs/tracing.md): directory (empty: off), full or summary,
  // buffer per PE; counters for stats and the trace ("off" or a list).
  std::string trace_dir;
  std::string trace_mode = "full";
  std::size_t trace_buffer_bytes = 4u << 20;
  std::uint32_t trace_sample = 1;  // --weft:trace-sample: every Nth message traced
  // --weft:trace-time-every: summary mode times at least 1 slice in N of a name
  std::uint32_t trace_time_every = 256;
  unsigned trace_pool = 3;  // buffers per PE
  std::string counters;
  bool counters_given = false;
  // Load balancing (the lb layer reads these; core validates the numbers,
  // lb the strategy's name, which may be one the program registered).
  std::string lb = "off";      // strategy at at_sync(), or off
  double lb_tolerance = 1.05;  // greedy-refine and refine: max load within this of the bound
  bool lb_stats = false;       // a line per balancing step
  double lb_period_s = 0;      // > 0: balance without at_sync, at the first safe point each period
  bool lb_together = false;    // --weft:lb-arrays=together: at_sync arrays balance in one step
  std::string lb_dump;         // file the steps' load records are written to ("": none)
  long lb_dump_first = 0, lb_dump_last = -1;  // steps dumped (last -1: to the end)
  // --weft:lb-comm resolved: elements count what they send to arrays'
  // elements, for the instance's edges (auto: with comm, --weft:lb-dump or
  // --weft:lb-tree-inner=comm).
  bool lb_comm = false;
  std::uint64_t lb_max_bytes = std::uint64_t(64) << 20;  // packed bytes in flight per PE
  bool lb_load_cpu = false;  // loads are the thread's CPU time, not wall time
  double lb_average = 0;     // 0 <= A < 1: a step sees A x the last estimate + (1 - A) x now
  int lb_sample = 1;         // time one entry in this many per PE (1: all)
  int lb_tree_group = 16;    // hierarchical: nodes per group of the tree (PE, node, group, root)
  // hierarchical: the strategy that places a node's elements on its PEs
  // (refine|greedy|greedy-refine|comm), resolved: comm when --weft:lb-comm=element
  // is given without it.
  std::string lb_tree_inner = "refine";
  // Idle time is measured per PE (stats, or load balancing's background).
  bool measure_busy = false;  // --weft:counters set: refused counters are said
  std::string config_text;    // --weft:print-config text: values and their origins
};

// Defines every runtime option in `set` (core's and the layers below it).
WEFT_API void define_runtime_options(base::option_set& set);

// Parses --weft:* from argv (removing them) and WEFT_* from the environment
// into a validated configuration; bad input exits with code 2 and one line
// naming the problem. Handles --weft:help (exit 0). Does not start anything,
// so tools and benchmarks that do not start a node use it too. It loads the
// machine topology: in a job of several processes on one host, local rank 0
// discovers it and the others wait for its file (base/topology.hpp).
// Main thread, before weft::run.
WEFT_API runtime_config parse_options(int& argc, char** argv, base::option_set* out_set = nullptr);

WEFT_API const char* to_string(queue_kind k);
WEFT_API const char* to_string(alloc_kind k);

}  // namespace weft
