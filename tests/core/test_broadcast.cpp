// Broadcast: every PE (the caller's included) gets exactly one copy with the
// payload intact, whoever broadcasts (PE 0, another PE, a thread that is not
// a PE), for node sizes that give different spanning-tree shapes, and for
// many broadcasts back to back.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_node;
using weft_test::scaled;
using weft_test::threads_opt;

using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;

constexpr int payload_words = 30;  // 240 bytes: more than a cache line or two

struct bcast_payload {
  std::uint32_t seq;
  std::int32_t root;  // the broadcasting PE (-1: a non-PE thread)
  std::uint64_t words[payload_words];
};

std::uint64_t word_of(std::uint32_t seq, int i) {
  return (std::uint64_t(seq) << 32) ^ (std::uint64_t(i) * 0x9e3779b97f4a7c15ull);
}

bcast_payload make_payload(std::uint32_t seq, int root) {
  bcast_payload p{};
  p.seq = seq;
  p.root = root;
  for (int i = 0; i < payload_words; ++i) p.words[i] = word_of(seq, i);
  return p;
}

struct alignas(64) pe_record {
  // Written only by the owning PE while the node runs.
  std::vector<std::uint32_t> copies;  // copies[seq]: how many copies of broadcast seq
  long total = 0;
};

struct bcast_state {
  int n = 0;
  long count = 0;  // broadcasts
  std::vector<std::unique_ptr<pe_record>> pes;
  std::atomic<long> received{0};
  bool from_external = false;  // then PE 0 ends the run (see check())
  std::atomic<bool> external_done{false};
  std::thread external;
};
bcast_state* g_b = nullptr;

void on_bcast(weft::message_ptr m);
void on_start(weft::message_ptr m);
const weft::handler_id h_bcast = weft::register_handler("bcast", on_bcast);
const weft::handler_id h_start = weft::register_handler("bcast_start", on_start);

void maybe_finish() {
  bcast_state& s = *g_b;
  // The last copy: wait for quiescence, so a surplus copy still in flight is
  // handled (and counted) before the node exits.
  if (s.received.fetch_add(1, std::memory_order_acq_rel) + 1 == long(s.n) * s.count &&
      !s.from_external)
    weft::exit_at_quiescence(0);
}

void on_bcast(weft::message_ptr m) {
  bcast_state& s = *g_b;
  const int me = weft::my_pe();
  if (me < 0 || me >= s.n) {
    record_error("handler ran off a PE");
    return;
  }
  if (m->size != sizeof(bcast_payload)) {
    record_error("payload size " + std::to_string(m->size));
    return;
  }
  const bcast_payload& p = m->as<bcast_payload>();
  if (p.seq >= std::uint32_t(s.count)) {
    record_error("bad seq " + std::to_string(p.seq));
    return;
  }
  for (int i = 0; i < payload_words; ++i)
    if (p.words[i] != word_of(p.seq, i)) {
      record_error("PE " + std::to_string(me) + ": payload word " + std::to_string(i) +
                   " of broadcast " + std::to_string(p.seq) + " changed");
      break;
    }
  // Who handed us the copy: the caller itself at the root (-1 for a non-PE
  // thread), else another PE of the node (our parent in the tree).
  const int root_pe = p.root >= 0 ? p.root : 0;
  if (me == root_pe) {
    if (m->src_pe != p.root)
      record_error("root copy from PE " + std::to_string(m->src_pe) + ", expected " +
                   std::to_string(p.root));
  } else if (m->src_pe < 0 || m->src_pe >= s.n || m->src_pe == me) {
    record_error("PE " + std::to_string(me) + " got its copy from PE " + std::to_string(m->src_pe));
  }
  pe_record& r = *s.pes[std::size_t(me)];
  if (++r.copies[p.seq] != 1)
    record_error("PE " + std::to_string(me) + " got broadcast " + std::to_string(p.seq) + " " +
                 std::to_string(r.copies[p.seq]) + " times");
  ++r.total;
  maybe_finish();
}

// Broadcasts s.count messages from the PE it runs on.
void broadcast_all(int root) {
  for (long i = 0; i < g_b->count; ++i) {
    bcast_payload p = make_payload(std::uint32_t(i), root);
    weft::broadcast(weft::make_message_with(h_bcast, p));
  }
}

void on_start(weft::message_ptr) {
  broadcast_all(weft::my_pe());
}

enum class from { pe0, last_pe, middle_pe, external };

using bcast_param = std::tuple<int, std::string>;  // PEs, queue

class Broadcast : public testing::TestWithParam<bcast_param> {
 protected:
  void check(from who, long count) {
    const auto& [n, queue] = GetParam();
    bcast_state s;
    s.n = n;
    s.count = count;
    for (int i = 0; i < n; ++i) {
      s.pes.push_back(std::make_unique<pe_record>());
      s.pes.back()->copies.assign(std::size_t(count), 0);
    }
    s.from_external = who == from::external;
    g_b = &s;
    g_errors = 0;
    int rc = run_node({threads_opt(n), "--weft:queue=" + queue}, [who] {
      switch (who) {
        case from::pe0:
          broadcast_all(0);
          break;
        case from::last_pe:
          weft::send(weft::num_pes() - 1, weft::make_message(h_start, 0));
          break;
        case from::middle_pe:
          weft::send(weft::num_pes() / 2, weft::make_message(h_start, 0));
          break;
        case from::external:
          g_b->external = std::thread([] {
            broadcast_all(-1);
            g_b->external_done.store(true, std::memory_order_release);
          });
          // The node may end only once the thread has returned from its last
          // broadcast (after that it touches no node state).
          weft::poll_while([] {
            if (g_b->external_done.load(std::memory_order_acquire) &&
                g_b->received.load() == long(g_b->n) * g_b->count) {
              weft::exit_at_quiescence(0);
              return false;
            }
            return true;
          });
          break;
      }
    });
    if (s.external.joinable()) s.external.join();
    g_b = nullptr;
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(g_errors.load(), 0) << "first error: " << first_error();
    EXPECT_EQ(s.received.load(), long(n) * count);
    for (int pe = 0; pe < n; ++pe) {
      EXPECT_EQ(s.pes[std::size_t(pe)]->total, count) << "PE " << pe;
      for (long i = 0; i < count; ++i)
        ASSERT_EQ(s.pes[std::size_t(pe)]->copies[std::size_t(i)], 1u)
            << "PE " << pe << ", broadcast " << i;
    }
  }
};

TEST_P(Broadcast, FromPe0) {
  check(from::pe0, 1);
}
TEST_P(Broadcast, FromLastPe) {
  check(from::last_pe, 1);
}
TEST_P(Broadcast, FromMiddlePe) {
  check(from::middle_pe, 1);
}
TEST_P(Broadcast, FromNonPeThread) {
  check(from::external, 1);
}
TEST_P(Broadcast, ManyBackToBackFromPe0) {
  check(from::pe0, scaled(2000, 300));
}
TEST_P(Broadcast, ManyBackToBackFromLastPe) {
  check(from::last_pe, scaled(2000, 300));
}
TEST_P(Broadcast, ManyBackToBackFromNonPeThread) {
  check(from::external, scaled(2000, 300));
}

INSTANTIATE_TEST_SUITE_P(Broadcast, Broadcast,
                         testing::Combine(testing::Values(1, 2, 3, 5, 8, 13),
                                          testing::Values("mpsc", "spsc-pairs")),
                         weft_test::pes_queue_name<testing::TestParamInfo<bcast_param>>);

// ---- every PE broadcasting at once -----------------------------------------------

struct all_state {
  int n = 0;
  long per_root = 0;
  // got[pe][root]: copies PE pe received from root (row written by pe only).
  std::vector<std::unique_ptr<std::vector<long>>> got;
  std::atomic<long> received{0};
};
all_state* g_all = nullptr;

void on_all_bcast(weft::message_ptr m);
void on_all_start(weft::message_ptr m);
const weft::handler_id h_all_bcast = weft::register_handler("all_bcast", on_all_bcast);
const weft::handler_id h_all_start = weft::register_handler("all_start", on_all_start);

void on_all_bcast(weft::message_ptr m) {
  all_state& s = *g_all;
  const int root = m->as<int>();
  if (root < 0 || root >= s.n) {
    record_error("bad root");
    return;
  }
  ++(*s.got[std::size_t(weft::my_pe())])[std::size_t(root)];
  if (s.received.fetch_add(1) + 1 == long(s.n) * s.n * s.per_root) weft::exit_at_quiescence(0);
}

void on_all_start(weft::message_ptr) {
  for (long i = 0; i < g_all->per_root; ++i)
    weft::broadcast(weft::make_message_with(h_all_bcast, weft::my_pe()));
}

TEST(BroadcastAll, EveryPeBroadcastsConcurrently) {
  for (const char* queue : {"mpsc", "spsc-pairs"}) {
    SCOPED_TRACE(queue);
    all_state s;
    s.n = 8;
    s.per_root = scaled(500, 100);
    for (int i = 0; i < s.n; ++i)
      s.got.push_back(std::make_unique<std::vector<long>>(std::size_t(s.n), 0));
    g_all = &s;
    g_errors = 0;
    int rc = run_node({threads_opt(s.n), std::string("--weft:queue=") + queue}, [] {
      for (int pe = 0; pe < weft::num_pes(); ++pe)
        weft::send(pe, weft::make_message(h_all_start, 0));
    });
    g_all = nullptr;
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(g_errors.load(), 0) << first_error();
    for (int pe = 0; pe < s.n; ++pe)
      for (int root = 0; root < s.n; ++root)
        EXPECT_EQ((*s.got[std::size_t(pe)])[std::size_t(root)], s.per_root)
            << "PE " << pe << " from root " << root;
  }
}

}  // namespace
