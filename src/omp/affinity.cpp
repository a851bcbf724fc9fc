// OpenMP's placement on weft's PEs: OMP_PLACES and OMP_PROC_BIND (the
// place list and the bind-var ICV), the affinity routines (places,
// partitions, omp_get_place_num), OMP_DISPLAY_ENV, OMP_DISPLAY_AFFINITY and
// OMP_AFFINITY_FORMAT (OpenMP 5.0, 2.6.2, 3.2.23-3.2.35, 6.4-6.15).
//
// libgomp binds each OpenMP thread to a place; weft binds PEs (one CPU
// each, --weft:bind) and puts thread i of a region met on PE p on PE
// (p + i) mod PEs. So the places are read as libgomp reads them (the same
// syntax, the same defaults, the same errors: a warning and the default),
// and mapped onto the PEs rather than onto threads:
//  - a plain OpenMP program's node (started at its first region) binds its
//    PEs where libgomp would bind a team of as many threads, unless
//    WEFT_BIND says otherwise: PE k gets a CPU of the place libgomp's rules
//    give thread k of a team met on place 0 (places_bind);
//  - a thread's place is the first place holding its PE's CPU, kept O(1)
//    (a table by CPU), and its partition is what libgomp's rules give it;
//  - where the PEs cannot be where the rules put a team (PEs bound
//    elsewhere, unbound, more threads than PEs), the first such region
//    says so once on stderr and runs where weft's placement puts it.
// libgomp's algorithm for a team's places (team.c, gomp_team_start) is
// re-derived in team_places below from OpenMP 5.0 2.6.2, and checked
// against libgomp side by side by tests/omp/affinity.c.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/base/topology.hpp"
#include "weft/core/handler.hpp"

extern "C" int omp_get_max_threads();

namespace weft::omp {

namespace {

struct places_state {
  std::vector<std::vector<int>> places;  // OS CPU numbers, ascending
  std::vector<int> cpu_place;            // OS CPU -> the first place holding it (-1: none)
  std::vector<int> bind_list;            // OMP_PROC_BIND per nesting level (empty: unset)
  std::string places_text;               // as OMP_DISPLAY_ENV shows it
  int display_env = 0;                   // 1: true, 2: verbose
  bool display_affinity = false;
};
// Written once (read_affinity_environment), then read. Made at first use,
// like every object the routines read: a library's constructor may call
// them before this library's own have run (OpenBLAS asks for the places
// while it loads, libweft-omp preloaded).
places_state& state() {
  static places_state s;
  return s;
}

// affinity-format-var: any thread may set it at any time.
std::mutex g_format_mutex;
std::string& format_var() {
  static std::string f = "level %L thread %i affinity %A";  // guarded by g_format_mutex
  return f;
}

std::atomic<bool> g_placement_warned{false};

void bad_value(const char* var, const char* value, const char* accepted) {
  base::warn("invalid value for environment variable %s=%s (%s); ignored, as libgomp does", var,
             value, accepted);
}

// ---- where threads go -------------------------------------------------------------

struct slot {
  int place, off, len;  // a thread's place and place partition
};

// The places and partitions OpenMP's rules (5.0, 2.6.2) give the n threads
// of a team whose thread 0 is on place `first`, with policy `bind` in the
// partition [off, off + len), as libgomp computes them: close puts thread i
// on the i-th place from thread 0's (T > P: consecutive threads share a
// place, the first T mod P places one more); spread splits the partition
// into T subpartitions and puts each thread on the first place of its own;
// primary puts every thread on thread 0's place.
std::vector<slot> team_places(int bind, int off, int len, int first, int n) {
  std::vector<slot> out(std::size_t(std::max(n, 1)), slot{first, off, len});
  if (len <= 0 || bind == bind_false) return out;
  if (first < off || first >= off + len) first = off;
  int p = first, s = 0, rest = 0, k = 0;
  switch (bind) {
    case bind_true:
    case bind_close:
      s = n > len ? n / len : 1;
      rest = n > len ? n % len : 0;
      k = 1;
      break;
    case bind_spread:
      if (n <= len) {
        s = len / n;
        rest = (s + 1) * (len % n) + off;
        if (p < rest) {
          p -= (p - off) % (s + 1);
          out[0].len = s + 1;
        } else {
          p -= (p - rest) % s;
          out[0].len = s;
        }
        out[0].off = p;
      } else {
        s = n / len;
        rest = n % len;
        out[0].off = p;
        out[0].len = 1;
        k = 1;
      }
      break;
    default:
      break;
  }
  const auto next = [&](int i) {
    if (k == s) {
      if (++p == off + len) p = off;
      k = 1;
      if (i == n - rest) s = 1;
    } else {
      ++k;
    }
  };
  for (int i = 1; i < n; ++i) {
    slot& o = out[std::size_t(i)];
    if (bind == bind_true || bind == bind_close) {
      next(i);
    } else if (bind == bind_spread) {
      if (k == 0) {
        p += p < rest ? s + 1 : s;
        if (p == off + len) p = off;
        o.off = p;
        o.len = p < rest ? s + 1 : s;
      } else {
        next(i);
        o.off = p;
        o.len = 1;
      }
    }
    o.place = p;
  }
  return out;
}

int place_of_cpu(int cpu) {
  const auto& t = state().cpu_place;
  return cpu >= 0 && std::size_t(cpu) < t.size() ? t[std::size_t(cpu)] : -1;
}

// The CPUs the calling OS thread may run on.
std::vector<int> my_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// A thread's place: its PE's CPU's (a PE is bound to one CPU), O(1). A
// thread that is not on a PE (the program's before its first region): the
// place holding every CPU it may run on, if one does.
int place_of(const thread_state& thr) {
  if (state().places.empty()) return -1;
  const int pe = thr.pe >= 0 ? thr.pe : threads::current_pe();
  if (pe >= 0) return place_of_cpu(weft::detail::pe_cpu(pe));
  // The program's thread before its first region: that region makes it PE
  // 0, on place 0 (places_bind), where libgomp binds it at its start.
  if (!weft::detail::node_runs() && std::getenv("WEFT_BIND") == nullptr) return 0;
  const std::vector<int> cpus = my_cpus();
  for (std::size_t p = 0; p < state().places.size(); ++p)
    if (std::all_of(cpus.begin(), cpus.end(), [&](int c) {
          return std::binary_search(state().places[p].begin(), state().places[p].end(), c);
        }))
      return int(p);
  return -1;
}

// A thread's own place partition (the initial thread's: every place).
slot partition_of(const thread_state& thr) {
  const int places = int(state().places.size());
  if (thr.t == nullptr || places == 0) return slot{place_of(thr), 0, places};
  const team& t = *thr.t;
  const int first = place_of_cpu(weft::detail::pe_cpu(t.master_pe));
  return team_places(t.bind, thr.part_off, thr.part_len, first, t.size)[std::size_t(thr.id)];
}

std::string env_text(const char* var) {
  const char* v = std::getenv(var);
  return v != nullptr ? std::string(var) + "=" + v : std::string();
}

// The variables that asked for the placement, for the one warning.
std::string asked_by() {
  std::string a = env_text("OMP_PROC_BIND"), b = env_text("OMP_PLACES");
  if (a.empty()) return b;
  return b.empty() ? a : a + " " + b;
}

// ---- affinity format ----------------------------------------------------------

std::string cpus_text() {
  return base::topology::format_cpus(my_cpus());
}

// The affinity format's fields (OpenMP 5.0, 6.14): %[[[0].]size]type, type
// one letter or {name}; right-justified with '.', zero-padded with "0.".
std::string format_affinity(const std::string& fmt, const thread_state& thr) {
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    const std::size_t start = i++;
    if (i < fmt.size() && fmt[i] == '%') {
      out += '%';
      continue;
    }
    bool zero = false, right = false;
    if (i < fmt.size() && fmt[i] == '0') zero = right = true, ++i;
    if (i < fmt.size() && fmt[i] == '.') right = true, ++i;
    std::size_t width = 0;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
      width = width * 10 + std::size_t(fmt[i++] - '0');
    std::string name;
    if (i < fmt.size() && fmt[i] == '{') {
      const std::size_t close = fmt.find('}', i);
      if (close == std::string::npos) {
        out += fmt.substr(start);
        break;
      }
      name = fmt.substr(i + 1, close - i - 1);
      i = close;
    } else if (i < fmt.size()) {
      name = std::string(1, fmt[i]);
    }
    const int level = thr.level;
    const thread_state* parent = thr.parent;
    std::string v;
    bool number = true;
    if (name == "t" || name == "team_num") {
      v = "0";
    } else if (name == "T" || name == "num_teams") {
      v = "1";
    } else if (name == "L" || name == "nesting_level") {
      v = std::to_string(level);
    } else if (name == "n" || name == "thread_num") {
      v = std::to_string(thr.t != nullptr ? thr.id : 0);
    } else if (name == "N" || name == "num_threads") {
      v = std::to_string(thr.t != nullptr ? thr.t->size : 1);
    } else if (name == "a" || name == "ancestor_tnum") {
      v = level == 0 ? "-1"
                     : std::to_string(parent != nullptr && parent->t != nullptr ? parent->id : 0);
    } else if (name == "H" || name == "host") {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      v = host;
      number = false;
    } else if (name == "P" || name == "process_id") {
      v = std::to_string(getpid());
    } else if (name == "i" || name == "native_thread_id") {
      char id[32];
      std::snprintf(id, sizeof id, "0x%lx", static_cast<unsigned long>(pthread_self()));
      v = id;
      number = false;
    } else if (name == "A" || name == "thread_affinity") {
      v = cpus_text();
      number = false;
    } else {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        base::warn(
            "unknown field '%%%s' in the OpenMP affinity format (OMP_AFFINITY_FORMAT, "
            "omp_set_affinity_format): accepted are t T L n N a H P i A and their long names "
            "({thread_num} ...); printed as it is",
            name.c_str());
      out += fmt.substr(start, i + 1 - start);
      continue;
    }
    if (v.size() < width) {
      const std::size_t pad = width - v.size();
      if (!right)
        v.append(pad, ' ');
      else if (zero && number && v[0] == '-')
        v.insert(1, pad, '0');
      else
        v.insert(0, pad, zero && number ? '0' : ' ');
    }
    out += v;
  }
  return out;
}

std::string current_format() {
  std::lock_guard<std::mutex> lock(g_format_mutex);
  return format_var();
}

void display_line(const std::string& text) {
  const std::string line = text + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

// ---- the environment ------------------------------------------------------------

void read_affinity_environment(global_icvs& g) {
  places_state& st = state();
  auto get = [](const char* var) -> const char* {
    const char* v = std::getenv(var);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  bool bind_false_given = false;
  if (const char* v = get("OMP_PROC_BIND")) {
    if (auto list = parse_proc_bind(v)) {
      st.bind_list = *list;
      bind_false_given = list->front() == bind_false;
    } else {
      bad_value("OMP_PROC_BIND", v,
                "expected true, false, or a list of primary, master, close, spread");
    }
  }
  // OMP_PROC_BIND=false: no places, whatever OMP_PLACES says (libgomp).
  if (const char* v = get("OMP_PLACES"); v != nullptr && !bind_false_given) {
    std::optional<std::vector<std::vector<int>>> places = parse_places(v);
    if (places && !places->empty()) {
      st.places = std::move(*places);
      if (st.bind_list.empty()) st.bind_list = {bind_true};
    } else {
      bad_value("OMP_PLACES", v,
                "expected threads, cores, sockets, ll_caches or numa_domains, each with an "
                "optional (count), or a list of places of this process's CPUs such as "
                "{0,1},{2,3} or {0:4}:4:4");
    }
  }
  // GCC's own variable, where OMP_PLACES gave no places.
  if (const char* v = get("GOMP_CPU_AFFINITY"); v != nullptr && !bind_false_given) {
    std::optional<std::vector<std::vector<int>>> places = parse_cpu_affinity(v);
    if (!places || places->empty())
      bad_value("GOMP_CPU_AFFINITY", v,
                "expected CPUs of this process, ranges a-b and a-b:stride, separated by spaces "
                "or commas");
    else if (st.places.empty()) {
      st.places = std::move(*places);
      if (st.bind_list.empty()) st.bind_list = {bind_true};
    }
  }
  const int bind = st.bind_list.empty() ? bind_false : st.bind_list.front();
  // A binding policy without places: one place per hardware thread.
  if (bind != bind_false && st.places.empty()) st.places = *parse_places("threads");
  if (bind == bind_false) st.places.clear();
  g.initial.bind = bind;
  // A list asks for nested placement: nesting is on unless the
  // variables that say so are set (libgomp).
  if (st.bind_list.size() > 1 && get("OMP_MAX_ACTIVE_LEVELS") == nullptr &&
      get("OMP_NESTED") == nullptr)
    g.initial.max_active_levels = 1 << 20;
  for (std::size_t p = 0; p < st.places.size(); ++p)
    for (int cpu : st.places[p]) {
      if (std::size_t(cpu) >= st.cpu_place.size()) st.cpu_place.resize(std::size_t(cpu) + 1, -1);
      if (st.cpu_place[std::size_t(cpu)] < 0) st.cpu_place[std::size_t(cpu)] = int(p);
    }
  st.places_text = places_text(st.places);

  if (const char* v = get("OMP_AFFINITY_FORMAT")) format_var() = v;
  if (const char* v = get("OMP_DISPLAY_AFFINITY")) {
    const std::string s = env_word(v);
    if (s == "true" || s == "false")
      st.display_affinity = s == "true";
    else
      bad_value("OMP_DISPLAY_AFFINITY", v, "expected true or false");
  }
  if (const char* v = get("OMP_DISPLAY_ENV")) {
    const std::string s = env_word(v);
    if (s == "true" || s == "verbose" || s == "false")
      st.display_env = s == "true" ? 1 : s == "verbose" ? 2 : 0;
    else
      bad_value("OMP_DISPLAY_ENV", v, "expected true, false or verbose");
  }
  g.affinity = !st.places.empty() || st.display_affinity;
}

// ---- regions --------------------------------------------------------------------

int region_bind(const thread_state& me, unsigned flags, int& child_bind) {
  int bind = me.icv.bind;
  if (bind != bind_false && (flags & 7) != 0) bind = int(flags & 7);
  child_bind = bind;
  const auto& list = state().bind_list;
  if (std::size_t(me.level) + 1 < list.size()) child_bind = list[std::size_t(me.level) + 1];
  return bind;
}

void affinity_begin(team& t, thread_state& me) {
  if (state().places.empty()) return;
  const slot mine = partition_of(me);
  t.proto.part_off = mine.off;
  t.proto.part_len = mine.len;
  if (t.size < 2 || t.bind == bind_false || g_placement_warned.load(std::memory_order_relaxed))
    return;
  // Compared once per team and shape (teams are recycled), not per region.
  const int pes = threads::node_pes(), places = int(state().places.size());
  const long key =
      ((long(t.bind) * (places + 1) + mine.off) * (places + 1) + mine.len) * (long(pes) + 1) +
      t.master_pe;
  if (t.placement_checked == key) return;
  t.placement_checked = key;
  const int first = place_of_cpu(weft::detail::pe_cpu(t.master_pe));
  const std::vector<slot> want = team_places(t.bind, mine.off, mine.len, first, t.size);
  for (int i = 0; i < t.size; ++i) {
    const int pe = (t.master_pe + i) % pes, cpu = weft::detail::pe_cpu(pe);
    const std::vector<int>& place = state().places[std::size_t(want[std::size_t(i)].place)];
    if (cpu >= 0 && std::binary_search(place.begin(), place.end(), cpu)) continue;
    if (g_placement_warned.exchange(true)) return;
    const std::string asked = asked_by(), wanted = places_text({place});
    if (cpu < 0)
      base::warn(
          "%s: weft's PEs are not bound (WEFT_BIND=none), so OpenMP threads are not bound to "
          "places; they run where the OS puts their PE, and omp_get_place_num() returns -1",
          asked.c_str());
    else
      base::warn(
          "%s: OpenMP puts thread %d of this team of %d on place %d %s, but weft runs it on "
          "PE %d, bound to CPU %d (place %d): thread i of a region met on PE p runs on PE "
          "(p + i) mod %d, and PEs are bound by WEFT_BIND / --weft:bind, else where the places "
          "put a team of one thread per PE, one CPU each; the team runs there (said once)",
          asked.c_str(), i, t.size, want[std::size_t(i)].place, wanted.c_str(), pe, cpu,
          place_of_cpu(cpu), pes);
    return;
  }
}

// Displayed as libgomp does: by an OS thread the first time it runs an
// OpenMP thread, and again when its OpenMP thread number or place changed.
void affinity_member(member& m) {
  if (!state().display_affinity) return;
  static thread_local long shown = -1;
  const thread_state& thr = m.thr;
  const long key = long(thr.id) * 65536 + place_of(thr) + 1;
  if (shown == key) return;
  shown = key;
  display_line(format_affinity(current_format(), thr));
}

std::string places_bind(int pes) {
  const places_state& st = state();
  if (st.places.empty() || pes <= 0) return {};
  const int bind = st.bind_list.front();
  const std::vector<slot> want = team_places(bind, 0, int(st.places.size()), 0, pes);
  std::vector<int> cpus;
  for (const slot& s : want)
    for (int c : st.places[std::size_t(s.place)])
      if (std::find(cpus.begin(), cpus.end(), c) == cpus.end()) {
        cpus.push_back(c);
        break;
      }
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

namespace {

void display_env(bool verbose, const icvs& icv) {
  const global_icvs& g = globals();
  static const char* const kinds[] = {"", "STATIC", "DYNAMIC", "GUIDED", "AUTO"};
  std::string sched = kinds[icv.run_sched];
  if (icv.run_chunk != (icv.run_sched == sched_static ? 0 : 1))
    sched += "," + std::to_string(icv.run_chunk);
  std::string bind;
  for (int b : state().bind_list) bind += std::string(bind.empty() ? "" : ",") + proc_bind_name(b);
  if (bind.empty()) bind = "FALSE";
  const auto yes = [](bool b) { return b ? "TRUE" : "FALSE"; };
  std::string s = "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n  _OPENMP = '201511'\n";
  const auto line = [&](const char* name, const std::string& v) {
    s += std::string("  ") + name + " = '" + v + "'\n";
  };
  line("OMP_DYNAMIC", yes(icv.dynamic));
  line("OMP_NESTED", yes(icv.max_active_levels > 1));
  line("OMP_NUM_THREADS", std::to_string(omp_get_max_threads()));
  line("OMP_SCHEDULE", sched);
  line("OMP_PROC_BIND", bind);
  line("OMP_PLACES", state().places_text);
  line("OMP_STACKSIZE", std::to_string(g.stack_bytes));
  line("OMP_WAIT_POLICY", "PASSIVE");
  line("OMP_THREAD_LIMIT", std::to_string(icv.thread_limit));
  line("OMP_MAX_ACTIVE_LEVELS", std::to_string(icv.max_active_levels));
  line("OMP_NUM_TEAMS", "0");
  line("OMP_TEAMS_THREAD_LIMIT", "0");
  line("OMP_CANCELLATION", yes(g.cancellation));
  line("OMP_DEFAULT_DEVICE", "0");
  line("OMP_MAX_TASK_PRIORITY", "0");
  line("OMP_DISPLAY_AFFINITY", yes(state().display_affinity));
  line("OMP_AFFINITY_FORMAT", current_format());
  line("OMP_ALLOCATOR", allocator_name(g.initial.def_allocator));
  line("OMP_TARGET_OFFLOAD", "DEFAULT");
  if (verbose) {
    line("GOMP_CPU_AFFINITY", "");
    line("GOMP_STACKSIZE", std::to_string(g.stack_bytes));
    line("GOMP_SPINCOUNT", "0");
  }
  s += "OPENMP DISPLAY ENVIRONMENT END\n";
  std::fwrite(s.data(), 1, s.size(), stderr);
}

// OMP_DISPLAY_ENV shows the ICVs as the program starts, as libgomp does
// from its constructor; the environment is read then only when asked to.
const bool shown_env = [] {
  const char* v = std::getenv("OMP_DISPLAY_ENV");
  if (v == nullptr || *v == '\0') return false;
  globals();
  if (state().display_env != 0) display_env(state().display_env == 2, globals().initial);
  return true;
}();

}  // namespace

}  // namespace weft::omp

using namespace weft::omp;

extern "C" {

WEFT_GOMP int omp_get_proc_bind() {
  return current().icv.bind;
}
WEFT_GOMP int omp_get_num_places() {
  globals();
  return int(state().places.size());
}
WEFT_GOMP int omp_get_place_num_procs(int place) {
  globals();
  if (place < 0 || place >= int(state().places.size())) return 0;
  return int(state().places[std::size_t(place)].size());
}
WEFT_GOMP void omp_get_place_proc_ids(int place, int* ids) {
  globals();
  if (place < 0 || place >= int(state().places.size()) || ids == nullptr) return;
  for (int c : state().places[std::size_t(place)]) *ids++ = c;
}
WEFT_GOMP int omp_get_place_num() {
  globals();
  return place_of(current());
}
WEFT_GOMP int omp_get_partition_num_places() {
  globals();
  if (state().places.empty()) return 0;
  return partition_of(current()).len;
}
WEFT_GOMP void omp_get_partition_place_nums(int* nums) {
  globals();
  if (state().places.empty() || nums == nullptr) return;
  const slot s = partition_of(current());
  for (int i = 0; i < s.len; ++i) nums[i] = s.off + i;
}

WEFT_GOMP void omp_set_affinity_format(const char* format) {
  globals();
  std::lock_guard<std::mutex> lock(g_format_mutex);
  format_var() = format != nullptr ? format : "";
}
WEFT_GOMP std::size_t omp_get_affinity_format(char* buffer, std::size_t size) {
  const std::string f = (globals(), current_format());
  if (buffer != nullptr && size > 0) {
    const std::size_t n = std::min(size - 1, f.size());
    std::memcpy(buffer, f.data(), n);
    buffer[n] = '\0';
  }
  return f.size();
}
WEFT_GOMP std::size_t omp_capture_affinity(char* buffer, std::size_t size, const char* format) {
  globals();
  const std::string f = format != nullptr && *format != '\0' ? format : current_format();
  const std::string text = format_affinity(f, current());
  if (buffer != nullptr && size > 0) {
    const std::size_t n = std::min(size - 1, text.size());
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}
WEFT_GOMP void omp_display_affinity(const char* format) {
  globals();
  const std::string f = format != nullptr && *format != '\0' ? format : current_format();
  display_line(format_affinity(f, current()));
}
WEFT_GOMP void omp_display_env(int verbose) {
  display_env(verbose != 0, current().icv);
}

}  // extern "C"
