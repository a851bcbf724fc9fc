// The readable name of a type, for error messages ("std::vector<int>"),
// taken from the compiler's function signature at compile time.
#pragma once
#include <string>
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

// A name as a user reads it in a trace or an error: without the anonymous
// namespaces the compiler spells out ("{anonymous}::Queen::step" is
// "Queen::step"). Once per registered name, never on a hot path.
inline std::string readable_name(std::string_view name) {
  std::string out(name);
  for (std::string_view anon : {"{anonymous}::", "(anonymous namespace)::"})
    for (std::size_t at = out.find(anon); at != std::string::npos; at = out.find(anon, at))
      out.erase(at, anon.size());
  return out;
}

// What a constructor of class `type` is called: "ns::Block<3>::Block" (the
// class's own name, without its namespaces and template arguments).
inline std::string constructor_name(std::string_view type) {
  const std::string cls = readable_name(type);
  // The last component at template depth 0.
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i < cls.size(); ++i) {
    if (cls[i] == '<') ++depth;
    if (cls[i] == '>') --depth;
    if (depth == 0 && cls[i] == ':' && i + 1 < cls.size() && cls[i + 1] == ':') start = i + 2;
  }
  std::string last = cls.substr(start);
  if (const std::size_t angle = last.find('<'); angle != std::string::npos) last.resize(angle);
  return cls + "::" + last;
}

}  // namespace weft::objects::detail
