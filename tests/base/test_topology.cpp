// Tests for weft::base::topology: the inherited CPU set, --weft:bind
// validation, PE placement, thread binding and the text forms.
//
// Most tests run against the real machine and the CPU set the test process
// was started with, so they assert only what holds on any machine (a 2-core
// VM, a laptop, a 2-socket node, under taskset). The exact placement orders
// are checked on machines simulated by hwloc (HWLOC_SYNTHETIC), and the
// inherited set under a restricted affinity, each in a child process: the
// topology is loaded once per process, so a case that needs a different
// machine or CPU set needs a fresh process. No test measures time.
#include "weft/base/topology.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using weft::base::cpu_info;
using weft::base::topology;

// ---- helpers ---------------------------------------------------------------

// Large enough for any machine these tests will meet (sched_getaffinity
// fails with EINVAL when the buffer is smaller than the kernel's mask).
constexpr int affinity_bits = 8192;

// The calling thread's CPU set, as the kernel reports it.
std::vector<int> thread_affinity() {
  cpu_set_t* set = CPU_ALLOC(affinity_bits);
  const std::size_t size = CPU_ALLOC_SIZE(affinity_bits);
  std::vector<int> cpus;
  if (set && sched_getaffinity(0, size, set) == 0)
    for (int i = 0; i < affinity_bits; ++i)
      if (CPU_ISSET_S(i, size, set)) cpus.push_back(i);
  CPU_FREE(set);
  return cpus;
}

std::vector<int> os_indices(const std::vector<cpu_info>& cpus) {
  std::vector<int> out;
  for (const cpu_info& c : cpus) out.push_back(c.os_index);
  return out;
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// OS index -> core, over the inherited set.
std::map<int, int> core_of_cpu() {
  std::map<int, int> m;
  for (const cpu_info& c : topology::get().allowed()) m[c.os_index] = c.core;
  return m;
}

// ---- child processes -------------------------------------------------------
//
// A test forks, prepares the child (its affinity, its environment) and
// re-executes this binary with child_env naming the case. The static
// initialiser at the end of this section sees the variable before main(),
// runs that case's checks on a topology loaded fresh in the child, and exits
// with child_ok. Any other status (including 0, which is what a child that
// somehow ran the GoogleTest main instead would return) is a failure.

constexpr const char* child_env = "WEFT_TEST_TOPOLOGY_CHILD";
constexpr int child_ok = 42;

// Two packages with a NUMA node each, two L3s per package, two cores per
// L3, two hardware threads per core, numbered the way Linux numbers x86
// hyperthreads: core c has CPUs c and c + 8. OS and logical indices thus
// differ, which the "L" list checks rely on.
constexpr const char* two_socket_machine =
    "pack:2 [numa] l3:2 core:2 pu:2(indexes=0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15)";
// No L3: the last-level cache is the L2, shared by pairs of cores.
constexpr const char* l2_only_machine = "pack:1 l2:2 core:2 pu:1";

bool child_passed = true;

void child_check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "child check failed: %s\n", what.c_str());
  child_passed = false;
}

std::string text(const std::vector<int>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}

void child_check_eq(const std::vector<int>& got, const std::vector<int>& want,
                    const std::string& what) {
  child_check(got == want, what + ": got " + text(got) + ", want " + text(want));
}

void child_check_has(const std::string& got, const std::string& part, const std::string& what) {
  child_check(contains(got, part), what + ": '" + part + "' not in:\n" + got);
}

// Case "inherited <cpu> <other cpu or -1> <machine PUs>": the child was
// restricted to <cpu> before it loaded the topology.
void child_inherited_set(const char* args) {
  int cpu = -1, other = -1, pus = -1;
  if (std::sscanf(args, "%d %d %d", &cpu, &other, &pus) != 3) {
    child_check(false, std::string("bad arguments: ") + args);
    return;
  }
  const topology& topo = topology::get();
  child_check_eq(os_indices(topo.allowed()), {cpu}, "allowed()");
  child_check(topo.hardware_threads() == pus, "the machine is not shrunk by the affinity");
  child_check(topo.allowed_cores() == 1, "allowed_cores() == 1");
  child_check_eq(topo.place(3, "compact"), {cpu, cpu, cpu}, "compact");
  child_check_eq(topo.place(3, "scatter"), {cpu, cpu, cpu}, "scatter");
  child_check(topo.check_bind(std::to_string(cpu)).empty(), "own CPU accepted");
  if (other >= 0)
    child_check(topo.check_bind(std::to_string(other)) == "CPU " + std::to_string(other) +
                                                              " is not in this process's CPU set " +
                                                              std::to_string(cpu),
                "a CPU of the parent's set is refused: " + topo.check_bind(std::to_string(other)));
  child_check_has(topo.describe(), "inherited CPU set: " + std::to_string(cpu) + " (1 CPU, 1 core)",
                  "describe()");
}

void child_two_socket_machine() {
  const topology& topo = topology::get();
  child_check(topo.packages() == 2 && topo.numa_nodes() == 2 && topo.l3_caches() == 4 &&
                  topo.cores() == 8 && topo.hardware_threads() == 16,
              "machine counts");
  child_check(topo.allowed().size() == 16 && topo.allowed_cores() == 8,
              "a simulated machine is inherited whole");
  if (topo.allowed().size() == 16) {
    for (int i = 0; i < 16; ++i)
      child_check(topo.allowed()[std::size_t(i)].logical_index == i, "logical order");
    const cpu_info& c = topo.allowed()[15];  // second thread of core 7
    child_check(c.os_index == 15 && c.core == 7 && c.package == 1 && c.numa == 1 && c.l3 == 3,
                "tree indices of L15");
    const cpu_info& d = topo.allowed()[1];  // second thread of core 0
    child_check(d.os_index == 8 && d.core == 0 && d.package == 0 && d.numa == 0 && d.l3 == 0,
                "tree indices of L1");
  }
  // One PE per core in core order, then the second hardware threads.
  child_check_eq(topo.place(16, "compact"), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                 "compact");
  // Cores alternate packages, then L3s within a package (cores 0-1 share
  // L3 0, cores 2-3 L3 1, ...), then the second hardware threads likewise.
  const std::vector<int> scatter = {0, 4, 2, 6, 1, 5, 3, 7, 8, 12, 10, 14, 9, 13, 11, 15};
  child_check_eq(topo.place(16, "scatter"), scatter, "scatter");
  std::vector<int> wrapped = scatter;
  wrapped.push_back(0);
  wrapped.push_back(4);
  child_check_eq(topo.place(18, "scatter"), wrapped, "scatter wraps around");
  // Logical lists name PUs in hwloc's order, whatever the OS numbering.
  child_check(topo.check_bind("L0-3").empty(), "L0-3 accepted");
  child_check_eq(topo.place(4, "L0-3"), {0, 8, 1, 9}, "L0-3");
  child_check_eq(topo.place(3, "L2,L1"), {1, 8, 1}, "L2,L1");
  child_check_eq(topo.place(2, "L2,3"), {1, 9}, "L2,3");
  child_check_eq(topo.place(3, "15,0"), {15, 0, 15}, "15,0");
  child_check(contains(topo.check_bind("L16"), "there is no CPU L16"), topo.check_bind("L16"));
  const std::string d = topo.describe();
  child_check_has(d, "machine: 2 packages, 2 NUMA nodes, 4 L3 caches, 8 cores, 16 hardware threads",
                  "describe()");
  child_check_has(d, "  package 1\n", "describe()");
  child_check_has(d, "    core 7 (NUMA 1, L3 3): CPU 7 (L14), CPU 15 (L15)\n", "describe()");
  child_check_has(d, "inherited CPU set: 0-15 (16 CPUs, 8 cores)", "describe()");
}

void child_l2_only_machine() {
  const topology& topo = topology::get();
  child_check(topo.l3_caches() == 2, "the L2 counts as the last-level cache");
  if (topo.allowed().size() == 4) child_check(topo.allowed()[3].l3 == 1, "l3 index of L3");
  // Cores 0-1 share one L2, cores 2-3 the other: scatter alternates them.
  child_check_eq(topo.place(4, "scatter"), {0, 2, 1, 3}, "scatter");
  child_check_eq(topo.place(4, "compact"), {0, 1, 2, 3}, "compact");
  child_check_has(topo.describe(), "2 L2 caches", "describe()");
}

[[noreturn]] void run_child_case(const std::string& which) {
  if (which.rfind("inherited ", 0) == 0) {
    child_inherited_set(which.c_str() + std::strlen("inherited "));
  } else if (which == "two-socket") {
    child_two_socket_machine();
  } else if (which == "l2-only") {
    child_l2_only_machine();
  } else {
    child_check(false, "unknown child case '" + which + "'");
  }
  std::fflush(stderr);
  std::_Exit(child_passed ? child_ok : 1);
}

[[maybe_unused]] const bool child_dispatch = [] {
  if (const char* which = std::getenv(child_env)) run_child_case(which);
  return false;
}();

// Re-executes this binary as child case `which`, with `env` added to an
// environment cleared of hwloc's variables and, if cpu >= 0, the affinity
// restricted to that CPU. Returns true if the child's checks passed.
::testing::AssertionResult run_child(const std::string& which, std::vector<std::string> env,
                                     int cpu) {
  // Everything the child needs is built before fork(): between fork and exec
  // only async-signal-safe calls are allowed, and the parent may have threads.
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "HWLOC_", 6) != 0 &&
        std::strncmp(*e, child_env, std::strlen(child_env)) != 0)
      env.emplace_back(*e);
  env.push_back(std::string(child_env) + "=" + which);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu >= 0) CPU_SET(cpu, &set);

  const pid_t pid = fork();
  if (pid < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);
  if (pid == 0) {
    if (cpu >= 0 && sched_setaffinity(0, sizeof set, &set) != 0) _exit(90);
    execve(self, argv, envp.data());
    _exit(91);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return ::testing::AssertionFailure() << "waitpid: " << std::strerror(errno);
  if (WIFEXITED(status) && WEXITSTATUS(status) == child_ok) return ::testing::AssertionSuccess();
  if (WIFEXITED(status))
    return ::testing::AssertionFailure()
           << "child '" << which << "' exited with " << WEXITSTATUS(status)
           << " (90: sched_setaffinity failed, 91: exec failed; see its output above)";
  return ::testing::AssertionFailure() << "child '" << which << "' ended with status " << status;
}

// ---- the inherited set -----------------------------------------------------

TEST(Topology, AllowedIsNonEmptyAndInsideTheAffinity) {
  const topology& topo = topology::get();
  const std::vector<int> affinity = thread_affinity();
  ASSERT_FALSE(affinity.empty());
  ASSERT_FALSE(topo.allowed().empty());
  const std::set<int> in_affinity(affinity.begin(), affinity.end());
  for (const cpu_info& c : topo.allowed())
    EXPECT_TRUE(in_affinity.count(c.os_index)) << "CPU " << c.os_index;
  // Every CPU the kernel lets this process use is one hwloc knows.
  EXPECT_EQ(sorted(os_indices(topo.allowed())), affinity);
}

TEST(Topology, AllowedIsInLogicalOrderWithConsistentCounts) {
  const topology& topo = topology::get();
  const auto& allowed = topo.allowed();
  for (std::size_t i = 1; i < allowed.size(); ++i)
    EXPECT_LT(allowed[i - 1].logical_index, allowed[i].logical_index);
  for (const cpu_info& c : allowed) {
    EXPECT_GE(c.logical_index, 0);
    EXPECT_LT(c.logical_index, topo.hardware_threads());
    EXPECT_LT(c.core, topo.cores());
    EXPECT_LT(c.package, topo.packages());
    EXPECT_LT(c.numa, topo.numa_nodes());
    EXPECT_LT(c.l3, topo.l3_caches());
  }
  EXPECT_GE(topo.hardware_threads(), int(allowed.size()));
  EXPECT_GE(topo.allowed_cores(), 1);
  EXPECT_LE(topo.allowed_cores(), int(allowed.size()));
  EXPECT_LE(topo.allowed_cores(), std::max(topo.cores(), int(allowed.size())));
  EXPECT_GE(topo.packages(), 1);
  EXPECT_GE(topo.numa_nodes(), 1);
}

TEST(Topology, GetReturnsOneObject) {
  const topology* seen[2] = {nullptr, nullptr};
  std::thread a([&] { seen[0] = &topology::get(); });
  std::thread b([&] { seen[1] = &topology::get(); });
  a.join();
  b.join();
  EXPECT_EQ(seen[0], &topology::get());
  EXPECT_EQ(seen[1], &topology::get());
}

TEST(TopologyChild, InheritedSetIsRespected) {
  const std::vector<int> affinity = thread_affinity();
  ASSERT_FALSE(affinity.empty());
  // The last CPU, so that the child's set is not simply "0".
  const int cpu = affinity.back();
  const int other = affinity.size() > 1 ? affinity.front() : -1;
  const std::string args = "inherited " + std::to_string(cpu) + " " + std::to_string(other) + " " +
                           std::to_string(topology::get().hardware_threads());
  EXPECT_TRUE(run_child(args, {}, cpu));
}

TEST(TopologyChild, PlacementOnTwoSocketMachine) {
  EXPECT_TRUE(run_child("two-socket", {std::string("HWLOC_SYNTHETIC=") + two_socket_machine}, -1));
}

TEST(TopologyChild, PlacementWithoutL3) {
  EXPECT_TRUE(run_child("l2-only", {std::string("HWLOC_SYNTHETIC=") + l2_only_machine}, -1));
}

// ---- check_bind ------------------------------------------------------------

TEST(TopologyCheckBind, AcceptsPolicies) {
  const topology& topo = topology::get();
  EXPECT_EQ(topo.check_bind("none"), "");
  EXPECT_EQ(topo.check_bind("compact"), "");
  EXPECT_EQ(topo.check_bind("scatter"), "");
}

TEST(TopologyCheckBind, AcceptsListsInsideTheSet) {
  const topology& topo = topology::get();
  const auto& allowed = topo.allowed();
  const cpu_info& first = allowed.front();
  const cpu_info& last = allowed.back();
  EXPECT_EQ(topo.check_bind(topology::format_cpus(os_indices(allowed))), "");
  EXPECT_EQ(topo.check_bind(std::to_string(first.os_index)), "");
  EXPECT_EQ(topo.check_bind("L" + std::to_string(first.logical_index)), "");
  if (allowed.size() > 1) {
    const std::string os_pair =
        std::to_string(last.os_index) + "," + std::to_string(first.os_index);
    EXPECT_EQ(topo.check_bind(os_pair), "");
    EXPECT_EQ(topo.check_bind("L" + std::to_string(last.logical_index) + ",L" +
                              std::to_string(first.logical_index)),
              "");
    EXPECT_EQ(topo.check_bind("L" + std::to_string(last.logical_index) + "," +
                              std::to_string(first.logical_index)),
              "");
  }
}

TEST(TopologyCheckBind, RejectsCpuOutsideTheSet) {
  const topology& topo = topology::get();
  const std::vector<int> cpus = os_indices(topo.allowed());
  const std::string set = topology::format_cpus(cpus);
  const int outside = *std::max_element(cpus.begin(), cpus.end()) + 1;
  EXPECT_EQ(topo.check_bind(std::to_string(outside)),
            "CPU " + std::to_string(outside) + " is not in this process's CPU set " + set);
  // Inside a range, after valid CPUs.
  EXPECT_EQ(topo.check_bind(std::to_string(cpus.front()) + "," + std::to_string(outside) + "-" +
                            std::to_string(outside + 3)),
            "CPU " + std::to_string(outside) + " is not in this process's CPU set " + set);
}

TEST(TopologyCheckBind, RejectsMalformedLists) {
  const topology& topo = topology::get();
  EXPECT_EQ(topo.check_bind(""), "empty CPU list");
  EXPECT_EQ(topo.check_bind("L"), "empty CPU list");
  EXPECT_EQ(topo.check_bind("0,"), "empty item in CPU list '0,'");
  EXPECT_EQ(topo.check_bind(",0"), "empty item in CPU list ',0'");
  EXPECT_EQ(topo.check_bind("0,,1"), "empty item in CPU list '0,,1'");
  EXPECT_EQ(topo.check_bind("a"), "'a' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind("0-"), "'0-' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind("-1"), "'-1' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind("1-2-3"), "'1-2-3' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind(" 0"), "' 0' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind("0x1"), "'0x1' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind("LL0"), "'LL0' is not a CPU number or range");
  EXPECT_EQ(topo.check_bind("Compact"), "'Compact' is not a CPU number or range");
  EXPECT_TRUE(contains(topo.check_bind("0,L1"), "'L1' is a logical index in a list of OS indices"))
      << topo.check_bind("0,L1");
  EXPECT_TRUE(contains(topo.check_bind("99999999999"), "names a CPU beyond"))
      << topo.check_bind("99999999999");
}

TEST(TopologyCheckBind, RejectsReversedRange) {
  const topology& topo = topology::get();
  EXPECT_EQ(topo.check_bind("3-1"), "'3-1' is not a CPU range (it runs backwards)");
  EXPECT_EQ(topo.check_bind("L3-1"), "'L3-1' is not a CPU range (it runs backwards)");
}

TEST(TopologyCheckBind, RejectsDuplicates) {
  const topology& topo = topology::get();
  const std::string c = std::to_string(topo.allowed().front().os_index);
  const std::string l = std::to_string(topo.allowed().front().logical_index);
  EXPECT_EQ(topo.check_bind(c + "," + c), "CPU " + c + " is listed more than once");
  EXPECT_EQ(topo.check_bind(c + "-" + c + "," + c), "CPU " + c + " is listed more than once");
  EXPECT_EQ(topo.check_bind("L" + l + ",L" + l), "CPU L" + l + " is listed more than once");
}

TEST(TopologyCheckBind, RejectsLogicalIndexBeyondTheMachine) {
  const topology& topo = topology::get();
  const int n = topo.hardware_threads();
  EXPECT_EQ(topo.check_bind("L" + std::to_string(n)),
            "there is no CPU L" + std::to_string(n) + " (this machine has " + std::to_string(n) +
                (n == 1 ? " hardware thread" : " hardware threads") + ", L0-" +
                std::to_string(n - 1) + ")");
  EXPECT_TRUE(contains(topo.check_bind("L0-" + std::to_string(n + 5)), "CPU L"))
      << topo.check_bind("L0-" + std::to_string(n + 5));
}

// ---- place -----------------------------------------------------------------

TEST(TopologyPlace, NoneLeavesPesUnbound) {
  EXPECT_EQ(topology::get().place(5, "none"), std::vector<int>(5, -1));
  EXPECT_TRUE(topology::get().place(0, "compact").empty());
}

// compact and scatter use every CPU of the set once, one PE per core first.
TEST(TopologyPlace, PoliciesCoverTheSetCoresFirst) {
  const topology& topo = topology::get();
  const int n = int(topo.allowed().size());
  const std::map<int, int> core = core_of_cpu();
  for (const char* policy : {"compact", "scatter"}) {
    SCOPED_TRACE(policy);
    const std::vector<int> cpus = topo.place(n, policy);
    EXPECT_EQ(sorted(cpus), sorted(os_indices(topo.allowed())));
    std::set<int> first_cores;
    for (int i = 0; i < topo.allowed_cores() && i < int(cpus.size()); ++i)
      first_cores.insert(core.at(cpus[std::size_t(i)]));
    EXPECT_EQ(int(first_cores.size()), topo.allowed_cores());
  }
}

TEST(TopologyPlace, CompactStartsWithTheFirstCpu) {
  const topology& topo = topology::get();
  EXPECT_EQ(topo.place(1, "compact"), std::vector<int>{topo.allowed().front().os_index});
}

TEST(TopologyPlace, WrapsAroundWhenOversubscribed) {
  const topology& topo = topology::get();
  const std::size_t size = topo.allowed().size();
  const std::vector<int> all = os_indices(topo.allowed());
  const std::set<int> in_set(all.begin(), all.end());
  const std::string list = topology::format_cpus(all);
  for (const std::string& policy : {std::string("compact"), std::string("scatter"), list}) {
    SCOPED_TRACE(policy);
    const std::vector<int> cpus = topo.place(int(2 * size + 1), policy);
    ASSERT_EQ(cpus.size(), 2 * size + 1);
    for (std::size_t i = 0; i < cpus.size(); ++i) {
      EXPECT_TRUE(in_set.count(cpus[i])) << cpus[i];
      EXPECT_EQ(cpus[i], cpus[i % size]) << "PE " << i;
    }
  }
}

TEST(TopologyPlace, ExplicitListKeepsItsOrder) {
  const topology& topo = topology::get();
  std::vector<int> reversed = os_indices(topo.allowed());
  std::reverse(reversed.begin(), reversed.end());
  std::string list;
  for (int c : reversed) list += (list.empty() ? "" : ",") + std::to_string(c);
  ASSERT_EQ(topo.check_bind(list), "");
  EXPECT_EQ(topo.place(int(reversed.size()), list), reversed);
  std::vector<int> more = topo.place(int(reversed.size()) + 1, list);
  EXPECT_EQ(more.back(), reversed.front());

  const cpu_info& first = topo.allowed().front();
  const cpu_info& last = topo.allowed().back();
  const std::string logical =
      "L" + std::to_string(last.logical_index) + ",L" + std::to_string(first.logical_index);
  if (topo.allowed().size() > 1) {
    EXPECT_EQ(topo.place(3, logical),
              (std::vector<int>{last.os_index, first.os_index, last.os_index}));
  }
}

// ---- bind_this_thread ------------------------------------------------------

TEST(TopologyBind, ThreadRunsOnItsCpu) {
  const topology& topo = topology::get();
  // A few CPUs of the set: the first ones and the last.
  std::vector<int> targets;
  for (const cpu_info& c : topo.allowed())
    if (targets.size() < 3) targets.push_back(c.os_index);
  targets.push_back(topo.allowed().back().os_index);
  for (int cpu : targets) {
    std::vector<int> affinity;
    int running_on = -1;
    std::thread t([&] {
      topo.bind_this_thread(cpu);
      // The kernel moves the calling thread off a CPU outside its new mask
      // before sched_setaffinity returns, so this holds at once.
      running_on = sched_getcpu();
      affinity = thread_affinity();
    });
    t.join();
    EXPECT_EQ(affinity, std::vector<int>{cpu});
    EXPECT_EQ(running_on, cpu);
  }
}

TEST(TopologyBind, NegativeCpuIsNoOp) {
  const topology& topo = topology::get();
  std::vector<int> before, after;
  std::thread t([&] {
    before = thread_affinity();
    topo.bind_this_thread(-1);
    after = thread_affinity();
  });
  t.join();
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(before, after);
}

TEST(TopologyBindDeathTest, RefusedCpuIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // No machine has a CPU 65535 today, so the kernel refuses the mask.
  EXPECT_EXIT(topology::get().bind_this_thread(65535), ::testing::ExitedWithCode(3),
              "weft: fatal: binding a thread to CPU 65535 failed");
}

// ---- text ------------------------------------------------------------------

TEST(TopologyFormat, FormatsCpuLists) {
  EXPECT_EQ(topology::format_cpus({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(topology::format_cpus({}), "");
  EXPECT_EQ(topology::format_cpus({5}), "5");
  EXPECT_EQ(topology::format_cpus({3, 1, 2, 2}), "1-3");
  EXPECT_EQ(topology::format_cpus({0, 2, 4}), "0,2,4");
  EXPECT_EQ(topology::format_cpus({1, 2, 4, 5, 9}), "1-2,4-5,9");
  EXPECT_EQ(topology::format_cpus({7, 6, -1}), "6-7");
}

TEST(TopologyFormat, FormatRoundTripsThroughCheckBind) {
  const topology& topo = topology::get();
  const std::string all = topology::format_cpus(os_indices(topo.allowed()));
  ASSERT_EQ(topo.check_bind(all), "");
  EXPECT_EQ(sorted(topo.place(int(topo.allowed().size()), all)),
            sorted(os_indices(topo.allowed())));
}

TEST(TopologyFormat, DescribeNamesMachineAndSet) {
  const topology& topo = topology::get();
  const std::string d = topo.describe();
  const auto& allowed = topo.allowed();
  EXPECT_TRUE(contains(d, "machine: ")) << d;
  EXPECT_TRUE(contains(d, std::to_string(topo.cores()) + " core")) << d;
  EXPECT_TRUE(contains(d, std::to_string(topo.hardware_threads()) + " hardware thread")) << d;
  const std::string set = "inherited CPU set: " + topology::format_cpus(os_indices(allowed)) +
                          " (" + std::to_string(allowed.size()) + " CPU";
  EXPECT_TRUE(contains(d, set)) << d;
  if (topo.hardware_threads() <= 64) {
    EXPECT_TRUE(contains(d, "CPU " + std::to_string(allowed.front().os_index) + " (L" +
                                std::to_string(allowed.front().logical_index) + ")"))
        << d;
  }
  EXPECT_EQ(d.back(), '\n');
}

}  // namespace
