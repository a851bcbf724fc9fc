// The dump format (weft/lb/dump.hpp; every field in docs/lb.md, "Dumps and
// replay"). Fields are written byte by byte in little-endian order, so a
// dump reads the same on any host; doubles travel as their IEEE-754 bits.
//
// The reader trusts nothing: each count is checked against the bytes its
// step declares before anything is allocated (a corrupt count must not
// become a 100 GB vector), each step must use exactly the bytes it
// declares, and the instance must pass check_instance -- so a strategy
// replaying it never sees a PE that does not exist.
#include "weft/lb/dump.hpp"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include "weft/base/error.hpp"

namespace weft::lb {

namespace {

constexpr char step_tag[4] = {'S', 'T', 'E', 'P'};
constexpr std::size_t header_bytes = 16;
// Fixed widths of the arrays' entries.
constexpr std::uint64_t pe_bytes = 8 + 4, object_bytes = 8 + 4 + 4 + 8, edge_bytes = 4 + 4 + 8 + 8;
constexpr std::uint32_t object_migratable = 1;  // the only flag of version 1

class encoder {
 public:
  explicit encoder(std::string& out) : out_(out) {}
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(char((v >> (8 * i)) & 0xff));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(char((v >> (8 * i)) & 0xff));
  }
  void i32(std::int32_t v) { u32(std::uint32_t(v)); }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void str(const std::string& s) {
    u32(std::uint32_t(s.size()));
    out_ += s;
  }

 private:
  std::string& out_;
};

// Reads fields of one file; every failure names the file and the offset of
// the field that could not be read.
class decoder {
 public:
  decoder(const std::string& bytes, const std::string& name) : b_(bytes), name_(name) {}
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return b_.size() - pos_; }
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw dump_error(name_ + ": byte " + std::to_string(at) + ": " + what);
  }
  void need(std::size_t n, const char* what) const {
    if (left() < n)
      fail(pos_, std::string("truncated: ") + what + " needs " + std::to_string(n) +
                     " bytes, the file has " + std::to_string(left()) + " more");
  }
  std::uint32_t u32(const char* what) {
    need(4, what);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(std::uint8_t(b_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64(const char* what) {
    need(8, what);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(std::uint8_t(b_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  std::int32_t i32(const char* what) { return std::int32_t(u32(what)); }
  double f64(const char* what) { return std::bit_cast<double>(u64(what)); }
  std::string str(const char* what) {
    const std::uint32_t n = u32(what);
    need(n, what);
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool bytes_are(const char* expect, std::size_t n) const {
    return left() >= n && std::memcmp(b_.data() + pos_, expect, n) == 0;
  }
  void skip(std::size_t n) { pos_ += n; }

 private:
  const std::string& b_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

dumped_step parse_step(decoder& d) {
  const std::size_t start = d.pos();
  if (!d.bytes_are(step_tag, 4)) {
    if (d.left() < 4) d.need(4, "a step's tag");
    d.fail(start, "not a step (tag \"STEP\" expected): the file is corrupt");
  }
  d.skip(4);
  const std::uint64_t length = d.u64("a step's length");
  const std::size_t body = d.pos();
  if (length > d.left())
    d.fail(start, "truncated step: it declares " + std::to_string(length) +
                      " bytes after its header, the file has " + std::to_string(d.left()) +
                      " more (a run killed while writing it?)");
  const std::size_t end = body + std::size_t(length);
  auto within = [&](const char* what) {
    if (d.pos() > end)
      d.fail(start, std::string("corrupt step: its ") + what + " run past the " +
                        std::to_string(length) + " bytes it declares");
  };

  dumped_step s;
  s.step = d.u64("the step number");
  s.collection = d.str("the collection name");
  s.strategy = d.str("the strategy name");
  s.tolerance = d.f64("the tolerance");
  s.seed = d.u64("the seed");
  const std::size_t counts_at = d.pos();
  const std::uint32_t pes = d.u32("the PE count");
  const std::uint32_t objects = d.u32("the object count");
  const std::uint64_t edges = d.u64("the edge count");
  const std::uint32_t planned = d.u32("the plan's length");
  within("names");
  // Checked in 128-bit-free arithmetic: each term is below 2^32 * 24.
  const std::uint64_t arrays = pes * pe_bytes + objects * object_bytes + planned * 4ull;
  const std::uint64_t room = end - d.pos();
  if (arrays > room || edges > (room - arrays) / edge_bytes || arrays + edges * edge_bytes != room)
    d.fail(counts_at, std::to_string(pes) + " PEs, " + std::to_string(objects) + " objects, " +
                          std::to_string(edges) + " edges and a plan of " +
                          std::to_string(planned) + " do not fill the step's " +
                          std::to_string(length) + " bytes: the file is corrupt");
  if (planned != 0 && planned != objects)
    d.fail(counts_at, "a plan of " + std::to_string(planned) + " PEs for " +
                          std::to_string(objects) + " objects (accepted: none or one per object)");

  s.inst.pes.resize(pes);
  for (pe_info& p : s.inst.pes) {
    p.background = d.f64("a PE's background");
    p.node = d.i32("a PE's node");
  }
  s.inst.objects.resize(objects);
  for (object_info& o : s.inst.objects) {
    o.load = d.f64("an object's load");
    o.pe = d.i32("an object's PE");
    const std::size_t flags_at = d.pos();
    const std::uint32_t flags = d.u32("an object's flags");
    if (flags & ~object_migratable)
      d.fail(flags_at,
             "object flags " + std::to_string(flags) + ": version 1 knows only bit 0 (migratable)");
    o.migratable = (flags & object_migratable) != 0;
    o.bytes = d.u64("an object's bytes");
  }
  s.inst.edges.resize(std::size_t(edges));
  for (edge& e : s.inst.edges) {
    e.a = d.u32("an edge's end");
    e.b = d.u32("an edge's end");
    e.messages = d.u64("an edge's messages");
    e.bytes = d.u64("an edge's bytes");
  }
  s.chosen.resize(planned);
  for (int& pe : s.chosen) {
    pe = d.i32("a planned PE");
    if (pe < 0 || pe >= int(pes))
      d.fail(d.pos() - 4, "planned PE " + std::to_string(pe) + " of " + std::to_string(pes));
  }
  const std::string bad = check_instance(s.inst);
  if (!bad.empty()) d.fail(start, "step " + std::to_string(s.step) + ": " + bad);
  return s;
}

// A FILE* closed when it goes.
struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

}  // namespace

std::string encode_dump_header(int node) {
  std::string out(dump_magic, sizeof dump_magic);
  encoder e(out);
  e.u32(dump_version);
  e.i32(node);
  return out;
}

std::string encode_step(const dumped_step& s) {
  std::string body;
  encoder e(body);
  e.u64(s.step);
  e.str(s.collection);
  e.str(s.strategy);
  e.f64(s.tolerance);
  e.u64(s.seed);
  e.u32(std::uint32_t(s.inst.pes.size()));
  e.u32(std::uint32_t(s.inst.objects.size()));
  e.u64(s.inst.edges.size());
  e.u32(std::uint32_t(s.chosen.size()));
  for (const pe_info& p : s.inst.pes) {
    e.f64(p.background);
    e.i32(p.node);
  }
  for (const object_info& o : s.inst.objects) {
    e.f64(o.load);
    e.i32(o.pe);
    e.u32(o.migratable ? object_migratable : 0);
    e.u64(o.bytes);
  }
  for (const edge& x : s.inst.edges) {
    e.u32(x.a);
    e.u32(x.b);
    e.u64(x.messages);
    e.u64(x.bytes);
  }
  for (int pe : s.chosen) e.i32(pe);
  std::string out(step_tag, sizeof step_tag);
  encoder(out).u64(body.size());
  return out + body;
}

std::vector<dumped_step> parse_dump(const std::string& bytes, const std::string& name, int* node) {
  decoder d(bytes, name);
  if (!d.bytes_are(dump_magic, sizeof dump_magic)) {
    if (d.left() < sizeof dump_magic)
      d.fail(0, "truncated: " + std::to_string(bytes.size()) +
                    " bytes, shorter than the 16-byte header of a weft lb dump");
    d.fail(0, "not a weft lb dump (magic \"WEFTLBD\\0\" expected; written by --weft:lb-dump)");
  }
  d.skip(sizeof dump_magic);
  const std::uint32_t version = d.u32("the header's version");
  if (version != dump_version)
    d.fail(8, "format version " + std::to_string(version) + ": this build reads version " +
                  std::to_string(dump_version) + " only");
  const std::int32_t writer = d.i32("the header's node");
  if (node) *node = writer;
  std::vector<dumped_step> steps;
  while (d.left() > 0) steps.push_back(parse_step(d));
  return steps;
}

std::vector<dumped_step> read_dump(const std::string& path, int* node) {
  file_ptr f(std::fopen(path.c_str(), "rb"));
  if (!f) throw dump_error(path + ": cannot open: " + base::errno_text(errno).c_str());
  std::string bytes;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, n);
  if (std::ferror(f.get()))
    throw dump_error(path + ": cannot read: " + base::errno_text(errno).c_str());
  return parse_dump(bytes, path, node);
}

void write_dump(const std::string& path, const std::vector<dumped_step>& steps, int node) {
  file_ptr f(std::fopen(path.c_str(), "wb"));
  if (!f) throw dump_error(path + ": cannot create: " + base::errno_text(errno).c_str());
  std::string bytes = encode_dump_header(node);
  for (const dumped_step& s : steps) bytes += encode_step(s);
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size() ||
      std::fflush(f.get()) != 0)
    throw dump_error(path + ": cannot write: " + base::errno_text(errno).c_str());
}

std::string dump_path_for_node(const std::string& file, int node) {
  return node == 0 ? file : file + ".node" + std::to_string(node);
}

}  // namespace weft::lb
