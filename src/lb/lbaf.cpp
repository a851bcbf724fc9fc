// Export to LBAF's JSON input (lbaf.hpp; the subset written is listed in
// docs/lb.md). Written by hand: numbers and fixed keys only, no strings
// from outside that would need escaping.
#include "weft/lb/lbaf.hpp"
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace weft::lb {
namespace {

void number(std::string& s, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  s += buf;
}

// Objects on `rank` (all of them for rank < 0), as LBAF tasks; edges whose
// sender (end a) is on `rank`, as SendRecv communications.
std::string datafile(const instance& inst, int rank) {
  std::string s = "{\"type\":\"LBDatafile\",\"metadata\":{\"type\":\"LBDatafile\",\"rank\":";
  s += std::to_string(rank < 0 ? 0 : rank);
  s += "},\"phases\":[{\"id\":0,\"tasks\":[";
  bool first = true;
  for (std::size_t i = 0; i < inst.objects.size(); ++i) {
    const object_info& o = inst.objects[i];
    if (rank >= 0 && o.pe != rank) continue;
    if (!first) s += ',';
    first = false;
    s += "{\"entity\":{\"type\":\"object\",\"id\":" + std::to_string(i) +
         ",\"home\":" + std::to_string(o.pe) +
         ",\"migratable\":" + (o.migratable ? "true" : "false") +
         "},\"node\":" + std::to_string(o.pe) + ",\"resource\":\"cpu\",\"time\":";
    number(s, o.load);
    s += '}';
  }
  s += "],\"communications\":[";
  first = true;
  for (const edge& e : inst.edges) {
    if (rank >= 0 && inst.objects[e.a].pe != rank) continue;
    if (!first) s += ',';
    first = false;
    s += "{\"type\":\"SendRecv\",\"from\":{\"type\":\"object\",\"id\":" + std::to_string(e.a) +
         "},\"to\":{\"type\":\"object\",\"id\":" + std::to_string(e.b) +
         "},\"messages\":" + std::to_string(e.messages) + ",\"bytes\":" + std::to_string(e.bytes) +
         '}';
  }
  s += "]}]}\n";
  return s;
}

std::string write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "cannot write " + path + ": " + std::strerror(errno);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return "cannot write " + path + ": " + std::strerror(errno);
  return "";
}

}  // namespace

std::string lbaf_json(const instance& inst, int rank) {
  return datafile(inst, rank);
}

std::string write_lbaf(const instance& inst, const std::string& path) {
  const std::size_t at = path.find("%r");
  if (at == std::string::npos) return write_file(path, datafile(inst, -1));
  for (int r = 0; r < inst.num_pes(); ++r) {
    std::string p = path;
    p.replace(at, 2, std::to_string(r));
    std::string err = write_file(p, datafile(inst, r));
    if (!err.empty()) return err;
  }
  return "";
}

}  // namespace weft::lb
