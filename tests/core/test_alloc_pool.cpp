// --weft:alloc and --weft:msg-pool with real traffic: every PE sends
// numbered messages of many sizes (every size class of the pool, and one
// above it) to every PE; each receiver checks the payload, per-sender order,
// no loss and no duplication, and where the message's block came from:
//  - alloc=system: no message lies in mimalloc's memory (mi_is_in_heap_region
//    is false for each; with alloc=mimalloc, the control, it is true);
//  - msg-pool=off: every message is an unpooled block (the header's
//    size_class is base::block_unpooled; with the pool on, the control, it
//    is the size class the size calls for), and a block freed on one PE is
//    not handed out again by that PE's next allocation, as the pool does.
// weft::config() and base::selected_allocator() must say the same.
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include "core/support.hpp"
#include "weft/base/memory.hpp"
#include "weft/config.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;
using weft_test::run_node;
using weft_test::scaled;
using weft_test::threads_opt;

// Under ThreadSanitizer the build keeps to the system allocator: mimalloc's
// own atomics are not instrumented, so its blocks moving between threads
// look like races (CMakeLists.txt). The mimalloc runs are skipped there.
bool thread_sanitized() {
  return std::string(weft::build_info::sanitizer) == "thread";
}

// Payload sizes: each size class of the pool (total block 128 B .. 128 KiB)
// is met, and the last is above the largest class (never pooled).
constexpr std::size_t sizes[] = {8, 90, 200, 400, 1000, 2000, 4000, 8000, 16000,
                                 32000, 64000, 131000, 140000};
constexpr int num_sizes = int(sizeof sizes / sizeof sizes[0]);

// The size class a block of `total` bytes gets from the pool (128 B << c),
// or block_unpooled above the largest (weft/base/memory.hpp).
std::uint8_t pooled_class(std::size_t total) {
  for (std::uint8_t c = 0; (weft::base::block_min << c) <= weft::base::block_max; ++c)
    if ((weft::base::block_min << c) >= total) return c;
  return weft::base::block_unpooled;
}

struct head {
  std::int32_t src;
  std::uint32_t seq;
};

std::uint8_t byte_of(std::int32_t src, std::uint32_t seq, std::size_t i) {
  return std::uint8_t((std::uint32_t(src) * 131u + seq * 7u + std::uint32_t(i) * 13u) ^ 0x5a);
}

struct expect {
  bool system = false;  // blocks from the system allocator (else mimalloc)
  bool pool = true;     // blocks from the size-class lists
};

struct alignas(64) pe_row {
  std::vector<std::uint32_t> next_seq;  // per source PE; written by the owning PE only
};

struct traffic_state {
  int n = 0;
  long per_pair = 0;
  expect want;
  std::vector<std::unique_ptr<pe_row>> rows;
  std::atomic<long> received{0};
  std::atomic<long> checked_place{0};  // messages whose block origin was checked
};
traffic_state* g_t = nullptr;

void on_traffic(weft::message_ptr m);
void on_kick(weft::message_ptr m);
const weft::handler_id h_traffic = weft::register_handler("alloc_pool.traffic", on_traffic);
const weft::handler_id h_kick = weft::register_handler("alloc_pool.kick", on_kick);

void check_config(const expect& want) {
  const weft::runtime_config& c = weft::config();
  if ((c.alloc == weft::alloc_kind::system) != want.system)
    record_error(std::string("weft::config().alloc is ") + weft::to_string(c.alloc));
  if (c.msg_pool != want.pool) record_error("weft::config().msg_pool is wrong");
  const bool sys = weft::base::selected_allocator() == weft::base::raw_allocator::system;
  if (sys != want.system) record_error("base::selected_allocator() is wrong");
}

void check_block(const weft::message& m, const expect& want) {
  const std::size_t total = sizeof(weft::message) + m.size;
  const std::uint8_t cls = want.pool ? pooled_class(total) : weft::base::block_unpooled;
  if (m.size_class != cls)
    record_error("a message of " + std::to_string(m.size) + " bytes has size class " +
                 std::to_string(m.size_class) + ", expected " + std::to_string(cls));
  // Under AddressSanitizer mimalloc's heap-region lookup does not find
  // mimalloc's own blocks (it answers false for every message), so where a
  // block lies is checked in the builds without it (build/full, build/tsan
  // for alloc=system); the size class and the configuration are checked in all.
  if (std::string(weft::build_info::sanitizer) == "address") {
    g_t->checked_place.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const bool in_mimalloc = mi_is_in_heap_region(&m);
  if (in_mimalloc == want.system)
    record_error(std::string("a message of ") + std::to_string(m.size) + " bytes is " +
                 (in_mimalloc ? "" : "not ") + "in mimalloc's memory");
  g_t->checked_place.fetch_add(1, std::memory_order_relaxed);
}

void on_traffic(weft::message_ptr m) {
  traffic_state& s = *g_t;
  const int me = weft::my_pe();
  if (m->size < sizeof(head)) {
    record_error("short message");
    return;
  }
  head h;
  std::memcpy(&h, m->data(), sizeof h);
  if (h.src < 0 || h.src >= s.n || m->src_pe != h.src) {
    record_error("bad source " + std::to_string(h.src));
    return;
  }
  if (m->size != sizes[h.seq % num_sizes]) record_error("payload size " + std::to_string(m->size));
  std::uint32_t& next = s.rows[std::size_t(me)]->next_seq[std::size_t(h.src)];
  if (h.seq != next)
    record_error("PE " + std::to_string(me) + " got seq " + std::to_string(h.seq) + " from PE " +
                 std::to_string(h.src) + ", expected " + std::to_string(next));
  next = h.seq + 1;
  const auto* p = reinterpret_cast<const std::uint8_t*>(m->data());
  for (std::size_t i = sizeof(head); i < m->size; ++i)
    if (p[i] != byte_of(h.src, h.seq, i)) {
      record_error("payload byte " + std::to_string(i) + " changed");
      break;
    }
  check_block(*m, s.want);
  if (s.received.fetch_add(1, std::memory_order_acq_rel) + 1 == long(s.n) * s.n * s.per_pair)
    weft::exit_at_quiescence(0);
}

void on_kick(weft::message_ptr) {
  traffic_state& s = *g_t;
  const int me = weft::my_pe();
  check_config(s.want);
  for (long k = 0; k < s.per_pair; ++k)
    for (int dst = 0; dst < s.n; ++dst) {
      const auto seq = std::uint32_t(k);
      const std::size_t bytes = sizes[seq % num_sizes];
      weft::message_ptr m = weft::make_message(h_traffic, bytes);
      const head h{me, seq};
      std::memcpy(m->data(), &h, sizeof h);
      auto* p = reinterpret_cast<std::uint8_t*>(m->data());
      for (std::size_t i = sizeof(head); i < bytes; ++i) p[i] = byte_of(me, seq, i);
      weft::send(dst, std::move(m));
    }
}

void run_traffic(int pes, const std::vector<std::string>& opts, expect want) {
  reset_errors();
  traffic_state s;
  s.n = pes;
  s.per_pair = scaled(3 * num_sizes, num_sizes);
  s.want = want;
  for (int i = 0; i < pes; ++i) {
    s.rows.push_back(std::make_unique<pe_row>());
    s.rows.back()->next_seq.assign(std::size_t(pes), 0);
  }
  g_t = &s;
  std::vector<std::string> all{threads_opt(pes)};
  all.insert(all.end(), opts.begin(), opts.end());
  const int rc = run_node(all, [] {
    for (int pe = 0; pe < weft::num_pes(); ++pe) weft::send(pe, weft::make_message(h_kick, 0));
  });
  g_t = nullptr;
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_errors.load(), 0) << "first error on a PE: " << first_error();
  const long total = long(pes) * pes * s.per_pair;
  EXPECT_EQ(s.received.load(), total);
  EXPECT_EQ(s.checked_place.load(), total);
  for (int dst = 0; dst < pes; ++dst)
    for (int src = 0; src < pes; ++src)
      EXPECT_EQ(s.rows[std::size_t(dst)]->next_seq[std::size_t(src)], std::uint32_t(s.per_pair))
          << "PE " << dst << " from PE " << src;
}

class AllocPool : public testing::TestWithParam<int> {};

TEST_P(AllocPool, SystemAllocatorCarriesTheTraffic) {
  run_traffic(GetParam(), {"--weft:alloc=system"}, {.system = true, .pool = true});
}

TEST_P(AllocPool, MimallocCarriesTheTraffic) {
  if (thread_sanitized()) GTEST_SKIP() << "mimalloc is not used under ThreadSanitizer";
  run_traffic(GetParam(), {"--weft:alloc=mimalloc"}, {.system = false, .pool = true});
}

TEST_P(AllocPool, PoolOffEveryMessageIsUnpooled) {
  run_traffic(GetParam(), {"--weft:msg-pool=off", "--weft:alloc=system"},
              {.system = true, .pool = false});
}

TEST_P(AllocPool, PoolOffWithMimalloc) {
  if (thread_sanitized()) GTEST_SKIP() << "mimalloc is not used under ThreadSanitizer";
  run_traffic(GetParam(), {"--weft:msg-pool=off", "--weft:alloc=mimalloc"},
              {.system = false, .pool = false});
}

// 5 PEs: more PEs than the 2-core machine's cores.
INSTANTIATE_TEST_SUITE_P(Pes, AllocPool, testing::Values(2, 5),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "pes";
                         });

// ---- the pool's behaviour: a freed block is the PE's next one ------------------
//
// PE 0 sends PE 1 one message of each pooled size. PE 1 frees it and at once
// makes a message of the same size: with the pool on, the block it freed is
// the head of its list for that class, so it gets the very same address
// (though PE 0 allocated it). With the pool off the block went back to
// mimalloc, whose per-thread heaps never hand a block of PE 0's heap to
// PE 1: another address.

constexpr std::size_t reuse_sizes[] = {16, 200, 3000, 60000};

struct reuse_state {
  std::atomic<int> same{0};
  std::atomic<int> different{0};
};
reuse_state* g_reuse = nullptr;

void on_reuse(weft::message_ptr m) {
  const void* freed = m.get();
  const std::size_t bytes = m->size;
  m.reset();
  weft::message_ptr again = weft::make_message(h_kick, bytes);
  (again.get() == freed ? g_reuse->same : g_reuse->different).fetch_add(1);
  if (g_reuse->same.load() + g_reuse->different.load() == int(std::size(reuse_sizes)))
    weft::exit_at_quiescence(0);
}
const weft::handler_id h_reuse = weft::register_handler("alloc_pool.reuse", on_reuse);

void run_reuse(const std::vector<std::string>& opts, reuse_state& s) {
  g_reuse = &s;
  std::vector<std::string> all{threads_opt(2)};
  all.insert(all.end(), opts.begin(), opts.end());
  const int rc = run_node(all, [] {
    for (std::size_t bytes : reuse_sizes) weft::send(1, weft::make_message(h_reuse, bytes));
  });
  g_reuse = nullptr;
  EXPECT_EQ(rc, 0);
}

TEST(MsgPool, OnAFreedBlockIsTheNextAllocation) {
  reuse_state s;
  run_reuse({"--weft:msg-pool=on"}, s);
  EXPECT_EQ(s.same.load(), int(std::size(reuse_sizes)));
  EXPECT_EQ(s.different.load(), 0);
}

TEST(MsgPool, OffAFreedBlockGoesBackToTheAllocator) {
  if (thread_sanitized()) GTEST_SKIP() << "mimalloc is not used under ThreadSanitizer";
  reuse_state s;
  run_reuse({"--weft:msg-pool=off", "--weft:alloc=mimalloc"}, s);
  EXPECT_EQ(s.same.load(), 0);
  EXPECT_EQ(s.different.load(), int(std::size(reuse_sizes)));
}

}  // namespace
