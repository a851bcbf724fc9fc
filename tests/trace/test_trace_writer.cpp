// The writer hand-off (issue 30): a full buffer goes to the session's writer
// thread and the track goes on in the next buffer of its pool; with none
// free it drops events and counts them, never blocks. Driven by hand, as
// core drives a run: tracks on threads of the test's own, marks numbered in
// `a` so that a file shows what was lost and whether anything came twice
// or out of order. The writer is made slow with WEFT_TRACE_TEST_SLOW_WRITER
// (milliseconds it sleeps before each buffer); buffers of 64 records, the
// smallest a session takes, so that a few thousand events make many.
#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace fs = std::filesystem;
using namespace weft::trace;
using detail::raw_record;

namespace {

constexpr std::uint32_t cap = 64;  // records per buffer
constexpr std::uint32_t mark_id = 7;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<raw_record> records_of(const fs::path& p) {
  const std::string f = slurp(p);
  if (f.size() < 32) return {};
  std::vector<raw_record> out((f.size() - 32) / 24);
  std::memcpy(out.data(), f.data() + 32, out.size() * 24);
  return out;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("weft-trace-writer-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

kind kind_of(const raw_record& r) {
  return kind(r.w & 0xff);
}

// What one track's file holds: its marks (in order, none twice), what its
// dropped records count, and its layout (ticks that never go back, every
// flush_begin the last record of a whole buffer, the end record last).
struct file_view {
  std::uint64_t marks = 0, dropped = 0, dropped_records = 0;
};

file_view check_file(const fs::path& p, std::uint64_t emitted) {
  SCOPED_TRACE(p.string());
  const std::vector<raw_record> r = records_of(p);
  file_view v;
  EXPECT_FALSE(r.empty());
  if (r.empty()) return v;
  std::uint64_t last_tick = 0;
  std::int64_t last_mark = -1;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::uint64_t tick = r[i].w >> 8;
    EXPECT_GE(tick, last_tick) << "record " << i << " goes back in time";
    last_tick = tick;
    switch (kind_of(r[i])) {
      case kind::mark:
        EXPECT_EQ(r[i].b, mark_id);
        EXPECT_GT(std::int64_t(r[i].a), last_mark) << "record " << i << ": a mark out of order";
        last_mark = r[i].a;
        ++v.marks;
        break;
      case kind::flush_begin:
        EXPECT_EQ((i + 1) % cap, 0u) << "flush_begin at record " << i;
        break;
      case kind::flush_end:
        EXPECT_EQ(r[i].a, cap) << "flush_end at record " << i;
        EXPECT_EQ(i % cap, 0u) << "flush_end at record " << i << ", not a buffer's first";
        break;
      case kind::dropped: {
        ++v.dropped_records;
        v.dropped += r[i].a | std::uint64_t(r[i].b) << 32;
        const std::uint64_t since = r[i].c | std::uint64_t(r[i].d) << 32;
        EXPECT_LE(since, tick) << "record " << i;
        EXPECT_GT(r[i].a, 0u) << "record " << i << ": a dropped record of no events";
        break;
      }
      default:
        break;
    }
  }
  EXPECT_EQ(kind_of(r.back()), kind::end);
  EXPECT_EQ(v.marks + v.dropped, emitted);
  return v;
}

// Runs `tracks` threads, each a PE's track that records `emit` (given its
// thread's number); returns after the session's end.
template <class Emit>
void run_session(const fs::path& dir, int tracks, unsigned pool, Emit emit,
                 std::uint64_t* dropped_said = nullptr) {
  session_config cfg;
  cfg.dir = dir.string();
  cfg.pes = tracks;
  cfg.buffer_bytes = cap * sizeof(raw_record);
  cfg.pool_buffers = pool;
  cfg.quiet = true;
  start_session(cfg);
  std::vector<std::thread> threads;
  for (int pe = 0; pe < tracks; ++pe)
    threads.emplace_back([pe, &emit] {
      begin_track(track_kind::pe, pe, pe);
      emit(pe);
      end_track();
    });
  for (auto& t : threads) t.join();
  if (dropped_said != nullptr) *dropped_said = dropped_events();
  pes_ended();
  end_session();
}

struct env_var {
  const char* name;
  env_var(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~env_var() { unsetenv(name); }
};

// A pool that holds everything the run records: the writer can never fall
// behind, and the file must hold every event, in order, once.
TEST(Writer, NothingIsLostWhileTheWriterKeepsUp) {
  const fs::path dir = fresh_dir("keeps-up");
  constexpr int tracks = 3;
  constexpr std::uint32_t marks = 2500;  // ~40 buffers per track
  std::uint64_t said = 1;
  run_session(
      dir, tracks, 64,
      [](int) {
        for (std::uint32_t i = 0; i < marks; ++i) detail::emit(kind::mark, i, mark_id, 0, 0);
      },
      &said);
  EXPECT_EQ(said, 0u);
  for (int pe = 0; pe < tracks; ++pe) {
    const file_view v = check_file(dir / ("node0.pe" + std::to_string(pe) + ".events"), marks);
    EXPECT_EQ(v.marks, marks);
    EXPECT_EQ(v.dropped_records, 0u);
  }
  EXPECT_NE(slurp(dir / "node0.json").find("\"complete\": true"), std::string::npos);
  fs::remove_all(dir);
}

// A writer that takes 20 ms a buffer, two buffers a track: bursts of marks
// overrun it, the track drops and counts, and resumes when a buffer is free.
// Marks in the file plus the dropped records' counts are what was emitted.
TEST(Writer, DropsAreCountedWhenTheWriterFallsBehind) {
  const fs::path dir = fresh_dir("falls-behind");
  env_var slow("WEFT_TRACE_TEST_SLOW_WRITER", "20");
  constexpr int tracks = 2;
  constexpr std::uint32_t bursts = 12, per_burst = 150;
  std::uint64_t said = 0;
  run_session(
      dir, tracks, 2,
      [](int) {
        std::uint32_t i = 0;
        for (std::uint32_t b = 0; b < bursts; ++b) {
          for (std::uint32_t k = 0; k < per_burst; ++k, ++i)
            detail::emit(kind::mark, i, mark_id, 0, 0);
          std::this_thread::sleep_for(std::chrono::milliseconds(8));
        }
      },
      &said);
  std::uint64_t dropped = 0;
  for (int pe = 0; pe < tracks; ++pe) {
    const file_view v =
        check_file(dir / ("node0.pe" + std::to_string(pe) + ".events"), bursts * per_burst);
    EXPECT_GT(v.dropped, 0u) << "PE " << pe;
    // It dropped and resumed: marks made it after a drop too.
    EXPECT_GT(v.marks, 2u * cap) << "PE " << pe;
    dropped += v.dropped;
  }
  EXPECT_EQ(said, dropped);
  EXPECT_NE(slurp(dir / "node0.json").find("\"complete\": true"), std::string::npos);
  fs::remove_all(dir);
}

// A fatal error while the writer is behind: the abort path writes the
// buffers that wait, in order, and the count of what was dropped since the
// last dropped record, before the end record.
TEST(Writer, AnAbortWritesWhatWaitsAndTheDropCount) {
  const fs::path dir = fresh_dir("abort");
  env_var slow("WEFT_TRACE_TEST_SLOW_WRITER", "300");
  constexpr std::uint32_t marks = 1000;
  run_session(dir, 1, 2, [](int) {
    for (std::uint32_t i = 0; i < marks; ++i) detail::emit(kind::mark, i, mark_id, 0, 0);
    abort_session(end_how::fatal, "a test's abort");
  });
  const fs::path file = dir / "node0.pe0.events";
  const file_view v = check_file(file, marks);
  EXPECT_EQ(v.dropped_records, 1u);
  EXPECT_EQ(v.marks, 2u * cap - 4);  // two buffers, less each one's own records
  const std::vector<raw_record> r = records_of(file);
  ASSERT_GE(r.size(), 2u);
  EXPECT_EQ(r.back().a, std::uint32_t(end_how::fatal));
  EXPECT_EQ(kind_of(r[r.size() - 2]), kind::dropped);
  fs::remove_all(dir);
}

// The test knob is checked as an option is: a bad value is refused in one
// line that names the accepted forms.
TEST(Writer, SlowWriterKnobIsChecked) {
  const fs::path dir = fresh_dir("knob");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("WEFT_TRACE_TEST_SLOW_WRITER", "fast", 1);
        session_config cfg;
        cfg.dir = dir.string();
        cfg.quiet = true;
        start_session(cfg);
      },
      testing::ExitedWithCode(2),
      "WEFT_TRACE_TEST_SLOW_WRITER=fast: expected milliseconds per buffer written, a whole "
      "number 0..10000");
  fs::remove_all(dir);
}

}  // namespace
