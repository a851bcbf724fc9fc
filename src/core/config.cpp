// Runtime options of the node (see --weft:help) and their validation.
// Mode rules live here too: an option that does not apply to this run is an
// error, never silently ignored.
#include "weft/core/config.hpp"

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/topology.hpp"
#include "weft/config.hpp"
#include "weft/net/transport.hpp"
#include "weft/trace/counters.hpp"

extern char** environ;

namespace weft {

const char* to_string(queue_kind k) {
  return k == queue_kind::mpsc ? "mpsc" : "spsc-pairs";
}
const char* to_string(alloc_kind k) {
  return k == alloc_kind::mimalloc ? "mimalloc" : "system";
}

// Idle back-off defaults, from bench/micro/wakeup on the reference machine
// (docs/benchmarks.md): a futex wake-up costs ~25 us one way against ~0.1 us
// for a cache-line transfer, so a PE spins for about twice the wake-up cost
// before it sleeps (spinning longer than a wake-up costs can at most double
// the latency of a late message — the ski-rental bound), then yields for a
// while so that on an oversubscribed node the runnable PEs get the core.
constexpr long default_spin_us = 50;
constexpr long default_yield_us = 200;

// queue=auto: per-producer SPSC rings up to this many PEs per process. A
// message to an idle PE then moves one queue line between the cores instead
// of the MPSC queue's several (kNeighbor, 2 PEs, 16 B: 0.70 -> 0.55 us per
// iteration; 4 PEs: 0.86x). But the consumer polls one ring per producer,
// a cost that grows with the PEs. Measured on a 16-core Xeon at 16 PEs
// (kNeighbor core level, 16 B): spsc-pairs 1.7-2.1 us per iteration, mpsc
// 1.9-3.5, so the rings are kept up to 16; beyond, unmeasured, the MPSC
// queue (docs/design/scheduler.md).
constexpr int spsc_pairs_max_pes = 16;

constexpr const char* bind_accepted = "none|compact|scatter|CPU list (0-3,6 or L0-3)";

namespace {
// "A:B" (inclusive), "A:" (A to the end) or "A" (that step alone) into
// [a, b] (b -1: no end); what is wrong, or "".
std::string parse_step_range(const std::string& v, long& a, long& b) {
  const std::size_t colon = v.find(':');
  auto number = [](const std::string& t, long& out) {
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9)
      return false;
    out = std::stol(t);
    return true;
  };
  if (colon == std::string::npos) {
    if (!number(v, a)) return "not a step number or range";
    b = a;
    return "";
  }
  if (!number(v.substr(0, colon), a)) return "the first step is not a number";
  const std::string rest = v.substr(colon + 1);
  if (rest.empty()) {
    b = -1;
    return "";
  }
  if (!number(rest, b)) return "the last step is not a number";
  if (b < a) return "the last step comes before the first";
  return "";
}

// "64M", "1K", "4096": a byte count with an optional K, M or G (binary:
// 2^10, 2^20, 2^30), at least 1 and at most 2^50; what is wrong, or "".
std::string parse_byte_size(const std::string& v, std::uint64_t& out) {
  std::size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  const std::string unit = v.substr(digits);
  if (digits == 0 || digits > 15) return "not a size: accepted forms N, NK, NM, NG (N > 0)";
  int shift = 0;
  if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (!unit.empty())
    return "unknown unit '" + unit + "': accepted forms N, NK, NM, NG (N > 0)";
  const std::uint64_t n = std::stoull(v.substr(0, digits));
  if (n == 0) return "the size must be at least 1 byte";
  if (n > (std::uint64_t(1) << (50 - shift))) return "larger than 1024T";
  out = n << shift;
  return "";
}

// An option's checker from a function that says what is wrong with a value
// ("" when nothing is).
template <class Check>
auto reason_checker(Check check) {
  return [check](const std::string& v) -> std::optional<std::string> {
    std::string err = check(v);
    if (err.empty()) return std::nullopt;
    return err;
  };
}
}  // namespace

constexpr const char* mem_accepted = "first-touch|local|interleave|bind:NODES (e.g. bind:0-1)";

void define_runtime_options(base::option_set& set) {
  using base::option_spec;
  set.define({"threads", "", "integer 1..4096", "PEs (worker threads) in this node",
              base::integer_in(1, 4096), false, "cores in the process's CPU set"});
  set.define({"bind", "compact", bind_accepted,
              "where PEs run: one per core, filling a cache domain first (compact), spread "
              "(scatter), unbound (none), or an explicit list",
              // The syntax only: a CPU list is checked against the machine
              // after parsing (parse_options), once the topology may be loaded.
              reason_checker(&base::topology::check_bind_syntax)});
  set.define({"mem", "first-touch", mem_accepted,
              "where the memory of the PEs (their pools, the runtime's structures, what the "
              "program allocates on them) goes: the node of the CPU that first touches it "
              "(first-touch), a bound PE's own NUMA node only (local), round robin over the "
              "NUMA nodes (interleave), or only the nodes listed (bind:0-1)",
              reason_checker(&base::topology::check_mem_syntax)});
  set.define(
      {"queue", "auto", "auto|mpsc|spsc-pairs",
       "PE message queue: one lock-free multi-producer queue, or one SPSC ring per "
       "producing PE",
       base::one_of({"auto", "mpsc", "spsc-pairs"}), false,
       "spsc-pairs for 2.." + std::to_string(spsc_pairs_max_pes) + " PEs per process, else mpsc"});
  set.define({"alloc", build_info::default_alloc, "mimalloc|system",
              "raw allocator for runtime memory and messages",
              base::one_of({"mimalloc", "system"})});
  set.define({"msg-pool", "on", "on|off", "per-PE size-class free lists for message blocks",
              base::boolean()});
  set.define({"transport", "auto", "auto|local|shm|mpi|ucx|shm+mpi|shm+ucx",
              "network between nodes (processes); shm+X: shm inside each host, X between "
              "hosts; auto: local for one process, shm when every process is on one host, "
              "else shm+mpi",
              base::one_of({"auto", "local", "shm", "mpi", "ucx", "shm+mpi", "shm+ucx"})});
  set.define({"comm", "", "thread|workers|hybrid",
              "who drives the network: a dedicated comm thread, the PEs between messages, or "
              "both (PEs help when idle)",
              base::one_of({"thread", "workers", "hybrid"}), false,
              "none in a one-node run; thread when the process has a CPU to spare for it, "
              "else workers"});
  set.define({"commap", "", "CPU number", "CPU the comm thread is bound to (comm=thread|hybrid)",
              base::integer_in(0, 1 << 20)});
  set.define({"startup-timeout", "60", "seconds",
              "how long a process waits for the others of the job at startup",
              base::number_in(0.1, 1e6)});
  set.define({"stats", "0", "bool",
              "print per-PE busy/idle/overhead, messages, CPU changes at exit", base::boolean(),
              true});
  set.define({"quiet", "0", "bool", "no startup line", base::boolean(), true});
  set.define({"print-config", "0", "bool", "print the effective configuration at startup",
              base::boolean(), true});
  set.define({"report-bindings", "0", "bool",
              "a line per PE on stderr with its binding drawn as Open MPI's --report-bindings "
              "draws it ([B/./.][./././.]), with hwloc's logical and OS indices; printed even "
              "with --weft:quiet",
              base::boolean(), true});
  set.define({"timeout", "0", "seconds (0 = off)",
              "abort with a per-PE dump if the node still runs after this long",
              base::number_in(0, 1e7)});
  set.define({"on-quiescence", "error", "error|wait",
              "a job that is quiescent (no message in flight, every PE idle, no timer or "
              "poll_while condition pending) but never called weft::exit: error says so, naming "
              "what ran last, and ends the job with exit status 4; wait keeps it waiting for "
              "events from outside weft (signals, files, threads weft cannot see)",
              base::one_of({"error", "wait"})});
  set.define({"idle-spin-us", "", "integer 0..1000000",
              "idle back-off: microseconds of spinning before yielding",
              base::integer_in(0, 1000000), false,
              std::to_string(default_spin_us) + ", or 0 when oversubscribed"});
  set.define({"idle-yield-us", "", "integer 0..1000000",
              "idle back-off: microseconds of sched_yield before sleeping",
              base::integer_in(0, 1000000), false, std::to_string(default_yield_us)});
  set.define({"wake-fence", "auto", "auto|membarrier|fence",
              "how a PE orders a message it hands to another PE before its look at that PE's "
              "sleep word: membarrier (a compiler barrier on the sender, membarrier(2) on the "
              "PE going to sleep) or a full fence on both; auto: membarrier where the kernel "
              "allows it",
              base::one_of({"auto", "membarrier", "fence"})});
  set.define({"trace", "", "directory",
              "record a trace of every PE into this directory (created if missing); read it "
              "with tools/weft-trace (docs/tracing.md)",
              [](const std::string& v) -> std::optional<std::string> {
                if (v.empty()) return std::string("an empty directory name");
                return std::nullopt;
              }});
  set.define({"trace-mode", "full", "full|summary",
              "full: every event; summary: per entry method totals and a utilization "
              "histogram only, for long runs",
              base::one_of({"full", "summary"})});
  set.define({"trace-sample", "1", "integer 1..1000000",
              "keep every Nth message's send and receive in the trace (a decision the sender "
              "makes, carried by the message); entry methods are all kept; 1: every message",
              base::integer_in(1, 1000000)});
  set.define({"trace-time-every", "256", "integer 1..1000000",
              "summary mode: every slice is counted; of a name with slices under 8 us, the "
              "first 16 are timed, then 1 in up to N (fewer as they are longer), and its "
              "totals estimated from them; 1: time every slice",
              base::integer_in(1, 1000000)});
  set.define({"trace-buffer", "4", "MiB 1..4096",
              "each trace buffer of a PE; a full one goes to the writer thread (shown as a "
              "flush)",
              base::integer_in(1, 4096)});
  set.define({"trace-pool", "3", "buffers 2..64",
              "trace buffers per PE: one filled while the others wait for the writer thread; "
              "with none free the PE drops events and counts them",
              base::integer_in(2, 64)});
  set.define({"counters", weft::trace::default_counters(),
              "off|comma list of " +
                  [] {
                    std::string names;
                    for (const auto& n : weft::trace::counter_names_known())
                      names += (names.empty() ? "" : ",") + n;
                    return names;
                  }(),
              "per-PE perf_event counters shown by --weft:stats and recorded in the trace "
              "(those the kernel refuses are left out, said in one line)",
              reason_checker(&weft::trace::check_counter_list)});
  // The threads layer's (weft/threads/ult.hpp).
  set.define({"ult-rescue-us", "500", "integer 1..10000000",
              "a logical thread (an OpenMP thread) that waits this long to start behind a PE "
              "that stays inside one handler starts on an OS thread of its own (a carrier) "
              "instead; --weft:stats counts them (docs/omp.md)",
              base::integer_in(1, 10000000)});
  set.define({"ult-isolate", "team", "team|all",
              "which OpenMP threads never share an OS thread (each keeps its thread-locals): "
              "those of one team and of the teams nested in it, while teams of different "
              "objects share the PEs' threads; or all of them, with a carrier thread for each "
              "thread that finds its PE's thread taken (docs/omp.md)",
              base::one_of({"team", "all"})});
  set.define({"omp-scheme", "static", "static|idle|history",
              "how libweft-omp shares a loop scheduled static at run time (schedule(runtime) "
              "with OMP_SCHEDULE=static or auto): static blocks; extra parts offered only to "
              "the team's idle threads; or an offered share that follows what was stolen at "
              "that loop lately (docs/omp.md)",
              base::one_of({"static", "idle", "history"})});
  // Strategy names are the lb layer's registry (the program may add its
  // own), checked when the node starts (src/lb/runtime.cpp).
  set.define({"lb", "off",
              "off|greedy|greedy-refine|refine|comm|node-aware|hierarchical|rotate|random|a "
              "registered strategy",
              "the load balancer run when the elements of an array call at_sync(): it moves "
              "elements by their measured loads (docs/lb.md); off resumes them where they are",
              [](const std::string& v) -> std::optional<std::string> {
                if (v.empty()) return std::string("empty strategy name");
                return std::nullopt;
              }});
  set.define({"lb-tolerance", "1.05", "number 1..100",
              "greedy-refine and refine keep an element where it is while its PE stays within "
              "this factor of the lower bound on the max load",
              base::number_in(1.0, 100.0)});
  set.define({"lb-stats", "0", "bool",
              "a line per balancing step on stderr: max/avg load before, the strategy's "
              "predicted max/avg after, migrations, bytes moved, time in the strategy and in "
              "migration",
              base::boolean(), true});
  set.define({"lb-period", "0", "seconds (0 = off)",
              "balance the arrays whose elements do not call at_sync, without their help, at "
              "the first safe point after each period: elements move between entry methods "
              "(docs/lb.md)",
              base::number_in(0.0, 1e6)});
  set.define({"lb-arrays", "each", "each|together",
              "each: every array balances in its own at_sync steps; together: the arrays "
              "that call at_sync balance in one step, placed as one set of objects (each "
              "must call at_sync equally often; docs/lb.md)",
              base::one_of({"each", "together"})});
  set.define({"lb-dump", "", "file",
              "write each balancing step's load records (a versioned binary format, "
              "docs/lb.md) to this file, for tools/weft-lbsim --replay",
              [](const std::string& v) -> std::optional<std::string> {
                if (v.empty()) return std::string("empty file name");
                return std::nullopt;
              }});
  set.define({"lb-dump-steps", "0:", "A:B, A: or A (step numbers from 0)",
              "the balancing steps --weft:lb-dump writes (default all)",
              reason_checker([](const std::string& v) -> std::string {
                long a = 0, b = -1;
                return parse_step_range(v, a, b);
              })});
  // Communication records: a separate block (other lb options are above).
  set.define({"lb-comm", "auto", "auto|off|element",
              "element: every measured element counts the messages and bytes it sends to each "
              "element of an array, and strategies see those between the elements a step "
              "places as the instance's edges (one hash-table update per such message); auto: "
              "element when --weft:lb=comm, --weft:lb-dump or --weft:lb-tree-inner=comm is "
              "given, else off (docs/lb.md)",
              base::one_of({"auto", "off", "element"})});
  // Migration in a balancing step: a PE holds at most this many packed
  // bytes sent to other processes and not yet acknowledged (src/objects/sync.cpp).
  set.define({"lb-max-bytes", "64M", "size: N, NK, NM or NG",
              "bytes of packed elements a PE may have in flight to other processes during a "
              "balancing step; one element always goes, however large (docs/lb.md)",
              reason_checker([](const std::string& v) -> std::string {
                std::uint64_t n = 0;
                return parse_byte_size(v, n);
              })});
  // What the load database measures (src/objects/sync.cpp, docs/lb.md "Load
  // options"): which clock, how much of the past, how many entries.
  set.define({"lb-load", "wall", "wall|cpu",
              "what an element's load is: the wall time of its entry methods, or the CPU time "
              "its PE's thread spent in them (not the time the core ran something else)",
              base::one_of({"wall", "cpu"})});
  set.define({"lb-average", "0", "number 0 <= A < 1",
              "the load a balancing step sees: A x the previous step's + (1 - A) x this "
              "interval's (0: this interval only)",
              [](const std::string& v) -> std::optional<std::string> {
                if (auto bad = base::number_in(0.0, 1.0)(v)) return bad;
                if (std::strtod(v.c_str(), nullptr) >= 1.0) return std::string("out of range");
                return std::nullopt;
              }});
  set.define({"lb-sample", "1", "integer 1..1000000",
              "time one entry method in N on each PE (on average; 1: every one) and estimate "
              "the others from each element's timed ones",
              base::integer_in(1, 1000000)});
  // The hierarchical tree's group level (src/objects/sync_tree.cpp and the
  // offline strategy's options::group_size at run time).
  set.define({"lb-tree-group", "16", "integer 1..1000000",
              "--weft:lb=hierarchical: nodes per group of the tree PE -> node -> group -> root; "
              "the root hears from the groups' leaders only (docs/lb.md)",
              base::integer_in(1, 1000000)});
  set.define({"lb-tree-inner", "refine", "refine|greedy|greedy-refine|comm",
              "--weft:lb=hierarchical: the strategy that places a node's elements on its PEs "
              "(comm: by their communication records, METIS); default refine, or comm with "
              "--weft:lb-comm=element (docs/lb.md)",
              base::one_of({"refine", "greedy", "greedy-refine", "comm"})});
  // MPI ranks as logical threads (the mpi layer reads these: docs/mpi.md).
  set.define({"vp", "0", "integer 0..1000000 (0: one rank per PE)",
              "MPI programs linked by weft-mpicc: ranks of the job (all its processes), each "
              "a logical thread on a PE (more ranks than PEs: several per PE); 0 gives one per "
              "PE of the job",
              base::integer_in(0, 1000000)});
  set.define({"rank-map", "block", "block|rr",
              "MPI ranks to the job's P PEs: block (rank r of n on PE r*P/n) or rr (rank r on PE "
              "r mod P)",
              base::one_of({"block", "rr"})});
  set.define({"rank-domain", "pe", "pe|node",
              "MPI programs: where a rank runs: on its PE all along (pe), or, between two of "
              "its MPI calls, on any PE of its process that runs no rank (node: a "
              "scheduling domain spanning the node's PEs; its MPI calls run on its own PE)",
              base::one_of({"pe", "node"})});
  set.define({"rank-wait", "serve", "serve|suspend",
              "MPI programs: a rank alone on its PE that waits in an MPI call first serves "
              "the PE's messages and the network itself for a few microseconds (serve: no "
              "context switch when what it waits for comes soon), or suspends at once "
              "(suspend)",
              base::one_of({"serve", "suspend"})});
  set.define({"rank-tls", "private", "private|shared",
              "MPI programs: the program's thread_local and __thread variables are each "
              "rank's own (private: a copy per rank, switched with it) or shared by the ranks "
              "of a PE (shared: no copy, for a program with large thread-locals that does not "
              "need them per rank)",
              base::one_of({"private", "shared"})});
  set.define({"ult-stack", "0", "integer 0 or 16..16777216 (KiB)",
              "the stack of each MPI rank (a logical thread), in KiB; 0: the C library's "
              "default thread stack (ulimit -s), at least 4 MiB. An overflow is reported as "
              "one, naming the rank",
              [](const std::string& v) -> std::optional<std::string> {
                if (auto bad = base::integer_in(0, 16777216)(v)) return bad;
                if (const long k = std::stol(v); k != 0 && k < 16)
                  return "is below 16 KiB (0 gives the default)";
                return std::nullopt;
              }});
  // The list is the tasks layer's tasks_scheme enum (weft/tasks/parallel_for.hpp).
  set.define({"tasks-scheme", "adaptive-idle",
              "split|broadcast|static|adaptive-idle|adaptive-history",
              "how weft::parallel_for shares a loop with the node's PEs when the call does not "
              "choose: recursive splitting over work-stealing deques, one descriptor every PE "
              "grabs chunks from, equal blocks per PE, tasks only for idle PEs, or as many as "
              "were stolen lately (docs/tasks.md)",
              base::one_of({"split", "broadcast", "static", "adaptive-idle", "adaptive-history"})});
}

runtime_config parse_options(int& argc, char** argv, base::option_set* out_set) {
  base::option_set local;
  base::option_set& set = out_set ? *out_set : local;
  define_runtime_options(set);
  set.set_version_text([] {
    std::string t = std::string("weft ") + build_info::version + "\n";
    t += std::string("  build type: ") +
         (*build_info::build_type ? build_info::build_type : "(none)");
#if defined(__clang__)
    t += ", compiler: clang " __clang_version__;
#elif defined(__GNUC__)
    t += ", compiler: GCC " __VERSION__;
#endif
    t += ", C++" + std::to_string(__cplusplus / 100 % 100);
    t += std::string(", sanitizer: ") + (*build_info::sanitizer ? build_info::sanitizer : "none") +
         "\n";
    t += std::string("  default allocator: ") + build_info::default_alloc + "\n";
    t += "  transports: " + net::available_transports() + "\n";
    return t;
  });
  set.parse(argc, argv, environ);

  // The first topology::get() of the process comes next. In a job of several
  // processes on this host, local rank 0 discovers the machine and the others
  // load what it found (topology.hpp); they wait for it as long as for the
  // job's other processes. The launcher's environment alone says who is who
  // (net_start reads it again; its errors now come from here).
  const net::launch_info launch = net::launch_from_environment();
  base::topology::share_per_host(
      {launch.job_id, launch.local_rank, launch.local_size, set.get_double("startup-timeout")});

  runtime_config c;
  const base::topology& topo = base::topology::get();
  const int cpus = int(topo.allowed().size());
  // What the option's validator could not check without the machine; the
  // message is the one a validator's would be.
  if (std::string err = topo.check_bind(set.get("bind")); !err.empty())
    base::usage_error("%s: %s; accepted: %s", set.origin("bind").c_str(), err.c_str(),
                      bind_accepted);

  if (std::string err = topo.check_mem(set.get("mem")); !err.empty())
    base::usage_error("%s: %s; accepted: %s", set.origin("mem").c_str(), err.c_str(), mem_accepted);
  c.mem = set.get("mem");

  c.threads =
      set.given("threads") ? int(set.get_int("threads")) : std::max(1, topo.allowed_cores());
  set.set_computed("threads", std::to_string(c.threads));
  c.bind = set.get("bind");
  c.pe_cpus = topo.place(c.threads, c.bind);
  // Oversubscribed: more PEs than CPUs, or an explicit list that puts two PEs
  // on one CPU (then spinning would steal that CPU from a PE with work).
  c.oversubscribed = c.threads > cpus;
  for (std::size_t i = 0; i < c.pe_cpus.size() && !c.oversubscribed; ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (c.pe_cpus[i] >= 0 && c.pe_cpus[i] == c.pe_cpus[j]) c.oversubscribed = true;
  if (set.get("queue") == "auto") {
    // One PE: no other PE sends to it, only threads that are not PEs (the
    // comm thread), and those use the MPSC queue in both kinds.
    c.queue = c.threads > 1 && c.threads <= spsc_pairs_max_pes ? queue_kind::spsc_pairs
                                                               : queue_kind::mpsc;
    set.set_computed("queue", to_string(c.queue));
  } else {
    c.queue = set.get("queue") == "mpsc" ? queue_kind::mpsc : queue_kind::spsc_pairs;
  }
  c.alloc = set.get("alloc") == "mimalloc" ? alloc_kind::mimalloc : alloc_kind::system;
  c.msg_pool = set.get_bool("msg-pool");
  c.transport = set.get("transport");
  c.comm = set.given("comm") ? set.get("comm") : "";
  c.commap = set.given("commap") ? int(set.get_int("commap")) : -1;
  c.startup_timeout_s = set.get_double("startup-timeout");
  c.stats = set.get_bool("stats");
  c.quiet = set.get_bool("quiet");
  c.print_config = set.get_bool("print-config");
  c.report_bindings = set.get_bool("report-bindings");
  c.timeout_s = set.get_double("timeout");
  c.quiescence_wait = set.get("on-quiescence") == "wait";
  c.tasks_scheme = set.get("tasks-scheme");
  c.mpi_vp = int(set.get_int("vp"));
  c.mpi_rank_map_rr = set.get("rank-map") == "rr";
  c.mpi_rank_tls_private = set.get("rank-tls") == "private";
  c.mpi_rank_domain_node = set.get("rank-domain") == "node";
  c.mpi_rank_wait_serve = set.get("rank-wait") == "serve";
  c.ult_stack_kib = std::size_t(set.get_int("ult-stack"));
  c.ult_rescue_us = set.get_int("ult-rescue-us");
  c.ult_isolate_all = set.get("ult-isolate") == "all";
  c.omp_scheme = set.get("omp-scheme");
  c.trace_dir = set.given("trace") ? set.get("trace") : "";
  c.trace_mode = set.get("trace-mode");
  c.trace_buffer_bytes = std::size_t(set.get_int("trace-buffer")) << 20;
  c.trace_sample = std::uint32_t(set.get_int("trace-sample"));
  c.trace_time_every = std::uint32_t(set.get_int("trace-time-every"));
  c.trace_pool = unsigned(set.get_int("trace-pool"));
  c.counters = set.get("counters");
  c.counters_given = set.given("counters");
  c.lb = set.get("lb");
  c.lb_tolerance = set.get_double("lb-tolerance");
  c.lb_stats = set.get_bool("lb-stats");
  c.lb_period_s = set.get_double("lb-period");
  c.lb_together = set.get("lb-arrays") == "together";
  c.lb_dump = set.given("lb-dump") ? set.get("lb-dump") : "";
  c.lb_load_cpu = set.get("lb-load") == "cpu";
  c.lb_average = set.get_double("lb-average");
  c.lb_sample = int(set.get_int("lb-sample"));
  c.lb_tree_group = int(set.get_int("lb-tree-group"));
  parse_step_range(set.get("lb-dump-steps"), c.lb_dump_first, c.lb_dump_last);
  if (set.given("lb-dump-steps") && c.lb_dump.empty())
    base::usage_error("%s applies only with --weft:lb-dump=FILE",
                      set.origin("lb-dump-steps").c_str());
  if ((c.lb_period_s > 0 || !c.lb_dump.empty() || c.lb_together) && c.lb == "off")
    base::usage_error("%s needs a strategy: add --weft:lb=NAME (greedy-refine, for one)",
                      set.origin(c.lb_period_s > 0 ? "lb-period"
                                 : c.lb_together   ? "lb-arrays"
                                                   : "lb-dump")
                          .c_str());
  parse_byte_size(set.get("lb-max-bytes"), c.lb_max_bytes);
  c.measure_busy = c.stats || c.lb != "off";
  {
    const std::string comm = set.get("lb-comm");
    if (comm == "element" && c.lb == "off")
      base::usage_error("%s needs a strategy: add --weft:lb=NAME (comm, for one)",
                        set.origin("lb-comm").c_str());
    // The tree's node level: only hierarchical has one. Records that no
    // level reads are an error (a dump reads them whatever the node level).
    const bool inner_given = set.given("lb-tree-inner");
    if (inner_given && c.lb != "hierarchical")
      base::usage_error("%s applies only with --weft:lb=hierarchical",
                        set.origin("lb-tree-inner").c_str());
    c.lb_tree_inner = set.get("lb-tree-inner");
    if (c.lb == "hierarchical") {
      if (!inner_given && comm == "element") c.lb_tree_inner = "comm";
      if (c.lb_tree_inner == "comm" && comm == "off")
        base::usage_error(
            "%s needs communication records, which %s turns off; accepted: "
            "--weft:lb-tree-inner=comm with --weft:lb-comm=auto|element",
            set.origin("lb-tree-inner").c_str(), set.origin("lb-comm").c_str());
      if (inner_given && c.lb_tree_inner != "comm" && comm == "element" && c.lb_dump.empty())
        base::usage_error(
            "%s places by load only, so the records of %s would go unread; accepted with "
            "--weft:lb=hierarchical: --weft:lb-comm=element with --weft:lb-tree-inner=comm "
            "(or without it: comm is then the default), or --weft:lb-tree-inner=%s with "
            "--weft:lb-comm=auto|off",
            set.origin("lb-tree-inner").c_str(), set.origin("lb-comm").c_str(),
            c.lb_tree_inner.c_str());
      if (!inner_given) set.set_computed("lb-tree-inner", c.lb_tree_inner);
    }
    c.lb_comm =
        comm == "element" || (comm == "auto" && c.lb != "off" &&
                              (c.lb == "comm" || !c.lb_dump.empty() || c.lb_tree_inner == "comm"));
    if (comm == "auto") set.set_computed("lb-comm", c.lb_comm ? "element" : "off");
  }
  if (set.given("trace-mode") && c.trace_dir.empty())
    base::usage_error("%s applies only with --weft:trace=DIR", set.origin("trace-mode").c_str());
  if (set.given("trace-sample") && c.trace_dir.empty())
    base::usage_error("%s applies only with --weft:trace=DIR", set.origin("trace-sample").c_str());
  if (set.given("trace-time-every") && c.trace_mode != "summary")
    base::usage_error(
        "%s applies only with --weft:trace-mode=summary (full mode times every event)",
        set.origin("trace-time-every").c_str());
  // Summary mode keeps totals, not messages: a sampled summary would only
  // undercount its handlers.
  if (c.trace_sample > 1 && c.trace_mode == "summary")
    base::usage_error(
        "%s applies only with --weft:trace-mode=full (summary mode keeps no messages to sample)",
        set.origin("trace-sample").c_str());

  // Mode rules: options that cannot apply to this run are errors.
  if (c.transport == "local") {
    if (set.given("comm"))
      base::usage_error(
          "%s: a comm mode applies only to runs with a network transport; this "
          "run is one node (--weft:transport=local)",
          set.origin("comm").c_str());
    if (set.given("commap"))
      base::usage_error(
          "%s: a comm thread CPU applies only with comm=thread|hybrid on a network "
          "transport; this run is one node (--weft:transport=local)",
          set.origin("commap").c_str());
  }
  if (set.given("commap") && c.comm == "workers")
    base::usage_error("%s: comm=workers has no comm thread to bind; use comm=thread or hybrid",
                      set.origin("commap").c_str());

  c.idle_spin_given = set.given("idle-spin-us");
  c.idle_spin_us = set.given("idle-spin-us") ? set.get_int("idle-spin-us")
                                             : (c.oversubscribed ? 0 : default_spin_us);
  c.idle_yield_us = set.given("idle-yield-us") ? set.get_int("idle-yield-us") : default_yield_us;
  set.set_computed("idle-spin-us", std::to_string(c.idle_spin_us));
  set.set_computed("idle-yield-us", std::to_string(c.idle_yield_us));
  // Registers the process now, before any PE runs (the fences are
  // process-wide; a later node of the same process chooses again).
  if (set.get("wake-fence") == "fence") {
    base::disable_asymmetric_fences();
  } else if (const char* why = base::enable_asymmetric_fences(); *why != '\0') {
    if (set.get("wake-fence") == "membarrier")
      base::usage_error("%s: %s; accepted: auto|membarrier|fence (fence needs nothing)",
                        set.origin("wake-fence").c_str(), why);
    base::disable_asymmetric_fences();
    set.set_computed("wake-fence", "fence");
  } else if (set.get("wake-fence") == "auto") {
    set.set_computed("wake-fence", "membarrier");
  }
  c.wake_fence_membarrier = base::asymmetric_fences_enabled();

  // Without memory for the stream the text stays empty: config() then
  // prints nothing, the run itself is unaffected. Not a fatal error.
  char* text = nullptr;
  std::size_t len = 0;
  if (std::FILE* f = open_memstream(&text, &len)) {
    set.print_config(f);
    std::fclose(f);
    c.config_text.assign(text, len);
    std::free(text);
  }
  return c;
}

}  // namespace weft
