#include "weft/base/options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "weft/base/error.hpp"

namespace weft::base {

const char* to_string(option_source s) {
  switch (s) {
    case option_source::default_value:
      return "default";
    case option_source::environment:
      return "environment";
    case option_source::command_line:
      return "command line";
  }
  return "?";
}

std::function<std::optional<std::string>(const std::string&)> one_of(
    std::vector<std::string> values) {
  return [values = std::move(values)](const std::string& v) -> std::optional<std::string> {
    if (std::find(values.begin(), values.end(), v) != values.end()) return std::nullopt;
    return std::string("unknown value");
  };
}

std::function<std::optional<std::string>(const std::string&)> integer_in(long lo, long hi) {
  return [lo, hi](const std::string& v) -> std::optional<std::string> {
    errno = 0;
    char* end = nullptr;
    long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0) return std::string("not an integer");
    if (x < lo || x > hi)
      return "out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
    return std::nullopt;
  };
}

std::function<std::optional<std::string>(const std::string&)> number_in(double lo, double hi) {
  return [lo, hi](const std::string& v) -> std::optional<std::string> {
    errno = 0;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno != 0) return std::string("not a number");
    if (!(x >= lo && x <= hi)) return std::string("out of range");
    return std::nullopt;
  };
}

static const char* const true_words[] = {"1", "true", "on", "yes"};
static const char* const false_words[] = {"0", "false", "off", "no"};

std::function<std::optional<std::string>(const std::string&)> boolean() {
  return [](const std::string& v) -> std::optional<std::string> {
    for (const char* w : true_words)
      if (v == w) return std::nullopt;
    for (const char* w : false_words)
      if (v == w) return std::nullopt;
    return std::string("not a boolean");
  };
}

bool parse_bool(const std::string& v) {
  for (const char* w : true_words)
    if (v == w) return true;
  return false;
}

void option_set::define(option_spec spec) {
  if (find(spec.name) != nullptr) fatal("option '%s' defined twice", spec.name.c_str());
  std::string value = spec.default_value;
  entries_.push_back(entry{std::move(spec), std::move(value), option_source::default_value});
}

option_set::entry* option_set::find(const std::string& name) {
  for (auto& e : entries_)
    if (e.spec.name == name) return &e;
  return nullptr;
}

const option_set::entry& option_set::at(const std::string& name) const {
  for (auto& e : entries_)
    if (e.spec.name == name) return e;
  fatal("internal: option '%s' was never defined", name.c_str());
}

std::string option_set::env_name(const std::string& name) {
  std::string s = "WEFT_";
  for (char c : name) s += (c == '-') ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void option_set::assign(entry& e, const std::string& value, option_source src) {
  const std::string where =
      src == option_source::environment ? env_name(e.spec.name) : "--weft:" + e.spec.name;
  if (e.spec.validate) {
    if (auto err = e.spec.validate(value))
      usage_error("%s=%s: %s; accepted: %s", where.c_str(), value.c_str(), err->c_str(),
                  e.spec.accepted.c_str());
  }
  e.value = value;
  e.source = src;
}

namespace {

// Edits (insert, delete, replace, swap two neighbours) between a and b.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string lowercase_dashes(std::string s) {
  for (char& c : s) c = (c == '_') ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Arguments that look meant for weft but miss its prefix: "--weft-threads",
// "-weft:threads", "--weft_threads", "-weft-threads". Returns the option
// name part, or "" for any other argument.
std::string mistyped_prefix_name(const char* a) {
  static const char* const near_misses[] = {"--weft-", "--weft_", "-weft:", "-weft-", "-weft_",
                                            "--weft.", "--weft;"};
  for (const char* p : near_misses) {
    const std::size_t n = std::strlen(p);
    if (std::strncmp(a, p, n) == 0) {
      std::string name(a + n);
      if (auto eq = name.find('='); eq != std::string::npos) name.resize(eq);
      return lowercase_dashes(name);
    }
  }
  return "";
}

}  // namespace

std::string option_set::closest(const std::string& name) const {
  const std::string want = lowercase_dashes(name);
  std::string best;
  std::size_t best_d = 0;
  auto consider = [&](const std::string& known) {
    const std::size_t d = edit_distance(want, known);
    // A typo, not another word: at most 2 edits, and fewer than a third of
    // the name.
    if (d <= 2 && 3 * d < std::max(want.size(), known.size()) && (best.empty() || d < best_d)) {
      best = known;
      best_d = d;
    }
  };
  for (const auto& e : entries_) consider(e.spec.name);
  consider("help");
  consider("version");
  return best;
}

void option_set::parse(int& argc, char** argv, char** envp) {
  // Environment first, so the command line can override it.
  std::string unknown_env;
  for (char** p = envp; p != nullptr && *p != nullptr; ++p) {
    const char* kv = *p;
    if (std::strncmp(kv, "WEFT_", 5) != 0) continue;
    const char* eq = std::strchr(kv, '=');
    if (eq == nullptr) continue;
    std::string key(kv, eq);
    entry* hit = nullptr;
    for (auto& e : entries_)
      if (env_name(e.spec.name) == key) hit = &e;
    if (hit == nullptr) {
      // Not ours, or a typo: said once, never fatal.
      unknown_env += (unknown_env.empty() ? "" : ", ") + key;
      if (std::string near = closest(key.substr(5)); !near.empty() && near != "help" &&
                                                     near != "version")
        unknown_env += " (did you mean " + env_name(near) + "?)";
      continue;
    }
    std::string value(eq + 1);
    if (value.empty() && hit->spec.is_flag) value.push_back('1');
    assign(*hit, value, option_source::environment);
  }
  if (!unknown_env.empty())
    warn("ignoring WEFT_* environment %s no weft option: %s (--weft:help lists the WEFT_* "
         "names)",
         unknown_env.find(',') == std::string::npos ? "variable that names"
                                                    : "variables that name",
         unknown_env.c_str());

  bool want_help = false, want_version = false;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--weft:", 7) != 0) {
      // "--weft-threads=2" is a typo of "--weft:threads=2" when the name is
      // (close to) an option; other arguments are the program's.
      if (std::string name = mistyped_prefix_name(a); !name.empty()) {
        if (std::string near = closest(name); !near.empty()) {
          const char* eq = std::strchr(a, '=');
          usage_error("%s is not a weft option: weft's start with --weft: (did you mean "
                      "--weft:%s%s?)",
                      a, near.c_str(), eq != nullptr ? eq : "");
        }
      }
      argv[out++] = argv[i];
      continue;
    }
    std::string body(a + 7);
    std::string name = body, value;
    bool has_value = false;
    if (auto eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    if (name == "help") {
      want_help = true;
      continue;
    }
    if (name == "version") {
      want_version = true;
      continue;
    }
    entry* e = find(name);
    if (e == nullptr) {
      const std::string near = closest(name);
      usage_error("unknown option --weft:%s (%s%s%srun with --weft:help for the list)",
                  name.c_str(), near.empty() ? "" : "did you mean --weft:", near.c_str(),
                  near.empty() ? "" : "? ");
    }
    if (!has_value) {
      if (!e->spec.is_flag)
        usage_error("--weft:%s needs a value: --weft:%s=<%s>", name.c_str(), name.c_str(),
                    e->spec.accepted.c_str());
      value.push_back('1');  // not value = "1": GCC 12 -Wrestrict false positive
    }
    assign(*e, value, option_source::command_line);
  }
  argc = out;
  if (out < 1 || argv[out] != nullptr) argv[out] = nullptr;
  if (want_help) {
    print_help(stdout, argc > 0 ? argv[0] : "app");
    std::exit(0);
  }
  if (want_version) {
    std::fputs(version_text_ ? version_text_().c_str() : "weft\n", stdout);
    std::exit(0);
  }
}

const std::string& option_set::get(const std::string& name) const {
  return at(name).value;
}
long option_set::get_int(const std::string& name) const {
  return std::strtol(get(name).c_str(), nullptr, 10);
}
double option_set::get_double(const std::string& name) const {
  return std::strtod(get(name).c_str(), nullptr);
}
bool option_set::get_bool(const std::string& name) const {
  return parse_bool(get(name));
}
option_source option_set::source(const std::string& name) const {
  return at(name).source;
}

void option_set::set_computed(const std::string& name, std::string value) {
  entry* e = find(name);
  if (e == nullptr) fatal("internal: option '%s' was never defined", name.c_str());
  e->value = std::move(value);
}

std::string option_set::origin(const std::string& name) const {
  const entry& e = at(name);
  switch (e.source) {
    case option_source::command_line:
      return "--weft:" + name + "=" + e.value;
    case option_source::environment:
      return env_name(name) + "=" + e.value;
    default:
      return e.spec.default_note.empty() ? "default" : "default: " + e.spec.default_note;
  }
}

void option_set::print_help(std::FILE* out, const char* program) const {
  std::fprintf(out,
               "usage: %s [--weft:name=value ...] [program arguments]\n"
               "weft runtime options (also settable as WEFT_NAME=value; the command line wins):\n",
               program);
  std::fprintf(out, "  %-22s %s\n", "--weft:help", "print this list and exit");
  std::fprintf(out, "  %-22s %s\n", "--weft:version", "print the version and build configuration, and exit");
  for (const auto& e : entries_) {
    std::string lhs =
        "--weft:" + e.spec.name + (e.spec.is_flag ? "[=bool]" : "=" + e.spec.accepted);
    std::string def = e.spec.default_note.empty() ? e.spec.default_value : e.spec.default_note;
    std::fprintf(out, "  %-22s %s\n  %-22s   default: %s; env: %s\n", lhs.c_str(),
                 e.spec.help.c_str(), "", def.empty() ? "(none)" : def.c_str(),
                 env_name(e.spec.name).c_str());
  }
}

void option_set::print_config(std::FILE* out) const {
  std::fprintf(out, "weft configuration (value, and where it came from):\n");
  for (const auto& e : entries_)
    std::fprintf(out, "  %-14s = %-16s (%s)\n", e.spec.name.c_str(),
                 e.value.empty() ? "-" : e.value.c_str(), origin(e.spec.name).c_str());
}

}  // namespace weft::base
