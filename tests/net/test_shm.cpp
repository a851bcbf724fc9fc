// Tests of the shm transport: each test forks the processes of one job (as
// mpirun would start them: OMPI_COMM_WORLD_* and a PMIx namespace in the
// environment), runs a scenario in every child, and checks the exit codes and
// that nothing is left in /dev/shm. A child reports a failed check on stderr
// and exits 1; every wait, in the children and in the parent, has a bound.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "net/shm/shm.hpp"
#include "test_scale.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/memory.hpp"
#include "weft/base/timer.hpp"
#include "weft/net/transport.hpp"

namespace {

using weft::net::shm_options;
using weft::net::transport;

// ------------------------------------------------------------ in a child

int g_rank = 0;
int g_size = 1;
std::uint64_t g_deadline = 0;  // wall_ns() after which a child gives up
int g_lost_exit = 42;          // exit code of node_lost, when a test expects it
int g_expected_lost = -1;      // the node whose loss is expected (-1: none)

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[node %d of %d] check failed: %s\n", g_rank, g_size, msg);
  std::fflush(stderr);
  _exit(1);
}

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

void check_deadline(const char* what) {
  if (weft::base::wall_ns() > g_deadline) fail("timed out while %s", what);
}

// What the hooks saw.
struct message {
  int src;
  std::vector<unsigned char> bytes;
};
std::vector<message>* g_inbox = nullptr;  // when set, deliver stores here
void (*g_on_deliver)(int, const unsigned char*, std::size_t) = nullptr;
long g_delivered = 0;
long g_released = 0;
bool g_in_init = false;

void* hook_alloc(std::size_t bytes) {
  void* p = std::aligned_alloc(16, (bytes + 15) / 16 * 16 + 16);
  if (p == nullptr) fail("out of memory for %zu bytes", bytes);
  return p;
}
void hook_deliver(int src, void* buffer, std::size_t bytes) {
  if (g_in_init) fail("a message from node %d was delivered before init() returned", src);
  if ((reinterpret_cast<std::uintptr_t>(buffer) & 15) != 0) fail("unaligned delivery");
  ++g_delivered;
  auto* b = static_cast<unsigned char*>(buffer);
  if (g_on_deliver != nullptr) g_on_deliver(src, b, bytes);
  if (g_inbox != nullptr)
    g_inbox->push_back(message{src, std::vector<unsigned char>(b, b + bytes)});
  std::free(buffer);
}
// The transport's message pool, when a test writes messages there.
weft::base::registered_memory* g_pool = nullptr;
void hook_release(void* buffer) {
  ++g_released;
  if (g_pool != nullptr && g_pool->contains(buffer))
    g_pool->deallocate(buffer);
  else
    std::free(buffer);
}
void hook_node_lost(int node, const char* why) {
  std::fprintf(stderr, "[node %d] node_lost(%d): %s\n", g_rank, node, why);
  // The expected node, or another that has ended because it saw that loss
  // first (exits 44, a loss too, but not the first one).
  _exit(node == g_expected_lost ? g_lost_exit : node != g_rank ? 44 : 43);
}

weft::net::hooks test_hooks() {
  weft::net::hooks h;
  h.alloc = hook_alloc;
  h.deliver = hook_deliver;
  h.release = hook_release;
  h.node_lost = hook_node_lost;
  return h;
}

// A numbered test message: a header, then bytes that depend on all of it.
struct msg_header {
  std::uint32_t src, dst;
  std::uint64_t seq, bytes;
};
unsigned char pattern(const msg_header& h, std::size_t i) {
  return static_cast<unsigned char>(h.seq * 131 + i * 7 + h.src * 29 + h.dst);
}
void* make_message(int dst, std::uint64_t seq, std::size_t bytes) {
  if (bytes < sizeof(msg_header)) bytes = sizeof(msg_header);
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(16, (bytes + 15) / 16 * 16));
  msg_header h{std::uint32_t(g_rank), std::uint32_t(dst), seq, bytes};
  std::memcpy(p, &h, sizeof h);
  for (std::size_t i = sizeof h; i < bytes; ++i) p[i] = pattern(h, i);
  return p;
}
// Checks a delivered numbered message from `src`; returns its sequence number.
std::uint64_t check_message(int src, const unsigned char* b, std::size_t bytes) {
  CHECK(bytes >= sizeof(msg_header), "message of %zu bytes from %d", bytes, src);
  msg_header h;
  std::memcpy(&h, b, sizeof h);
  CHECK(int(h.src) == src && int(h.dst) == g_rank && h.bytes == bytes,
        "header says %u->%u %llu bytes, delivered %d->%d %zu bytes", h.src, h.dst,
        static_cast<unsigned long long>(h.bytes), src, g_rank, bytes);
  for (std::size_t i = sizeof h; i < bytes; ++i)
    if (b[i] != pattern(h, i))
      fail("message %llu from %d (%zu bytes): byte %zu is wrong",
           static_cast<unsigned long long>(h.seq), src, bytes, i);
  return h.seq;
}

// One step of a polling loop: progress, and sleep briefly when idle (the
// machine may have fewer cores than the job has processes).
int pump(transport& t) {
  int n = t.progress();
  if (n == 0) t.wait_for_incoming(20'000'000);
  return n;
}

std::unique_ptr<transport> start(const shm_options& o, double startup_timeout_s = 30,
                                 const weft::net::hooks& h = test_hooks()) {
  weft::net::launch_info l = weft::net::launch_from_environment();
  g_rank = l.rank;
  g_size = l.size;
  auto t = weft::net::make_shm_transport(o);
  g_in_init = true;
  t->init(l, h, startup_timeout_s);
  g_in_init = false;
  CHECK(t->node_rank() == l.rank && t->num_nodes() == l.size, "rank %d of %d after init",
        t->node_rank(), t->num_nodes());
  return t;
}

// ------------------------------------------------------------ in the parent

int g_job_counter = 0;

// Shared between the parent and its children (an anonymous shared mapping
// made before fork): flags and counters for the scenarios.
struct shared_area {
  std::atomic<int> running[8];
  std::atomic<int> arrivals[128];
};

struct child_result {
  int status = -1;  // waitpid status
  std::string err;  // the child's stderr
};

std::string leftover_segments(const std::string& id) {
  std::string prefix = weft::net::shm_segment_name(id, 0);
  prefix = prefix.substr(1, prefix.size() - 2);  // no '/', no rank
  std::string found;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        found += std::string(e->d_name) + " ";
    closedir(d);
  }
  return found;
}

// Forks node `r` of a job of `size` for each r in `ranks`, runs body(r, shared)
// in each (exit 0 when it returns), and waits at most `timeout_s` for all;
// `on_running` runs in the parent while they run.
std::vector<child_result> run_job(
    int size, const std::vector<int>& ranks, const std::function<void(int, shared_area*)>& body,
    double timeout_s = 120, int local_size = -1,
    const std::function<void(std::vector<pid_t>&, shared_area*)>& on_running = nullptr) {
  const std::string id =
      "gtest-shm." + std::to_string(getpid()) + "." + std::to_string(++g_job_counter);
  void* m =
      mmap(nullptr, sizeof(shared_area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(m, MAP_FAILED);
  auto* shared = new (m) shared_area{};
  std::vector<pid_t> pids;
  std::vector<int> errfds;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r : ranks) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      dup2(fds[1], STDERR_FILENO);
      close(fds[1]);
      setenv("OMPI_COMM_WORLD_RANK", std::to_string(r).c_str(), 1);
      setenv("OMPI_COMM_WORLD_SIZE", std::to_string(size).c_str(), 1);
      setenv("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("OMPI_COMM_WORLD_LOCAL_SIZE",
             std::to_string(local_size > 0 ? local_size : size).c_str(), 1);
      setenv("PMIX_NAMESPACE", id.c_str(), 1);
      g_rank = r;
      g_size = size;
      g_deadline = weft::base::wall_ns() + std::uint64_t(timeout_s * 0.8e9);
      body(r, shared);
      std::fflush(stdout);
      _exit(0);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    pids.push_back(pid);
    errfds.push_back(fds[0]);
  }
  std::vector<child_result> res(pids.size());
  if (on_running) on_running(pids, shared);
  const std::uint64_t deadline = weft::base::wall_ns() + std::uint64_t(timeout_s * 1e9);
  std::size_t left = pids.size();
  bool timed_out = false;
  std::vector<bool> done(pids.size(), false);
  auto read_err = [&](std::size_t i) {
    char buf[4096];
    ssize_t n;
    while ((n = read(errfds[i], buf, sizeof buf)) > 0) res[i].err.append(buf, std::size_t(n));
  };
  while (left > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      read_err(i);
      if (done[i]) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        res[i].status = st;
        done[i] = true;
        --left;
      }
    }
    if (left > 0 && weft::base::wall_ns() > deadline && !timed_out) {
      timed_out = true;
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) kill(pids[i], SIGKILL);
    }
    if (left > 0) usleep(2000);
  }
  for (std::size_t i = 0; i < pids.size(); ++i) {
    read_err(i);
    close(errfds[i]);
  }
  EXPECT_FALSE(timed_out) << "the job did not end within " << timeout_s << " s";
  // Children end with _exit, so a ThreadSanitizer report does not change
  // their exit code: look for one.
  for (std::size_t i = 0; i < res.size(); ++i)
    EXPECT_EQ(res[i].err.find("Sanitizer"), std::string::npos)
        << "node " << ranks[i] << ": " << res[i].err;
  munmap(m, sizeof(shared_area));
  EXPECT_EQ(leftover_segments(id), "") << "segments left in /dev/shm";
  return res;
}

std::vector<int> all_ranks(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

std::string describe(const child_result& r) {
  char buf[64];
  if (WIFEXITED(r.status))
    std::snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(r.status));
  else if (WIFSIGNALED(r.status))
    std::snprintf(buf, sizeof buf, "signal %d", WTERMSIG(r.status));
  else
    std::snprintf(buf, sizeof buf, "status %d", r.status);
  return std::string(buf) + "; stderr: " + r.err;
}

void expect_exit(const child_result& r, int code, int node) {
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == code)
      << "node " << node << ": expected exit " << code << ", got " << describe(r);
}

void expect_all_ok(const std::vector<child_result>& res) {
  for (std::size_t i = 0; i < res.size(); ++i) expect_exit(res[i], 0, int(i));
}

// ------------------------------------------------------------ scenarios

TEST(ShmTransport, PingPong) {
  auto res = run_job(2, all_ranks(2), [](int rank, shared_area*) {
    std::vector<message> inbox;
    g_inbox = &inbox;
    auto t = start(shm_options{});
    const int rounds = int(weft_test::scaled(5000, 1000));
    for (int i = 0; i < rounds; ++i) {
      const std::size_t bytes = i % 3 == 0 ? 8 : i % 3 == 1 ? 64 : 1000;
      if (rank == 0) {
        auto* p = static_cast<unsigned char*>(std::aligned_alloc(16, 1008));
        std::memset(p, i & 0xff, bytes);
        t->send(1, p, bytes);
      }
      while (inbox.empty()) {
        pump(*t);
        check_deadline("waiting for the ball");
      }
      message m = std::move(inbox.front());
      inbox.clear();
      CHECK(m.src == 1 - rank && m.bytes.size() == bytes, "round %d: %zu bytes from %d", i,
            m.bytes.size(), m.src);
      for (unsigned char c : m.bytes) CHECK(c == (i & 0xff), "round %d: wrong content", i);
      if (rank == 1) {
        auto* p = static_cast<unsigned char*>(std::aligned_alloc(16, 1008));
        std::memcpy(p, m.bytes.data(), bytes);
        t->send(0, p, bytes);
      }
    }
    t->finalize();
    CHECK(g_released == rounds, "released %ld of %d send buffers", g_released, rounds);
  });
  expect_all_ok(res);
}

// Every node sends `count` numbered messages to every other; each receiver
// checks content, loss, duplication and per-sender order. `sizes` picks the
// size of message i.
struct exchange_state {
  std::vector<std::uint64_t> next;  // expected sequence number per source
  long received = 0;
};
exchange_state* g_ex = nullptr;

void exchange_deliver(int src, const unsigned char* b, std::size_t bytes) {
  const std::uint64_t seq = check_message(src, b, bytes);
  CHECK(seq == g_ex->next[std::size_t(src)], "from node %d: message %llu, expected %llu", src,
        static_cast<unsigned long long>(seq),
        static_cast<unsigned long long>(g_ex->next[std::size_t(src)]));
  ++g_ex->next[std::size_t(src)];
  ++g_ex->received;
}

void exchange(const shm_options& o, long count, std::size_t (*size_of)(long), bool send_all_first) {
  exchange_state ex;
  ex.next.assign(std::size_t(g_size), 0);
  g_ex = &ex;
  g_on_deliver = exchange_deliver;
  auto t = start(o);
  const long expected = count * (g_size - 1);
  long sent = 0;
  // With send_all_first, everything is queued before any progress call (the
  // sender's FIFO path), then finalize must push it all out.
  for (long i = 0; i < count; ++i) {
    for (int k = 1; k < g_size; ++k) {
      const int dst = (g_rank + k) % g_size;
      const std::size_t bytes = size_of(i * 7 + dst);
      t->send(dst, make_message(dst, std::uint64_t(i), bytes), bytes < 24 ? 24 : bytes);
      ++sent;
    }
    if (!send_all_first) {
      t->progress();
      // Bound the memory in flight: at most 512 unreleased sends.
      while (sent - g_released > 512) {
        pump(*t);
        check_deadline("waiting for send buffers");
      }
    }
  }
  if (!send_all_first) {
    while (ex.received < expected || g_released < sent) {
      pump(*t);
      check_deadline("exchanging messages");
    }
  }
  t->finalize();
  CHECK(g_released == sent, "released %ld of %ld send buffers after finalize", g_released, sent);
  CHECK(ex.received == expected, "received %ld of %ld messages", ex.received, expected);
  for (int s = 0; s < g_size; ++s)
    CHECK(s == g_rank || ex.next[std::size_t(s)] == std::uint64_t(count),
          "from node %d: %llu messages", s,
          static_cast<unsigned long long>(ex.next[std::size_t(s)]));
}

std::size_t varied_small(long i) {
  // Mostly eager sizes, and one above the default eager limit (rendezvous).
  static const std::size_t s[] = {24, 40, 100, 256, 1000, 33, 4000, 8, 2048, 64, 7000, 500, 20000};
  return s[std::size_t(i) % (sizeof s / sizeof s[0])];
}

class ShmManyNodes : public ::testing::TestWithParam<int> {};

TEST_P(ShmManyNodes, OrderedExchangeOfManyMessages) {
  const int n = GetParam();
  auto res = run_job(n, all_ranks(n), [](int, shared_area*) {
    exchange(shm_options{}, weft_test::scaled(20000, 10000), varied_small, false);
  });
  expect_all_ok(res);
}

INSTANTIATE_TEST_SUITE_P(Nodes, ShmManyNodes, ::testing::Values(2, 3, 4));

std::size_t small_and_large(long i) {
  static const std::size_t s[] = {24,
                                  std::size_t(1) << 20,
                                  100,
                                  std::size_t(4) << 20,
                                  9000,
                                  16,
                                  (std::size_t(1) << 20) + 48,
                                  3000,
                                  70000,
                                  64};
  return s[std::size_t(i) % (sizeof s / sizeof s[0])];
}

class ShmLarge : public ::testing::TestWithParam<bool> {};

TEST_P(ShmLarge, LargeMessagesMixedWithSmallKeepOrderAndContent) {
  const bool cma = GetParam();
  auto res = run_job(3, all_ranks(3), [cma](int, shared_area*) {
    shm_options o;
    o.allow_cma = cma;
    exchange(o, weft_test::scaled(60, 30), small_and_large, false);
  });
  expect_all_ok(res);
}

INSTANTIATE_TEST_SUITE_P(Cma, ShmLarge, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "cma" : "chunked"; });

class ShmTinyRings : public ::testing::TestWithParam<bool> {};

TEST_P(ShmTinyRings, SenderQueueAndFinalizeDeliverEverything) {
  const bool cma = GetParam();
  auto res = run_job(3, all_ranks(3), [cma](int, shared_area*) {
    shm_options o;
    o.allow_cma = cma;
    o.ring_bytes = 4096;
    o.eager_max = 512;
    exchange(o, weft_test::scaled(1500, 500), varied_small, true);
  });
  expect_all_ok(res);
}

INSTANTIATE_TEST_SUITE_P(Cma, ShmTinyRings, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "cma" : "chunked"; });

// Large messages written in the sender's message pool (message_memory, as
// core's large blocks are) leave as descriptors; the receiver copies them
// out of the mapped pool, in pieces, while small messages keep flowing:
// contents, order and every release checked, and the pool path counted.
TEST(ShmTransport, LargeMessagesFromThePoolAreCopiedOutByTheReceiver) {
  auto res = run_job(3, all_ranks(3), [](int rank, shared_area*) {
    exchange_state ex;
    ex.next.assign(3, 0);
    g_ex = &ex;
    g_on_deliver = exchange_deliver;
    shm_options o;
    auto t = start(o);
    g_pool = t->message_memory();
    CHECK(g_pool != nullptr, "no message pool");
    const long count = long(weft_test::scaled(40, 10));
    auto large = [](long i) { return (std::size_t(300) << 10) + std::size_t(i) * 50000; };
    // The largest message fits the pool (the 32 MiB one holds 8 MiB slots;
    // a /dev/shm short of room shrinks it): else no wait below would end.
    const std::size_t largest = large((count - 1) / 2 * 2);
    if (void* b = g_pool->allocate(largest)) {
      g_pool->deallocate(b);
    } else {
      fail("the message pool has no slot of %zu bytes (shrunk for a small /dev/shm?)", largest);
    }
    long sent = 0;
    for (long i = 0; i < count; ++i)
      for (int k = 1; k < 3; ++k) {
        const int dst = (rank + k) % 3;
        // Alternately a pool message (300 KiB .. 2.1 MiB, growing: the
        // pool's memory serves ever larger slots) and a small one.
        const std::size_t bytes = i % 2 == 0 ? large(i) : 100;
        void* b = nullptr;
        if (i % 2 == 0) {
          // Lent slots come back as the peers copy them out: wait for room
          // (freed slots merge into larger ones, message_pool.hpp).
          while ((b = g_pool->allocate(bytes)) == nullptr) {
            pump(*t);
            check_deadline("waiting for room in the pool");
          }
          void* filled = make_message(dst, std::uint64_t(i), bytes);
          std::memcpy(b, filled, bytes);
          std::free(filled);
        } else {
          b = make_message(dst, std::uint64_t(i), bytes);
        }
        t->send(dst, b, bytes);
        ++sent;
        // Keep the send buffers in flight bounded (a pool message's is
        // released at once: its loan holds the slot until the peer has
        // copied it out, and only the wait for room above bounds those).
        while (sent - g_released > 8) {
          pump(*t);
          check_deadline("waiting for send buffers");
        }
      }
    while (ex.received < 2 * count) {
      pump(*t);
      check_deadline("waiting for the messages");
    }
    const weft::net::shm_counters* c = weft::net::shm_counters_of(*t);
    const long pooled = 2 * ((count + 1) / 2);  // the even-numbered messages, to 2 peers
    CHECK(c != nullptr && c->pooled == std::uint64_t(pooled),
          "%llu messages by the pool, %ld expected",
          static_cast<unsigned long long>(c != nullptr ? c->pooled : 0), pooled);
    t->finalize();
    CHECK(g_released == sent, "released %ld of %ld send buffers", g_released, sent);
  });
  expect_all_ok(res);
}

// Large messages in blocks of the sender's pool, as core makes them
// (base::block_alloc over message_memory), with the deliver_block hook, as
// core has it: each is lent to its receiver, which handles it in place and
// then, by its number, frees it at once, frees it on another thread, sends
// it back to its owner (which gets its own block in place), or keeps it past
// the transport's end. Checked: contents and order, every path counted, the
// pool recycled (many times its size moves through it), and the kept blocks
// freed safely after teardown.
namespace lend {
std::unique_ptr<transport>* t = nullptr;
std::vector<std::uint64_t> next;  // expected seq per source
long received = 0, came_back = 0;
std::vector<void*> kept;
std::mutex mutex;  // the other thread's frees
std::vector<void*> to_free;
std::atomic<long> freed_elsewhere{0};

void release(void* buffer) {
  ++g_released;
  weft::base::block_free(buffer, weft::base::block_registered);
}
void deliver(int, void*, std::size_t) {
  fail("a lent message was copied, not delivered in place");
}
void deliver_block(int src, void* buffer, std::size_t bytes) {
  CHECK((reinterpret_cast<std::uintptr_t>(buffer) & 15) == 0, "unaligned block");
  msg_header h;
  std::memcpy(&h, buffer, sizeof h);
  if (int(h.src) == g_rank) {  // one of ours, back from src
    CHECK(int(h.dst) == src && h.seq % 4 == 2, "block %llu of ours came back from %d",
          static_cast<unsigned long long>(h.seq), src);
    const auto* b = static_cast<const unsigned char*>(buffer);
    CHECK(h.bytes == bytes, "returned block of %zu bytes, %llu sent", bytes,
          static_cast<unsigned long long>(h.bytes));
    for (std::size_t i = sizeof h; i < bytes; ++i)
      if (b[i] != pattern(h, i))
        fail("returned block %llu: byte %zu is wrong", static_cast<unsigned long long>(h.seq), i);
    ++came_back;
    weft::base::block_free(buffer, weft::base::block_registered);
    return;
  }
  const std::uint64_t seq = check_message(src, static_cast<unsigned char*>(buffer), bytes);
  CHECK(seq == next[std::size_t(src)], "from node %d: message %llu, expected %llu", src,
        static_cast<unsigned long long>(seq),
        static_cast<unsigned long long>(next[std::size_t(src)]));
  ++next[std::size_t(src)];
  ++received;
  switch (seq % 4) {
    case 0:
      weft::base::block_free(buffer, weft::base::block_registered);
      break;
    case 1: {
      std::lock_guard<std::mutex> lock(mutex);
      to_free.push_back(buffer);
      break;
    }
    case 2:
      (*t)->send(src, buffer, bytes);
      break;
    default:  // a few only: each holds a slot of the sender's pool
      if (kept.size() < 4)
        kept.push_back(buffer);
      else
        weft::base::block_free(buffer, weft::base::block_registered);
      break;
  }
}
}  // namespace lend

TEST(ShmTransport, LargeMessagesAreLentAndHandledInPlace) {
  auto res = run_job(3, all_ranks(3), [](int rank, shared_area*) {
    weft::net::hooks h = test_hooks();
    h.deliver = lend::deliver;
    h.deliver_block = lend::deliver_block;
    h.release = lend::release;
    shm_options o;
    o.pool_bytes = std::size_t(4) << 20;  // 128 KiB slots: 32 of them
    auto t = start(o, 30, h);
    lend::t = &t;
    lend::next.assign(3, 0);
    weft::base::set_registered_memory(t->message_memory());
    std::atomic<bool> stop{false};
    std::thread other([&] {
      while (!stop.load()) {
        std::vector<void*> batch;
        {
          std::lock_guard<std::mutex> lock(lend::mutex);
          batch.swap(lend::to_free);
        }
        for (void* b : batch) weft::base::block_free(b, weft::base::block_registered);
        lend::freed_elsewhere += long(batch.size());
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    const long count = long(weft_test::scaled(400, 60));  // 50 MiB per peer: the pool 12x over
    long returned_expected = 0;
    for (long i = 0; i < count; ++i)
      for (int k = 1; k < 3; ++k) {
        const int dst = (rank + k) % 3;
        const std::size_t bytes = std::size_t(64) << 10;
        std::uint8_t cls = 0;
        void* b = nullptr;
        // A full pool would send by another path: wait for loans to end.
        for (;;) {
          b = weft::base::block_alloc(bytes, cls);
          if (cls == weft::base::block_registered) break;
          weft::base::block_free(b, cls);
          pump(*t);
          check_deadline("waiting for lent blocks to come back");
        }
        void* filled = make_message(dst, std::uint64_t(i), bytes);
        std::memcpy(b, filled, bytes);
        std::free(filled);
        t->send(dst, b, bytes);
        if (i % 4 == 2) ++returned_expected;
        t->progress();
      }
    while (lend::received < 2 * count || lend::came_back < returned_expected) {
      pump(*t);
      check_deadline("exchanging lent blocks");
    }
    stop = true;
    other.join();
    for (void* b : lend::to_free) weft::base::block_free(b, weft::base::block_registered);
    const weft::net::shm_counters* c = weft::net::shm_counters_of(*t);
    CHECK(c->pooled == std::uint64_t(2 * count), "%llu messages lent, %ld expected",
          static_cast<unsigned long long>(c->pooled), 2 * count);
    CHECK(c->in_place == std::uint64_t(2 * count), "%llu handled in place, %ld expected",
          static_cast<unsigned long long>(c->in_place), 2 * count);
    CHECK(c->returned == std::uint64_t(returned_expected), "%llu sent back, %ld expected",
          static_cast<unsigned long long>(c->returned), returned_expected);
    CHECK(lend::freed_elsewhere > 0, "no block was freed on the other thread");
    t->finalize();
    weft::base::set_registered_memory(nullptr);
    t.reset();
    // The peers' pools stay mapped for what we kept; reading and freeing it
    // now is safe, and the last free unmaps them.
    CHECK(!lend::kept.empty(), "nothing was kept");
    for (void* b : lend::kept) {
      msg_header mh;
      std::memcpy(&mh, b, sizeof mh);
      CHECK(int(mh.dst) == rank && mh.seq % 4 == 3, "a kept block changed after teardown");
      weft::base::block_free(b, weft::base::block_registered);
    }
  });
  expect_all_ok(res);
}

// The pages of this process's mapping of the segment of node `node` that
// /proc/self/pagemap shows present (mapped in the page tables), and how
// many pages the mapping has. Segment names end in "-<node>"; mapped after
// init they are unlinked, and /proc/self/maps says "(deleted)".
struct mapping_pages {
  long present = 0, total = 0;
};
mapping_pages segment_pages(int node) {
  mapping_pages r;
  const std::string suffix = "-" + std::to_string(node);
  FILE* maps = std::fopen("/proc/self/maps", "r");
  int pagemap = open("/proc/self/pagemap", O_RDONLY);
  if (maps == nullptr || pagemap == -1) {
    if (maps != nullptr) std::fclose(maps);
    if (pagemap != -1) close(pagemap);
    return r;
  }
  const long page = sysconf(_SC_PAGESIZE);
  char line[512];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    std::string l(line);
    const std::size_t at = l.find("/dev/shm/weft-");
    if (at == std::string::npos) continue;
    std::string name = l.substr(at);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    const std::string deleted = " (deleted)";
    if (name.size() > deleted.size() &&
        name.compare(name.size() - deleted.size(), deleted.size(), deleted) == 0)
      name.resize(name.size() - deleted.size());
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line, "%lx-%lx", &begin, &end) != 2) continue;
    for (unsigned long a = begin; a < end; a += (unsigned long)page) {
      std::uint64_t entry = 0;
      if (pread(pagemap, &entry, sizeof entry, off_t(a / (unsigned long)page * 8)) != 8) continue;
      ++r.total;
      if ((entry >> 63) & 1) ++r.present;
    }
  }
  std::fclose(maps);
  close(pagemap);
  return r;
}

// Whether this kernel has MADV_POPULATE_WRITE (5.14 and later); without it
// the transport's rings fault in page by page, as documented.
bool kernel_can_populate() {
  const long page = sysconf(_SC_PAGESIZE);
  void* m =
      mmap(nullptr, std::size_t(page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const bool ok = madvise(m, std::size_t(page), MADV_POPULATE_WRITE) == 0;
  munmap(m, std::size_t(page));
  return ok;
}

// The rings' pages are in the page tables before the first message (init
// populates them), so the first lap of a ring takes no page fault every
// 4 KiB: all of the own segment (every ring this process reads), and of the
// peer's segment at least a ring's worth (the one this process writes).
TEST(ShmTransport, RingsAreMappedInAtStartup) {
  if (!kernel_can_populate()) GTEST_SKIP() << "no MADV_POPULATE_WRITE on this kernel";
  constexpr std::size_t ring = std::size_t(256) << 10;
  auto res = run_job(2, all_ranks(2), [](int rank, shared_area*) {
    shm_options o;
    o.ring_bytes = ring;
    auto t = start(o);
    const mapping_pages own = segment_pages(rank), peer = segment_pages(1 - rank);
    const long ring_pages = long(ring) / sysconf(_SC_PAGESIZE);
    CHECK(own.total > 2 * ring_pages && own.present == own.total,
          "own segment: %ld of %ld pages present", own.present, own.total);
    CHECK(peer.total > 2 * ring_pages && peer.present >= ring_pages && peer.present < peer.total,
          "peer's segment: %ld of %ld pages present, expected its ring of %ld and not all",
          peer.present, peer.total, ring_pages);
    t->barrier();
    t->finalize();
  });
  expect_all_ok(res);
}

TEST(ShmTransport, AllgatherAndBarrier) {
  auto res = run_job(4, all_ranks(4), [](int rank, shared_area* shared) {
    std::vector<message> inbox;
    g_inbox = &inbox;
    auto t = start(shm_options{});
    for (std::size_t bytes : {std::size_t(8), std::size_t(0), std::size_t(10000), std::size_t(3)}) {
      std::vector<unsigned char> mine(bytes), all(bytes * 4 + 1, 0xee);
      for (std::size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(rank * 50 + i);
      t->allgather(mine.data(), bytes, all.data());
      for (int r = 0; r < 4; ++r)
        for (std::size_t i = 0; i < bytes; ++i)
          CHECK(all[std::size_t(r) * bytes + i] == static_cast<unsigned char>(r * 50 + i),
                "allgather of %zu bytes: byte %zu of node %d", bytes, i, r);
      CHECK(all[bytes * 4] == 0xee, "allgather of %zu bytes wrote past the end", bytes);
    }
    // Nobody leaves a barrier before all have arrived.
    for (int it = 0; it < 100; ++it) {
      // Checked before the barrier: nobody sends before leaving the last
      // one, but a node that has left it may send while this one is still
      // inside it, and the message then arrives (seen in CI under load).
      CHECK(inbox.empty(), "a message before any was sent (barrier %d)", it);
      shared->arrivals[it].fetch_add(1);
      t->barrier();
      CHECK(shared->arrivals[it].load() == 4, "barrier %d: left with %d arrivals", it,
            shared->arrivals[it].load());
    }
    // Messages sent before a barrier are delivered while others wait in it.
    for (int k = 1; k < 4; ++k) t->send((rank + k) % 4, make_message((rank + k) % 4, 0, 64), 64);
    t->barrier();
    while (inbox.size() < 3) {
      pump(*t);
      check_deadline("waiting for the messages around the barrier");
    }
    t->finalize();
  });
  expect_all_ok(res);
}

// With full fences on both sides of each doorbell, and (where the kernel
// has it) with a compiler barrier on the ringer and a global membarrier on
// the sleeper (shm_options::allow_membarrier, as core's default wake fence
// turns on).
class ShmWaitForIncoming : public testing::TestWithParam<bool> {};

// Whether thread `tid` of this process sleeps in the kernel now (/proc's
// state S or D: the state follows the last ')' of its stat line).
bool sleeps_in_kernel(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", int(tid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* end = std::strrchr(buf, ')');
  return end != nullptr && end[1] == ' ' && (end[2] == 'S' || end[2] == 'D');
}

TEST_P(ShmWaitForIncoming, IsWokenByMessagesAndWakeWaiter) {
  const bool membarrier = GetParam();
  if (membarrier) {
    if (const char* why = weft::base::enable_asymmetric_fences(); *why != '\0') GTEST_SKIP() << why;
    if (const char* why = weft::base::register_global_membarrier(); *why != '\0')
      GTEST_SKIP() << why;
  } else {
    weft::base::disable_asymmetric_fences();
  }
  auto res = run_job(2, all_ranks(2), [membarrier](int rank, shared_area* shared) {
    shm_options o;
    o.ring_bytes = 4096;  // the sender also sleeps waiting for room
    o.eager_max = 1024;
    o.allow_membarrier = membarrier;
    // (Each process registers for itself: a forked child is a new process.)
    if (membarrier)
      CHECK(*weft::base::enable_asymmetric_fences() == '\0', "membarrier in the child");
    std::vector<message> inbox;
    g_inbox = &inbox;
    auto t = start(o);
    CHECK(weft::net::shm_counters_of(*t)->light_doorbells == membarrier,
          "light doorbells %s, expected %s",
          weft::net::shm_counters_of(*t)->light_doorbells ? "on" : "off",
          membarrier ? "on" : "off");
    constexpr std::uint64_t forever = 3600ull * 1'000'000'000ull;  // a lost wake-up hangs
    if (rank == 0) {
      // wake_waiter before the wait: the wait returns at once.
      t->wake_waiter();
      t->wait_for_incoming(forever);
      // wake_waiter from another thread during the wait: once this thread
      // sleeps in the kernel (on the doorbell), and not before; the wait
      // ends by that wake-up only.
      const pid_t waiter = gettid();
      std::atomic<bool> go{false}, woken{false};
      std::thread waker([&] {
        while (!go.load()) std::this_thread::yield();
        while (!sleeps_in_kernel(waiter)) {
          check_deadline("waiting for the waiter to sleep");
          std::this_thread::yield();
        }
        woken.store(true);
        t->wake_waiter();
      });
      go.store(true);
      t->wait_for_incoming(forever);
      CHECK(woken.load(), "wait_for_incoming returned before wake_waiter was called");
      waker.join();
      shared->running[0].store(1);
    }
    // A message wakes a sleeping receiver, many times over; the sender of a
    // full ring sleeps until the receiver makes room.
    const int rounds = int(weft_test::scaled(300, 100));
    for (int i = 0; i < rounds; ++i) {
      if (rank == 1) {
        if (i == 0)
          while (shared->running[0].load() == 0) check_deadline("waiting for node 0");
        for (int k = 0; k < 8; ++k) t->send(0, make_message(0, std::uint64_t(i), 900), 900);
        while (inbox.empty()) {
          if (t->progress() == 0) t->wait_for_incoming(forever);
        }
        inbox.clear();
      } else {
        while (inbox.size() < 8) {
          if (t->progress() == 0) t->wait_for_incoming(forever);
        }
        inbox.clear();
        t->send(1, make_message(1, std::uint64_t(i), 24), 24);
      }
    }
    t->finalize();
  });
  expect_all_ok(res);
}
INSTANTIATE_TEST_SUITE_P(ShmTransport, ShmWaitForIncoming, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "membarrier" : "full_fences");
                         });

TEST(ShmTransport, KilledPeerIsReportedToEveryOtherNode) {
  const int n = 3;
  auto res = run_job(
      n, all_ranks(n),
      [](int rank, shared_area* shared) {
        g_expected_lost = 2;
        g_on_deliver = [](int, const unsigned char*, std::size_t) {};
        auto t = start(shm_options{});
        shared->running[rank].store(1);
        const std::uint64_t lost_by = weft::base::wall_ns() + 10'000'000'000ull;
        for (long i = 0;; ++i) {
          for (int k = 1; k < g_size; ++k) {
            const int dst = (rank + k) % g_size;
            if (i - g_released < 256) t->send(dst, make_message(dst, std::uint64_t(i), 64), 64);
          }
          pump(*t);
          if (rank != 2 && weft::base::wall_ns() > lost_by) fail("node_lost did not fire in 10 s");
          check_deadline("running until killed");
        }
      },
      60, -1,
      [](std::vector<pid_t>& pids, shared_area* shared) {
        const std::uint64_t until = weft::base::wall_ns() + 30'000'000'000ull;
        for (int r = 0; r < 3; ++r)
          while (shared->running[r].load() == 0 && weft::base::wall_ns() < until) usleep(1000);
        usleep(50'000);
        kill(pids[2], SIGKILL);
      });
  // Each survivor hears of a loss: of node 2, or of the other survivor that
  // ended on hearing of node 2 first (exit 44). At least one hears of node 2.
  int saw_killed = 0;
  for (std::size_t r = 0; r < 2; ++r) {
    const int code = WIFEXITED(res[r].status) ? WEXITSTATUS(res[r].status) : -1;
    EXPECT_TRUE(code == 42 || code == 44) << "node " << r << ": " << describe(res[r]);
    if (code == 42) {
      ++saw_killed;
      EXPECT_NE(res[r].err.find("exited or was killed"), std::string::npos) << res[r].err;
    }
  }
  EXPECT_GE(saw_killed, 1);
  EXPECT_TRUE(WIFSIGNALED(res[2].status) && WTERMSIG(res[2].status) == SIGKILL) << describe(res[2]);
}

TEST(ShmTransport, AbortEndsThePeers) {
  auto res = run_job(2, all_ranks(2), [](int rank, shared_area*) {
    auto t = start(shm_options{});
    g_expected_lost = 1;
    t->barrier();
    if (rank == 1) t->abort(7, "test abort from node 1");
    for (;;) {
      pump(*t);
      check_deadline("waiting for node_lost after an abort");
    }
  });
  // The survivor ends with the aborting node's code, not through node_lost:
  // the job's status is the abort's whichever process its launcher sees end
  // first.
  expect_exit(res[0], 7, 0);
  expect_exit(res[1], 7, 1);
  EXPECT_NE(res[1].err.find("test abort from node 1"), std::string::npos) << res[1].err;
  EXPECT_NE(res[0].err.find("aborted with exit code 7"), std::string::npos) << res[0].err;
}

TEST(ShmTransport, SingleNodeJob) {
  auto res = run_job(1, all_ranks(1), [](int, shared_area*) {
    auto t = start(shm_options{});
    std::uint64_t mine = 0x1234, all = 0;
    t->allgather(&mine, sizeof mine, &all);
    CHECK(all == mine, "allgather of one node");
    t->barrier();
    CHECK(t->progress() == 0, "progress with nothing to do");
    t->wait_for_incoming(1'000'000);
    t->wake_waiter();
    t->wait_for_incoming(3600ull * 1'000'000'000ull);
    t->finalize();
  });
  expect_all_ok(res);
}

TEST(ShmTransport, JobSpanningHostsIsAUsageError) {
  auto res = run_job(
      2, {0},
      [](int, shared_area*) {
        start(shm_options{});
        fail("init accepted a job that spans hosts");
      },
      60, 1);
  expect_exit(res[0], 2, 0);
  EXPECT_NE(res[0].err.find("--weft:transport=mpi"), std::string::npos) << res[0].err;
  EXPECT_NE(res[0].err.find("ucx"), std::string::npos) << res[0].err;
}

TEST(ShmTransport, MissingPeerIsNamedAtStartupTimeout) {
  auto res = run_job(3, {0, 1}, [](int, shared_area*) {
    start(shm_options{}, 1.0);
    fail("init returned without node 2");
  });
  expect_exit(res[0], 3, 0);
  expect_exit(res[1], 3, 1);
  EXPECT_NE(res[0].err.find("node(s) 2"), std::string::npos) << res[0].err;
}

TEST(ShmTransport, StaleSegmentOfAnEarlierJobIsReplaced) {
  // A segment under rank 0's name, as a process that died during startup
  // leaves it (never sized). run_job's next job id is predictable.
  const std::string next =
      "gtest-shm." + std::to_string(getpid()) + "." + std::to_string(g_job_counter + 1);
  const std::string name = weft::net::shm_segment_name(next, 0);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_NE(fd, -1);
  close(fd);
  auto res = run_job(2, all_ranks(2), [](int rank, shared_area*) {
    std::vector<message> inbox;
    g_inbox = &inbox;
    auto t = start(shm_options{});
    t->send(1 - rank, make_message(1 - rank, 0, 100), 100);
    while (inbox.empty()) {
      pump(*t);
      check_deadline("waiting for a message");
    }
    t->finalize();
  });
  expect_all_ok(res);
  EXPECT_NE(res[0].err.find("removing"), std::string::npos) << res[0].err;
}

}  // namespace
