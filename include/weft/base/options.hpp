// Runtime options: `--weft:name=value` on the command line (removed from argv
// before the application sees it) or `WEFT_NAME=value` in the environment; the
// command line wins. Every layer defines its options in one option_set before
// parsing; values are validated at parse time, so a bad value is a one-line
// error naming the option and what is accepted (exit 2), never a surprise
// later. An unknown `--weft:` name is an error (with the closest known name),
// and so is a near miss of the prefix (`--weft-threads`, `-weft:threads`)
// that names a known option: a typo must not be silently ignored. Unknown
// `WEFT_*` variables are only warned about, once: environment modules and
// install scripts set such variables (WEFT_ROOT, WEFT_DIR) for their own use.
#pragma once
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include "weft/base/export.hpp"

namespace weft::base {

enum class option_source { default_value, environment, command_line };
WEFT_API const char* to_string(option_source s);

using option_validator = std::function<std::optional<std::string>(const std::string&)>;

struct option_spec {
  option_spec(std::string name_, std::string default_value_, std::string accepted_,
              std::string help_, option_validator validate_, bool is_flag_ = false,
              std::string default_note_ = "")
      : name(std::move(name_)),
        default_value(std::move(default_value_)),
        accepted(std::move(accepted_)),
        help(std::move(help_)),
        validate(std::move(validate_)),
        is_flag(is_flag_),
        default_note(std::move(default_note_)) {}
  std::string name;           // e.g. "threads"
  std::string default_value;  // as text; "" may mean "computed" (see default_note)
  std::string accepted;       // what is accepted, for help and errors, e.g. "mpsc|spsc-pairs"
  std::string help;           // one line
  // Returns an error text (what is wrong) or nullopt when the value is good.
  option_validator validate;
  bool is_flag = false;      // `--weft:name` alone means "1"
  std::string default_note;  // shown instead of default_value when it is computed
};

// Validators for the common kinds.
WEFT_API std::function<std::optional<std::string>(const std::string&)> one_of(
    std::vector<std::string> values);
WEFT_API std::function<std::optional<std::string>(const std::string&)> integer_in(long lo, long hi);
WEFT_API std::function<std::optional<std::string>(const std::string&)> number_in(double lo,
                                                                                 double hi);
WEFT_API std::function<std::optional<std::string>(const std::string&)> boolean();

// Parses a boolean option value (validated before: 1/0/true/false/on/off/yes/no).
WEFT_API bool parse_bool(const std::string& v);

class WEFT_API option_set {
 public:
  void define(option_spec spec);

  // Reads the environment (WEFT_*) and then argv (--weft:*), removing the
  // weft arguments from argv and updating argc. Errors exit with code 2.
  // `--weft:help` and `--weft:version` are recognised here: they print the
  // option list or the version text (see set_version_text) and exit 0.
  void parse(int& argc, char** argv, char** envp);

  // What `--weft:version` prints: a function, so that what it reports (the
  // transports built in, ...) is asked only when someone wants it.
  void set_version_text(std::function<std::string()> text) { version_text_ = std::move(text); }

  // The known name closest to `name` (a plausible typo of it), or "".
  std::string closest(const std::string& name) const;

  const std::string& get(const std::string& name) const;
  long get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  option_source source(const std::string& name) const;
  bool given(const std::string& name) const { return source(name) != option_source::default_value; }
  // Overrides a value from code (e.g. a default computed after parsing); keeps
  // the source as it was.
  void set_computed(const std::string& name, std::string value);

  // Where a value came from, as the user typed it: "--weft:threads=4" or
  // "WEFT_THREADS=4" or "default".
  std::string origin(const std::string& name) const;

  void print_help(std::FILE* out, const char* program) const;
  void print_config(std::FILE* out) const;

  static std::string env_name(const std::string& name);  // threads -> WEFT_THREADS

 private:
  struct entry {
    option_spec spec;
    std::string value;
    option_source source = option_source::default_value;
  };
  entry* find(const std::string& name);
  const entry& at(const std::string& name) const;
  void assign(entry& e, const std::string& value, option_source src);
  std::vector<entry> entries_;
  std::function<std::string()> version_text_;
};

}  // namespace weft::base
