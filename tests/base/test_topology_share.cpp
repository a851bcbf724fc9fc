// Tests for one discovery per host (weft::base::topology::host_share): local
// rank 0 discovers the machine and writes it as hwloc XML to a file; the
// other processes of the host load that file. Checked here: the XML round
// trip gives the same machine and the same inherited set as a discovery of
// its own; the file is private to the user, named by user, host and job, and
// gone once the last reader has loaded it (or when the writer exits); readers
// wait for the writer, time out with the file's name, ignore a file left by
// a dead writer; the inherited set stays each process's own. Several
// "processes" are topology::load() calls in this process or in forked
// children. No test measures time; the waits are bounded by short timeouts.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>
#include "weft/base/topology.hpp"

namespace {

using weft::base::cpu_info;
using weft::base::topology;
using share = topology::host_share;

// A job id no other test (or test run) uses.
std::string fresh_job(const char* what) {
  static int counter = 0;
  return std::string("test-") + what + "-" + std::to_string(getpid()) + "-" +
         std::to_string(++counter);
}

bool exists(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Everything get() would compute from the machine, as one comparable text.
std::string summary(const topology& t) {
  std::string s = std::to_string(t.packages()) + "/" + std::to_string(t.numa_nodes()) + "/" +
                  std::to_string(t.l3_caches()) + "/" + std::to_string(t.cores()) + "/" +
                  std::to_string(t.hardware_threads()) + ":";
  for (const cpu_info& c : t.allowed())
    s += " " + std::to_string(c.os_index) + "," + std::to_string(c.logical_index) + "," +
         std::to_string(c.core) + "," + std::to_string(c.package) + "," + std::to_string(c.numa) +
         "," + std::to_string(c.l3);
  return s + "\n" + t.describe();
}

// A pid that certainly belonged to a process that is gone: a child that
// exited and was reaped.
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  chmod(path.c_str(), 0600);
}

// Waits for a forked child; true if it exited with code 0.
#if defined(__SANITIZE_THREAD__)
constexpr bool under_thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool under_thread_sanitizer = true;
#else
constexpr bool under_thread_sanitizer = false;
#endif
#else
constexpr bool under_thread_sanitizer = false;
#endif

::testing::AssertionResult child_ok(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return ::testing::AssertionFailure() << "waitpid failed";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ::testing::AssertionSuccess();
  if (WIFEXITED(status))
    return ::testing::AssertionFailure() << "the child exited with " << WEXITSTATUS(status);
  return ::testing::AssertionFailure() << "the child was killed by signal " << WTERMSIG(status);
}

TEST(TopologyShare, FileIsNamedByUserHostAndJob) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const std::string file = topology::shared_file("1234@5/x");
  EXPECT_TRUE(contains(file, "/weft-topo-" + std::to_string(geteuid()) + "-")) << file;
  EXPECT_TRUE(contains(file, "@1234_5_x.xml")) << file;  // no '/' or '@' from the job id
  struct stat st{};
  if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0) {
    EXPECT_EQ(file.rfind("/dev/shm/", 0), 0u) << file;
  }
  // Host names are sanitised the same way; a plain one appears as it is.
  bool plain = *host != '\0';
  for (const char* p = host; *p; ++p)
    plain = plain && (std::isalnum(static_cast<unsigned char>(*p)) || *p == '-');
  if (plain) {
    EXPECT_TRUE(contains(file, std::string("-") + host + "@")) << file;
  }
  // A job id too long for a file name is hashed.
  EXPECT_LT(topology::shared_file(std::string(400, 'j')).size(), 255u + 64u);
}

TEST(TopologyShare, OneProcessDiscoversAndWritesNothing) {
  const std::string job = fresh_job("one");
  EXPECT_EQ(topology::load(nullptr)->origin(), "discovered");
  share one{job, 0, 1, 5};
  EXPECT_EQ(topology::load(&one)->origin(), "discovered");
  share unknown{job, 0, 0, 5};  // the launcher does not say
  EXPECT_EQ(topology::load(&unknown)->origin(), "discovered");
  EXPECT_FALSE(exists(topology::shared_file(job)));
}

TEST(TopologyShare, RoundTripGivesTheSameMachine) {
  const std::string job = fresh_job("roundtrip");
  const std::string file = topology::shared_file(job);
  share writer{job, 0, 2, 10}, reader{job, 1, 2, 10};

  std::unique_ptr<topology> w = topology::load(&writer);
  EXPECT_TRUE(contains(w->origin(), "discovered and shared through " + file)) << w->origin();
  EXPECT_TRUE(contains(w->origin(), "1 other process on this host")) << w->origin();
  struct stat st{};
  ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());

  std::unique_ptr<topology> r = topology::load(&reader);
  EXPECT_EQ(r->origin(), "loaded from " + file + " (discovered by local rank 0)");
  EXPECT_FALSE(exists(file)) << "the last reader removes the file";

  const std::string own = summary(*topology::load(nullptr));
  EXPECT_EQ(summary(*w), own);
  EXPECT_EQ(summary(*r), own);
  // Placement, the use the rest of weft makes of it, agrees too.
  const int n = int(r->allowed().size()) + 1;
  EXPECT_EQ(r->place(n, "compact"), topology::load(nullptr)->place(n, "compact"));
  EXPECT_EQ(r->place(n, "scatter"), topology::load(nullptr)->place(n, "scatter"));
}

TEST(TopologyShare, OnlyTheLastReaderRemovesTheFile) {
  const std::string job = fresh_job("last");
  const std::string file = topology::shared_file(job);
  share writer{job, 0, 3, 10}, first{job, 1, 3, 10}, second{job, 2, 3, 10};
  std::unique_ptr<topology> w = topology::load(&writer);
  std::unique_ptr<topology> a = topology::load(&first);
  EXPECT_TRUE(exists(file)) << "one reader of two has loaded it";
  std::unique_ptr<topology> b = topology::load(&second);
  EXPECT_FALSE(exists(file));
  EXPECT_EQ(a->origin(), b->origin());
}

// Readers started before the writer wait for its file; one of them runs on
// a single CPU and still sees just that CPU as its inherited set.
TEST(TopologyShare, ReadersWaitForTheWriterAndKeepTheirOwnCpuSet) {
  const std::string job = fresh_job("wait");
  const std::string file = topology::shared_file(job);
  const std::string machine = summary(*topology::load(nullptr));
  const std::vector<cpu_info> all = topology::load(nullptr)->allowed();
  ASSERT_FALSE(all.empty());
  const int last_cpu = all.back().os_index;
  const int threads = topology::load(nullptr)->hardware_threads();

  std::vector<pid_t> readers;
  for (int rank = 1; rank <= 2; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (rank == 2) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(last_cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(10);
      }
      share me{job, rank, 3, 30};
      std::unique_ptr<topology> t = topology::load(&me);
      if (t->origin() != "loaded from " + file + " (discovered by local rank 0)") _exit(11);
      if (rank == 1 && summary(*t) != machine) _exit(12);
      // The machine is the whole one; the inherited set is this process's
      // (the union over its threads: under ThreadSanitizer the child also
      // has the sanitizer's own thread, unpinned, so only the machine is
      // checked there).
      if (rank == 2 && t->hardware_threads() != threads) _exit(13);
      if (rank == 2 && !under_thread_sanitizer &&
          (t->allowed().size() != 1 || t->allowed()[0].os_index != last_cpu))
        _exit(14);
      _exit(0);
    }
    readers.push_back(pid);
  }
  share writer{job, 0, 3, 30};
  std::unique_ptr<topology> w = topology::load(&writer);
  for (pid_t pid : readers) EXPECT_TRUE(child_ok(pid));
  EXPECT_FALSE(exists(file));
}

TEST(TopologyShareDeathTest, ReaderWithoutWriterTimesOutNamingTheFile) {
  const std::string job = fresh_job("timeout");
  share reader{job, 1, 2, 0.2};
  EXPECT_EXIT(topology::load(&reader), ::testing::ExitedWithCode(3),
              "topology: .*weft-topo-.*did not appear within 0.2 s \\(--weft:startup-timeout\\)");
}

TEST(TopologyShareDeathTest, FileOfADeadWriterIsNotTaken) {
  const std::string job = fresh_job("stale");
  const std::string file = topology::shared_file(job);
  const pid_t gone = dead_pid();
  // A whole file, as a job whose local rank 0 died would have left it.
  std::unique_ptr<topology> source;
  {
    share w{job, 0, 2, 10}, r{job, 1, 2, 10};
    source = topology::load(&w);
    ASSERT_TRUE(exists(file));
    std::ifstream in(file, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t nl = content.find('\n');
    ASSERT_NE(nl, std::string::npos);
    const std::string header = content.substr(0, nl);
    const std::size_t bytes_at = header.rfind(' ');
    content =
        "weft-topology 1 " + std::to_string(gone) + header.substr(bytes_at) + content.substr(nl);
    topology::load(&r);  // removes the writer's file
    write_file(file, content);
  }
  share reader{job, 1, 2, 0.3};
  // The reader names the stale file's writer when it saw the file; another
  // weft process starting meanwhile (ctest -j) may sweep the file of a dead
  // writer away first, and then the reader only times out. Either way the
  // file is not taken.
  EXPECT_EXIT(topology::load(&reader), ::testing::ExitedWithCode(3),
              "did not appear within 0.3 s.*(left by process " + std::to_string(gone) +
                  ", which is gone|did it start\\?)");
  // This job's own local rank 0 replaces it, and then the reader takes it.
  share writer{job, 0, 2, 10}, reader2{job, 1, 2, 10};
  std::unique_ptr<topology> w = topology::load(&writer);
  EXPECT_EQ(topology::load(&reader2)->origin(),
            "loaded from " + file + " (discovered by local rank 0)");
  EXPECT_FALSE(exists(file));
}

TEST(TopologyShareDeathTest, FileOfAnotherFormatIsNotTaken) {
  const std::string job = fresh_job("format");
  const std::string file = topology::shared_file(job);
  write_file(file, "weft-topology 99 1 5\n<xml>");
  share reader{job, 1, 2, 0.3};
  EXPECT_EXIT(topology::load(&reader), ::testing::ExitedWithCode(3),
              "did not appear within 0.3 s.*not a topology file of this weft version");
  share writer{job, 0, 2, 10}, reader2{job, 1, 2, 10};
  std::unique_ptr<topology> w = topology::load(&writer);
  EXPECT_EQ(topology::load(&reader2)->origin(),
            "loaded from " + file + " (discovered by local rank 0)");
  EXPECT_FALSE(exists(file));
}

TEST(TopologyShare, WriterRemovesFilesOfDeadWriters) {
  const std::string dead_job = fresh_job("dead"), live_job = fresh_job("live");
  const std::string dead_file = topology::shared_file(dead_job);
  const std::string gone = std::to_string(dead_pid());
  write_file(dead_file, "weft-topology 1 " + gone + " 6\n<xml>" + std::string(1, '\0'));
  const std::string dead_tmp = topology::shared_file(fresh_job("dead-tmp")) + ".tmp." + gone;
  write_file(dead_tmp, "weft-top");
  // A file whose writer runs (this process) is left alone.
  const std::string live_file = topology::shared_file(live_job);
  write_file(live_file,
             "weft-topology 1 " + std::to_string(getpid()) + " 6\n<xml>" + std::string(1, '\0'));
  // Neither is a file without a writer's pid (of some other program).
  const std::string odd_file = topology::shared_file(fresh_job("odd"));
  write_file(odd_file, "something else\n");

  const std::string job = fresh_job("sweeper");
  share writer{job, 0, 2, 10}, reader{job, 1, 2, 10};
  std::unique_ptr<topology> w = topology::load(&writer);
  std::unique_ptr<topology> r = topology::load(&reader);
  EXPECT_FALSE(exists(dead_file));
  EXPECT_FALSE(exists(dead_tmp));
  EXPECT_TRUE(exists(live_file));
  EXPECT_TRUE(exists(odd_file));
  unlink(live_file.c_str());
  unlink(odd_file.c_str());
}

// A writer whose readers never come removes the file when it exits (after
// waiting for them as long as they would wait for it).
TEST(TopologyShare, WriterRemovesItsFileAtExit) {
  const std::string job = fresh_job("exit");
  const std::string file = topology::shared_file(job);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    share writer{job, 0, 2, 0.2};
    topology::load(&writer).reset();
    std::exit(exists(file) ? 0 : 20);
  }
  EXPECT_TRUE(child_ok(pid));
  EXPECT_FALSE(exists(file));
}

// A child forked from the writer (which exits normally) does not take the
// file away from readers still to come.
TEST(TopologyShare, ForkedChildOfTheWriterLeavesTheFile) {
  const std::string job = fresh_job("fork");
  const std::string file = topology::shared_file(job);
  share writer{job, 0, 2, 30}, reader{job, 1, 2, 30};
  std::unique_ptr<topology> w = topology::load(&writer);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) std::exit(0);
  EXPECT_TRUE(child_ok(pid));
  EXPECT_TRUE(exists(file));
  topology::load(&reader);
  EXPECT_FALSE(exists(file));
}

TEST(TopologyShare, HwlocEnvironmentKeepsEachProcessOnItsOwn) {
  const std::string job = fresh_job("synthetic");
  ASSERT_EQ(setenv("HWLOC_SYNTHETIC", "pack:2 core:2 pu:1", 1), 0);
  share reader{job, 1, 2, 0.1};  // would time out if it waited
  std::unique_ptr<topology> t = topology::load(&reader);
  unsetenv("HWLOC_SYNTHETIC");
  EXPECT_EQ(t->origin(), "discovered");
  EXPECT_EQ(t->packages(), 2);
  EXPECT_EQ(t->hardware_threads(), 4);
}

TEST(TopologyShare, SharingIsSetUpOnlyBeforeTheFirstGet) {
  const std::string job = fresh_job("get");
  EXPECT_FALSE(topology::share_per_host({job, 1, 1, 1}));  // one process on the host
  topology::get();
  EXPECT_FALSE(topology::share_per_host({job, 1, 2, 1}));
  EXPECT_EQ(topology::get().origin(), "discovered");
}

// Two "hosts" in separate UTS namespaces on one kernel share /dev/shm and
// the job id (tests/net/two_hosts.sh): their files must differ.
TEST(TopologyShare, HostsInSeparateUtsNamespacesUseSeparateFiles) {
  const std::string job = fresh_job("uts");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    if (unshare(CLONE_NEWUTS) != 0) _exit(77);
    const char name[] = "weft-test-other-host";
    if (sethostname(name, sizeof name - 1) != 0) _exit(77);
    const std::string file = topology::shared_file(job);
    if (write(fds[1], file.data(), file.size()) != ssize_t(file.size())) _exit(21);
    _exit(0);
  }
  close(fds[1]);
  char buf[512] = {};
  const ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no permission for a UTS namespace";
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::string other(buf, std::size_t(std::max<ssize_t>(n, 0)));
  EXPECT_TRUE(contains(other, "-weft-test-other-host@")) << other;
  EXPECT_NE(other, topology::shared_file(job));
}

}  // namespace
