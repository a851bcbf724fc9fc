// json_quote on nlohmann::json (Debian's nlohmann-json3-dev, header only):
// a well-kept library that validates UTF-8 and says what it does with bad
// bytes, instead of an escaping loop of our own (the trace writer had one
// that passed byte 0xff through, and the trace became unreadable: issue 24).
#include "weft/base/json.hpp"

#include <nlohmann/json.hpp>

namespace weft::base {

std::string json_quote(std::string_view s) {
  // dump(indent -1, ..., ensure_ascii false, replace): compact, UTF-8 kept,
  // invalid bytes as U+FFFD; it never throws with `replace`.
  return nlohmann::json(std::string(s)).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace);
}

}  // namespace weft::base
