// Serialization: round trips for every supported type, the one-memcpy path
// for contiguous trivially copyable data, and unpacking of corrupt and
// truncated buffers (always a serialization_error naming the type, never a
// crash: ASan/UBSan watch the fuzz loops).
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <random>
#include <span>
#include "test_scale.hpp"
#include "weft/objects/pup.hpp"

namespace {

struct point {
  double x, y, z;
  bool operator==(const point&) const = default;
};

enum class color : std::uint8_t { red, green, blue };

struct particle {
  std::vector<double> pos;
  std::string name;
  int id = 0;
  std::optional<point> anchor;
  color c = color::red;
  void pup(weft::pupper& p) { p | pos | name | id | anchor | c; }
  bool operator==(const particle&) const = default;
};

struct everything {
  std::vector<particle> particles;
  std::map<std::string, std::vector<int>> index;
  std::unordered_map<int, std::string> names;
  std::set<long> ids;
  std::array<std::string, 3> tags;
  std::array<int, 4> counts{};
  std::pair<int, std::string> pair;
  std::tuple<int, double, std::string> tuple;
  std::variant<int, std::string, point> var;
  std::unique_ptr<particle> owned;
  std::vector<bool> bits;
  bool flag = false;
  void pup(weft::pupper& p) {
    p | particles | index | names | ids | tags | counts | pair | tuple | var | owned | bits | flag;
  }
  bool operator==(const everything& o) const {
    return particles == o.particles && index == o.index && names == o.names && ids == o.ids &&
           tags == o.tags && counts == o.counts && pair == o.pair && tuple == o.tuple &&
           var == o.var && ((!owned && !o.owned) || (owned && o.owned && *owned == *o.owned)) &&
           bits == o.bits && flag == o.flag;
  }
};

everything sample() {
  everything e;
  e.particles = {{{1.0, 2.0}, "a", 7, point{1, 2, 3}, color::blue}, {{}, "", -1, {}, color::green}};
  e.index = {{"x", {1, 2, 3}}, {"y", {}}};
  e.names = {{1, "one"}, {2, "two"}};
  e.ids = {5, 3, 9};
  e.tags = {"p", "", "q"};
  e.counts = {1, 2, 3, 4};
  e.pair = {4, "four"};
  e.tuple = {1, 2.5, "t"};
  e.var = std::string("variant");
  e.owned = std::make_unique<particle>(particle{{9.0}, "owned", 3, {}, color::red});
  e.bits = {true, false, true};
  e.flag = true;
  return e;
}

TEST(Pup, RoundTripsEverySupportedType) {
  everything in = sample();
  std::vector<std::byte> bytes = weft::to_bytes(in);
  EXPECT_EQ(bytes.size(), weft::packed_size(in));
  everything out;
  weft::from_bytes(bytes, out);
  EXPECT_TRUE(out == in);
}

TEST(Pup, SeveralValuesAndEmptyOnes) {
  int a = 5;
  std::string s;
  std::vector<point> v;
  std::optional<int> none;
  auto bytes = weft::to_bytes(a, s, v, none);
  int a2 = 0;
  std::string s2 = "junk";
  std::vector<point> v2{{1, 1, 1}};
  std::optional<int> none2 = 3;
  weft::from_bytes(bytes, a2, s2, v2, none2);
  EXPECT_EQ(a2, 5);
  EXPECT_TRUE(s2.empty());
  EXPECT_TRUE(v2.empty());
  EXPECT_FALSE(none2.has_value());
}

TEST(Pup, ContiguousTriviallyCopyableDataIsOneBlock) {
  // A vector of trivially copyable elements packs as length + raw bytes:
  // exactly the bytes of its array, in order (one memcpy, no per-element work).
  std::vector<point> v{{1, 2, 3}, {4, 5, 6}};
  auto bytes = weft::to_bytes(v);
  ASSERT_EQ(bytes.size(), sizeof(std::uint64_t) + v.size() * sizeof(point));
  EXPECT_EQ(std::memcmp(bytes.data() + 8, v.data(), v.size() * sizeof(point)), 0);
  std::array<int, 3> arr{7, 8, 9};
  EXPECT_EQ(weft::packed_size(arr), sizeof arr);
}

TEST(Pup, ConstValuesPackWithoutBeingChanged) {
  const std::vector<bool> bits{true, false};
  const std::string s = "const";
  auto bytes = weft::to_bytes(bits, s);
  std::vector<bool> b2;
  std::string s2;
  weft::from_bytes(bytes, b2, s2);
  EXPECT_EQ(b2, bits);
  EXPECT_EQ(s2, s);
}

TEST(Pup, TruncatedBufferNamesTheType) {
  std::vector<int> v{1, 2, 3, 4};
  auto bytes = weft::to_bytes(v);
  bytes.resize(bytes.size() - 1);
  std::vector<int> out;
  try {
    weft::from_bytes(bytes, out);
    FAIL() << "no error";
  } catch (const weft::serialization_error& e) {
    EXPECT_NE(std::string(e.what()).find("std::vector<int"), std::string::npos) << e.what();
  }
}

TEST(Pup, LeftoverBytesAreAnError) {
  auto bytes = weft::to_bytes(1, 2);
  int one = 0;
  EXPECT_THROW(weft::from_bytes(bytes, one), weft::serialization_error);
}

TEST(Pup, ImpossibleValuesAreErrors) {
  // A length larger than the buffer could hold must not allocate it.
  std::vector<std::byte> huge(8);
  std::uint64_t n = ~0ull;
  std::memcpy(huge.data(), &n, 8);
  std::vector<double> v;
  EXPECT_THROW(weft::from_bytes(huge, v), weft::serialization_error);
  std::string s;
  EXPECT_THROW(weft::from_bytes(huge, s), weft::serialization_error);

  std::variant<int, float> var;
  std::vector<std::byte> bad_index(8);
  bad_index[0] = std::byte{5};
  EXPECT_THROW(weft::from_bytes(bad_index, var), weft::serialization_error);

  std::optional<int> o;
  std::vector<std::byte> bad_flag{std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0},
                                  std::byte{0}};
  EXPECT_THROW(weft::from_bytes(bad_flag, o), weft::serialization_error);
  bool b = false;
  std::vector<std::byte> bad_bool{std::byte{9}};
  EXPECT_THROW(weft::from_bytes(bad_bool, b), weft::serialization_error);
}

// Every prefix of a valid buffer is truncated: each must throw, none crash.
TEST(PupFuzz, EveryPrefixOfAValidBufferThrows) {
  auto bytes = weft::to_bytes(sample());
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + long(len));
    everything out;
    EXPECT_THROW(weft::from_bytes(prefix, out), weft::serialization_error) << "length " << len;
  }
}

// The forms of serialization_error's messages (pup.hpp): "corrupt buffer while
// unpacking T at offset N: problem", "truncated buffer while unpacking T: need
// N bytes at offset M, have K", "N bytes left over after unpacking (...)".
bool documented_error(const std::string& m) {
  auto digits_then = [&](std::size_t at, std::string_view next) {
    std::size_t end = at;
    while (end < m.size() && std::isdigit(static_cast<unsigned char>(m[end]))) ++end;
    return end > at && m.compare(end, next.size(), next) == 0;
  };
  if (m.starts_with("corrupt buffer while unpacking ")) {
    const std::size_t at = m.find(" at offset ");
    return at != std::string::npos && at > 31 && digits_then(at + 11, ": ") && !m.ends_with(": ");
  }
  if (m.starts_with("truncated buffer while unpacking ")) {
    const std::size_t need = m.find(": need ");
    if (need == std::string::npos || need <= 33 || !digits_then(need + 7, " bytes at offset "))
      return false;
    const std::size_t have = m.find(", have ", need);
    return have != std::string::npos && digits_then(have + 7, "") &&
           m.find_first_not_of("0123456789", have + 7) == std::string::npos;
  }
  return digits_then(0, " bytes left over after unpacking (");
}

// Random corruption of a valid buffer and random buffers. Every round
// either succeeds or throws serialization_error in one of the documented
// forms (ASan/UBSan check that nothing outside the buffer is read and no
// invalid value is made), and where the outcome is known it is checked:
//  - bytes changed only where any value is valid (the payload of ints,
//    doubles and characters, located from sample()'s layout below): unpacking
//    succeeds and the value packs back to exactly those bytes;
//  - the last byte (the bool `flag`) set to a value other than 0 or 1, all
//    other changes in such payload bytes: the bool error, at that offset;
//  - a strict prefix of the valid buffer: a truncation (or a length that the
//    bytes left cannot hold) error.
// Each of these situations must have come up (the rounds are deterministic:
// mt19937_64 with a fixed seed).
TEST(PupFuzz, CorruptBuffersNeverCrash) {
  std::mt19937_64 rng(12345);
  const everything s = sample();
  const auto valid = weft::to_bytes(s);
  ASSERT_EQ(valid.back(), std::byte{1});  // `flag` is packed last

  // Payload bytes of sample()'s buffer: counts (bitwise std::array<int, 4>),
  // pair's int and characters, tuple's int and double and characters,
  // var's characters (after its 4-byte index and 8-byte length).
  std::vector<bool> payload(valid.size(), false);
  auto mark = [&](std::size_t from, std::size_t n, std::string_view expect = {}) {
    ASSERT_LE(from + n, valid.size());
    for (std::size_t i = from; i < from + n; ++i) payload[i] = true;
    if (!expect.empty()) {  // the layout is what this test thinks it is
      ASSERT_EQ(std::memcmp(valid.data() + from, expect.data(), n), 0) << expect;
    }
  };
  const std::size_t counts_at = weft::packed_size(s.particles, s.index, s.names, s.ids, s.tags);
  mark(counts_at, 16);
  const std::size_t pair_at = counts_at + weft::packed_size(s.counts);
  mark(pair_at, 4);
  mark(pair_at + 4 + 8, 4, "four");
  const std::size_t tuple_at = pair_at + weft::packed_size(s.pair);
  mark(tuple_at, 4 + 8);
  mark(tuple_at + 4 + 8 + 8, 1, "t");
  const std::size_t var_at = tuple_at + weft::packed_size(s.tuple);
  mark(var_at + 4 + 8, 7, "variant");
  const std::size_t var_end = var_at + weft::packed_size(s.var);
  ASSERT_EQ(var_end, var_at + 4 + 8 + 7);
  // A value unpacked from `buf`, which differs from `valid` in payload bytes
  // and the last byte only: the fields from counts to var pack back to the
  // bytes they came from (compared as bytes: a double may have become a
  // NaN), the others are sample()'s (compared as values: an unordered_map
  // may pack its elements in another order than sample()'s did).
  auto payload_changes_only = [&](const everything& out, const std::vector<std::byte>& buf) {
    const std::vector<std::byte> middle(buf.begin() + long(counts_at), buf.begin() + long(var_end));
    return weft::to_bytes(out.counts, out.pair, out.tuple, out.var) == middle &&
           out.flag == (buf.back() == std::byte{1}) && out.particles == s.particles &&
           out.index == s.index && out.names == s.names && out.ids == s.ids && out.tags == s.tags &&
           out.owned && *out.owned == *s.owned && out.bits == s.bits;
  };

  const long rounds = weft_test::scaled(200'000, 20'000);
  long ok = 0, errors = 0, payload_rounds = 0, bad_flag_rounds = 0, prefix_rounds = 0;
  for (long r = 0; r < rounds; ++r) {
    std::vector<std::byte> buf;
    bool random = false;
    if (r % 4 == 0) {
      random = true;
      buf.resize(rng() % 64);
      for (auto& b : buf) b = std::byte(rng());
    } else {
      buf = valid;
      const int flips = 1 + int(rng() % 4);
      for (int f = 0; f < flips; ++f) buf[rng() % buf.size()] = std::byte(rng());
      if (rng() % 8 == 0) buf.resize(rng() % (buf.size() + 1));
    }
    // What this round must give, where it is known.
    enum class expect { anything, success, bad_flag, truncated } want = expect::anything;
    if (!random && buf.size() < valid.size() && std::equal(buf.begin(), buf.end(), valid.begin())) {
      want = expect::truncated;
    } else if (!random && buf.size() == valid.size()) {
      bool only_payload = true;
      for (std::size_t i = 0; i + 1 < buf.size(); ++i)
        only_payload = only_payload && (buf[i] == valid[i] || payload[i]);
      const auto last = std::to_integer<unsigned>(buf.back());
      if (only_payload) want = last <= 1 ? expect::success : expect::bad_flag;
    }
    everything out;
    std::string error;
    try {
      weft::from_bytes(buf, out);
      ++ok;
    } catch (const weft::serialization_error& e) {
      ++errors;
      error = e.what();
      EXPECT_TRUE(documented_error(error)) << "round " << r << ": " << error;
    }
    switch (want) {
      case expect::success:
        ++payload_rounds;
        EXPECT_EQ(error, "") << "round " << r;
        if (error.empty()) {
          EXPECT_TRUE(payload_changes_only(out, buf)) << "round " << r;
        }
        break;
      case expect::bad_flag:
        ++bad_flag_rounds;
        EXPECT_EQ(error, "corrupt buffer while unpacking bool at offset " +
                             std::to_string(valid.size()) + ": flag byte " +
                             std::to_string(std::to_integer<unsigned>(buf.back())) +
                             " is neither 0 nor 1")
            << "round " << r;
        break;
      case expect::truncated:
        ++prefix_rounds;
        EXPECT_TRUE(error.starts_with("truncated buffer while unpacking ") ||
                    error.find(" bytes left could hold") != std::string::npos)
            << "round " << r << " (" << buf.size() << " bytes): " << error;
        break;
      case expect::anything:
        break;
    }
    if (HasFailure()) return;  // one round's report is enough
  }
  EXPECT_GT(payload_rounds, 100);
  EXPECT_GE(bad_flag_rounds, 5);
  EXPECT_GT(prefix_rounds, 100);
  EXPECT_GT(ok, payload_rounds);  // changes elsewhere may give a valid value too
  EXPECT_GT(errors, bad_flag_rounds + prefix_rounds);
  RecordProperty("payload_rounds", int(payload_rounds));
  RecordProperty("bad_flag_rounds", int(bad_flag_rounds));
  RecordProperty("prefix_rounds", int(prefix_rounds));
}

// ---- std::span<const T>: packed like a vector, unpacked as a view -------------------

TEST(PupSpan, PacksLikeAVectorAndUnpacksAsAViewIntoTheBytes) {
  const std::vector<int> src{1, 2, 3, 4, 5};
  std::span<const int> in(src);
  auto bytes = weft::to_bytes(in);
  EXPECT_EQ(bytes, weft::to_bytes(src));  // same bytes as the vector (int needs no padding)
  std::span<const int> out;
  weft::from_bytes(bytes, out);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), src.begin()));
  // A view: it points into the buffer, nothing was copied.
  EXPECT_GE(reinterpret_cast<const std::byte*>(out.data()), bytes.data());
  EXPECT_LT(reinterpret_cast<const std::byte*>(out.data()), bytes.data() + bytes.size());
  // Unpacked into a vector, the same bytes give the values back too.
  std::vector<int> as_vector;
  weft::from_bytes(bytes, as_vector);
  EXPECT_EQ(as_vector, src);
}

TEST(PupSpan, EmptySpan) {
  std::span<const double> in;
  auto bytes = weft::to_bytes(in);
  EXPECT_EQ(bytes.size(), 8u);  // the length only
  const double old = 1.0;
  std::span<const double> out(&old, 1);
  weft::from_bytes(bytes, out);
  EXPECT_TRUE(out.empty());
}

TEST(PupSpan, ElementsArePaddedToTheirAlignment) {
  const std::vector<double> src{1.5, 2.5, -3.25};
  const std::uint8_t before = 7;
  std::span<const double> in(src);
  auto bytes = weft::to_bytes(before, in);
  // 1 byte, 8 of length, 7 of padding, then the doubles at offset 16.
  EXPECT_EQ(bytes.size(), 1 + 8 + 7 + 3 * sizeof(double));
  std::uint8_t b = 0;
  std::span<const double> out;
  weft::unpack(std::span<const std::byte>(bytes), b, out);  // vector data: 16-byte aligned
  EXPECT_EQ(b, before);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(out.data()) % alignof(double), 0u);
  EXPECT_EQ(out[2], -3.25);
}

TEST(PupSpan, MisalignedBufferIsAnErrorNamingTheType) {
  const std::vector<double> src{1.0, 2.0};
  auto bytes = weft::to_bytes(std::span<const double>(src));
  std::vector<std::byte> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  std::span<const double> out;
  try {
    weft::unpack(std::span<const std::byte>(shifted.data() + 1, bytes.size()), out);
    FAIL() << "a misaligned view was made";
  } catch (const weft::serialization_error& e) {
    EXPECT_NE(std::string(e.what()).find("span"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aligned"), std::string::npos) << e.what();
  }
}

TEST(PupSpan, TruncatedOrOversizedLengthsThrow) {
  const std::vector<std::int32_t> src{1, 2, 3, 4};
  auto bytes = weft::to_bytes(std::span<const std::int32_t>(src));
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + long(len));
    std::span<const std::int32_t> out;
    EXPECT_THROW(weft::from_bytes(prefix, out), weft::serialization_error) << "length " << len;
  }
  std::uint64_t huge = std::uint64_t(1) << 60;
  std::memcpy(bytes.data(), &huge, sizeof huge);
  std::span<const std::int32_t> out;
  EXPECT_THROW(weft::from_bytes(bytes, out), weft::serialization_error);
}

}  // namespace

namespace {
struct Hidden {};
template <int N>
struct Grid {};
}  // namespace

// Names as a trace or an error shows them (issue 30): no anonymous
// namespaces, a constructor named after its class.
TEST(TypeNames, ReadableWithoutAnonymousNamespaces) {
  using weft::objects::detail::constructor_name;
  using weft::objects::detail::readable_name;
  using weft::objects::detail::type_name_v;
  EXPECT_EQ(readable_name(type_name_v<Hidden>), "Hidden");
  EXPECT_EQ(readable_name("{anonymous}::Queen::{anonymous}::step"), "Queen::step");
  EXPECT_EQ(readable_name("(anonymous namespace)::Queen::step"), "Queen::step");
  EXPECT_EQ(readable_name("ns::Block::run"), "ns::Block::run");
  EXPECT_EQ(constructor_name(type_name_v<Hidden>), "Hidden::Hidden");
  EXPECT_EQ(constructor_name("{anonymous}::Queen"), "Queen::Queen");
  EXPECT_EQ(constructor_name("ns::Block<3, ns::Cell<int> >"),
            "ns::Block<3, ns::Cell<int> >::Block");
  EXPECT_EQ(constructor_name(type_name_v<Grid<2>>), "Grid<2>::Grid");
}
