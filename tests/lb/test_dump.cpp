// The load database on disk (weft/lb/dump.hpp): instances survive a write
// and a read bit for bit; truncated, corrupt, foreign and newer files are
// errors naming the file and the byte; and a run with --weft:lb-dump writes
// the steps its arrays balance (all of them, or the --weft:lb-dump-steps
// range), two arrays balancing concurrently included.
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <weft/lb/dump.hpp>
#include <weft/lb/generate.hpp>
#include <weft/lb/strategy.hpp>
#include "objects/support.hpp"

using namespace objects_test;
namespace lb = weft::lb;

namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "weft_dump_" + std::to_string(::getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Two steps with every kind of field: a generated instance with edges,
// background, pinned objects, a plan; and a small one without a plan.
std::vector<lb::dumped_step> sample_steps() {
  lb::generator g;
  g.objects = 40;
  g.pes = 6;
  g.pes_per_node = 3;
  g.background = 0.25;
  g.graph = lb::graph_kind::mesh2d;
  lb::dumped_step a;
  a.step = 7;
  a.collection = "array Block#0.1";
  a.strategy = "greedy-refine";
  a.tolerance = 1.05;
  a.seed = 8;
  a.inst = lb::generate(g);
  a.inst.objects[3].migratable = false;
  a.inst.objects[5].bytes = 0xfedcba9876543210ull;
  a.inst.objects[6].load = 0;
  a.chosen = lb::run("greedy", a.inst, {}).placement;
  lb::dumped_step b;
  b.step = 0;
  b.collection = "array Other#1.2";
  b.inst.pes = {{0.5, 0}, {0.0, 1}};
  b.inst.objects = {{1e-9, 1, true, 12}};
  return {a, b};
}

void expect_same(const lb::dumped_step& x, const lb::dumped_step& y) {
  EXPECT_EQ(x.step, y.step);
  EXPECT_EQ(x.collection, y.collection);
  EXPECT_EQ(x.strategy, y.strategy);
  EXPECT_EQ(x.tolerance, y.tolerance);
  EXPECT_EQ(x.seed, y.seed);
  ASSERT_EQ(x.inst.pes.size(), y.inst.pes.size());
  for (std::size_t i = 0; i < x.inst.pes.size(); ++i) {
    EXPECT_EQ(x.inst.pes[i].background, y.inst.pes[i].background) << i;
    EXPECT_EQ(x.inst.pes[i].node, y.inst.pes[i].node) << i;
  }
  ASSERT_EQ(x.inst.objects.size(), y.inst.objects.size());
  for (std::size_t i = 0; i < x.inst.objects.size(); ++i) {
    EXPECT_EQ(x.inst.objects[i].load, y.inst.objects[i].load) << i;  // bit for bit
    EXPECT_EQ(x.inst.objects[i].pe, y.inst.objects[i].pe) << i;
    EXPECT_EQ(x.inst.objects[i].migratable, y.inst.objects[i].migratable) << i;
    EXPECT_EQ(x.inst.objects[i].bytes, y.inst.objects[i].bytes) << i;
  }
  ASSERT_EQ(x.inst.edges.size(), y.inst.edges.size());
  for (std::size_t i = 0; i < x.inst.edges.size(); ++i) {
    EXPECT_EQ(x.inst.edges[i].a, y.inst.edges[i].a) << i;
    EXPECT_EQ(x.inst.edges[i].b, y.inst.edges[i].b) << i;
    EXPECT_EQ(x.inst.edges[i].messages, y.inst.edges[i].messages) << i;
    EXPECT_EQ(x.inst.edges[i].bytes, y.inst.edges[i].bytes) << i;
  }
  EXPECT_EQ(x.chosen, y.chosen);
}

// The message of the dump_error that parsing `bytes` throws ("" if none).
std::string parse_error(const std::string& bytes, const std::string& name = "f.lbdump") {
  try {
    (void)lb::parse_dump(bytes, name);
  } catch (const lb::dump_error& e) {
    return e.what();
  }
  return "";
}

// ---- the format ---------------------------------------------------------------------

TEST(DumpFormat, RoundTripThroughAFile) {
  const auto steps = sample_steps();
  ASSERT_FALSE(steps[0].inst.edges.empty());
  const std::string path = temp_path("roundtrip");
  lb::write_dump(path, steps, 3);
  int node = -1;
  const auto back = lb::read_dump(path, &node);
  EXPECT_EQ(node, 3);
  ASSERT_EQ(back.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) expect_same(steps[i], back[i]);
  std::remove(path.c_str());
}

TEST(DumpFormat, LittleEndianHeaderAndEmptyDump) {
  const std::string h = lb::encode_dump_header(2);
  ASSERT_EQ(h.size(), 16u);
  EXPECT_EQ(h.substr(0, 8), std::string("WEFTLBD\0", 8));
  EXPECT_EQ(h.substr(8, 4), std::string("\1\0\0\0", 4));  // version 1
  EXPECT_EQ(h.substr(12, 4), std::string("\2\0\0\0", 4));
  EXPECT_TRUE(lb::parse_dump(h, "x").empty());
}

TEST(DumpFormat, TruncatedAtAnyOffsetNamesFileAndByte) {
  const auto steps = sample_steps();
  std::string bytes = lb::encode_dump_header(0);
  const std::size_t first = bytes.size();
  bytes += lb::encode_step(steps[0]);
  const std::size_t second = bytes.size();
  bytes += lb::encode_step(steps[1]);
  // Cut inside the header, the first step's header, its body, the second
  // step; each cut is an error, never fewer steps read quietly.
  for (std::size_t cut : {std::size_t(0), std::size_t(5), std::size_t(12), first + 3, first + 10,
                          first + 40, second - 1, second + 2, bytes.size() - 1}) {
    const std::string msg = parse_error(bytes.substr(0, cut), "cut.lbdump");
    EXPECT_NE(msg.find("cut.lbdump: byte "), std::string::npos) << cut << ": " << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << cut << ": " << msg;
  }
  // A step cut short names the byte where that step starts.
  EXPECT_NE(parse_error(bytes.substr(0, second - 1)).find("byte " + std::to_string(first) + ":"),
            std::string::npos);
  EXPECT_NE(parse_error(bytes.substr(0, second + 2)).find("byte " + std::to_string(second)),
            std::string::npos);
  // Whole steps read.
  EXPECT_EQ(lb::parse_dump(bytes.substr(0, second), "x").size(), 1u);
}

TEST(DumpFormat, TruncatedFileOnDiskNamesThePath) {
  const auto steps = sample_steps();
  const std::string path = temp_path("truncated");
  lb::write_dump(path, steps);
  const std::string bytes = slurp(path);
  spit(path, bytes.substr(0, bytes.size() - 7));
  try {
    (void)lb::read_dump(path);
    ADD_FAILURE() << "no error";
  } catch (const lb::dump_error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": byte "), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(DumpFormat, WrongMagic) {
  std::string bytes = lb::encode_dump_header(0);
  bytes[3] = 'X';
  const std::string msg = parse_error(bytes);
  EXPECT_NE(msg.find("f.lbdump: byte 0: not a weft lb dump"), std::string::npos) << msg;
  EXPECT_NE(parse_error("{\"type\":\"LBDatafile\"}").find("not a weft lb dump"), std::string::npos);
}

TEST(DumpFormat, WrongVersion) {
  std::string bytes = lb::encode_dump_header(0);
  bytes[8] = 2;
  const std::string msg = parse_error(bytes);
  EXPECT_NE(msg.find("f.lbdump: byte 8: format version 2: this build reads version 1 only"),
            std::string::npos)
      << msg;
}

TEST(DumpFormat, CorruptContentsAreErrors) {
  const auto steps = sample_steps();
  const std::string head = lb::encode_dump_header(0);
  const std::string step = lb::encode_step(steps[1]);  // 2 PEs, 1 object, no edges, no plan
  // Garbage after a whole step.
  EXPECT_NE(parse_error(head + step + "junk!").find("not a step"), std::string::npos);
  // A count that does not match the step's length.
  std::string bad = step;
  const std::size_t counts = 4 + 8 + 8 + (4 + steps[1].collection.size()) + 4 + 8 + 8;
  bad[counts] = 9;  // 9 PEs
  EXPECT_NE(parse_error(head + bad).find("do not fill the step"), std::string::npos)
      << parse_error(head + bad);
  // An object on a PE that does not exist: check_instance's words.
  bad = step;
  const std::size_t object = counts + 4 + 4 + 8 + 4 + 2 * 12;
  bad[object + 8] = 5;
  EXPECT_NE(parse_error(head + bad).find("byte 16: step 0: "), std::string::npos)
      << parse_error(head + bad);
  // Unknown object flags.
  bad = step;
  bad[object + 12] = 2;
  EXPECT_NE(parse_error(head + bad).find("version 1 knows only bit 0"), std::string::npos);
}

TEST(DumpFormat, MissingFileNamesItAndErrno) {
  try {
    (void)lb::read_dump("/nonexistent/weft.lbdump");
    ADD_FAILURE() << "no error";
  } catch (const lb::dump_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/weft.lbdump: cannot open: "),
              std::string::npos)
        << e.what();
  }
}

TEST(DumpFormat, NodeFileNames) {
  EXPECT_EQ(lb::dump_path_for_node("run.lbdump", 0), "run.lbdump");
  EXPECT_EQ(lb::dump_path_for_node("run.lbdump", 3), "run.lbdump.node3");
}

// ---- a run dumps its steps -----------------------------------------------------------

constexpr int run_steps = 4;
std::atomic<long> g_stepper_done{0};

// Elements call at_sync run_steps times; element 0..3 are heavy.
struct Stepper : weft::array_element<Stepper, int> {
  Stepper() = default;
  int done_ = 0;
  void pup(weft::pupper& p) { p | done_; }
  double load_estimate() const override { return this_index() < 4 ? 3.0 : 1.0; }
  void go() { at_sync(); }
  void resume_from_sync() override {
    if (++done_ == run_steps) {
      ++g_stepper_done;
      return;
    }
    this_proxy()[this_index()].send<&Stepper::go>();
  }
};

// Two arrays of `n` elements balance run_steps steps each, concurrently.
void run_two_arrays(int pes, int n, const std::vector<std::string>& opts) {
  g_stepper_done = 0;
  ASSERT_EQ(run_pes(
                pes,
                [n]() -> weft::task<> {
                  auto a = weft::array<Stepper>::create(n);
                  auto b = weft::array<Stepper>::create(n + 1);
                  a.broadcast<&Stepper::go>();
                  b.broadcast<&Stepper::go>();
                  co_await quiescence();
                  weft::exit(0);
                },
                opts),
            0);
  expect_no_pe_errors();
  EXPECT_EQ(g_stepper_done.load(), 2L * n + 1);
}

TEST(DumpRun, EveryStepOfTwoArrays) {
  const std::string path = temp_path("run_all");
  const int pes = 4, n = 10;
  run_two_arrays(pes, n, {"--weft:lb=greedy", "--weft:lb-dump=" + path});
  const auto steps = lb::read_dump(path);
  ASSERT_EQ(int(steps.size()), 2 * run_steps);
  std::map<std::string, std::set<std::uint64_t>> seen;
  std::set<std::size_t> sizes;
  for (const lb::dumped_step& s : steps) {
    EXPECT_TRUE(seen[s.collection].insert(s.step).second) << s.collection << " " << s.step;
    EXPECT_EQ(s.strategy, "greedy");
    EXPECT_EQ(s.inst.num_pes(), pes);
    EXPECT_EQ(s.chosen.size(), s.inst.objects.size());
    EXPECT_EQ(lb::check_instance(s.inst), "");
    sizes.insert(s.inst.objects.size());
    for (const lb::object_info& o : s.inst.objects) EXPECT_GE(o.load, 0);
    // load_estimate is what the records carry.
    double total = 0;
    for (const lb::object_info& o : s.inst.objects) total += o.load;
    EXPECT_DOUBLE_EQ(total, 4 * 3.0 + double(s.inst.objects.size() - 4));
  }
  EXPECT_EQ(sizes, (std::set<std::size_t>{std::size_t(n), std::size_t(n + 1)}));
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& [name, got] : seen) {
    EXPECT_EQ(name.rfind("array ", 0), 0u) << name;
    EXPECT_EQ(got, (std::set<std::uint64_t>{0, 1, 2, 3})) << name;
  }
  std::remove(path.c_str());
}

TEST(DumpRun, StepRangeWritesOnlyThoseSteps) {
  const std::string path = temp_path("run_range");
  run_two_arrays(2, 6,
                 {"--weft:lb=greedy-refine", "--weft:lb-dump=" + path, "--weft:lb-dump-steps=1:2"});
  const auto steps = lb::read_dump(path);
  ASSERT_EQ(steps.size(), 4u);
  std::map<std::string, std::set<std::uint64_t>> seen;
  for (const lb::dumped_step& s : steps) seen[s.collection].insert(s.step);
  for (const auto& [name, got] : seen) EXPECT_EQ(got, (std::set<std::uint64_t>{1, 2})) << name;
  std::remove(path.c_str());
}

TEST(DumpRun, NoStepsStillReplacesTheFile) {
  const std::string path = temp_path("run_none");
  spit(path, "stale contents of an earlier run");
  ASSERT_EQ(run_pes(2,
                    []() -> weft::task<> {
                      weft::exit(0);
                      co_return;
                    },
                    {"--weft:lb=greedy", "--weft:lb-dump=" + path}),
            0);
  EXPECT_TRUE(lb::read_dump(path).empty());
  std::remove(path.c_str());
}

TEST(DumpRun, UnwritableFileIsFatal) {
  EXPECT_EXIT((void)run_pes(1, []() -> weft::task<> { co_return; },
                            {"--weft:lb=greedy", "--weft:lb-dump=/nonexistent/dir/x.lbdump"}),
              testing::ExitedWithCode(3),
              "--weft:lb-dump: cannot create /nonexistent/dir/x.lbdump: .*No such file");
}

}  // namespace
