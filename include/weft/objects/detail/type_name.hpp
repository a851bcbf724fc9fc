// The readable name of a type, for error messages ("std::vector<int>"),
// taken from the compiler's function signature at compile time.
#pragma once
#include <string_view>

namespace weft::objects::detail {

template <class T>
constexpr std::string_view type_name() {
#if defined(__clang__) || defined(__GNUC__)
  std::string_view f = __PRETTY_FUNCTION__;
  // GCC: "... type_name() [with T = X; std::string_view = ...]"
  // Clang: "... type_name() [T = X]"
  auto start = f.find("T = ");
  if (start == std::string_view::npos) return "?";
  start += 4;
  auto end = f.find_first_of(";]", start);
  return f.substr(start, end - start);
#else
  return "?";
#endif
}

// The name as a constant: computed once at compile time, never per call
// (a call in a non-constant context searches the signature each time).
template <class T>
inline constexpr std::string_view type_name_v = type_name<T>();

}  // namespace weft::objects::detail
