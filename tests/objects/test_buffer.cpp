// weft::buffer: the owning array itself, its serialization with reach
// anywhere (length + one memcpy, checked on unpacking) and with reach
// this_process (pointer + count: ownership moves through the bytes, no copy).
// The build runs under ASan with leak detection, so every test must end with
// each in-process block adopted again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>
#include "weft/objects/buffer.hpp"
#include "weft/objects/pup.hpp"

namespace {

using reach = weft::pupper::reach;

static_assert(!std::is_copy_constructible_v<weft::buffer<double>>);
static_assert(!std::is_copy_assignable_v<weft::buffer<double>>);
static_assert(std::is_nothrow_move_constructible_v<weft::buffer<double>>);
static_assert(std::is_nothrow_move_assignable_v<weft::buffer<double>>);
static_assert(std::is_convertible_v<weft::buffer<int>&, std::span<int>>);
static_assert(std::is_convertible_v<const weft::buffer<int>&, std::span<const int>>);
static_assert(!std::is_convertible_v<const weft::buffer<int>&, std::span<int>>);

struct point {
  double x, y, z;
};

weft::buffer<int> iota_buffer(std::size_t n, int start = 0) {
  weft::buffer<int> b(n);
  std::iota(b.begin(), b.end(), start);
  return b;
}

bool is_iota(const weft::buffer<int>& b, std::size_t n, int start = 0) {
  if (b.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != start + int(i)) return false;
  return true;
}

// Size + pack + unpack with reach this_process (weft::to_bytes is anywhere).
template <class... Ts>
std::vector<std::byte> to_bytes_in_process(Ts&... vs) {
  weft::pupper s = weft::pupper::sizer(reach::this_process);
  (s | ... | vs);
  std::vector<std::byte> out(s.offset());
  weft::pupper p = weft::pupper::packer(out.data(), out.size(), reach::this_process);
  (p | ... | vs);
  EXPECT_EQ(p.offset(), out.size());
  return out;
}

template <class... Ts>
void from_bytes_in_process(const std::vector<std::byte>& in, Ts&... vs) {
  weft::pupper p = weft::pupper::unpacker(in.data(), in.size(), reach::this_process);
  (p | ... | vs);
  EXPECT_EQ(p.remaining(), 0u);
}

// ---- the container -----------------------------------------------------------

TEST(Buffer, EmptyByDefault) {
  weft::buffer<double> b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.begin(), b.end());
  EXPECT_TRUE(weft::buffer<double>(0).empty());
}

TEST(Buffer, SizedAccessAndSpans) {
  weft::buffer<int> b = iota_buffer(5, 10);
  EXPECT_EQ(b.size(), 5u);
  EXPECT_EQ(b.size_bytes(), 5 * sizeof(int));
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(is_iota(b, 5, 10));
  std::span<int> s = b;
  s[2] = 99;
  EXPECT_EQ(b[2], 99);
  const weft::buffer<int>& cb = b;
  std::span<const int> cs = cb;
  EXPECT_EQ(cs.data(), b.data());
  EXPECT_EQ(cb.span().size(), 5u);
  EXPECT_EQ(std::accumulate(cb.begin(), cb.end(), 0), 10 + 11 + 99 + 13 + 14);
}

TEST(Buffer, CopyOfCopies) {
  std::vector<point> src{{1, 2, 3}, {4, 5, 6}};
  auto b = weft::buffer<point>::copy_of(src);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NE(static_cast<const void*>(b.data()), static_cast<const void*>(src.data()));
  EXPECT_EQ(b[1].y, 5);
  EXPECT_TRUE(weft::buffer<point>::copy_of({}).empty());
}

TEST(Buffer, AdoptsAndReleases) {
  std::unique_ptr<int[]> raw(new int[3]{7, 8, 9});
  int* addr = raw.get();
  weft::buffer<int> b(std::move(raw), 3);
  EXPECT_EQ(b.data(), addr);
  EXPECT_EQ(b[2], 9);
  weft::buffer_storage<int> back = b.release();
  EXPECT_EQ(back.get(), addr);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_THROW(weft::buffer<int>(nullptr, 4), std::invalid_argument);
  EXPECT_TRUE(weft::buffer<int>(nullptr, 0).empty());
}

TEST(Buffer, ReleasedBlockMemoryIsFreedByItsDeleter) {
  weft::buffer<int> b = iota_buffer(5);
  const int* addr = b.data();
  weft::buffer_storage<int> back = b.release();
  EXPECT_EQ(back.get(), addr);
  EXPECT_EQ(back[4], 4);
  EXPECT_TRUE(b.empty());
  back.reset();  // back to the block lists (ASan would see a mismatched free)
}

TEST(Buffer, FreedOnAnotherThreadThanTheOneThatMadeIt) {
  std::vector<weft::buffer<int>> made;
  for (int i = 0; i < 64; ++i) made.push_back(iota_buffer(std::size_t(1 + i * 37)));
  std::thread t([&made] {
    for (std::size_t i = 0; i < made.size(); ++i) {
      EXPECT_TRUE(is_iota(made[i], 1 + i * 37));
      made[i] = weft::buffer<int>();  // frees on this thread
    }
  });
  t.join();
  // And the freeing thread's blocks are reused by later buffers here.
  for (std::size_t i = 1; i <= 64; ++i) EXPECT_TRUE(is_iota(iota_buffer(i), i));
}

struct alignas(64) wide {
  double v[8];
};

TEST(Buffer, OverAlignedElementsAreAligned) {
  weft::buffer<wide> b(3);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
  b[2].v[7] = 1.0;
  auto bytes = weft::to_bytes(b);
  weft::buffer<wide> c;
  weft::from_bytes(bytes, c);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].v[7], 1.0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c.data()) % 64, 0u);
}

TEST(Buffer, MoveTransfersOwnership) {
  weft::buffer<int> a = iota_buffer(4);
  const int* addr = a.data();
  weft::buffer<int> b(std::move(a));
  EXPECT_EQ(b.data(), addr);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.data(), nullptr);
  weft::buffer<int> c = iota_buffer(2, 100);
  c = std::move(b);  // the old block of c is freed
  EXPECT_EQ(c.data(), addr);
  EXPECT_TRUE(is_iota(c, 4));
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  auto& self = c;
  c = std::move(self);  // self-move keeps the data
  EXPECT_EQ(c.data(), addr);
  EXPECT_EQ(c.size(), 4u);
}

// ---- reach anywhere: the data travels in the bytes ----------------------------

TEST(BufferPup, AnywhereRoundTripCopiesAndKeepsSource) {
  weft::buffer<int> in = iota_buffer(100, -7);
  const int* addr = in.data();
  auto bytes = weft::to_bytes(in);
  EXPECT_EQ(bytes.size(), sizeof(std::uint64_t) + 100 * sizeof(int));
  EXPECT_EQ(in.data(), addr);  // the source is untouched
  EXPECT_TRUE(is_iota(in, 100, -7));
  weft::buffer<int> out = iota_buffer(3);  // replaced, not appended to
  weft::from_bytes(bytes, out);
  EXPECT_TRUE(is_iota(out, 100, -7));
  EXPECT_NE(out.data(), in.data());
}

TEST(BufferPup, AnywhereEmptyBuffer) {
  weft::buffer<double> in;
  auto bytes = weft::to_bytes(in);
  EXPECT_EQ(bytes.size(), sizeof(std::uint64_t));
  weft::buffer<double> out(8);
  weft::from_bytes(bytes, out);
  EXPECT_TRUE(out.empty());
}

TEST(BufferPup, AnywhereLargeBuffer) {
  constexpr std::size_t n = 1'000'000;
  weft::buffer<double> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = double(i) * 0.5;
  auto bytes = weft::to_bytes(in);
  EXPECT_EQ(bytes.size(), sizeof(std::uint64_t) + n * sizeof(double));
  weft::buffer<double> out;
  weft::from_bytes(bytes, out);
  ASSERT_EQ(out.size(), n);
  EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
}

TEST(BufferPup, AnywhereInsideContainers) {
  std::vector<weft::buffer<int>> vin;
  vin.push_back(iota_buffer(3));
  vin.emplace_back();
  vin.push_back(iota_buffer(50, 1000));
  std::tuple<int, weft::buffer<int>, std::optional<weft::buffer<point>>> tin{
      42, iota_buffer(2, 5), weft::buffer<point>::copy_of(std::vector<point>{{1, 2, 3}})};
  std::optional<weft::buffer<int>> none;

  auto bytes = weft::to_bytes(vin, tin, none);
  EXPECT_EQ(bytes.size(), weft::packed_size(vin, tin, none));

  std::vector<weft::buffer<int>> vout;
  std::tuple<int, weft::buffer<int>, std::optional<weft::buffer<point>>> tout;
  std::optional<weft::buffer<int>> nout = iota_buffer(1);
  weft::from_bytes(bytes, vout, tout, nout);
  ASSERT_EQ(vout.size(), 3u);
  EXPECT_TRUE(is_iota(vout[0], 3));
  EXPECT_TRUE(vout[1].empty());
  EXPECT_TRUE(is_iota(vout[2], 50, 1000));
  EXPECT_EQ(std::get<0>(tout), 42);
  EXPECT_TRUE(is_iota(std::get<1>(tout), 2, 5));
  ASSERT_TRUE(std::get<2>(tout).has_value());
  ASSERT_EQ(std::get<2>(tout)->size(), 1u);
  EXPECT_EQ((*std::get<2>(tout))[0].z, 3);
  EXPECT_FALSE(nout.has_value());
}

// A user type holding buffers, as an entry-method argument would.
struct field_msg {
  int step = 0;
  weft::buffer<double> values;
  std::vector<weft::buffer<int>> halos;
  void pup(weft::pupper& p) { p | step | values | halos; }
};

TEST(BufferPup, AnywhereInsideUserType) {
  field_msg in;
  in.step = 3;
  in.values = weft::buffer<double>::copy_of(std::vector<double>{1.5, 2.5});
  in.halos.push_back(iota_buffer(4));
  auto bytes = weft::to_bytes(in);
  field_msg out;
  weft::from_bytes(bytes, out);
  EXPECT_EQ(out.step, 3);
  ASSERT_EQ(out.values.size(), 2u);
  EXPECT_EQ(out.values[1], 2.5);
  ASSERT_EQ(out.halos.size(), 1u);
  EXPECT_TRUE(is_iota(out.halos[0], 4));
}

// Every prefix of a valid buffer is truncated: each must throw, none crash.
TEST(BufferPup, AnywhereEveryPrefixThrows) {
  std::vector<weft::buffer<int>> in;
  in.push_back(iota_buffer(5));
  in.emplace_back();
  in.push_back(iota_buffer(3, 9));
  auto bytes = weft::to_bytes(in);
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + long(len));
    std::vector<weft::buffer<int>> out;
    EXPECT_THROW(weft::from_bytes(prefix, out), weft::serialization_error) << "length " << len;
  }
  // And the same for a lone buffer.
  auto one = weft::to_bytes(in[0]);
  for (std::size_t len = 0; len < one.size(); ++len) {
    std::vector<std::byte> prefix(one.begin(), one.begin() + long(len));
    weft::buffer<int> out;
    EXPECT_THROW(weft::from_bytes(prefix, out), weft::serialization_error) << "length " << len;
  }
}

TEST(BufferPup, AnywhereCorruptLengthThrowsBeforeAllocating) {
  weft::buffer<double> in = weft::buffer<double>::copy_of(std::vector<double>{1, 2, 3});
  auto bytes = weft::to_bytes(in);
  for (std::uint64_t bad : {std::uint64_t{4}, std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
    auto corrupt = bytes;
    std::memcpy(corrupt.data(), &bad, sizeof bad);
    weft::buffer<double> out;
    try {
      weft::from_bytes(corrupt, out);
      ADD_FAILURE() << "no error for length " << bad;
    } catch (const weft::serialization_error& e) {
      EXPECT_NE(std::string(e.what()).find("weft::buffer<double>"), std::string::npos) << e.what();
    }
  }
  // A length that is too short leaves bytes over.
  auto corrupt = bytes;
  const std::uint64_t two = 2;
  std::memcpy(corrupt.data(), &two, sizeof two);
  weft::buffer<double> out;
  EXPECT_THROW(weft::from_bytes(corrupt, out), weft::serialization_error);
}

// ---- reach this_process: the pointer travels, ownership moves -----------------

TEST(BufferPup, InProcessSizeIsPointerAndCount) {
  weft::buffer<double> big(1'000'000), empty;
  for (auto* b : {&big, &empty}) {
    weft::pupper s = weft::pupper::sizer(reach::this_process);
    EXPECT_TRUE(s.in_process());
    s | *b;
    EXPECT_EQ(s.offset(), sizeof(double*) + sizeof(std::uint64_t));
  }
  EXPECT_EQ(big.size(), 1'000'000u);  // sizing does not release
  weft::pupper a = weft::pupper::sizer();
  EXPECT_FALSE(a.in_process());
  a | big;
  EXPECT_EQ(a.offset(), sizeof(std::uint64_t) + 1'000'000 * sizeof(double));
  EXPECT_EQ(weft::packed_size(big), a.offset());
}

TEST(BufferPup, InProcessRoundTripMovesThePointer) {
  weft::buffer<double> in(1'000'000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = double(i);
  const double* addr = in.data();
  auto bytes = to_bytes_in_process(in);
  EXPECT_EQ(bytes.size(), sizeof(double*) + sizeof(std::uint64_t));
  EXPECT_TRUE(in.empty());  // the bytes own the block now
  EXPECT_EQ(in.data(), nullptr);
  weft::buffer<double> out(4);  // its old block is freed on adoption
  from_bytes_in_process(bytes, out);
  EXPECT_EQ(out.data(), addr);  // same memory: no copy
  ASSERT_EQ(out.size(), 1'000'000u);
  EXPECT_EQ(out[999'999], 999'999.0);
}

TEST(BufferPup, InProcessEmptyBuffer) {
  weft::buffer<int> in;
  auto bytes = to_bytes_in_process(in);
  weft::buffer<int> out = iota_buffer(2);
  from_bytes_in_process(bytes, out);
  EXPECT_TRUE(out.empty());
}

TEST(BufferPup, InProcessInsideContainersAndUserTypes) {
  field_msg in;
  in.step = 9;
  in.values = weft::buffer<double>::copy_of(std::vector<double>{1, 2, 3});
  in.halos.push_back(iota_buffer(10));
  in.halos.emplace_back();
  in.halos.push_back(iota_buffer(20, 50));
  const double* vaddr = in.values.data();
  const int* h0 = in.halos[0].data();
  const int* h2 = in.halos[2].data();
  std::optional<weft::buffer<int>> opt = iota_buffer(7);
  const int* oaddr = opt->data();

  auto bytes = to_bytes_in_process(in, opt);
  // step, 5 buffers (values, 3 halos, the optional's), the halos' length, the flag
  EXPECT_EQ(bytes.size(), sizeof(int) + 5 * (sizeof(void*) + 8) + 8 + 1);
  EXPECT_TRUE(in.values.empty());
  for (auto& h : in.halos) EXPECT_TRUE(h.empty());
  EXPECT_TRUE(opt.has_value() && opt->empty());

  field_msg out;
  std::optional<weft::buffer<int>> oout;
  from_bytes_in_process(bytes, out, oout);
  EXPECT_EQ(out.step, 9);
  EXPECT_EQ(out.values.data(), vaddr);
  EXPECT_EQ(out.values[2], 3.0);
  ASSERT_EQ(out.halos.size(), 3u);
  EXPECT_EQ(out.halos[0].data(), h0);
  EXPECT_TRUE(out.halos[1].empty());
  EXPECT_EQ(out.halos[2].data(), h2);
  EXPECT_TRUE(is_iota(out.halos[2], 20, 50));
  ASSERT_TRUE(oout.has_value());
  EXPECT_EQ(oout->data(), oaddr);
}

TEST(BufferPup, InProcessNullWithCountThrows) {
  std::vector<std::byte> bytes(sizeof(int*) + sizeof(std::uint64_t), std::byte{0});
  const std::uint64_t n = 5;
  std::memcpy(bytes.data() + sizeof(int*), &n, sizeof n);
  weft::buffer<int> out;
  weft::pupper p = weft::pupper::unpacker(bytes.data(), bytes.size(), reach::this_process);
  try {
    p | out;
    ADD_FAILURE() << "no error";
  } catch (const weft::serialization_error& e) {
    EXPECT_NE(std::string(e.what()).find("null pointer"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(out.empty());
}

TEST(BufferPup, InProcessTruncatedThrowsAndAdoptsNothing) {
  weft::buffer<int> in = iota_buffer(6);
  auto bytes = to_bytes_in_process(in);
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    weft::buffer<int> out;
    weft::pupper p = weft::pupper::unpacker(bytes.data(), len, reach::this_process);
    EXPECT_THROW(p | out, weft::serialization_error) << "length " << len;
    EXPECT_TRUE(out.empty());
  }
  weft::buffer<int> out;  // the full bytes still own the block: adopt it once
  from_bytes_in_process(bytes, out);
  EXPECT_TRUE(is_iota(out, 6));
}

TEST(BufferPup, InProcessPackingIntoTooSmallBytesKeepsTheSource) {
  weft::buffer<int> in = iota_buffer(3);
  for (std::size_t cap = 0; cap < sizeof(int*) + sizeof(std::uint64_t); ++cap) {
    std::vector<std::byte> out(cap);
    weft::pupper p = weft::pupper::packer(out.data(), out.size(), reach::this_process);
    EXPECT_THROW(p | in, weft::serialization_error) << "capacity " << cap;
    EXPECT_TRUE(is_iota(in, 3));  // not released: nobody else owns it
  }
}

}  // namespace
