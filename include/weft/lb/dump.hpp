// The load database on disk: the balancing steps a run dumps
// (--weft:lb-dump=FILE) and tools/weft-lbsim replays (--replay=FILE).
//
// A step is what the balancer saw and chose: the step number (per
// collection, from 0), the collection's name, the lb::instance exactly as
// the runtime built it from the elements' records, the strategy's name,
// its options (tolerance, seed) and the plan it returned. Replaying a step
// runs any strategy on the very instance a run balanced, so strategies are
// compared on real loads, offline and repeatably.
//
// The format is binary, little-endian, fixed-width fields (docs/lb.md,
// "Dumps and replay", has every field): a 16-byte header (magic
// "WEFTLBD\0", version, the writing node), then steps, each a tag and its
// length followed by its fields. Binary because a step of 10^5 objects is
// 2.4 MB this way and several times that as JSON lines, and a run may
// dump every step; the length prefix makes a truncated step (a killed run)
// detectable at its first byte. A reader accepts exactly the version it
// knows: a new field means a new version, never a silent reinterpretation.
//
// Plain data and files, no runtime: usable by tools that start no node.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/lb/instance.hpp"

namespace weft::lb {

inline constexpr char dump_magic[8] = {'W', 'E', 'F', 'T', 'L', 'B', 'D', '\0'};
inline constexpr std::uint32_t dump_version = 1;

struct dumped_step {
  std::uint64_t step = 0;  // the collection's balancing step, from 0
  std::string collection;  // e.g. "array Block#0.1" (objects' collection_name)
  std::string strategy;    // what ran ("" when the step carries no plan)
  double tolerance = 0;    // the strategy's options as the run set them
  std::uint64_t seed = 0;
  instance inst;
  plan chosen;  // the strategy's plan; empty: not recorded
};

// What a corrupt, truncated or unreadable dump is: the message names the
// file and, for bad contents, the byte offset ("f.lbdump: byte 123: ...").
class dump_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The header and one step in the file's bytes (encode_step needs a well
// formed instance and a plan that is empty or one PE per object).
WEFT_API std::string encode_dump_header(int node);
WEFT_API std::string encode_step(const dumped_step& s);

// Every step of the file at `path`, in file order; the node that wrote it
// in *node when given. Throws dump_error. Any thread; reads the whole file.
WEFT_API std::vector<dumped_step> read_dump(const std::string& path, int* node = nullptr);

// The same from bytes already in memory; `name` stands for the file in
// messages.
WEFT_API std::vector<dumped_step> parse_dump(const std::string& bytes, const std::string& name,
                                             int* node = nullptr);

// Writes a whole dump (header and `steps`) to `path`, replacing it; for
// tests and tools. Throws dump_error naming the file and errno's text.
WEFT_API void write_dump(const std::string& path, const std::vector<dumped_step>& steps,
                         int node = 0);

// The file node `node` of a run writes for --weft:lb-dump=FILE: FILE on
// node 0, FILE.node<N> on node N > 0 (each process that balances writes
// its own: no cross-process locking or gathering).
WEFT_API std::string dump_path_for_node(const std::string& file, int node);

}  // namespace weft::lb
