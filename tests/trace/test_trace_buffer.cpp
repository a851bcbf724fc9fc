// --weft:trace-buffer=MiB on a real node: each PE's buffer holds MiB·2^20 /
// 24 records, and a full one is handed to the writer thread as a flush slice
// (docs/tracing.md, docs/design/trace-format.md). Two PEs pass messages
// whose handlers make many marks, several buffers' worth per PE, with a
// pool (--weft:trace-pool) that holds them all: however far the writer falls
// behind on a loaded machine, nothing may be dropped (tests/trace/
// test_trace_writer.cpp has the drops). Then each PE's event file must be a
// valid trace (header, whole records, ticks that never go back, slices that
// nest) in which
//  - every flush wrote exactly one full buffer: each flush_end counts `cap`
//    records, the flush_begin that closes each buffer is record k·cap - 1
//    of the file, and the file holds (flushes) whole buffers and less than
//    one more;
//  - nothing was lost: as many handler_begin records of the test's handler
//    and marks as the PE ran, and no dropped record.
// For 1 and 2 MiB (the default is 4): the same run flushes at other places.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include "core/support.hpp"
#include "weft/trace/trace.hpp"
#include "weft/weft.hpp"

namespace fs = std::filesystem;
using weft::trace::kind;
using weft::trace::detail::raw_record;

namespace {

using weft_test::first_error;
using weft_test::g_errors;
using weft_test::record_error;
using weft_test::reset_errors;
using weft_test::run_node;
using weft_test::threads_opt;

constexpr int pes = 2;
constexpr int marks_per_message = 500;

struct alignas(64) pe_count {
  std::atomic<long> handled{0};
  std::atomic<long> marks{0};
};

struct run_state {
  long hops = 0;                                  // messages in each chain
  std::unique_ptr<weft::trace::event_name> tick;  // made on PE 0 once the trace is on
  std::uint32_t mark_id = 0;
  pe_count counts[pes];
};
run_state* g_run = nullptr;

void on_hop(weft::message_ptr m);
const weft::handler_id h_hop = weft::register_handler("trace_buffer.hop", on_hop);

// A chain: each hop makes its marks and passes the message to the other PE.
void on_hop(weft::message_ptr m) {
  run_state& s = *g_run;
  const int me = weft::my_pe();
  for (int i = 0; i < marks_per_message; ++i) weft::trace::mark(*s.tick);
  s.counts[me].marks.fetch_add(marks_per_message, std::memory_order_relaxed);
  s.counts[me].handled.fetch_add(1, std::memory_order_relaxed);
  long& left = m->as<long>();
  if (--left > 0) weft::send((me + 1) % weft::num_pes(), std::move(m));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool is_begin(kind k) {
  return k == kind::handler_begin || k == kind::entry_begin || k == kind::region_begin ||
         k == kind::flush_begin || k == kind::task_begin || k == kind::progress_begin ||
         k == kind::lb_begin;
}
bool is_end(kind k) {
  return k == kind::handler_end || k == kind::entry_end || k == kind::region_end ||
         k == kind::flush_end || k == kind::task_end || k == kind::progress_end ||
         k == kind::lb_end;
}

// Checks one PE's event file; returns its number of flushes.
long check_events(const fs::path& file, int pe, std::size_t cap, long handled, long marks,
                  std::uint32_t mark_id) {
  SCOPED_TRACE(file.string());
  const std::string f = slurp(file);
  EXPECT_GE(f.size(), 32u);
  if (f.size() < 32) return 0;
  EXPECT_EQ(std::memcmp(f.data(), "WEFTTRC\0", 8), 0);
  std::uint32_t header[6];
  std::memcpy(header, f.data() + 8, sizeof header);
  EXPECT_EQ(header[0], 3u);   // format version (docs/design/trace-format.md)
  EXPECT_EQ(header[1], 24u);  // record bytes
  EXPECT_EQ(header[2], 0u);   // node
  EXPECT_EQ(int(header[3]), pe);
  EXPECT_EQ(header[4], 0u);  // a PE's track
  EXPECT_EQ((f.size() - 32) % 24, 0u) << "a truncated record";
  const std::size_t n = (f.size() - 32) / 24;
  std::vector<raw_record> r(n);
  std::memcpy(r.data(), f.data() + 32, n * 24);

  long flush_begins = 0, flush_ends = 0, handler_begins = 0, mark_count = 0;
  std::uint64_t last_tick = 0;
  std::vector<std::pair<kind, std::uint32_t>> open;  // slices begun, not yet ended
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = kind(r[i].w & 0xff);
    const std::uint64_t tick = r[i].w >> 8;
    EXPECT_GE(tick, last_tick) << "record " << i << " goes back in time";
    last_tick = tick;
    if (k == kind::flush_begin) {
      ++flush_begins;
      // The record that closes a full buffer: the last of it.
      EXPECT_EQ((i + 1) % cap, 0u) << "flush_begin at record " << i << ", buffer of " << cap;
    }
    if (k == kind::flush_end) {
      ++flush_ends;
      EXPECT_EQ(r[i].a, cap) << "flush_end at record " << i << " wrote another count";
    }
    EXPECT_NE(k, kind::dropped) << "record " << i;
    if (k == kind::handler_begin && r[i].a == h_hop) ++handler_begins;
    if (k == kind::mark && r[i].a == mark_id) ++mark_count;
    // Slices nest: an end closes the innermost open begin, of the same kind
    // and id (flush_end carries a count, not an id).
    if (is_begin(k)) open.push_back({k, k == kind::flush_begin ? 0 : r[i].a});
    if (is_end(k)) {
      const bool ok = !open.empty() && std::uint8_t(open.back().first) + 1 == std::uint8_t(k) &&
                      (k == kind::flush_end || open.back().second == r[i].a);
      EXPECT_TRUE(ok) << "record " << i << " (kind " << int(k) << ") ends no open slice";
      if (!ok) return flush_ends;
      open.pop_back();
    }
  }
  EXPECT_EQ(flush_begins, flush_ends);
  // Every buffer but the last was full and written whole.
  EXPECT_EQ(std::size_t(flush_ends), n / cap) << n << " records, buffers of " << cap;
  EXPECT_EQ(handler_begins, handled);
  EXPECT_EQ(mark_count, marks);
  return flush_ends;
}

class TraceBuffer : public testing::TestWithParam<int> {};

TEST_P(TraceBuffer, AFullBufferOfThisSizeIsWrittenWhole) {
  const int mib = GetParam();
  const std::size_t cap = (std::size_t(mib) << 20) / 24;
  const fs::path dir =
      fs::path(testing::TempDir()) /
      ("weft_trace_buffer_" + std::to_string(::getpid()) + "_" + std::to_string(mib));
  fs::remove_all(dir);
  reset_errors();
  run_state s;
  // About five 2 MiB buffers of marks per PE: several flushes for each size.
  const long per_pe = 5 * ((2l << 20) / 24);
  s.hops = per_pe / marks_per_message;  // each chain visits each PE hops/2 times, two chains
  g_run = &s;
  // ~10.5 MiB of records per PE: a pool of 16 MiB.
  const int rc = run_node({threads_opt(pes), "--weft:trace=" + dir.string(),
                           "--weft:trace-buffer=" + std::to_string(mib),
                           "--weft:trace-pool=" + std::to_string(16 / mib)},
                          [] {
                            g_run->tick =
                                std::make_unique<weft::trace::event_name>("trace_buffer.tick");
                            g_run->mark_id = g_run->tick->id();
                            for (int pe = 0; pe < pes; ++pe)
                              weft::send(pe, weft::make_message_with(h_hop, g_run->hops));
                            weft::exit_at_quiescence(0);
                          });
  g_run = nullptr;
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(g_errors.load(), 0) << first_error();

  const std::string meta = slurp(dir / "node0.json");
  EXPECT_NE(meta.find("\"complete\": true"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"trace_buffer.tick\""), std::string::npos);
  long total_handled = 0;
  for (int pe = 0; pe < pes; ++pe) {
    const long handled = s.counts[pe].handled.load();
    total_handled += handled;
    const long flushes = check_events(dir / ("node0.pe" + std::to_string(pe) + ".events"), pe, cap,
                                      handled, s.counts[pe].marks.load(), s.mark_id);
    // The run made enough records for several buffers of this size.
    EXPECT_GE(flushes, long(s.counts[pe].marks.load() / long(cap)) - 1) << "PE " << pe;
    EXPECT_GE(flushes, 2) << "PE " << pe;
  }
  EXPECT_EQ(total_handled, pes * s.hops);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(MiB, TraceBuffer, testing::Values(1, 2),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "MiB";
                         });

}  // namespace
