// The ICVs a program starts with, from the OMP_* (and GOMP_*) environment
// variables, read once at the first use of globals(). A malformed value is
// a warning naming the variable and what it accepts, and the variable is
// ignored, as libgomp does.
#include <pthread.h>
#include <strings.h>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include "omp/omp_internal.hpp"
#include "weft/base/error.hpp"

namespace weft::omp {

namespace {

// ---- ICVs from the environment ---------------------------------------------------

// A bad value is what libgomp makes of it: a warning, and the variable is
// ignored (its default stays). A plain OpenMP program must not die under
// libweft-omp where it runs under libgomp.
void bad_env(const char* var, const char* value, const char* accepted) {
  base::warn("invalid value for environment variable %s=%s (%s); ignored, as libgomp does", var,
             value, accepted);
}

// An unsigned integer, the whole value (spaces around it allowed); for a list
// ("4,2": OMP_NUM_THREADS per nesting level) the first item.
std::optional<long> parse_count(const char* var, const char* v, bool allow_zero,
                                bool list = false) {
  const char* p = v;
  while (std::isspace(static_cast<unsigned char>(*p))) ++p;
  char* end = nullptr;
  errno = 0;
  const long n = std::isdigit(static_cast<unsigned char>(*p)) ? std::strtol(p, &end, 10) : -1;
  if (n >= 0 && errno == 0) {
    while (std::isspace(static_cast<unsigned char>(*end))) ++end;
    if ((*end == '\0' || (list && *end == ',')) && (allow_zero || n > 0)) return n;
  }
  bad_env(var, v, allow_zero ? "expected a non-negative integer" : "expected a positive integer");
  return std::nullopt;
}

// OpenMP's kinds, and weft's schemes of a static schedule (docs/omp.md,
// "Loop schemes"): weft_idle and weft_history, whose chunk is the least
// part of a block they offer. OpenMP leaves other kinds to the
// implementation (LLVM's runtime reads static_steal there).
void parse_schedule(const char* v, icvs& icv) {
  std::string s(v);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  // monotonic: a thread's chunks in increasing order, which no loop scheme
  // keeps: a static schedule then stays static whatever --weft:omp-scheme.
  const bool monotonic = s.rfind("monotonic:", 0) == 0;
  if (monotonic) s = s.substr(10);
  if (s.rfind("nonmonotonic:", 0) == 0) s = s.substr(13);
  const std::size_t comma = s.find(',');
  const std::string k = s.substr(0, comma);
  int new_kind;
  int scheme = scheme_option;
  if (k == "static")
    new_kind = sched_static;
  else if (k == "weft_idle")
    new_kind = sched_static, scheme = scheme_idle;
  else if (k == "weft_history")
    new_kind = sched_static, scheme = scheme_history;
  else if (k == "dynamic")
    new_kind = sched_dynamic;
  else if (k == "guided")
    new_kind = sched_guided;
  else if (k == "auto")
    new_kind = sched_auto;
  else {
    bad_env("OMP_SCHEDULE", v,
            "expected [monotonic:|nonmonotonic:]static|dynamic|guided|auto|weft_idle|"
            "weft_history[,chunk]");
    return;
  }
  long new_chunk = new_kind == sched_static ? 0 : 1;
  if (comma != std::string::npos) {
    const std::optional<long> c = parse_count("OMP_SCHEDULE", s.c_str() + comma + 1, false);
    if (!c) return;
    new_chunk = *c;
  }
  icv.run_sched = new_kind;
  icv.run_scheme = monotonic ? scheme_static : scheme;
  // A scheme's chunk is its least part; the schedule stays static without one.
  icv.run_chunk = scheme == scheme_option ? new_chunk : 0;
  icv.run_part = scheme == scheme_option ? 1 : std::max(1L, new_chunk);
}

std::optional<std::size_t> parse_stacksize(const char* var, const char* v) {
  char* end = nullptr;
  const double n = std::strtod(v, &end);
  const char* accepted = "expected a size such as 4M, 512K or 65536";
  if (end == v || n <= 0) {
    bad_env(var, v, accepted);
    return std::nullopt;
  }
  double unit = 1024;  // OpenMP: a bare number is in kilobytes
  switch (*end) {
    case 'b':
    case 'B':
      unit = 1;
      ++end;
      break;
    case 'k':
    case 'K':
      unit = 1024;
      ++end;
      break;
    case 'm':
    case 'M':
      unit = 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      unit = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0') {
    bad_env(var, v, accepted);
    return std::nullopt;
  }
  return std::size_t(n * unit);
}

std::optional<bool> parse_bool(const char* var, const char* v) {
  std::string s(v);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  bad_env(var, v, "expected true or false");
  return std::nullopt;
}

// libgomp's threads take the C library's default thread stack (the
// process's stack limit, `ulimit -s`, 8 MiB as a rule), and programs size
// their stack arrays by it: a member's stack is never smaller (and at least
// 4 MiB). Its pages are reserved, not committed, until used.
std::size_t default_member_stack() {
  std::size_t bytes = std::size_t(4) << 20;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    std::size_t thread_default = 0;
    if (pthread_attr_getstacksize(&attr, &thread_default) == 0)
      bytes = std::max(bytes, thread_default);
    pthread_attr_destroy(&attr);
  }
  return bytes;
}

void read_environment(global_icvs& g) {
  g.initial.nthreads = 0;  // 0: the PEs of the node (decided when it runs)
  g.stack_bytes = default_member_stack();
  auto get = [](const char* var) -> const char* {
    const char* v = std::getenv(var);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  if (const char* v = get("OMP_NUM_THREADS")) {
    // A list gives the first level's count first; nested levels run inactive.
    if (auto n = parse_count("OMP_NUM_THREADS", v, false, true)) g.initial.nthreads = int(*n);
  }
  if (const char* v = get("OMP_SCHEDULE")) parse_schedule(v, g.initial);
  if (const char* v = get("OMP_DYNAMIC"))
    if (auto b = parse_bool("OMP_DYNAMIC", v)) g.initial.dynamic = *b;
  if (const char* v = get("OMP_MAX_ACTIVE_LEVELS")) {
    if (auto n = parse_count("OMP_MAX_ACTIVE_LEVELS", v, true))
      g.initial.max_active_levels = int(*n);
  } else if (const char* n = get("OMP_NESTED")) {
    if (auto b = parse_bool("OMP_NESTED", n)) g.initial.max_active_levels = *b ? 1 << 20 : 1;
  }
  if (const char* v = get("OMP_THREAD_LIMIT"))
    if (auto n = parse_count("OMP_THREAD_LIMIT", v, false)) g.initial.thread_limit = int(*n);
  if (const char* v = get("OMP_NUM_TEAMS"))
    if (auto n = parse_count("OMP_NUM_TEAMS", v, false)) g.num_teams = int(*n);
  if (const char* v = get("OMP_TEAMS_THREAD_LIMIT"))
    if (auto n = parse_count("OMP_TEAMS_THREAD_LIMIT", v, false)) g.teams_thread_limit = int(*n);
  if (const char* v = get("OMP_TARGET_OFFLOAD")) {
    if (strcasecmp(v, "mandatory") == 0)
      g.offload_mandatory = true;
    else if (strcasecmp(v, "default") != 0 && strcasecmp(v, "disabled") != 0)
      bad_env("OMP_TARGET_OFFLOAD", v, "expected mandatory, disabled or default");
  }
  if (const char* v = get("OMP_CANCELLATION"))
    if (auto b = parse_bool("OMP_CANCELLATION", v)) g.cancellation = *b;
  if (const char* v = get("OMP_STACKSIZE")) {
    if (auto n = parse_stacksize("OMP_STACKSIZE", v)) g.stack_bytes = *n;
  } else if (const char* w = get("GOMP_STACKSIZE")) {
    if (auto n = parse_stacksize("GOMP_STACKSIZE", w)) g.stack_bytes = *n;
  }
  if (const char* v = get("OMP_ALLOCATOR"))
    g.initial.def_allocator = parse_allocator("OMP_ALLOCATOR", v);
  read_affinity_environment(g);
}

}  // namespace

constinit global_icvs g_globals{};
constinit std::atomic<bool> g_globals_read{false};

global_icvs& read_globals() {
  // Two program threads may meet their first constructs at once.
  static std::once_flag once;
  std::call_once(once, [] {
    read_environment(g_globals);
    g_globals_read.store(true, std::memory_order_release);
  });
  return g_globals;
}

}  // namespace weft::omp
