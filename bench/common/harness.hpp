// The benchmark harness: every program in bench/ takes --json, --repeat N,
// --help and the --weft: runtime options, prints a readable table, and with
// --json one JSON object per measurement line (DESIGN.md, "Tests and
// benchmarks"). Header-only: each benchmark is one small program.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>
#include <vector>
#include "weft/base/json.hpp"
#include "weft/core/config.hpp"

namespace weft::bench {

struct cli {
  bool json = false;
  int repeat = 3;
  std::vector<std::string> args;  // what is left, in order (program-specific)
};

// Parses the harness flags, removing them from argv; --help prints `about`
// (what the benchmark measures and its own flags) and exits 0. --weft:*
// arguments are left in argv for weft::run / weft::parse_options.
inline cli parse_cli(int& argc, char** argv, const char* about) {
  cli c;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "%s\n\ncommon flags:\n  --json        one JSON object per measurement\n"
          "  --repeat N    repeats of each measurement (default 3)\n"
          "  --weft:...    runtime options (see --weft:help)\n",
          about);
      std::exit(0);
    } else if (a == "--json") {
      c.json = true;
    } else if (a == "--repeat" && i + 1 < argc) {
      c.repeat = std::atoi(argv[++i]);
    } else if (a.rfind("--repeat=", 0) == 0) {
      c.repeat = std::atoi(a.c_str() + 9);
    } else {
      if (a.rfind("--weft:", 0) != 0) c.args.push_back(a);
      argv[out++] = argv[i];
      continue;
    }
  }
  argc = out;
  argv[argc] = nullptr;
  if (c.repeat < 1) {
    std::fprintf(stderr, "error: --repeat must be at least 1\n");
    std::exit(2);
  }
  return c;
}

// For benchmarks that do not start a node: checks the --weft: options and
// WEFT_* variables like any weft program does (a bad or unknown one exits 2),
// so a typo is never silently ignored; returns the configuration.
inline runtime_config check_weft_options(int& argc, char** argv) {
  return parse_options(argc, argv);
}

// Value of "--name=value" among the program arguments, or `fallback`.
inline std::string arg(const cli& c, const char* name, const std::string& fallback) {
  std::string prefix = std::string("--") + name + "=";
  for (auto& a : c.args)
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  return fallback;
}

// Parses a positive integer (the whole text); false when it is not one.
inline bool parse_positive(const std::string& text, long& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v <= 0) return false;
  out = v;
  return true;
}

// Value of --name=N: an integer in [1, limit], or exit 2 naming what was wrong.
inline long positive_arg(const cli& c, const char* name, long fallback, long limit) {
  const std::string text = arg(c, name, std::to_string(fallback));
  long v = 0;
  if (!parse_positive(text, v) || v > limit) {
    std::fprintf(stderr, "error: --%s=%s: expected an integer from 1 to %ld\n", name, text.c_str(),
                 limit);
    std::exit(2);
  }
  return v;
}

// "a,b,c" -> {"a", "b", "c"} ("" -> {""}: an empty item is the caller's
// to reject).
inline std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos <= list.size();) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

// Parses one item of a --name=LIST of integers, each in [lo, hi]; false
// (after printing which item and what is accepted) when it is not one.
inline bool parse_list_item(const char* name, const std::string& item, long lo, long hi,
                            long& out) {
  errno = 0;
  char* end = nullptr;
  const long v = item.empty() ? 0 : std::strtol(item.c_str(), &end, 10);
  if (item.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "error: --%s: each item must be an integer from %ld to %ld (got '%s')\n",
                 name, lo, hi, item.c_str());
    return false;
  }
  out = v;
  return true;
}

// Value of --name=LIST: integers in [lo, hi], or exit 2 naming the bad item.
inline std::vector<long> int_list_arg(const cli& c, const char* name, const std::string& fallback,
                                      long lo, long hi) {
  std::vector<long> out;
  for (const std::string& item : split_list(arg(c, name, fallback))) {
    long v = 0;
    if (!parse_list_item(name, item, lo, hi, v)) std::exit(2);
    out.push_back(v);
  }
  return out;
}

// Rejects program arguments that are not in `known` (names without "--").
inline void reject_unknown(const cli& c, std::initializer_list<const char*> known) {
  for (auto& a : c.args) {
    bool ok = false;
    for (const char* k : known) {
      std::string p = std::string("--") + k + "=";
      if (a.rfind(p, 0) == 0) ok = true;
    }
    if (!ok) {
      std::fprintf(stderr, "error: unknown argument '%s' (see --help)\n", a.c_str());
      std::exit(2);
    }
  }
}

using value = std::variant<std::string, double, long, bool>;
struct field {
  std::string key;
  value v;
  field(std::string k, const char* s) : key(std::move(k)), v(std::string(s)) {}
  field(std::string k, std::string s) : key(std::move(k)), v(std::move(s)) {}
  field(std::string k, double d) : key(std::move(k)), v(d) {}
  field(std::string k, int i) : key(std::move(k)), v(long(i)) {}
  field(std::string k, long i) : key(std::move(k)), v(i) {}
  field(std::string k, std::size_t i) : key(std::move(k)), v(long(i)) {}
  field(std::string k, bool b) : key(std::move(k)), v(b) {}
};

inline std::string to_text(const value& v, bool json) {
  char buf[64];
  // JSON strings through the runtime's one escaper: valid UTF-8 whatever
  // the bytes (a value may come from the command line).
  if (auto* s = std::get_if<std::string>(&v)) return json ? base::json_quote(*s) : *s;
  if (auto* d = std::get_if<double>(&v)) {
    std::snprintf(buf, sizeof buf, std::fabs(*d) >= 100 ? "%.1f" : "%.3g", *d);
    return buf;
  }
  if (auto* l = std::get_if<long>(&v)) return std::to_string(*l);
  return std::get<bool>(v) ? "true" : "false";
}

// Collects rows; prints JSON lines as they come (--json) or an aligned table
// at flush().
class reporter {
 public:
  reporter(std::string bench, bool json) : bench_(std::move(bench)), json_(json) {}
  ~reporter() { flush(); }

  void row(std::vector<field> fields) {
    if (json_) {
      std::string line = "{\"bench\":" + base::json_quote(bench_);
      for (auto& f : fields) line += "," + base::json_quote(f.key) + ":" + to_text(f.v, true);
      std::printf("%s}\n", line.c_str());
      std::fflush(stdout);
      return;
    }
    rows_.push_back(std::move(fields));
  }

  void flush() {
    if (rows_.empty()) return;
    std::vector<std::string> keys;
    for (auto& r : rows_)
      for (auto& f : r)
        if (std::find(keys.begin(), keys.end(), f.key) == keys.end()) keys.push_back(f.key);
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> width(keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) width[k] = keys[k].size();
    for (auto& r : rows_) {
      std::vector<std::string> line(keys.size());
      for (auto& f : r) {
        auto k = std::size_t(std::find(keys.begin(), keys.end(), f.key) - keys.begin());
        line[k] = to_text(f.v, false);
        width[k] = std::max(width[k], line[k].size());
      }
      cells.push_back(std::move(line));
    }
    auto print = [&](const std::vector<std::string>& line) {
      for (std::size_t k = 0; k < line.size(); ++k)
        std::printf("%*s%s", int(width[k]), line[k].c_str(), k + 1 < line.size() ? "  " : "\n");
    };
    print(keys);
    for (auto& l : cells) print(l);
    std::printf("\n");
    std::fflush(stdout);
    rows_.clear();
  }

 private:
  std::string bench_;
  bool json_;
  std::vector<std::vector<field>> rows_;
};

// Summary of repeated measurements.
struct summary {
  double median = 0, min = 0, max = 0;
  // (max - min) / median: the spread reported beside every figure.
  double spread() const { return median > 0 ? (max - min) / median : 0; }
};
inline summary summarize(std::vector<double> xs) {
  summary s;
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  s.min = xs.front();
  s.max = xs.back();
  std::size_t n = xs.size();
  s.median = n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
  return s;
}

}  // namespace weft::bench
