// Logical threads (weft/threads/ult.hpp): where a ULT runs (its PE's own
// thread when free, else a carrier; the same carrier slot each time),
// suspend and resume from any thread, yield, errno kept across switches, a
// ULT held up behind a PE that stays inside one handler, and a stress of
// many ULTs suspending and resuming at once, checked for loss and
// duplication.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "core/support.hpp"
#include "test_scale.hpp"
#include "weft/threads/ult.hpp"
#include "weft/weft.hpp"

namespace wt = weft::threads;
using weft_test::run_node;
using weft_test::threads_opt;

namespace {

long gettid_now() {
  return long(syscall(SYS_gettid));
}

// A handler that runs fn(arg) on the PE it is sent to.
struct call {
  void (*fn)(void*);
  void* arg;
};
void on_call(weft::message_ptr m) {
  const call c = m->as<call>();
  c.fn(c.arg);
}
const weft::handler_id h_call = weft::register_handler("test_ult.call", on_call);

void call_on(int pe, void (*fn)(void*), void* arg) {
  weft::send(pe, weft::make_message_with(h_call, call{fn, arg}));
}

// What a ULT saw of itself.
struct record {
  wt::ult u;
  std::atomic<long> tid{0};
  std::atomic<int> pe{-2};
  std::atomic<bool> self_current{false};
  std::atomic<bool> done{false};
  std::atomic<int> rounds{0};
  int want_rounds = 0;           // suspensions before it ends
  std::atomic<int> suspended{0};  // times it announced a suspension
  std::atomic<bool> errno_kept{true};
  std::atomic<int> yields{0};
};

void record_body(wt::ult* u) {
  auto* r = static_cast<record*>(u->arg);
  r->tid = gettid_now();
  r->pe = wt::current_pe();
  r->self_current = wt::current() == u;
  for (int i = 0; i < r->want_rounds; ++i) {
    errno = 1000 + i;
    r->suspended.fetch_add(1);
    wt::suspend();
    if (errno != 1000 + i) r->errno_kept = false;
    if (wt::current() != u) r->self_current = false;
    r->rounds.fetch_add(1);
  }
}

void record_finished(wt::ult* u) {
  static_cast<record*>(u->arg)->done = true;
}

// Claims a record's ULT and starts it on the PE this runs on (a handler).
void start_here_if_unclaimed(void* p) {
  auto* r = static_cast<record*>(p);
  if (wt::claim(&r->u)) wt::start_here(&r->u);
}

void prepare(record& r, int rounds = 0) {
  r.u.reset();
  r.u.body = &record_body;
  r.u.finished = &record_finished;
  r.u.arg = &r;
  r.want_rounds = rounds;
}

std::atomic<long> g_pe_tid[8];
void note_pe_tid(void* arg) {
  g_pe_tid[reinterpret_cast<std::intptr_t>(arg)] = gettid_now();
}

// Waits (on PE 0, inside the main function) until `done` holds, serving
// PE 0's messages meanwhile.
template <class F>
void wait_until(F done) {
  const std::uint64_t deadline = weft_test::now_ns() + 60'000'000'000ull;
  while (!done()) {
    weft::detail::serve_messages(16);
    if (weft_test::now_ns() > deadline) {
      ADD_FAILURE() << "timed out";
      return;
    }
    std::this_thread::yield();
  }
}

}  // namespace

TEST(Ult, StartsOnItsPesOwnThreadWhenNoOtherLivesThere) {
  record r;
  prepare(r);
  const int rc = run_node({threads_opt(2)}, [&] {
    call_on(1, &note_pe_tid, reinterpret_cast<void*>(std::intptr_t(1)));
    call_on(
        1,
        [](void* a) {
          auto* rr = static_cast<record*>(a);
          ASSERT_TRUE(wt::claim(&rr->u));
          EXPECT_FALSE(wt::claim(&rr->u)) << "a ULT is claimed once";
          wt::start_here(&rr->u);
        },
        &r);
    wait_until([&] { return r.done.load(); });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.pe, 1);
  EXPECT_TRUE(r.self_current);
  EXPECT_EQ(r.tid.load(), g_pe_tid[1].load()) << "ran on PE 1's own OS thread";
}

// A second ULT on a PE whose thread has a live one (suspended) runs on a
// carrier: another OS thread, with errno at an address of its own; both are
// resumed from other threads and end.
TEST(Ult, SecondLiveUltOnAPeRunsOnACarrier) {
  record a, b;
  prepare(a, 2);
  prepare(b, 2);
  const int rc = run_node({threads_opt(2)}, [&] {
    call_on(1, &note_pe_tid, reinterpret_cast<void*>(std::intptr_t(1)));
    call_on(1, &start_here_if_unclaimed, &a);
    wait_until([&] { return a.suspended.load() == 1; });
    EXPECT_TRUE(wt::pe_thread_taken(1));
    call_on(1, &start_here_if_unclaimed, &b);
    wait_until([&] { return b.suspended.load() == 1; });
    // Resume each from another thread than the one it runs on: a
    // program's own thread, then PE 0.
    std::thread([&] { wt::resume(&a.u); }).join();
    wt::resume(&b.u);
    wait_until([&] { return a.suspended.load() == 2 && b.suspended.load() == 2; });
    wt::resume(&a.u);
    wt::resume(&b.u);
    wait_until([&] { return a.done.load() && b.done.load(); });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(a.rounds, 2);
  EXPECT_EQ(b.rounds, 2);
  EXPECT_EQ(a.tid.load(), g_pe_tid[1].load());
  EXPECT_NE(b.tid.load(), g_pe_tid[1].load()) << "the second ULT shared PE 1's thread";
  EXPECT_NE(b.tid.load(), a.tid.load());
  EXPECT_EQ(b.pe, 1);
  EXPECT_TRUE(a.errno_kept);
  EXPECT_TRUE(b.errno_kept);
  EXPECT_TRUE(a.self_current && b.self_current);
}

// A PE whose own stack acts as a logical thread of a family
// (claim_pe_stack) sends a ULT of that family it starts to a carrier, and
// hosts one of another family itself; released, it hosts the family's next
// one itself. A ULT without a family shares with none.
int g_family_a, g_family_b;

TEST(Ult, ClaimedPeStackSendsUltsOfItsFamilyToCarriers) {
  record a, b, other, lone;
  prepare(a);
  prepare(b);
  prepare(other);
  prepare(lone, 1);
  a.u.family = b.u.family = &g_family_a;
  other.u.family = &g_family_b;
  struct all {
    record* a;
    record* b;
    record* other;
    record* lone;
  } ab{&a, &b, &other, &lone};
  const int rc = run_node({threads_opt(2)}, [&] {
    call_on(1, &note_pe_tid, reinterpret_cast<void*>(std::intptr_t(1)));
    call_on(
        1,
        [](void* p) {
          auto* x = static_cast<all*>(p);
          wt::claim_pe_stack(&g_family_a);
          EXPECT_TRUE(wt::pe_thread_taken(1));
          if (wt::claim(&x->a->u)) wt::start_here(&x->a->u);
          if (wt::claim(&x->other->u)) wt::start_here(&x->other->u);
          // Suspends on its carrier: it holds no place on PE 1's thread.
          if (wt::claim(&x->lone->u)) wt::start_here(&x->lone->u);
          wt::release_pe_stack(&g_family_a);
          EXPECT_FALSE(wt::pe_thread_taken(1));
          if (wt::claim(&x->b->u)) wt::start_here(&x->b->u);
        },
        &ab);
    wait_until([&] { return lone.suspended.load() == 1; });
    wt::resume(&lone.u);
    wait_until([&] { return a.done.load() && b.done.load() && other.done.load() && lone.done; });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_NE(a.tid.load(), g_pe_tid[1].load()) << "a ULT shared PE 1's thread with its family";
  EXPECT_EQ(a.pe, 1);
  EXPECT_EQ(other.tid.load(), g_pe_tid[1].load()) << "another family's ULT got a carrier";
  EXPECT_NE(lone.tid.load(), g_pe_tid[1].load()) << "a ULT without a family shared";
  EXPECT_EQ(b.tid.load(), g_pe_tid[1].load());
}

// Two hosted ULTs of one family never share the PE's thread; of two
// families they do, and both are resumed there.
TEST(Ult, UltsOfTwoFamiliesShareAPesThreadAndOfOneDoNot) {
  record a1, a2, b1;
  prepare(a1, 1);
  prepare(a2, 1);
  prepare(b1, 1);
  a1.u.family = a2.u.family = &g_family_a;
  b1.u.family = &g_family_b;
  const int rc = run_node({threads_opt(2)}, [&] {
    call_on(1, &note_pe_tid, reinterpret_cast<void*>(std::intptr_t(1)));
    call_on(1, &start_here_if_unclaimed, &a1);
    wait_until([&] { return a1.suspended.load() == 1; });
    call_on(1, &start_here_if_unclaimed, &b1);
    call_on(1, &start_here_if_unclaimed, &a2);
    wait_until([&] { return b1.suspended.load() == 1 && a2.suspended.load() == 1; });
    for (record* r : {&a1, &a2, &b1}) wt::resume(&r->u);
    wait_until([&] { return a1.done.load() && a2.done.load() && b1.done.load(); });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(a1.tid.load(), g_pe_tid[1].load());
  EXPECT_EQ(b1.tid.load(), g_pe_tid[1].load());
  EXPECT_NE(a2.tid.load(), g_pe_tid[1].load());
  EXPECT_TRUE(a1.errno_kept && a2.errno_kept && b1.errno_kept);
}

// The same carrier slot is the same OS thread each time it is free; a busy
// slot gives another carrier.
TEST(Ult, ACarrierSlotIsTheSameThreadEachTime) {
  record first, second, third, other;
  const int rc = run_node({threads_opt(2)}, [&] {
    prepare(first);
    wt::claim(&first.u);
    wt::start_on_carrier(&first.u, 1, 2, wt::placement::beyond_pes);
    wait_until([&] { return first.done.load(); });
    prepare(second, 1);
    wt::claim(&second.u);
    wt::start_on_carrier(&second.u, 1, 2, wt::placement::beyond_pes);
    wait_until([&] { return second.suspended.load() == 1; });
    // Slot 2 is busy (second is suspended there): another thread.
    prepare(other);
    wt::claim(&other.u);
    wt::start_on_carrier(&other.u, 1, 2, wt::placement::beyond_pes);
    wait_until([&] { return other.done.load(); });
    wt::resume(&second.u);
    wait_until([&] { return second.done.load(); });
    prepare(third);
    wt::claim(&third.u);
    wt::start_on_carrier(&third.u, 1, 2, wt::placement::beyond_pes);
    wait_until([&] { return third.done.load(); });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(first.tid.load(), second.tid.load());
  EXPECT_EQ(first.tid.load(), third.tid.load());
  EXPECT_NE(first.tid.load(), other.tid.load());
  EXPECT_EQ(first.pe, 1);
  EXPECT_EQ(other.pe, 1);
}

// A carrier is a guest of its PE: the code it runs sees the PE's numbers,
// and it is not a PE.
namespace {
struct identity {
  std::atomic<int> pe{-2}, rank{-2}, size{-2};
  std::atomic<bool> guest{false}, carrier{false};
};
identity g_identity;
void identity_body(wt::ult* u) {
  g_identity.pe = weft::my_pe();
  g_identity.rank = weft::my_rank();
  g_identity.size = weft::node_size();
  g_identity.guest = weft::detail::on_guest_thread();
  g_identity.carrier = wt::on_carrier();
  static_cast<record*>(u->arg)->tid = gettid_now();
}
}  // namespace

TEST(Ult, ACarrierSeesItsPesNumbersAndIsNotAPe) {
  record r;
  const int rc = run_node({threads_opt(3)}, [&] {
    prepare(r);
    r.u.body = &identity_body;
    wt::claim(&r.u);
    wt::start_on_carrier(&r.u, 2, 1, wt::placement::beyond_pes);
    wait_until([&] { return r.done.load(); });
    EXPECT_FALSE(weft::detail::on_guest_thread());
    EXPECT_FALSE(wt::on_carrier());
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_identity.pe, 2);
  EXPECT_EQ(g_identity.rank, 2);
  EXPECT_EQ(g_identity.size, 3);
  EXPECT_TRUE(g_identity.guest);
  EXPECT_TRUE(g_identity.carrier);
}

// yield() comes back by itself, on a PE's thread and on a carrier.
namespace {
void yielding_body(wt::ult* u) {
  auto* r = static_cast<record*>(u->arg);
  r->tid = gettid_now();
  for (int i = 0; i < 50; ++i) {
    errno = 7 + i;
    wt::yield();
    if (errno != 7 + i) r->errno_kept = false;
    r->yields.fetch_add(1);
  }
}
}  // namespace

TEST(Ult, YieldComesBackOnAPeAndOnACarrier) {
  record on_pe, on_carrier;
  const int rc = run_node({threads_opt(2)}, [&] {
    for (record* r : {&on_pe, &on_carrier}) {
      prepare(*r);
      r->u.body = &yielding_body;
    }
    call_on(1, &start_here_if_unclaimed, &on_pe);
    wt::claim(&on_carrier.u);
    wt::start_on_carrier(&on_carrier.u, 0, 1, wt::placement::pe_taken);
    wait_until([&] { return on_pe.done.load() && on_carrier.done.load(); });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(on_pe.yields, 50);
  EXPECT_EQ(on_carrier.yields, 50);
  EXPECT_TRUE(on_pe.errno_kept);
  EXPECT_TRUE(on_carrier.errno_kept);
}

// A ULT whose start message waits behind a PE that stays inside one handler
// (and runs: it spins) is held up once that lasted --weft:ult-rescue-us, and
// not before; started on a carrier, it lets the handler finish (it was what
// the handler waited for); the late message then finds it claimed.
TEST(Ult, HeldUpBehindAHandlerThatStaysIsRescued) {
  static std::atomic<bool> release{false};
  static std::atomic<bool> spinning{false};
  release = false;
  spinning = false;
  record r;
  prepare(r);
  r.u.body = [](wt::ult* u) {
    static_cast<record*>(u->arg)->tid = gettid_now();
    release = true;
  };
  bool early = true, late = false;
  std::uint64_t waited_ns = 0;
  const int rc = run_node({threads_opt(2), "--weft:ult-rescue-us=20000"}, [&] {
    call_on(
        1,
        [](void*) {
          spinning = true;
          while (!release.load()) {
          }
        },
        nullptr);
    wait_until([&] { return spinning.load(); });
    call_on(1, &start_here_if_unclaimed, &r);
    const std::uint64_t t0 = weft_test::now_ns();
    early = wt::held_up(&r.u, 1, t0) || wt::held_up(&r.u, 1, t0 + 10'000'000);
    // The spinning PE uses CPU time as real time goes by (on a loaded
    // machine, more slowly): held up once it ran a quarter of the bound.
    const std::uint64_t deadline = t0 + 60'000'000'000ull;
    for (std::uint64_t now = t0; now < deadline; now = weft_test::now_ns()) {
      if (wt::held_up(&r.u, 1, now)) {
        late = true;
        waited_ns = now - t0;
        break;
      }
      std::this_thread::yield();
    }
    if (late && wt::claim(&r.u)) wt::start_on_carrier(&r.u, 0, 1, wt::placement::rescued);
    wait_until([&] { return r.done.load(); });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(early) << "held up before the bound";
  EXPECT_TRUE(late);
  EXPECT_GE(waited_ns, 20'000'000u) << "held up before --weft:ult-rescue-us";
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(release);
}

// Many ULTs on every PE (more than the PEs: most on carriers), each
// suspending many times; a driver resumes whoever announced a suspension,
// from PE 0 and from a thread of the program's own at once. Every ULT ends,
// each round is counted once, each finish once.
namespace {
struct stress_state {
  std::mutex m;
  std::vector<wt::ult*> parked;  // guarded by m
  std::atomic<long> finished{0};
};
stress_state* g_stress = nullptr;

void parking_body(wt::ult* u) {
  auto* r = static_cast<record*>(u->arg);
  for (int i = 0; i < r->want_rounds; ++i) {
    errno = i;
    {
      std::lock_guard<std::mutex> lock(g_stress->m);
      g_stress->parked.push_back(u);
    }
    wt::suspend();
    if (errno != i) r->errno_kept = false;
    r->rounds.fetch_add(1);
  }
}
void parking_finished(wt::ult* u) {
  static_cast<record*>(u->arg)->done = true;
  g_stress->finished.fetch_add(1);
}
}  // namespace

TEST(Ult, StressManyUltsSuspendAndResumeWithoutLossOrDuplication) {
  constexpr int pes = 3;
  const int count = weft_test::scaled(96, 24);
  const int rounds = weft_test::scaled(200, 30);
  std::vector<record> recs(static_cast<std::size_t>(count));
  stress_state st;
  g_stress = &st;
  const int rc = run_node({threads_opt(pes)}, [&] {
    for (int i = 0; i < count; ++i) {
      record& r = recs[std::size_t(i)];
      prepare(r, rounds);
      r.u.body = &parking_body;
      r.u.finished = &parking_finished;
    }
    // A third on the PEs' threads (a message each), the rest on carriers.
    for (int i = 0; i < count; ++i) {
      record& r = recs[std::size_t(i)];
      if (i % 3 == 0) {
        call_on(i % pes, &start_here_if_unclaimed, &r);
      } else {
        wt::claim(&r.u);
        wt::start_on_carrier(&r.u, i % pes, 1 + i % 4, wt::placement::beyond_pes);
      }
    }
    std::atomic<bool> stop{false};
    auto drive = [&] {
      std::vector<wt::ult*> take;
      {
        std::lock_guard<std::mutex> lock(st.m);
        take.swap(st.parked);
      }
      for (wt::ult* u : take) wt::resume(u);
    };
    std::thread helper([&] {
      while (!stop.load()) {
        drive();
        std::this_thread::yield();
      }
    });
    wait_until([&] {
      drive();
      return st.finished.load() == count;
    });
    stop = true;
    helper.join();
    weft::exit(0);
  });
  g_stress = nullptr;
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(st.finished.load(), count);
  long bad_rounds = 0, bad_errno = 0;
  for (record& r : recs) {
    if (r.rounds.load() != rounds || !r.done.load()) ++bad_rounds;
    if (!r.errno_kept.load()) ++bad_errno;
  }
  EXPECT_EQ(bad_rounds, 0);
  EXPECT_EQ(bad_errno, 0);
}

// --weft:stats reports where logical threads ran.
TEST(Ult, StatsCountThePlacements) {
  record a, b;
  testing::internal::CaptureStdout();
  const int rc = run_node({threads_opt(2), "--weft:stats"}, [&] {
    prepare(a);
    prepare(b);
    call_on(1, &start_here_if_unclaimed, &a);
    wt::claim(&b.u);
    wt::start_on_carrier(&b.u, 1, 1, wt::placement::beyond_pes);
    wait_until([&] { return a.done.load() && b.done.load(); });
    weft::exit(0);
  });
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("logical threads (OpenMP threads): 1 on their PE's thread, 1 on carriers"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("beyond_pes"), std::string::npos) << out;
}
