// Export of an instance in the JSON input of DARMA's LB-analysis-framework
// (LBAF), so that a third-party tool reads weft's loads.
//
// LBAF reads one "LBDatafile" per rank ("type", "metadata" with the rank,
// "phases" with one phase of "tasks" and "communications"). What weft
// writes, the subset of that format, is in docs/lb.md: each object is a
// task (entity type "object", its id, home = its current PE, migratable),
// its "time" is its load, and each edge a "SendRecv" communication with
// its messages and bytes, written in the file of the sender's rank.
// Background load has no place in the format and is not written.
#pragma once
#include <string>
#include "weft/base/export.hpp"
#include "weft/lb/instance.hpp"

namespace weft::lb {

// The LBDatafile of PE `rank` (the objects on it now), as JSON text.
// rank < 0: one file with every rank's tasks (metadata rank 0).
WEFT_API std::string lbaf_json(const instance& inst, int rank);

// Writes the instance: if `path` contains "%r", one file per PE with %r
// replaced by the rank (LBAF's own naming, e.g. data.%r.json); otherwise
// one file holding all tasks. Returns "" or what failed (with the path).
WEFT_API std::string write_lbaf(const instance& inst, const std::string& path);

}  // namespace weft::lb
