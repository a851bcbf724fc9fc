// omp-test task_depend_abi: the dependences GCC 12 cannot write as pragmas
// (OpenMP 5.1's omp_all_memory and inoutset), made by calling GOMP_task with
// the depend arrays GCC 13 emits, and the dependence table's bookkeeping
// under load: tasks that complete while later siblings are linked after
// them, addresses named once and never again (swept from the table),
// tables of explicit tasks, and regions after regions on one team.
//
// - omp_all_memory (a null address, out): after every earlier sibling with
//   dependences; every later one with dependences after it.
// - inoutset: tasks of one set may run together, all after the writer
//   before them; a reader after the set waits for all of it; a set after a
//   reader waits for that reader.
// - A wavefront of tasks over a grid (in: upper and left, inout: own
//   cell), made by one thread, repeated over regions: every cell sees its
//   neighbours' final values.
// - 20000 tasks on addresses named once: all run.
// - Children with dependences of explicit tasks that do not wait for them.
// Registered for libweft-omp only: GCC 12's libgomp predates both kinds.
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "check.h"

extern "C" void GOMP_task(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size,
                          long arg_align, bool if_clause, unsigned flags, void** depend,
                          int priority, void* detach);

namespace {

constexpr unsigned flag_depend = 8;  // GOMP_TASK_FLAG_DEPEND
constexpr std::uintptr_t type_in = 1, type_inoutset = 5;

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

struct body {
  void (*run)(void*);
  void* ctx;
};

void call(void* arg) {
  auto* b = static_cast<body*>(arg);
  b->run(b->ctx);
}

// A task with the given depend array, its body `run(ctx)`.
void task(void (*run)(void*), void* ctx, void** depend) {
  body b{run, ctx};
  GOMP_task(&call, &b, nullptr, sizeof b, alignof(body), true, flag_depend, depend, 0, nullptr);
}

// depend[0] = n != 0 layout: `nout` writers first, then readers.
struct plain_depend {
  std::vector<void*> words;
  plain_depend(std::vector<void*> out, std::vector<void*> in) {
    words.push_back(reinterpret_cast<void*>(out.size() + in.size()));
    words.push_back(reinterpret_cast<void*>(out.size()));
    for (void* a : out) words.push_back(a);
    for (void* a : in) words.push_back(a);
  }
};

// depend[0] = 0 layout with one depobj-style object of type `type`.
struct object_depend {
  void* object[2];
  void* words[6];
  object_depend(void* addr, std::uintptr_t type) {
    object[0] = addr;
    object[1] = reinterpret_cast<void*>(type);
    words[0] = nullptr;
    words[1] = reinterpret_cast<void*>(std::uintptr_t(1));
    words[2] = words[3] = words[4] = nullptr;
    words[5] = object;
  }
};

std::atomic<int> done_before{0};

void test_all_memory() {
  constexpr int kBefore = 40, kAfter = 40;
  static int cells[kBefore];
  static std::atomic<int> all_saw{-1};
  static std::atomic<int> after_ok{0};
  done_before = 0;
  all_saw = -1;
  after_ok = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      for (int k = 0; k < kBefore; ++k) {
        plain_depend d({&cells[k]}, {});
        task(
            [](void* c) {
              pause(3000);
              ++*static_cast<int*>(c);
              done_before.fetch_add(1);
            },
            &cells[k], d.words.data());
      }
      plain_depend all({nullptr}, {});
      task([](void*) { all_saw = done_before.load(); }, nullptr, all.words.data());
      for (int k = 0; k < kAfter; ++k) {
        plain_depend d({}, {&cells[k % kBefore]});
        task(
            [](void*) {
              if (all_saw.load() >= 0) after_ok.fetch_add(1);
            },
            nullptr, d.words.data());
      }
    }
  }
  CHECK_EQ(all_saw.load(), kBefore, "omp_all_memory: earlier siblings done when it runs");
  CHECK_EQ(after_ok.load(), kAfter, "omp_all_memory: later siblings run after it");
  for (int k = 0; k < kBefore; ++k) CHECK_EQ(cells[k], 1, "omp_all_memory: cell %d", k);
}

void test_inoutset() {
  constexpr int kSet = 8, kRounds = 20;
  static int x;
  static std::atomic<int> writes{0}, set_ran{0}, set_saw_writer{0}, reader_saw_set{0},
      second_set_saw_reader{0}, reader_done{0};
  writes = set_ran = set_saw_writer = reader_saw_set = second_set_saw_reader = reader_done = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int r = 0; r < kRounds; ++r) {
      plain_depend w({&x}, {});
      task(
          [](void*) {
            pause(2000);
            writes.fetch_add(1);
          },
          nullptr, w.words.data());
      // A set after the writer.
      for (int k = 0; k < kSet; ++k) {
        object_depend s(&x, type_inoutset);
        task(
            [](void* round) {
              if (writes.load() == *static_cast<int*>(round) + 1) set_saw_writer.fetch_add(1);
              pause(500);
              set_ran.fetch_add(1);
              delete static_cast<int*>(round);
            },
            new int(r), s.words);
      }
      // A reader after the set: all of it done.
      object_depend rd(&x, type_in);
      task(
          [](void* round) {
            const int r2 = *static_cast<int*>(round);
            if (set_ran.load() == (r2 + 1) * kSet) reader_saw_set.fetch_add(1);
            pause(1000);
            reader_done.fetch_add(1);
            delete static_cast<int*>(round);
          },
          new int(r), rd.words);
      // A set after the reader.
      object_depend s2(&x, type_inoutset);
      task(
          [](void* round) {
            if (reader_done.load() == *static_cast<int*>(round) + 1)
              second_set_saw_reader.fetch_add(1);
            delete static_cast<int*>(round);
          },
          new int(r), s2.words);
    }
  }
  CHECK_EQ(set_saw_writer.load(), kSet * kRounds, "inoutset: each set member after the writer");
  CHECK_EQ(reader_saw_set.load(), kRounds, "inoutset: the reader after the whole set");
  CHECK_EQ(second_set_saw_reader.load(), kRounds, "inoutset: a set after the reader");
}

constexpr int kSide = 40;
int grid[kSide][kSide];

void test_wavefront(int regions) {
  for (int round = 0; round < regions; ++round) {
    for (auto& row : grid)
      for (int& c : row) c = 0;
#pragma omp parallel
    {
      probe_here();
#pragma omp single
      for (int i = 0; i < kSide; ++i)
        for (int j = 0; j < kSide; ++j) {
          std::vector<void*> in;
          if (i > 0) in.push_back(&grid[i - 1][j]);
          if (j > 0) in.push_back(&grid[i][j - 1]);
          plain_depend d({&grid[i][j]}, in);
          task(
              [](void* cell) {
                auto* c = static_cast<int*>(cell);
                const std::ptrdiff_t at = c - &grid[0][0];
                const int i2 = int(at / kSide), j2 = int(at % kSide);
                const int up = i2 > 0 ? grid[i2 - 1][j2] : 0;
                const int left = j2 > 0 ? grid[i2][j2 - 1] : 0;
                *c = (up > left ? up : left) + 1;
              },
              &grid[i][j], d.words.data());
        }
    }
    for (int i = 0; i < kSide; ++i)
      for (int j = 0; j < kSide; ++j)
        if (!CHECK_EQ(grid[i][j], i + j + 1, "wavefront region %d: cell (%d, %d)", round, i, j))
          return;
  }
}

void test_addresses_named_once() {
  constexpr int kTasks = 20000;
  static std::vector<char> slots(kTasks);
  static std::atomic<int> ran{0};
  ran = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int k = 0; k < kTasks; ++k) {
      plain_depend d({&slots[std::size_t(k)]}, {});
      task([](void*) { ran.fetch_add(1); }, nullptr, d.words.data());
    }
  }
  CHECK_EQ(ran.load(), kTasks, "addresses named once: tasks run");
}

void test_children_of_explicit_tasks() {
  constexpr int kParents = 16, kChildren = 50;
  static int chains[kParents];
  static std::atomic<int> in_order{0};
  in_order = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int p = 0; p < kParents; ++p) {
#pragma omp task firstprivate(p)
      {
        chains[p] = 0;
        for (int k = 0; k < kChildren; ++k) {
          plain_depend d({&chains[p]}, {});
          struct step {
            int p, k;
          };
          task(
              [](void* s) {
                auto* st = static_cast<step*>(s);
                if (chains[st->p] == st->k) in_order.fetch_add(1);
                ++chains[st->p];
                delete st;
              },
              new step{p, k}, d.words.data());
        }
        // No taskwait: the parent ends before its children.
      }
    }
  }
  CHECK_EQ(in_order.load(), kParents * kChildren, "explicit parents: children in order");
}

}  // namespace

int main() {
  test_begin("task_depend_abi");
  test_all_memory();
  test_inoutset();
  test_wavefront(5);
  test_addresses_named_once();
  test_children_of_explicit_tasks();
  return test_end();
}
