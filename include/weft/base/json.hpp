// JSON text of a string, for every JSON file the runtime and its tools write
// (the trace's metadata and summary, the benchmarks' --json lines).
//
// The bytes come from anywhere -- a program's arguments, the host name,
// names a program gives its marks -- and need not be UTF-8. The result is
// always valid UTF-8 JSON: quotes, backslashes and control characters are
// escaped, valid UTF-8 passes through, and every byte that is not part of a
// valid UTF-8 sequence becomes U+FFFD (the replacement character). The
// escaping is nlohmann::json's (its error_handler_t::replace), not ours.
#pragma once
#include <string>
#include <string_view>
#include "weft/base/export.hpp"

namespace weft::base {

// "\"...\"": `s` as a JSON string, quotes included. Any thread; allocates.
WEFT_API std::string json_quote(std::string_view s);

}  // namespace weft::base
