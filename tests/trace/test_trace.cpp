// The trace layer without a node: counters, and a session's files written
// by hand-driven tracks (the runs of whole programs are in CMakeLists.txt).
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "weft/trace/counters.hpp"
#include "weft/trace/session.hpp"
#include "weft/trace/trace.hpp"

namespace fs = std::filesystem;
using namespace weft::trace;

namespace {

int real_open(perf_event_attr* attr, int pid, int cpu, int group, unsigned long flags) {
  return int(syscall(SYS_perf_event_open, attr, pid, cpu, group, flags));
}

// A kernel without hardware counters (a virtual machine): ENOENT for them.
int no_hardware(perf_event_attr* attr, int pid, int cpu, int group, unsigned long flags) {
  if (attr->type != PERF_TYPE_SOFTWARE) {
    errno = ENOENT;
    return -1;
  }
  return real_open(attr, pid, cpu, group, flags);
}

// The hardware path driven by a software event: a hardware request is
// answered by the kernel's task clock, so the values that come back are
// real counts going up, through the very code a hardware counter takes.
int hardware_as_task_clock(perf_event_attr* attr, int pid, int cpu, int group,
                           unsigned long flags) {
  if (attr->type != PERF_TYPE_SOFTWARE) {
    perf_event_attr sw = *attr;
    sw.type = PERF_TYPE_SOFTWARE;
    sw.config = PERF_COUNT_SW_TASK_CLOCK;
    return real_open(&sw, pid, cpu, group, flags);
  }
  return real_open(attr, pid, cpu, group, flags);
}

// perf_event_paranoid >= 2 for a user: only user-space counting.
int user_space_only(perf_event_attr* attr, int pid, int cpu, int group, unsigned long flags) {
  if (!attr->exclude_kernel) {
    errno = EACCES;
    return -1;
  }
  return hardware_as_task_clock(attr, pid, cpu, group, flags);
}

double spin(int n) {
  double x = 1;
  for (int i = 0; i < n; ++i) x = x * 1.0000001 + std::sqrt(double(i));
  return x;
}

bool task_clock_available() {
  counter_set c;
  c.open({"task-clock"});
  return !c.opened().empty();
}

}  // namespace

TEST(Counters, ListsAreChecked) {
  EXPECT_EQ(check_counter_list("off"), "");
  EXPECT_EQ(check_counter_list(default_counters()), "");
  EXPECT_EQ(check_counter_list("cycles,task-clock"), "");
  EXPECT_NE(check_counter_list("cycles,bogus").find("unknown counter 'bogus'"), std::string::npos);
  EXPECT_NE(check_counter_list("cycles,,instructions").find("empty name"), std::string::npos);
  EXPECT_NE(check_counter_list("cycles,cycles").find("named twice"), std::string::npos);
  EXPECT_NE(check_counter_list("").find("empty"), std::string::npos);
  EXPECT_EQ(split_counter_list("off").size(), 0u);
  EXPECT_EQ(split_counter_list("a,b").size(), 2u);
}

TEST(Counters, RefusedHardwareIsLeftOutAndSaid) {
  if (!task_clock_available()) GTEST_SKIP() << "this kernel gives no perf events at all";
  counter_set c;
  c.open(split_counter_list(default_counters()), no_hardware);
  ASSERT_EQ(c.opened().size(), 2u);
  EXPECT_EQ(c.opened()[0], "context-switches");
  EXPECT_EQ(c.opened()[1], "cpu-migrations");
  ASSERT_EQ(c.refused().size(), 4u);
  EXPECT_NE(c.refused()[0].find("cycles: "), std::string::npos);
  EXPECT_NE(c.refused()[0].find(std::strerror(ENOENT)), std::string::npos);
  EXPECT_EQ(c.read().size(), 2u);
}

TEST(Counters, HardwarePathCountsThroughASoftwareEvent) {
  if (!task_clock_available()) GTEST_SKIP() << "this kernel gives no perf events at all";
  counter_set c;
  c.open({"cycles", "instructions", "llc-misses"}, hardware_as_task_clock);
  ASSERT_EQ(c.opened().size(), 3u);
  EXPECT_TRUE(c.refused().empty());
  const std::vector<std::uint64_t> a = c.read();
  volatile double sink = spin(2'000'000);
  (void)sink;
  const std::vector<std::uint64_t> b = c.read();
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_GT(b[i], a[i]) << c.opened()[i];
}

TEST(Counters, UserSpaceOnlyKernelsAreCountedAndMarked) {
  if (!task_clock_available()) GTEST_SKIP() << "this kernel gives no perf events at all";
  counter_set c;
  c.open({"cycles", "context-switches"}, user_space_only);
  // A hardware counter falls back to user space (":u"); a software one would
  // count nothing there and is refused instead.
  ASSERT_EQ(c.opened().size(), 1u);
  EXPECT_EQ(c.opened()[0], "cycles:u");
  ASSERT_EQ(c.refused().size(), 1u);
  EXPECT_NE(c.refused()[0].find("context-switches"), std::string::npos);
}

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct raw_record {
  std::uint64_t w;
  std::uint32_t a, b, c, d;
};

std::vector<raw_record> records_of(const std::string& file) {
  std::vector<raw_record> out((file.size() - 32) / 24);
  std::memcpy(out.data(), file.data() + 32, out.size() * 24);
  return out;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("weft-trace-test-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST(Session, FullModeWritesHeaderRecordsAndMetadata) {
  const fs::path dir = fresh_dir("full") / "nested";
  session_config cfg;
  cfg.dir = dir.string();
  cfg.mode = trace_mode::full;
  cfg.buffer_bytes = 64 * 24;  // small: several flushes
  // A pool that holds the whole run: nothing is dropped however late the
  // writer thread runs (test_trace_writer.cpp has the drops).
  cfg.pool_buffers = 16;
  cfg.pes = 2;
  cfg.argv = {"test"};
  start_session(cfg);
  ASSERT_TRUE(enabled());
  static const event_name step{"step \"quoted\""};
  std::thread pe1([] {
    begin_track(track_kind::pe, 1, 1);
    for (int i = 0; i < 100; ++i) {
      region r{step};
      mark("tick");
    }
    end_track();
  });
  begin_track(track_kind::pe, 0, 0);
  for (int i = 0; i < 10; ++i) {
    detail::idle_enter();
    detail::idle_enter();  // one idle period, however many back-off rounds
    detail::record(kind::handler_begin, 3, 1, 16, detail::record_send(1, 16, 3, 0));
    detail::record(kind::handler_end, 3, 0, 0, 0);
  }
  end_track();
  pe1.join();
  pes_ended();
  end_session();
  EXPECT_FALSE(enabled());

  const std::string meta = slurp(dir / "node0.json");
  EXPECT_NE(meta.find("\"complete\": true"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"mono_ns_end\""), std::string::npos);
  EXPECT_NE(meta.find("step \\\"quoted\\\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"node0.pe1.events\""), std::string::npos);

  const std::string f0 = slurp(dir / "node0.pe0.events");
  ASSERT_GE(f0.size(), 32u);
  EXPECT_EQ(std::memcmp(f0.data(), "WEFTTRC\0", 8), 0);
  EXPECT_EQ((f0.size() - 32) % 24, 0u);
  int begins = 0, ends = 0, idle_begins = 0, idle_ends = 0, sends = 0;
  std::uint64_t last = 0;
  for (const raw_record& r : records_of(f0)) {
    const auto k = kind(r.w & 0xff);
    EXPECT_GE(r.w >> 8, last);
    last = r.w >> 8;
    begins += k == kind::handler_begin;
    ends += k == kind::handler_end;
    idle_begins += k == kind::idle_begin;
    idle_ends += k == kind::idle_end;
    sends += k == kind::send;
  }
  EXPECT_EQ(begins, 10);
  EXPECT_EQ(ends, 10);
  EXPECT_EQ(sends, 10);
  // Each handler_begin closed the idle period before it.
  EXPECT_EQ(idle_begins, 10);
  EXPECT_EQ(idle_ends, 10);

  // PE 1's buffer filled several times: every record arrived, with the
  // flushes shown as slices.
  const std::vector<raw_record> r1 = records_of(slurp(dir / "node0.pe1.events"));
  int marks = 0, region_begins = 0, region_ends = 0, flushes = 0, flush_ends = 0;
  for (const raw_record& r : r1) {
    const auto k = kind(r.w & 0xff);
    marks += k == kind::mark;
    region_begins += k == kind::region_begin;
    region_ends += k == kind::region_end;
    flushes += k == kind::flush_begin;
    flush_ends += k == kind::flush_end;
  }
  EXPECT_EQ(marks, 100);
  EXPECT_EQ(region_begins, 100);
  EXPECT_EQ(region_ends, 100);
  EXPECT_GE(flushes, 4);
  EXPECT_EQ(flushes, flush_ends);
  fs::remove_all(dir.parent_path());
}

TEST(Session, SummaryModeKeepsTotalsAndHistogram) {
  const fs::path dir = fresh_dir("summary");
  session_config cfg;
  cfg.dir = dir.string();
  cfg.mode = trace_mode::summary;
  cfg.pes = 1;
  start_session(cfg);
  begin_track(track_kind::pe, 0, 0);
  for (int i = 0; i < 5; ++i) {
    detail::record(kind::handler_begin, 7, 0, 0, 0);
    detail::record(kind::entry_begin, 2, 0, 0, 0);
    volatile double sink = spin(20'000);
    (void)sink;
    detail::record(kind::entry_end, 2, 0, 0, 0);
    detail::record(kind::handler_end, 7, 0, 0, 0);
    detail::idle_enter();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  end_track();
  pes_ended();
  end_session();
  EXPECT_FALSE(fs::exists(dir / "node0.pe0.events"));
  const std::string meta = slurp(dir / "node0.json");
  EXPECT_NE(meta.find("\"mode\": \"summary\""), std::string::npos);
  EXPECT_NE(meta.find("\"summary_file\": \"node0.summary.json\""), std::string::npos);
  const std::string sum = slurp(dir / "node0.summary.json");
  EXPECT_NE(sum.find("{\"space\": \"handler\", \"id\": 7, \"count\": 5,"), std::string::npos)
      << sum;
  EXPECT_NE(sum.find("{\"space\": \"entry\", \"id\": 2, \"count\": 5,"), std::string::npos) << sum;
  EXPECT_NE(sum.find("\"bins\": [["), std::string::npos) << sum;
  EXPECT_NE(sum.find("\"bin_ns\": "), std::string::npos);
  fs::remove_all(dir);
}

namespace {
// The numbers of a name's row in a summary file: count, timed, total_ns.
struct summary_row {
  long long count = -1, timed = -1, total_ns = -1;
};
summary_row row_of(const std::string& sum, const std::string& space, int id) {
  const std::string key = "{\"space\": \"" + space + "\", \"id\": " + std::to_string(id) + ",";
  const std::size_t at = sum.find(key);
  summary_row r;
  if (at == std::string::npos) return r;
  const auto num = [&](const char* field) {
    const std::size_t f = sum.find(std::string("\"") + field + "\": ", at);
    return f == std::string::npos ? -1 : std::stoll(sum.substr(f + std::strlen(field) + 4));
  };
  r.count = num("count");
  r.timed = num("timed");
  r.total_ns = num("total_ns");
  return r;
}

// A summary session of one PE track running `body`, with
// --weft:trace-time-every=`every`; returns nodeN.summary.json.
template <class Body>
std::string summary_of(const char* name, std::uint32_t every, Body body) {
  const fs::path dir = fresh_dir(name);
  session_config cfg;
  cfg.dir = dir.string();
  cfg.mode = trace_mode::summary;
  cfg.time_every = every;
  cfg.pes = 1;
  start_session(cfg);
  begin_track(track_kind::pe, 0, 0);
  body();
  end_track();
  pes_ended();
  end_session();
  std::string sum = slurp(dir / "node0.summary.json");
  fs::remove_all(dir);
  return sum;
}
}  // namespace

// Short slices: every one counted, through the inline path as the layers
// call it; the first 16 of a name timed, then 1 in N on average; every
// slice inside a timed one timed with it. How many are timed does not
// depend on time:
// the shortest of these slices stays far under 1 us however loaded the
// machine is (a preempted slice only lengthens).
TEST(Session, SummaryModeCountsEverySliceAndTimesOneInN) {
  constexpr int n = 1000;
  const std::string sum = summary_of("summary_sampled", 4, [] {
    for (int i = 0; i < n; ++i) {
      detail::begin_handler(i > 0, 7, 0, 0, 0);
      detail::emit_adjacent(kind::handler_begin, kind::entry_begin, 2, 0, 0, 0);
      detail::record_send(0, 8, 7, 0);   // an instant: no row, no time
      volatile double sink = spin(100);  // ~0.2 us: more than the timing's own
      (void)sink;
      detail::emit(kind::entry_end, 2, 0, 0, 0);
      detail::emit_adjacent(kind::entry_end, kind::handler_end, 7, 0, 0, 0);
    }
    // One handler alone: timed, with the entry inside it.
    detail::emit(kind::handler_begin, 9, 0, 0, 0);
    detail::emit(kind::entry_begin, 2, 0, 0, 0);
    detail::emit(kind::entry_end, 2, 0, 0, 0);
    detail::emit(kind::handler_end, 9, 0, 0, 0);
  });
  const summary_row h = row_of(sum, "handler", 7), e = row_of(sum, "entry", 2),
                    h9 = row_of(sum, "handler", 9);
  EXPECT_EQ(h.count, n) << sum;
  // 1 in 4 on average after the first 16: random gaps of 1 to 7.
  EXPECT_GE(h.timed, 16 + (n - 16) / 7) << sum;
  EXPECT_LE(h.timed, 16 + (n - 16) / 2) << sum;
  // The entry is timed with every timed handler (and inside handler 9),
  // and at times on its own.
  EXPECT_EQ(e.count, n + 1) << sum;
  EXPECT_GE(e.timed, h.timed + 1) << sum;
  EXPECT_LE(e.timed, e.count) << sum;
  EXPECT_EQ(h9.count, 1) << sum;
  EXPECT_EQ(h9.timed, 1) << sum;
  EXPECT_GT(h.total_ns, 0) << sum;
  EXPECT_NE(sum.find("\"time_every\": 4"), std::string::npos) << sum;
}

// Long slices (each over 8 us, whatever the machine does) are all timed
// once the first ones show it; 1 times every slice of any length.
TEST(Session, SummaryModeTimesEveryLongSliceAndEverySliceAtOne) {
  const std::string lng = summary_of("summary_long", 16, [] {
    for (int i = 0; i < 40; ++i) {
      detail::emit(kind::region_begin, 3, 0, 0, 0);
      std::this_thread::sleep_for(std::chrono::microseconds(10));
      detail::emit(kind::region_end, 3, 0, 0, 0);
    }
  });
  const summary_row r = row_of(lng, "user", 3);
  EXPECT_EQ(r.count, 40) << lng;
  EXPECT_EQ(r.timed, 40) << lng;
  EXPECT_GE(r.total_ns, 40 * 10000) << lng;
  const std::string all = summary_of("summary_all", 1, [] {
    for (int i = 0; i < 100; ++i) {
      detail::emit(kind::task_begin, 5, 0, 0, 0);
      detail::emit(kind::task_end, 5, 0, 0, 0);
    }
  });
  const summary_row t = row_of(all, "task", 5);
  EXPECT_EQ(t.count, 100) << all;
  EXPECT_EQ(t.timed, 100) << all;
}

TEST(Session, OffRecordsNothing) {
  EXPECT_FALSE(enabled());
  mark("nobody hears this");
  region r{"nor this"};
  detail::record(kind::handler_begin, 1, 0, 0, 0);  // no track, no session: a no-op
  EXPECT_FALSE(session_traces());
}

namespace {
// A kernel that gives no counter at all.
int refuse_all(perf_event_attr*, int, int, int, unsigned long) {
  errno = ENOENT;
  return -1;
}

// stderr of a session of one PE track with `counters`, opened by `open`.
std::string session_stderr(const fs::path& dir, bool asked, perf_open_fn open) {
  session_config cfg;
  cfg.dir = dir.string();
  cfg.pes = 1;
  cfg.counters = {"cycles", "context-switches"};
  cfg.counters_asked = asked;
  cfg.perf_open = open;
  testing::internal::CaptureStderr();
  start_session(cfg);
  begin_track(track_kind::pe, 0, 0);
  end_track();
  pes_ended();
  end_session();
  return testing::internal::GetCapturedStderr();
}
}  // namespace

// Issue 24, item 8: a run that did not ask for counters (the default list of
// --weft:stats and --weft:trace) says nothing about the ones the kernel
// refuses; the metadata still notes them. One that asked hears it.
TEST(Session, RefusedCountersAreSaidOnlyWhenAsked) {
  const fs::path dir = fresh_dir("counters-quiet");
  const std::string quiet = session_stderr(dir, false, refuse_all);
  EXPECT_EQ(quiet.find("counters not available"), std::string::npos) << quiet;
  const std::string meta = slurp(dir / "node0.json");
  EXPECT_NE(meta.find("\"note\": \"cycles: No such file or directory; context-switches: No such "
                      "file or directory\""),
            std::string::npos)
      << meta;
  const std::string said = session_stderr(dir, true, refuse_all);
  EXPECT_NE(said.find("weft: counters not available: cycles: No such file or directory; "
                      "context-switches: No such file or directory; no counters this run"),
            std::string::npos)
      << said;
  // Counters only (--weft:stats without a trace): quiet too.
  const std::string stats = session_stderr("", false, refuse_all);
  EXPECT_EQ(stats.find("counters not available"), std::string::npos) << stats;
  fs::remove_all(dir);
}

// Issue 24, item 6: whatever bytes the program's arguments and names hold,
// the metadata is valid UTF-8: bad bytes become U+FFFD, controls \u escapes.
TEST(Session, MetadataIsValidUtf8WhateverTheArguments) {
  const fs::path dir = fresh_dir("utf8");
  session_config cfg;
  cfg.dir = dir.string();
  cfg.pes = 1;
  cfg.argv = {"./app",        "\xff",          "caf\xc3\xa9", "a\xc3(b",
              "\xed\xa0\x80", "tab\there\x01", "cut\xe2\x82"};
  start_session(cfg);
  begin_track(track_kind::pe, 0, 0);
  mark("name \xfe\"quoted\"");
  end_track();
  pes_ended();
  end_session();
  const std::string meta = slurp(dir / "node0.json");
  // Valid UTF-8 throughout (a strict decoder's rules: no overlong forms, no
  // surrogates, no bytes past U+10FFFF).
  std::size_t i = 0;
  while (i < meta.size()) {
    const auto c = static_cast<unsigned char>(meta[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    ASSERT_GE(n, 0) << "bad lead byte at " << i << ": " << meta;
    ASSERT_LE(i + std::size_t(n), meta.size() - 1);
    std::uint32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(meta[i + std::size_t(k)]);
      ASSERT_EQ(cc >> 6, 2) << "bad continuation at " << i + std::size_t(k);
      cp = cp << 6 | (cc & 0x3f);
    }
    static constexpr std::uint32_t min_of[4] = {0, 0x80, 0x800, 0x10000};
    EXPECT_GE(cp, min_of[n]) << "overlong form at " << i;
    EXPECT_FALSE(cp >= 0xd800 && cp <= 0xdfff) << "surrogate at " << i;
    EXPECT_LE(cp, 0x10ffffu);
    i += std::size_t(n) + 1;
  }
  EXPECT_NE(meta.find("\"\xef\xbf\xbd\""), std::string::npos) << meta;  // "\xff" alone
  EXPECT_NE(meta.find("\"caf\xc3\xa9\""), std::string::npos) << meta;   // valid UTF-8 kept
  EXPECT_NE(meta.find("\"a\xef\xbf\xbd(b\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"tab\\there\\u0001\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"name \xef\xbf\xbd\\\"quoted\\\"\""), std::string::npos) << meta;
  fs::remove_all(dir);
}

// Format 2: every track's file ends with an end record (how: exit), and the
// metadata says how the run ended.
TEST(Session, FilesEndWithTheirEndRecord) {
  const fs::path dir = fresh_dir("end-record");
  session_config cfg;
  cfg.dir = dir.string();
  cfg.pes = 1;
  start_session(cfg);
  begin_track(track_kind::pe, 0, 0);
  // Listed from the time every PE has begun (a killed run keeps that).
  EXPECT_NE(slurp(dir / "node0.json").find("\"node0.pe0.events\""), std::string::npos);
  EXPECT_NE(slurp(dir / "node0.json").find("\"complete\": false, \"aborted\": false"),
            std::string::npos);
  detail::record(kind::handler_begin, 1, 0, 0, 0);
  detail::record(kind::handler_end, 1, 0, 0, 0);
  end_track();
  pes_ended();
  end_session();
  const std::vector<raw_record> r = records_of(slurp(dir / "node0.pe0.events"));
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(kind(r.back().w & 0xff), kind::end);
  EXPECT_EQ(r.back().a, std::uint32_t(end_how::exit));
  EXPECT_GE(r.back().w >> 8, r[r.size() - 2].w >> 8);
  const std::string meta = slurp(dir / "node0.json");
  EXPECT_NE(meta.find("\"version\": 3"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"end\": {\"how\": \"exit\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"complete\": true, \"aborted\": false"), std::string::npos) << meta;
  fs::remove_all(dir);
}
