// The objects layer across processes: a program run under mpirun (see
// mp_objects.cmake) with --case=NAME and the usual --weft: options. The main
// function is a coroutine on PE 0; every check is made where its data is (a
// process sees only its own globals), results reach PE 0 through reductions,
// futures and call<>, and any failure is a weft fatal error naming the case,
// the PE and what was wrong, so the whole job fails. A case that passes
// prints "mp_objects: <case> passed on <P> PEs in <N> processes" once, on
// PE 0, and every process exits with 0.
//
// Most cases end with quiescence (job-wide) and then ask every element to
// check its own counts and contribute them: a lost message is then named by
// the element that misses it instead of hanging the run.
//
// Cases:
//   array1d     a dense 1-D array (block map, constructor arguments int,
//               string, vector<double>) of 4P+3 elements; each sends a
//               payload to elements i+1 and i+7; each checks its home PE,
//               that it got exactly its two messages, and a sum reduction
//               to a future on main counts them
//   array2d     2-D arrays with the round-robin map and a user map; 50
//               numbered broadcasts from main and 25 from an element, each
//               received once and in order per root; a reduction confirms
//   group       a group: element on its own PE, point-to-point messages
//               between every pair, and reductions with every op (sum, min,
//               max, product, logical and/or/xor, bit and/or/xor, concat,
//               set, a user op, vectors) checked against values computed on
//               PE 0; results through futures, a broadcast callback and an
//               element callback
//   nodegroup   a nodegroup: one element per node, on that node; messages
//               from every PE to every node's element, broadcasts, and an
//               exclusive entry sent from every PE never overlapping
//   chares      chares made with create_on (every PE, also remote ones, also
//               from PEs of other processes) and create (placed by the
//               runtime); each reports its PE through a future, gets ordered
//               messages, answers call<>, is destroyed; constructions and
//               destructions are counted per process
//   migration   array elements migrate to a PE of another process every
//               other step while every element keeps sending them messages
//               and broadcasts come from main and from an element; no
//               message or broadcast lost or duplicated, on_migrated seen,
//               state (strings, vectors, sets) carried along
//   insert      a sparse array filled by insert()/insert_on() from every PE
//               onto PEs of other processes, messages sent right after the
//               insert and to elements other PEs insert (not there yet), then
//               late insertions; reductions count every element
//   futures     futures made on PE 0 set by group elements on every PE;
//               call<> answered by remote elements, to main and to
//               coroutines of other PEs
//   coroutines  a ring of elements running a coroutine: each round it sends
//               its value to both neighbours (on other PEs), co_awaits
//               next<> for theirs and all_reduce for the sum; checked against
//               a serial run on PE 0
//   readonly    weft::readonly<int>, <std::vector<int>> and <std::string>
//               set in main's setup; group and array elements on every PE
//               check them in their constructors and in an entry method
//   buffer      weft::buffer<double> (small and 1 MiB) and a struct holding
//               a weft::buffer<int32_t> moved into sends to elements on other
//               processes; the receivers check every value
//   priorities  messages with priorities (INT_MIN .. INT_MAX) across
//               processes all arrive, once each
//   exitcode    an element on the last PE calls weft::exit(7): weft::run
//               returns 7 in every process (the program turns that into 0)
//   error       an element on node 1 sends to an index out of the array's
//               bounds: the job fails, naming the index (CODE nonzero)
//   deleted     an element on node 1 sends to a deleted element whose home
//               is on node 0: the job fails, naming the element
//   tree        40 rounds of a group's sum reduction: the root PE gets one
//               partial result per round (nodes combine up a tree)
// With MP_OBJECTS_EXTRA_ENTRY set, process 1 registers one entry method more
// (a different build): the job must refuse to start.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include "weft/base/error.hpp"
#include "weft/weft.hpp"

namespace {

std::string g_case;
// Recorded by the main function (node 0 only), for the exitcode line.
int g_job_pes = 0, g_job_nodes = 0;

// ---- checks ------------------------------------------------------------------------

[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
  char what[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  weft::base::fatal("mp_objects: %s: PE %d: %s", g_case.c_str(), weft::my_pe(), what);
}

// Arguments are evaluated even when the check passes: keep them cheap.
__attribute__((format(printf, 2, 3))) void check(bool ok, const char* fmt, ...) {
  if (ok) [[likely]]
    return;
  char what[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  fail("%s", what);
}

template <class T>
inline constexpr bool is_vector_v = false;
template <class T, class A>
inline constexpr bool is_vector_v<std::vector<T, A>> = true;
template <class T>
inline constexpr bool is_pair_v = false;
template <class A, class B>
inline constexpr bool is_pair_v<std::pair<A, B>> = true;

// Readable values for failure messages.
template <class T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", double(v));
    return b;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "\"" + v + "\"";
  } else if constexpr (is_pair_v<T>) {
    return "(" + show(v.first) + ", " + show(v.second) + ")";
  } else if constexpr (is_vector_v<T>) {
    std::string s = "[";
    for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + show(v[k]);
    return s + "]";
  } else {
    return v.show();
  }
}

void passed() {
  std::printf("mp_objects: %s passed on %d PEs in %d processes\n", g_case.c_str(), weft::num_pes(),
              weft::num_nodes());
  std::fflush(stdout);
  weft::exit(0);
}

// A future set on PE 0 when the whole job is quiescent.
weft::future<int> quiescence() {
  auto f = weft::make_future<int>();
  weft::on_quiescence([f] { f.set(1); });
  return f;
}

// The case's own premise: a message from PE `from_pe` crossed processes
// (unless the job is one process).
void check_crossed(int from_pe, const char* what) {
  check(weft::num_nodes() == 1 || weft::node_of(from_pe) != weft::my_node(),
        "%s from PE %d reached PE %d, in the same process: the case means to cross processes", what,
        from_pe, weft::my_pe());
}

// A PE of another process than `pe`, `k` choosing among them (in a
// one-process job: PE pe+1+k, wrapping).
int remote_pe(int pe, int k = 0) {
  const int nodes = weft::num_nodes(), per = weft::node_size(), pes = weft::num_pes();
  if (nodes == 1) return (pe + 1 + k) % pes;
  const int node = (weft::node_of(pe) + 1 + k % (nodes - 1)) % nodes;
  return node * per + (pe + k) % per;
}

// ---- array1d -----------------------------------------------------------------------

constexpr int line_tag = 42;
const char* const line_label = "array1d label";
std::vector<double> line_weights() {
  return {0.5, -1.25, 1e10, 3.0};
}
std::vector<int> line_payload(int from, int slot) {
  std::vector<int> v(std::size_t(3 + (from * 5 + slot) % 17));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = from * 1000 + slot * 100 + int(k);
  return v;
}
constexpr int line_step[2] = {1, 7};  // slot 0 goes to i+1, slot 1 to i+7

struct Line : weft::array_element<Line, int> {
  Line(int tag, std::string label, std::vector<double> weights) {
    const int i = this_index(), n = array_size();
    check(tag == line_tag && label == line_label && weights == line_weights(),
          "element [%d] got constructor arguments (%d, \"%s\", %zu doubles), expected (%d, \"%s\", "
          "%s)",
          i, tag, label.c_str(), weights.size(), line_tag, line_label,
          show(line_weights()).c_str());
    const int home = int(long(i) * weft::num_pes() / n);
    check(weft::my_pe() == home,
          "element [%d] of %d constructed on PE %d; the block map's home is PE %d", i, n,
          weft::my_pe(), home);
  }
  int got[2] = {0, 0};

  void start() {
    const int i = this_index(), n = array_size();
    for (int slot = 0; slot < 2; ++slot)
      this_proxy()[(i + line_step[slot]) % n].send<&Line::take>(i, slot, line_payload(i, slot),
                                                                "from " + std::to_string(i));
  }
  void take(int from, int slot, std::vector<int> payload, std::string note) {
    const int i = this_index(), n = array_size();
    check(slot == 0 || slot == 1, "element [%d] got a message with slot %d", i, slot);
    const int want_from = ((i - line_step[slot]) % n + n) % n;
    check(from == want_from, "element [%d] got slot %d from [%d], expected it from [%d]", i, slot,
          from, want_from);
    check(payload == line_payload(from, slot) && note == "from " + std::to_string(from),
          "element [%d]: the payload from [%d] (slot %d) is corrupt: %zu ints, note \"%s\"", i,
          from, slot, payload.size(), note.c_str());
    ++got[slot];
    check(got[slot] == 1, "element [%d] got the message from [%d] (slot %d) %d times", i, from,
          slot, got[slot]);
  }
  void verify(weft::callback<int> cb) {
    check(got[0] == 1 && got[1] == 1,
          "element [%d] on PE %d got %d message(s) from [%d] and %d from [%d], expected one each",
          this_index(), weft::my_pe(), got[0], (this_index() - 1 + array_size()) % array_size(),
          got[1], (this_index() - 7 + 7 * array_size()) % array_size());
    contribute(got[0] + got[1], weft::op::sum, cb);
  }
};

weft::task<> case_array1d() {
  const int n = 4 * weft::num_pes() + 3;
  auto a = weft::array<Line>::create(n, line_tag, std::string(line_label), line_weights());
  a.broadcast<&Line::start>();
  auto q = quiescence();
  co_await q;
  auto total = weft::make_future<int>();
  a.broadcast<&Line::verify>(weft::callback<int>(total));
  const int t = co_await total;
  check(t == 2 * n, "the sum of the elements' message counts is %d, expected %d", t, 2 * n);
  passed();
}

// ---- array2d -----------------------------------------------------------------------

constexpr int grid_main_bcasts = 50, grid_elem_bcasts = 25;
int grid_map(const weft::index2d& i, int pes) {
  return (i.x * 3 + i.y * 5 + 1) % pes;
}
std::int64_t grid_stamp(int root, int seq) {
  return std::int64_t(root + 1) * 7919 * 1000 + seq;
}

struct Grid : weft::array_element<Grid, weft::index2d> {
  explicit Grid(int kind) : kind_(kind) {
    const weft::index2d i = this_index(), b = array_bounds();
    const int pes = weft::num_pes();
    const int want = kind == 0 ? (i.x * b.y + i.y) % pes : grid_map(i, pes);
    check(weft::my_pe() == want, "%s element [%d,%d] constructed on PE %d, its map says PE %d",
          kind == 0 ? "round-robin" : "user-map", i.x, i.y, weft::my_pe(), want);
  }
  int kind_;
  int next_[2] = {0, 0};  // per root: 0 main, 1 the last element

  void bcast(int root, int seq, std::int64_t stamp) {
    const weft::index2d i = this_index();
    check(root == 0 || root == 1, "element [%d,%d] got a broadcast from root %d", i.x, i.y, root);
    check(stamp == grid_stamp(root, seq), "element [%d,%d]: broadcast %d of root %d is corrupt",
          i.x, i.y, seq, root);
    check(seq == next_[root], "%s element [%d,%d] expected broadcast %d of root %d, got %d (%s)",
          kind_ == 0 ? "round-robin" : "user-map", i.x, i.y, next_[root], root, seq,
          seq < next_[root] ? "duplicate or reordered" : "lost or reordered");
    ++next_[root];
  }
  // Broadcasts rooted at this element's PE.
  void echo(int count) {
    for (int s = 0; s < count; ++s) this_proxy().broadcast<&Grid::bcast>(1, s, grid_stamp(1, s));
  }
  void verify(weft::callback<long> cb) {
    const weft::index2d i = this_index();
    check(next_[0] == grid_main_bcasts && next_[1] == grid_elem_bcasts,
          "%s element [%d,%d] on PE %d got %d of %d broadcasts from main and %d of %d from an "
          "element",
          kind_ == 0 ? "round-robin" : "user-map", i.x, i.y, weft::my_pe(), next_[0],
          grid_main_bcasts, next_[1], grid_elem_bcasts);
    contribute(long(next_[0] + next_[1]), weft::op::sum, cb);
  }
};

weft::task<> case_array2d() {
  const weft::index2d bounds{weft::num_pes() + 1, 3};
  const long count = long(bounds.x) * bounds.y;
  weft::array<Grid> arrays[2] = {
      weft::array<Grid>::create(weft::array_options{weft::array_map::round_robin()}, bounds, 0),
      weft::array<Grid>::create(weft::array_options{weft::array_map::function<&grid_map>()}, bounds,
                                1)};
  // The last element (on some other PE) broadcasts too, interleaved with main.
  for (auto& a : arrays) a[{bounds.x - 1, bounds.y - 1}].send<&Grid::echo>(grid_elem_bcasts);
  for (int s = 0; s < grid_main_bcasts; ++s)
    for (auto& a : arrays) a.broadcast<&Grid::bcast>(0, s, grid_stamp(0, s));
  auto q = quiescence();
  co_await q;
  for (int k = 0; k < 2; ++k) {
    auto total = weft::make_future<long>();
    arrays[k].broadcast<&Grid::verify>(weft::callback<long>(total));
    const long t = co_await total;
    const long want = count * (grid_main_bcasts + grid_elem_bcasts);
    check(t == want, "%s array: the elements counted %ld broadcasts, expected %ld",
          k == 0 ? "round-robin" : "user-map", t, want);
  }
  passed();
}

// ---- group -------------------------------------------------------------------------

constexpr int peer_msgs = 10;

// A user reduction op over a struct with its own pup.
struct extent {
  int lo = INT_MAX, hi = INT_MIN;
  long count = 0;
  std::vector<int> pes;  // sorted
  void pup(weft::pupper& p) { p | lo | hi | count | pes; }
  bool operator==(const extent&) const = default;
  std::string show() const {
    return "{lo " + std::to_string(lo) + ", hi " + std::to_string(hi) + ", count " +
           std::to_string(count) + ", pes " + ::show(pes) + "}";
  }
};
struct merge_extent {
  extent operator()(extent a, const extent& b) const {
    a.lo = std::min(a.lo, b.lo);
    a.hi = std::max(a.hi, b.hi);
    a.count += b.count;
    std::vector<int> m;
    std::merge(a.pes.begin(), a.pes.end(), b.pes.begin(), b.pes.end(), std::back_inserter(m));
    a.pes = std::move(m);
    return a;
  }
};

// One reduction each: the op, each PE's value, and the result computed on
// PE 0 (normalised where the op leaves the order open).
template <class R>
struct red_base {
  static R normal(R r) { return r; }
};
struct red_sum : red_base<long> {
  static constexpr const char* name = "sum<long>";
  using op = weft::op::sum_t;
  using R = long;
  static long value(int pe) { return 1000L * pe + 7; }
  static R expect(int pes) {
    R r = 0;
    for (int pe = 0; pe < pes; ++pe) r += value(pe);
    return r;
  }
};
struct red_vsum : red_base<std::vector<long>> {
  static constexpr const char* name = "sum<vector<long>>";
  using op = weft::op::sum_t;
  using R = std::vector<long>;
  static R value(int pe) { return {pe, 2L * pe + 1, -pe}; }
  static R expect(int pes) {
    R r(3, 0);
    for (int pe = 0; pe < pes; ++pe)
      for (std::size_t k = 0; k < 3; ++k) r[k] += value(pe)[k];
    return r;
  }
};
struct red_min : red_base<int> {
  static constexpr const char* name = "min<int>";
  using op = weft::op::min_t;
  using R = int;
  static int value(int pe) { return (pe * 7 + 3) % 11 - 5; }
  static R expect(int pes) {
    R r = value(0);
    for (int pe = 1; pe < pes; ++pe) r = std::min(r, value(pe));
    return r;
  }
};
struct red_max : red_base<double> {
  static constexpr const char* name = "max<double>";
  using op = weft::op::max_t;
  using R = double;
  static double value(int pe) { return (pe % 3) * 0.25 - 1.0 + pe * 0.125; }
  static R expect(int pes) {
    R r = value(0);
    for (int pe = 1; pe < pes; ++pe) r = std::max(r, value(pe));
    return r;
  }
};
struct red_product : red_base<long> {
  static constexpr const char* name = "product<long>";
  using op = weft::op::product_t;
  using R = long;
  static long value(int pe) { return pe % 3 + 2; }
  static R expect(int pes) {
    R r = 1;
    for (int pe = 0; pe < pes; ++pe) r *= value(pe);
    return r;
  }
};
struct red_land : red_base<bool> {
  static constexpr const char* name = "logical_and";
  using op = weft::op::logical_and_t;
  using R = bool;
  static bool value(int pe) { return pe != 1; }
  static R expect(int pes) {
    R r = true;
    for (int pe = 0; pe < pes; ++pe) r = r && value(pe);
    return r;
  }
};
struct red_lor : red_base<bool> {
  static constexpr const char* name = "logical_or";
  using op = weft::op::logical_or_t;
  using R = bool;
  static bool value(int pe) { return pe == 1; }
  static R expect(int pes) {
    R r = false;
    for (int pe = 0; pe < pes; ++pe) r = r || value(pe);
    return r;
  }
};
struct red_lxor : red_base<bool> {
  static constexpr const char* name = "logical_xor";
  using op = weft::op::logical_xor_t;
  using R = bool;
  static bool value(int pe) { return pe % 3 != 1; }
  static R expect(int pes) {
    R r = false;
    for (int pe = 0; pe < pes; ++pe) r = r != value(pe);
    return r;
  }
};
struct red_band : red_base<std::uint32_t> {
  static constexpr const char* name = "bit_and<uint32>";
  using op = weft::op::bit_and_t;
  using R = std::uint32_t;
  static R value(int pe) { return 0xF0F0u | (1u << (pe % 32)); }
  static R expect(int pes) {
    R r = ~0u;
    for (int pe = 0; pe < pes; ++pe) r &= value(pe);
    return r;
  }
};
struct red_bor : red_base<std::uint32_t> {
  static constexpr const char* name = "bit_or<uint32>";
  using op = weft::op::bit_or_t;
  using R = std::uint32_t;
  static R value(int pe) { return 1u << ((pe * 3) % 32); }
  static R expect(int pes) {
    R r = 0;
    for (int pe = 0; pe < pes; ++pe) r |= value(pe);
    return r;
  }
};
struct red_bxor : red_base<std::uint32_t> {
  static constexpr const char* name = "bit_xor<uint32>";
  using op = weft::op::bit_xor_t;
  using R = std::uint32_t;
  static R value(int pe) { return std::uint32_t(pe) * 0x9E37u + 1u; }
  static R expect(int pes) {
    R r = 0;
    for (int pe = 0; pe < pes; ++pe) r ^= value(pe);
    return r;
  }
};
struct red_concat {
  static constexpr const char* name = "concat<string>";
  using op = weft::op::concat_t;
  using R = std::vector<std::string>;
  static std::string value(int pe) { return "pe-" + std::to_string(pe) + std::string(pe, '*'); }
  static R expect(int pes) {
    R r;
    for (int pe = 0; pe < pes; ++pe) r.push_back(value(pe));
    return r;
  }
  static R normal(R r) {
    std::sort(r.begin(), r.end());
    return r;
  }
};
struct red_set {
  static constexpr const char* name = "set<int>";
  using op = weft::op::set_t;
  using R = std::vector<std::pair<int, int>>;
  static int value(int pe) { return pe * pe - 3; }
  static R expect(int pes) {
    R r;
    for (int pe = 0; pe < pes; ++pe) r.push_back({pe, value(pe)});
    return r;
  }
  static R normal(R r) {
    std::sort(r.begin(), r.end());
    return r;
  }
};
struct red_user : red_base<extent> {
  static constexpr const char* name = "user op merge_extent";
  using op = merge_extent;
  using R = extent;
  static extent value(int pe) { return extent{pe * 2 - 1, pe * 2 - 1, 1, {pe}}; }
  static R expect(int pes) {
    R r = value(0);
    for (int pe = 1; pe < pes; ++pe) r = merge_extent{}(r, value(pe));
    return r;
  }
};

struct Peer : weft::group_element<Peer> {
  explicit Peer(std::string tag) {
    check(this_pe() == weft::my_pe(), "group element %d constructed on PE %d", this_pe(),
          weft::my_pe());
    check(tag == "peers", "group element %d got constructor argument \"%s\"", this_pe(),
          tag.c_str());
    seen_.assign(std::size_t(weft::num_pes()), std::vector<bool>(peer_msgs, false));
  }
  std::vector<std::vector<bool>> seen_;  // [source PE][seq]
  int got_ = 0;
  weft::callback<int> all_cb_;
  weft::future<long> one_f_;

  void start() {
    const int me = weft::my_pe();
    // Interleaved, so every pair of processes has traffic at once.
    for (int s = 0; s < peer_msgs; ++s)
      for (int k = 1; k < weft::num_pes(); ++k) {
        const int to = (me + k) % weft::num_pes();
        this_proxy()[to].send<&Peer::hello>(me, s, std::to_string(me) + ">" + std::to_string(to));
      }
  }
  void hello(int from, int seq, std::string route) {
    const int me = weft::my_pe();
    check(this_pe() == me, "group element %d runs on PE %d", this_pe(), me);
    check(from >= 0 && from < weft::num_pes() && from != me && seq >= 0 && seq < peer_msgs,
          "group element %d got message %d from PE %d, which sends no such message", me, seq, from);
    check(route == std::to_string(from) + ">" + std::to_string(me),
          "group element %d got a message from PE %d routed \"%s\"", me, from, route.c_str());
    std::vector<bool>::reference bit = seen_[std::size_t(from)][std::size_t(seq)];
    check(!bit, "group element %d got message %d from PE %d twice", me, seq, from);
    bit = true;
    ++got_;
  }
  void verify(weft::callback<int> cb) {
    for (int from = 0; from < weft::num_pes(); ++from)
      for (int s = 0; s < peer_msgs; ++s)
        check(from == weft::my_pe() || seen_[std::size_t(from)][std::size_t(s)],
              "group element %d never got message %d from PE %d", weft::my_pe(), s, from);
    contribute(got_, weft::op::sum, cb);
  }

  template <class C>
  void give(weft::callback<typename C::R> cb) {
    contribute(C::value(this_pe()), typename C::op{}, cb);
  }
  void arm(weft::callback<int> all_cb, weft::future<long> one_f) {
    all_cb_ = all_cb;
    one_f_ = one_f;
  }
  // A broadcast callback's value: every element checks it, then counts.
  void got_total(long v) {
    check(v == red_sum::expect(weft::num_pes()),
          "group element %d got %ld through a broadcast callback, expected %ld", this_pe(), v,
          red_sum::expect(weft::num_pes()));
    contribute(1, weft::op::sum, all_cb_);
  }
  // An element callback's value (this element only).
  void got_one(long v) {
    check(this_pe() == weft::num_pes() - 1, "an element callback for PE %d ran on element %d",
          weft::num_pes() - 1, this_pe());
    one_f_.set(v);
  }
};

template <class C>
weft::future<typename C::R> start_group_red(const weft::group_proxy<Peer>& g) {
  auto f = weft::make_future<typename C::R>();
  g.broadcast<&Peer::give<C>>(weft::callback<typename C::R>(f));
  return f;
}
template <class C>
weft::task<> check_group_red(weft::future<typename C::R> f) {
  const typename C::R got = C::normal(co_await f);
  const typename C::R want = C::normal(C::expect(weft::num_pes()));
  check(got == want, "the group's %s reduction gave %s, expected %s", C::name, show(got).c_str(),
        show(want).c_str());
}

weft::task<> case_group() {
  const int pes = weft::num_pes();
  auto g = weft::group_proxy<Peer>::create(std::string("peers"));
  g.broadcast<&Peer::start>();
  // Every reduction in flight at once (rounds follow the broadcasts' order).
  auto f_sum = start_group_red<red_sum>(g);
  auto f_vsum = start_group_red<red_vsum>(g);
  auto f_min = start_group_red<red_min>(g);
  auto f_max = start_group_red<red_max>(g);
  auto f_prod = start_group_red<red_product>(g);
  auto f_land = start_group_red<red_land>(g);
  auto f_lor = start_group_red<red_lor>(g);
  auto f_lxor = start_group_red<red_lxor>(g);
  auto f_band = start_group_red<red_band>(g);
  auto f_bor = start_group_red<red_bor>(g);
  auto f_bxor = start_group_red<red_bxor>(g);
  auto f_concat = start_group_red<red_concat>(g);
  auto f_set = start_group_red<red_set>(g);
  auto f_user = start_group_red<red_user>(g);
  // The same sum to a broadcast callback and to an element callback.
  // The broadcast callback's round comes last: an element may get its
  // result before main's later broadcasts, and its got_total() contributes
  // to the next round, which must be the same round for every element.
  auto all_checked = weft::make_future<int>();
  auto at_last = weft::make_future<long>();
  g.broadcast<&Peer::arm>(weft::callback<int>(all_checked), at_last);
  g.broadcast<&Peer::give<red_sum>>(g[pes - 1].callback<&Peer::got_one>());
  g.broadcast<&Peer::give<red_sum>>(g.broadcast_callback<&Peer::got_total>());

  auto t1 = check_group_red<red_sum>(f_sum);
  co_await t1;
  auto t2 = check_group_red<red_vsum>(f_vsum);
  co_await t2;
  auto t3 = check_group_red<red_min>(f_min);
  co_await t3;
  auto t4 = check_group_red<red_max>(f_max);
  co_await t4;
  auto t5 = check_group_red<red_product>(f_prod);
  co_await t5;
  auto t6 = check_group_red<red_land>(f_land);
  co_await t6;
  auto t7 = check_group_red<red_lor>(f_lor);
  co_await t7;
  auto t8 = check_group_red<red_lxor>(f_lxor);
  co_await t8;
  auto t9 = check_group_red<red_band>(f_band);
  co_await t9;
  auto t10 = check_group_red<red_bor>(f_bor);
  co_await t10;
  auto t11 = check_group_red<red_bxor>(f_bxor);
  co_await t11;
  auto t12 = check_group_red<red_concat>(f_concat);
  co_await t12;
  auto t13 = check_group_red<red_set>(f_set);
  co_await t13;
  auto t14 = check_group_red<red_user>(f_user);
  co_await t14;
  const int checked = co_await all_checked;
  check(checked == pes, "%d group elements checked the broadcast callback's value, expected %d",
        checked, pes);
  const long one = co_await at_last;
  check(one == red_sum::expect(pes), "the element callback got %ld, expected %ld", one,
        red_sum::expect(pes));

  auto q = quiescence();
  co_await q;
  auto total = weft::make_future<int>();
  g.broadcast<&Peer::verify>(weft::callback<int>(total));
  const int t = co_await total;
  check(t == pes * (pes - 1) * peer_msgs, "the group elements got %d messages, expected %d", t,
        pes * (pes - 1) * peer_msgs);
  passed();
}

// ---- nodegroup ---------------------------------------------------------------------

constexpr int depot_hits = 20, depot_adds = 100, depot_bcasts = 30;
std::atomic<int> g_depot_ctors{0};  // this process

long depot_value(int pe, int k) {
  return long(pe) * 1000 + k;
}

struct depot_report {
  int node = -1, ctors = 0;
  long hits = 0, bcasts = 0, adds = 0, total = 0, overlaps = 0;
  void pup(weft::pupper& p) { p | node | ctors | hits | bcasts | adds | total | overlaps; }
};

struct Depot : weft::nodegroup_element<Depot> {
  explicit Depot(int tag) {
    check(this_node() == weft::my_node(), "nodegroup element %d constructed on node %d",
          this_node(), weft::my_node());
    check(tag == 77, "nodegroup element %d got constructor argument %d", this_node(), tag);
    seen_.assign(std::size_t(weft::num_pes()), std::vector<bool>(depot_hits, false));
    bcast_seen_.assign(depot_bcasts, false);
    ++g_depot_ctors;
  }
  // Non-exclusive entries run at once on several PEs of the node: mu_.
  std::mutex mu_;
  std::vector<std::vector<bool>> seen_;
  std::vector<bool> bcast_seen_;
  long hits_ = 0, bcasts_ = 0;
  // Touched by the exclusive entry only.
  long adds_ = 0, total_ = 0;
  std::atomic<int> inside_{0};
  std::atomic<long> overlaps_{0};

  void hit(int from, int seq) {
    check(weft::my_node() == this_node(), "nodegroup element %d ran on node %d", this_node(),
          weft::my_node());
    check(from >= 0 && from < weft::num_pes() && seq >= 0 && seq < depot_hits,
          "nodegroup element %d got hit %d from PE %d, which sends no such message", this_node(),
          seq, from);
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<bool>::reference bit = seen_[std::size_t(from)][std::size_t(seq)];
    check(!bit, "nodegroup element %d got hit %d from PE %d twice", this_node(), seq, from);
    bit = true;
    ++hits_;
  }
  void bcast(int seq) {
    check(weft::my_node() == this_node(), "nodegroup element %d ran on node %d", this_node(),
          weft::my_node());
    check(seq >= 0 && seq < depot_bcasts, "nodegroup element %d got broadcast %d", this_node(),
          seq);
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<bool>::reference bit = bcast_seen_[std::size_t(seq)];
    check(!bit, "nodegroup element %d got broadcast %d twice", this_node(), seq);
    bit = true;
    ++bcasts_;
  }
  void add(int from, long v) {
    check(from >= 0 && from < weft::num_pes(), "nodegroup element %d got an add from PE %d",
          this_node(), from);
    if (inside_.fetch_add(1) != 0) ++overlaps_;
    const long t = total_;
    ++adds_;
    // Some work inside widens the window an overlap would need.
    volatile long sink = 0;
    for (int k = 0; k < 200; ++k) sink = sink + k * t;
    total_ = t + v;
    inside_.fetch_sub(1);
  }
  using exclusive_entries = weft::entries<&Depot::add>;

  depot_report report() {
    std::lock_guard<std::mutex> lock(mu_);
    const int pes = weft::num_pes();
    for (int from = 0; from < pes; ++from)
      for (int s = 0; s < depot_hits; ++s)
        check(seen_[std::size_t(from)][std::size_t(s)],
              "nodegroup element %d never got hit %d from PE %d", this_node(), s, from);
    for (int s = 0; s < depot_bcasts; ++s)
      check(bcast_seen_[std::size_t(s)], "nodegroup element %d never got broadcast %d", this_node(),
            s);
    long want_total = 0;
    for (int pe = 0; pe < pes; ++pe)
      for (int k = 0; k < depot_adds; ++k) want_total += depot_value(pe, k);
    check(overlaps_.load() == 0, "nodegroup element %d: the exclusive entry overlapped %ld times",
          this_node(), overlaps_.load());
    check(adds_ == long(pes) * depot_adds && total_ == want_total,
          "nodegroup element %d: %ld exclusive adds totalling %ld, expected %ld totalling %ld",
          this_node(), adds_, total_, long(pes) * depot_adds, want_total);
    return depot_report{this_node(), g_depot_ctors.load(), hits_, bcasts_, adds_,
                        total_,      overlaps_.load()};
  }
};

// One per PE: sends to every node's element from every PE at once.
struct Feeder : weft::group_element<Feeder> {
  explicit Feeder(weft::nodegroup_proxy<Depot> d) : depot_(d) {}
  weft::nodegroup_proxy<Depot> depot_;
  void feed() {
    const int me = weft::my_pe();
    for (int k = 0; k < std::max(depot_hits, depot_adds); ++k)
      for (int node = 0; node < weft::num_nodes(); ++node) {
        if (k < depot_hits) depot_[node].send<&Depot::hit>(me, k);
        if (k < depot_adds) depot_[node].send<&Depot::add>(me, depot_value(me, k));
      }
  }
};

weft::task<> case_nodegroup() {
  const int nodes = weft::num_nodes(), pes = weft::num_pes();
  auto d = weft::nodegroup_proxy<Depot>::create(77);
  auto feeders = weft::group_proxy<Feeder>::create(d);
  feeders.broadcast<&Feeder::feed>();
  for (int s = 0; s < depot_bcasts; ++s) d.broadcast<&Depot::bcast>(s);
  auto q = quiescence();
  co_await q;
  for (int node = 0; node < nodes; ++node) {
    auto f = d[node].call<&Depot::report>();
    const depot_report r = co_await f;
    check(r.node == node, "nodegroup element %d answered for element %d", node, r.node);
    check(r.ctors == 1, "node %d constructed %d nodegroup elements, expected 1", node, r.ctors);
    check(r.hits == long(pes) * depot_hits && r.bcasts == depot_bcasts,
          "nodegroup element %d counted %ld hits and %ld broadcasts, expected %ld and %d", node,
          r.hits, r.bcasts, long(pes) * depot_hits, depot_bcasts);
    check(r.adds == long(pes) * depot_adds && r.overlaps == 0,
          "nodegroup element %d: %ld exclusive adds (%ld overlapping), expected %ld", node, r.adds,
          r.overlaps, long(pes) * depot_adds);
  }
  passed();
}

// ---- chares ------------------------------------------------------------------------

constexpr int spot_hits = 20, spot_free_from_main = 3;
std::atomic<long> g_spot_ctors{0}, g_spot_dtors{0};  // this process

struct Spot : weft::chare<Spot> {
  // want_pe -1: placed by the runtime (on any node: it may spread them).
  Spot(int id, int want_pe, int creator, weft::future<std::pair<int, int>> born) : id_(id) {
    if (want_pe >= 0)
      check(weft::my_pe() == want_pe, "chare %d made by PE %d for PE %d was constructed on PE %d",
            id, creator, want_pe, weft::my_pe());
    ++g_spot_ctors;
    born.set({id, weft::my_pe()});
  }
  ~Spot() override { ++g_spot_dtors; }
  int id_;
  int next_ = 0;
  int pe_ = weft::my_pe();

  void hit(int seq) {
    check(weft::my_pe() == pe_, "chare %d moved from PE %d to PE %d", id_, pe_, weft::my_pe());
    check(seq == next_, "chare %d expected hit %d, got %d (%s)", id_, next_, seq,
          seq < next_ ? "duplicate or reordered" : "lost or reordered");
    ++next_;
  }
  int hits() { return next_; }
};

// Creates chares, sends to them, asks them, destroys them; from any PE.
weft::task<int> exercise_chares(std::vector<std::tuple<int, int>> specs) {  // (id, want_pe)
  const int me = weft::my_pe();
  std::vector<weft::chare_proxy<Spot>> cs;
  std::vector<weft::future<std::pair<int, int>>> born;
  for (auto [id, want] : specs) {
    born.push_back(weft::make_future<std::pair<int, int>>());
    cs.push_back(want >= 0 ? weft::create_on<Spot>(want, id, want, me, born.back())
                           : weft::create<Spot>(id, -1, me, born.back()));
  }
  // Sent before the chares may exist: they wait for them.
  for (auto& c : cs)
    for (int s = 0; s < spot_hits; ++s) c.send<&Spot::hit>(s);
  for (std::size_t k = 0; k < cs.size(); ++k) {
    const auto [id, want] = specs[k];
    const std::pair<int, int> b = co_await born[k];
    check(b.first == id && (want < 0 || b.second == want) && b.second >= 0 &&
              b.second < weft::num_pes(),
          "chare %d (for PE %d) reported itself as chare %d on PE %d", id, want, b.first, b.second);
    auto f = cs[k].call<&Spot::hits>();
    const int h = co_await f;
    check(h == spot_hits, "chare %d on PE %d had %d hits when asked after them, expected %d", id,
          b.second, h, spot_hits);
  }
  for (auto& c : cs) c.destroy();
  co_return int(cs.size());
}

struct Maker : weft::group_element<Maker> {
  weft::task<> spawn(weft::future<int> done) {
    const int me = weft::my_pe();
    auto t = exercise_chares({{1000 + me, remote_pe(me)}, {2000 + me, -1}});
    const int made = co_await t;
    done.set(made);
  }
  // Counts of this process (from its first PE; the others give 0).
  void tally(weft::callback<std::vector<long>> cb) {
    const bool first = weft::my_rank() == 0;
    contribute(std::vector<long>{first ? g_spot_ctors.load() : 0, first ? g_spot_dtors.load() : 0},
               weft::op::sum, cb);
  }
};

weft::task<> case_chares() {
  const int pes = weft::num_pes();
  std::vector<std::tuple<int, int>> specs;
  for (int pe = 0; pe < pes; ++pe) specs.push_back({pe, pe});
  for (int k = 0; k < spot_free_from_main; ++k) specs.push_back({100 + k, -1});
  auto makers = weft::group_proxy<Maker>::create();
  std::vector<weft::future<int>> done;
  for (int pe = 0; pe < pes; ++pe) {
    done.push_back(weft::make_future<int>());
    makers[pe].send<&Maker::spawn>(done.back());
  }
  auto mine = exercise_chares(specs);
  const int made_here = co_await mine;
  int made = made_here;
  for (auto& f : done) made += co_await f;
  const long want = pes + spot_free_from_main + 2L * pes;
  check(made == want, "%d chares made and checked, expected %ld", made, want);
  auto q = quiescence();
  co_await q;
  auto counts = weft::make_future<std::vector<long>>();
  makers.broadcast<&Maker::tally>(weft::callback<std::vector<long>>(counts));
  const std::vector<long> c = co_await counts;
  check(c == std::vector<long>{want, want},
        "the processes constructed %ld chares and destroyed %ld, expected %ld of each", c[0], c[1],
        want);
  passed();
}

// ---- migration ---------------------------------------------------------------------

constexpr int mover_steps = 40;
constexpr int mover_main_bcasts = 30;
// Broadcasts come from main (root 0) and from element [1] (root 1, which
// does not move), one per step, so they are in flight during migrations.
constexpr int mover_bcasts = mover_main_bcasts + mover_steps;
long mover_value(int from, int seq, int slot) {
  return long(from) * 100000 + seq * 10 + slot;
}
int mover_target(int i, int slot, int n) {
  return slot == 0 ? (i + 1) % n : (i + 3) % n;
}
std::vector<double> ballast_for(int i) {
  std::vector<double> b(300);
  for (std::size_t k = 0; k < b.size(); ++k) b[k] = i * 0.5 + double(k);
  return b;
}
bool mover_moves(int i) {
  return i % 2 == 0;
}
// Migrations of a moving element: after each even step but the last.
int mover_migrations() {
  return (mover_steps - 1) / 2;
}
// The next PE: one of another process (the next PE in a one-process job).
int mover_next_pe(int pe) {
  return weft::num_nodes() > 1 ? (pe + weft::node_size()) % weft::num_pes()
                               : (pe + 1) % weft::num_pes();
}

struct Mover : weft::array_element<Mover, int> {
  Mover() = default;  // for migration
  explicit Mover(std::string prefix)
      : name_(prefix + std::to_string(this_index())),
        path_{weft::my_pe()},
        ballast_(ballast_for(this_index())) {}
  int step_ = 0;
  std::string name_;
  std::vector<int> path_;  // PEs lived on
  int migrations_ = 0;     // on_migrated calls
  std::set<std::tuple<int, int, int>> seen_;
  std::set<std::pair<int, int>> heard_;  // broadcasts: (root, seq)
  long sum_ = 0;
  std::vector<double> ballast_;

  void pup(weft::pupper& p) {
    p | step_ | name_ | path_ | migrations_ | seen_ | heard_ | sum_ | ballast_;
  }
  void on_migrated() override {
    const int i = this_index(), from = path_.empty() ? -1 : path_.back();
    check(!path_.empty() && from != weft::my_pe(),
          "element [%d]: on_migrated on PE %d, but it lived on PE %d before", i, weft::my_pe(),
          from);
    check(from < 0 || weft::num_nodes() == 1 || weft::node_of(from) != weft::my_node(),
          "element [%d] migrated from PE %d to PE %d, expected another process", i, from,
          weft::my_pe());
    check(name_ == "mover-" + std::to_string(i) && ballast_ == ballast_for(i),
          "element [%d] arrived on PE %d without its state (name \"%s\", %zu doubles)", i,
          weft::my_pe(), name_.c_str(), ballast_.size());
    ++migrations_;
    path_.push_back(weft::my_pe());
  }
  void tick() {
    const int n = array_size(), i = this_index();
    for (int slot = 0; slot < 2; ++slot)
      this_proxy()[mover_target(i, slot, n)].send<&Mover::msg>(i, step_, slot,
                                                               mover_value(i, step_, slot));
    if (i == 1) this_proxy().broadcast<&Mover::hear>(1, step_);
    ++step_;
    if (step_ >= mover_steps) return;
    this_proxy()[i].send<&Mover::tick>();  // follows the element if it moves
    if (mover_moves(i) && weft::num_pes() > 1 && step_ % 2 == 0)
      migrate_to(mover_next_pe(weft::my_pe()));
  }
  void msg(int from, int seq, int slot, long value) {
    check(value == mover_value(from, seq, slot),
          "element [%d]: message (%d,%d,%d) carries %ld, expected %ld", this_index(), from, seq,
          slot, value, mover_value(from, seq, slot));
    check(seen_.insert({from, seq, slot}).second,
          "element [%d] on PE %d got message (from %d, step %d, slot %d) twice", this_index(),
          weft::my_pe(), from, seq, slot);
    sum_ += value;
  }
  void hear(int root, int seq) {
    check(heard_.insert({root, seq}).second,
          "element [%d] on PE %d got broadcast %d of root %d twice", this_index(), weft::my_pe(),
          seq, root);
  }
  void report(weft::callback<std::vector<long>> cb) {
    const int i = this_index(), n = array_size();
    for (int seq = 0; seq < mover_main_bcasts; ++seq)
      check(heard_.count({0, seq}) == 1,
            "element [%d] (path of %zu PEs) never got broadcast %d "
            "from main",
            i, path_.size(), seq);
    for (int seq = 0; seq < mover_steps; ++seq)
      check(heard_.count({1, seq}) == 1,
            "element [%d] (path of %zu PEs) never got broadcast %d "
            "from element [1]",
            i, path_.size(), seq);
    check(heard_.size() == std::size_t(mover_bcasts),
          "element [%d] got %zu broadcasts, expected %d", i, heard_.size(), mover_bcasts);
    check(path_.back() == weft::my_pe(), "element [%d]'s path ends on PE %d, it is on PE %d", i,
          path_.back(), weft::my_pe());
    check(int(path_.size()) == migrations_ + 1 && step_ == mover_steps,
          "element [%d]: %zu PEs on its path, %d on_migrated calls, %d of %d steps", i,
          path_.size(), migrations_, step_, mover_steps);
    const int want_migrations = mover_moves(i) && weft::num_pes() > 1 ? mover_migrations() : 0;
    check(migrations_ == want_migrations, "element [%d] saw %d on_migrated calls, expected %d", i,
          migrations_, want_migrations);
    long want_sum = 0;
    std::size_t want_count = 0;
    for (int from = 0; from < n; ++from)
      for (int slot = 0; slot < 2; ++slot)
        if (mover_target(from, slot, n) == i)
          for (int seq = 0; seq < mover_steps; ++seq) {
            check(seen_.count({from, seq, slot}) == 1,
                  "element [%d] (path of %zu PEs) never got message (from %d, step %d, slot %d)", i,
                  path_.size(), from, seq, slot);
            want_sum += mover_value(from, seq, slot);
            ++want_count;
          }
    check(seen_.size() == want_count && sum_ == want_sum,
          "element [%d] got %zu messages summing to %ld, expected %zu summing to %ld", i,
          seen_.size(), sum_, want_count, want_sum);
    contribute(std::vector<long>{long(seen_.size()), migrations_, long(heard_.size())},
               weft::op::sum, cb);
  }
};

weft::task<> case_migration() {
  const int pes = weft::num_pes(), n = 4 * pes;
  auto a = weft::array<Mover>::create(n, std::string("mover-"));
  a.broadcast<&Mover::tick>();
  for (int seq = 0; seq < mover_main_bcasts; ++seq) a.broadcast<&Mover::hear>(0, seq);
  auto q = quiescence();
  co_await q;
  auto f = weft::make_future<std::vector<long>>();
  a.broadcast<&Mover::report>(weft::callback<std::vector<long>>(f));
  const std::vector<long> r = co_await f;
  long movers = 0;
  for (int i = 0; i < n; ++i) movers += mover_moves(i) ? 1 : 0;
  const std::vector<long> want{2L * n * mover_steps, pes > 1 ? movers * mover_migrations() : 0,
                               long(n) * mover_bcasts};
  check(r == want,
        "the elements got %ld messages and %ld broadcasts and migrated %ld times, expected %ld, "
        "%ld and %ld",
        r[0], r[2], r[1], want[0], want[2], want[1]);
  passed();
}

// ---- bcast_history -----------------------------------------------------------------
// 400 broadcasts from main (more than the 256 a PE keeps) while every
// element moves at most of them, across processes: an element arriving
// behind its new PE gets what it missed from the PE it left
// (src/objects/broadcast.cpp). Each must get every broadcast once, in order.

constexpr int history_bcasts = 400;

struct Drifter : weft::array_element<Drifter, int> {
  Drifter() = default;
  long next = 0, bad = 0, moves = 0;
  void pup(weft::pupper& p) { p | next | bad | moves; }
  void hear(int k) {
    if (k != next && bad++ == 0)
      std::fprintf(stderr, "mp_objects: bcast_history: element %d got %d, expected %ld\n",
                   this_index(), k, next);
    next = k + 1;
    const int pes = weft::num_pes();
    if (pes > 1 && (this_index() + k) % 4 != 0) {
      ++moves;
      migrate_to((weft::my_pe() + 1 + (this_index() * 7 + k) % (pes - 1)) % pes);
    }
  }
  void report(weft::callback<std::vector<long>> cb) {
    contribute(std::vector<long>{bad, next == history_bcasts ? 1 : 0, moves}, weft::op::sum, cb);
  }
};

weft::task<> case_bcast_history() {
  const int n = 3 * weft::num_pes() + 1;
  auto a = weft::array<Drifter>::create(n);
  for (int k = 0; k < history_bcasts; ++k) a.broadcast<&Drifter::hear>(k);
  auto q = quiescence();
  co_await q;
  auto f = weft::make_future<std::vector<long>>();
  a.broadcast<&Drifter::report>(weft::callback<std::vector<long>>(f));
  const std::vector<long> t = co_await f;
  check(t[0] == 0, "%ld elements got a broadcast twice, out of order or not at all", t[0]);
  check(t[1] == n, "%ld of %d elements got all %d broadcasts", t[1], n, history_bcasts);
  check(t[2] > 0, "no element moved");
  passed();
}

// ---- insert ------------------------------------------------------------------------

struct cell {
  std::int32_t owner = 0;  // the inserting PE (-1: main)
  std::int32_t k = 0;
  std::string show() const { return "{" + std::to_string(owner) + "," + std::to_string(k) + "}"; }
  friend bool operator<(const cell& a, const cell& b) {
    return std::tie(a.owner, a.k) < std::tie(b.owner, b.k);
  }
  friend bool operator==(const cell&, const cell&) = default;
};
constexpr int ins_first = 4, ins_late = 2, ins_from_main = 3;

struct Cell : weft::array_element<Cell, cell> {
  // want_pe -1: insert() at the element's home.
  explicit Cell(int want_pe) {
    const cell c = this_index();
    const int home = weft::objects::detail::home_pe(this_proxy().ref(), weft::index_key::of(c));
    const int want = want_pe >= 0 ? want_pe : home;
    check(weft::my_pe() == want, "element %s %s PE %d was constructed on PE %d", c.show().c_str(),
          want_pe >= 0 ? "inserted on" : "inserted at its home,", want, weft::my_pe());
  }
  std::map<std::pair<int, int>, int> notes_;  // (from PE, seq) -> times

  void note(int from, int seq) {
    check(++notes_[{from, seq}] == 1, "element %s got note %d from PE %d twice",
          this_index().show().c_str(), seq, from);
  }
  // The notes this element must have: 3 from its inserter right after the
  // insert, 2 from the next PE's inserter; main's elements get 3 from PE 0.
  std::set<std::pair<int, int>> expected() const {
    const cell c = this_index();
    const int pes = weft::num_pes();
    std::set<std::pair<int, int>> w;
    if (c.owner < 0) {
      for (int s = 0; s < 3; ++s) w.insert({0, s});
      return w;
    }
    for (int s = 0; s < 3; ++s) w.insert({c.owner, s});
    for (int s = 0; s < 2; ++s) w.insert({(c.owner - 1 + pes) % pes, 100 + s});
    return w;
  }
  void count(weft::callback<std::vector<long>> cb) {
    std::set<std::pair<int, int>> got;
    for (auto& [k, times] : notes_) got.insert(k);
    const std::set<std::pair<int, int>> want = expected();
    check(got == want, "element %s on PE %d got notes %s, expected %s", this_index().show().c_str(),
          weft::my_pe(), show(std::vector<std::pair<int, int>>(got.begin(), got.end())).c_str(),
          show(std::vector<std::pair<int, int>>(want.begin(), want.end())).c_str());
    contribute(std::vector<long>{1, long(notes_.size())}, weft::op::sum, cb);
  }
  void keys(weft::callback<std::vector<std::pair<cell, int>>> cb) {
    contribute(weft::my_pe(), weft::op::set, cb);
  }
};

struct Inserter : weft::group_element<Inserter> {
  void insert_batch(weft::array<Cell> a, int k0, int count) {
    const int me = weft::my_pe(), pes = weft::num_pes();
    for (int k = k0; k < k0 + count; ++k) {
      const cell c{me, k};
      if (k % 2 == 0) {
        const int to = remote_pe(me, k);
        a[c].insert_on(to, to);
      } else {
        a[c].insert(-1);
      }
      // Right after the insert: maybe before the element exists.
      for (int s = 0; s < 3; ++s) a[c].send<&Cell::note>(me, s);
    }
    // To the elements the next PE inserts (maybe not yet).
    for (int k = k0; k < k0 + count; ++k)
      for (int s = 0; s < 2; ++s) a[cell{(me + 1) % pes, k}].send<&Cell::note>(me, 100 + s);
  }
};

// Where element c was put: insert_on(remote_pe(...)) for even k and main's,
// insert() (its home) for odd k.
int cell_pe(const weft::array<Cell>& a, const cell& c) {
  if (c.owner < 0) return remote_pe(0, c.k);
  if (c.k % 2 == 0) return remote_pe(c.owner, c.k);
  return weft::objects::detail::home_pe(a.ref(), weft::index_key::of(c));
}

weft::task<> check_cells(weft::array<Cell> a, int per_pe, int from_main) {
  const int pes = weft::num_pes();
  auto f = weft::make_future<std::vector<long>>();
  a.broadcast<&Cell::count>(weft::callback<std::vector<long>>(f));
  const std::vector<long> c = co_await f;
  const std::vector<long> want{long(pes) * per_pe + from_main,
                               long(pes) * per_pe * 5 + from_main * 3};
  check(c == want,
        "after inserting %d per PE and %d from main: %ld elements with %ld notes, "
        "expected %ld with %ld",
        per_pe, from_main, c[0], c[1], want[0], want[1]);
  auto fk = weft::make_future<std::vector<std::pair<cell, int>>>();
  a.broadcast<&Cell::keys>(weft::callback<std::vector<std::pair<cell, int>>>(fk));
  std::vector<std::pair<cell, int>> got = co_await fk;
  std::vector<cell> keys;
  for (auto& [k, pe] : got) {
    check(pe == cell_pe(a, k), "the set reduction pairs element %s with PE %d, expected PE %d",
          k.show().c_str(), pe, cell_pe(a, k));
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<cell> want_keys;
  for (int k = 0; k < from_main; ++k) want_keys.push_back(cell{-1, k});
  for (int pe = 0; pe < pes; ++pe)
    for (int k = 0; k < per_pe; ++k) want_keys.push_back(cell{pe, k});
  check(keys == want_keys, "the set reduction names elements %s, expected %s", show(keys).c_str(),
        show(want_keys).c_str());
}

weft::task<> case_insert() {
  auto a = weft::array<Cell>::create_sparse();
  auto ins = weft::group_proxy<Inserter>::create();
  ins.broadcast<&Inserter::insert_batch>(a, 0, ins_first);
  auto q = quiescence();
  co_await q;
  auto t1 = check_cells(a, ins_first, 0);
  co_await t1;
  // Late insertions between reduction phases: from every PE again, and
  // from main onto PEs of other processes.
  ins.broadcast<&Inserter::insert_batch>(a, ins_first, ins_late);
  for (int k = 0; k < ins_from_main; ++k) {
    const int to = remote_pe(0, k);
    a[cell{-1, k}].insert_on(to, to);
    for (int s = 0; s < 3; ++s) a[cell{-1, k}].send<&Cell::note>(0, s);
  }
  auto q2 = quiescence();
  co_await q2;
  auto t2 = check_cells(a, ins_first + ins_late, ins_from_main);
  co_await t2;
  passed();
}

// ---- futures -----------------------------------------------------------------------

struct answer {
  int index = -1, pe = -1, k = -1;
  std::string text;
  void pup(weft::pupper& p) { p | index | pe | k | text; }
};
std::string answer_text(int index, int k) {
  return "oracle " + std::to_string(index) + " answers " + std::to_string(k);
}

struct Oracle : weft::array_element<Oracle, int> {
  answer ask(int k) { return answer{this_index(), weft::my_pe(), k, answer_text(this_index(), k)}; }
};

std::string teller_text(int pe) {
  return "pe " + std::to_string(pe) + " node " + std::to_string(weft::node_of(pe));
}
std::vector<double> teller_vector() {
  std::vector<double> v(1000);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = double(k) * 0.25 - 3;
  return v;
}
// Oracles (round-robin) that PE `pe` asks: those on other processes (other
// PEs in a one-process job).
bool asks(int pe, int oracle) {
  const int home = oracle % weft::num_pes();
  return weft::num_nodes() > 1 ? weft::node_of(home) != weft::node_of(pe) : home != pe;
}

struct Teller : weft::group_element<Teller> {
  void tell(std::vector<weft::future<std::string>> fs, weft::future<std::vector<double>> vf) {
    check(fs.size() == std::size_t(weft::num_pes()), "got %zu futures, expected %d", fs.size(),
          weft::num_pes());
    fs[std::size_t(weft::my_pe())].set(teller_text(weft::my_pe()));
    if (weft::my_pe() == weft::num_pes() - 1) vf.set(teller_vector());
  }
  // call<> from this PE to oracles of other processes; the futures are
  // owned here.
  weft::task<> relay(weft::array<Oracle> o, int n, weft::future<long> done) {
    const int me = weft::my_pe();
    long asked = 0;
    for (int j = 0; j < n; ++j) {
      if (!asks(me, j)) continue;
      auto f = o[j].call<&Oracle::ask>(me);
      const answer a = co_await f;
      check(
          a.index == j && a.pe == j % weft::num_pes() && a.k == me && a.text == answer_text(j, me),
          "oracle %d answered PE %d with (index %d, PE %d, k %d, \"%s\")", j, me, a.index, a.pe,
          a.k, a.text.c_str());
      ++asked;
    }
    done.set(asked);
  }
};

weft::task<> case_futures() {
  const int pes = weft::num_pes(), n = 2 * pes + 1;
  auto tellers = weft::group_proxy<Teller>::create();
  std::vector<weft::future<std::string>> fs;
  for (int pe = 0; pe < pes; ++pe) fs.push_back(weft::make_future<std::string>());
  auto vf = weft::make_future<std::vector<double>>();
  tellers.broadcast<&Teller::tell>(fs, vf);
  for (int pe = 0; pe < pes; ++pe) {
    const std::string s = co_await fs[std::size_t(pe)];
    check(s == teller_text(pe), "future %d was set to \"%s\", expected \"%s\"", pe, s.c_str(),
          teller_text(pe).c_str());
  }
  const std::vector<double> v = co_await vf;
  check(v == teller_vector(), "the vector future holds %zu values, not the %zu sent", v.size(),
        teller_vector().size());

  auto o = weft::array<Oracle>::create(weft::array_options{weft::array_map::round_robin()}, n);
  std::vector<weft::future<answer>> answers;
  for (int j = 0; j < n; ++j) answers.push_back(o[j].call<&Oracle::ask>(1000 + j));
  for (int j = 0; j < n; ++j) {
    const answer a = co_await answers[std::size_t(j)];
    check(a.index == j && a.pe == j % pes && a.k == 1000 + j && a.text == answer_text(j, 1000 + j),
          "oracle %d answered main with (index %d, PE %d, k %d, \"%s\")", j, a.index, a.pe, a.k,
          a.text.c_str());
  }
  std::vector<weft::future<long>> relayed;
  for (int pe = 0; pe < pes; ++pe) {
    relayed.push_back(weft::make_future<long>());
    tellers[pe].send<&Teller::relay>(o, n, relayed.back());
  }
  for (int pe = 0; pe < pes; ++pe) {
    const long got = co_await relayed[std::size_t(pe)];
    long want = 0;
    for (int j = 0; j < n; ++j) want += asks(pe, j) ? 1 : 0;
    check(got == want, "PE %d had %ld calls answered, expected %ld", pe, got, want);
  }
  passed();
}

// ---- coroutines --------------------------------------------------------------------

constexpr int ring_rounds = 20;
constexpr long ring_mod = 1000003;
long ring_start(int i) {
  return i * 37L + 5;
}
long ring_next(long left, long v, long right) {
  return (left + 2 * v + right + 1) % ring_mod;
}

struct ring_result {
  long value = 0;
  std::vector<long> sums;  // the all_reduce result of each round
  void pup(weft::pupper& p) { p | value | sums; }
};

struct Ring : weft::array_element<Ring, int> {
  Ring() : v_(ring_start(this_index())) {}
  long v_;
  // Only ever awaited with next<>: the body never runs.
  void ghost(int, int, long) { fail("the body of the awaited Ring::ghost ran"); }

  weft::task<> run(int rounds, weft::callback<std::vector<std::pair<int, ring_result>>> done) {
    const int n = array_size(), i = this_index();
    const int left = (i - 1 + n) % n, right = (i + 1) % n;
    ring_result res;
    for (int iter = 0; iter < rounds; ++iter) {
      this_proxy()[left].send<&Ring::ghost>(iter, i, v_);
      this_proxy()[right].send<&Ring::ghost>(iter, i, v_);
      long lv = -1, rv = -1;
      for (auto& [it, from, value] : co_await next<&Ring::ghost>(2)) {
        check(it == iter, "ring element [%d] got a ghost of round %d from [%d] in round %d", i, it,
              from, iter);
        if (from == left && lv < 0)
          lv = value;
        else if (from == right && rv < 0)
          rv = value;
        else
          fail(
              "ring element [%d] got an unexpected ghost from [%d] in round %d (neighbours [%d], "
              "[%d])",
              i, from, iter, left, right);
      }
      v_ = ring_next(lv, v_, rv);
      res.sums.push_back(co_await all_reduce(v_, weft::op::sum));
    }
    res.value = v_;
    contribute(std::move(res), weft::op::set, done);
  }
};

weft::task<> case_coroutines() {
  const int n = std::max(2 * weft::num_pes(), 3);
  // Round-robin: both neighbours of every element are on other PEs.
  auto ring = weft::array<Ring>::create(weft::array_options{weft::array_map::round_robin()}, n);
  auto f = weft::make_future<std::vector<std::pair<int, ring_result>>>();
  ring.broadcast<&Ring::run>(ring_rounds,
                             weft::callback<std::vector<std::pair<int, ring_result>>>(f));
  std::vector<std::pair<int, ring_result>> got = co_await f;
  // The same computation, serially.
  std::vector<long> v(static_cast<std::size_t>(n)), sums;
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = ring_start(i);
  for (int r = 0; r < ring_rounds; ++r) {
    std::vector<long> w(v.size());
    long s = 0;
    for (int i = 0; i < n; ++i) {
      w[std::size_t(i)] = ring_next(v[std::size_t((i - 1 + n) % n)], v[std::size_t(i)],
                                    v[std::size_t((i + 1) % n)]);
      s += w[std::size_t(i)];
    }
    v = std::move(w);
    sums.push_back(s);
  }
  check(got.size() == std::size_t(n), "%zu ring elements reported, expected %d", got.size(), n);
  std::vector<bool> seen(std::size_t(n), false);
  for (auto& [i, r] : got) {
    check(i >= 0 && i < n && !seen[std::size_t(i)],
          "ring element [%d] reported twice or is no "
          "element",
          i);
    seen[std::size_t(i)] = true;
    check(r.value == v[std::size_t(i)], "ring element [%d] ended with %ld, the serial run with %ld",
          i, r.value, v[std::size_t(i)]);
    check(r.sums == sums, "ring element [%d] saw the sums %s, the serial run %s", i,
          show(r.sums).c_str(), show(sums).c_str());
  }
  passed();
}

// ---- readonly ----------------------------------------------------------------------

weft::readonly<int> ro_size;
weft::readonly<std::vector<int>> ro_table;
weft::readonly<std::string> ro_name;

std::vector<int> ro_table_value() {
  std::vector<int> v(50);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = int(k * k) - 7;
  return v;
}
void check_readonlies(const char* where) {
  check(*ro_size == 4242 && *ro_table == ro_table_value() && *ro_name == "readonly name",
        "%s on PE %d (node %d) sees the readonlies as %d, %zu ints, \"%s\"; expected 4242, %zu "
        "ints, \"readonly name\"",
        where, weft::my_pe(), weft::my_node(), *ro_size, ro_table->size(), ro_name->c_str(),
        ro_table_value().size());
}

struct ReaderG : weft::group_element<ReaderG> {
  ReaderG() { check_readonlies("a group element's constructor"); }
  void again(weft::callback<int> cb) {
    check_readonlies("a group element's entry method");
    contribute(1, weft::op::sum, cb);
  }
};
struct ReaderA : weft::array_element<ReaderA, int> {
  ReaderA() { check_readonlies("an array element's constructor"); }
  void again(weft::callback<int> cb) {
    check_readonlies("an array element's entry method");
    contribute(1, weft::op::sum, cb);
  }
};

weft::task<> case_readonly() {
  // Main's setup: before its first co_await.
  ro_size = 4242;
  ro_table = ro_table_value();
  ro_name = std::string("readonly name");
  const int pes = weft::num_pes(), n = 3 * pes + 1;
  auto g = weft::group_proxy<ReaderG>::create();
  auto a = weft::array<ReaderA>::create(n);
  auto fg = weft::make_future<int>();
  auto fa = weft::make_future<int>();
  g.broadcast<&ReaderG::again>(weft::callback<int>(fg));
  a.broadcast<&ReaderA::again>(weft::callback<int>(fa));
  const int cg = co_await fg;
  const int ca = co_await fa;
  check(cg == pes && ca == n,
        "%d group and %d array elements checked the readonlies, expected %d "
        "and %d",
        cg, ca, pes, n);
  passed();
}

// ---- setup_group ---------------------------------------------------------------------
// A group (and a nodegroup) made in main's setup is there on every PE
// before anything else of the program runs there: a chare created on another process right after
// the group, whose constructor asks for the group's local element, finds
// it, although its creation message (one hop, straight from PE 0) may reach
// that PE before the group's (two hops, down the broadcast tree).

struct Counter : weft::group_element<Counter> {
  int made = 0;
  void report(weft::callback<int> cb) { contribute(made, weft::op::sum, cb); }
};
weft::readonly<weft::group_proxy<Counter>> setup_counter;
struct Shelf : weft::nodegroup_element<Shelf> {};
weft::readonly<weft::nodegroup_proxy<Shelf>> setup_shelf;

struct EarlyChare : weft::chare<EarlyChare> {
  EarlyChare() {
    Counter* c = setup_counter->local();
    check(c != nullptr,
          "a chare constructed on PE %d (node %d) found no local element of the group main's "
          "setup made",
          weft::my_pe(), weft::my_node());
    check(setup_shelf->local() != nullptr,
          "a chare constructed on PE %d (node %d) found no local element of the nodegroup "
          "main's setup made",
          weft::my_pe(), weft::my_node());
    ++c->made;
    destroy();
  }
};

constexpr int early_chares_per_pe = 16;

weft::task<> case_setup_group() {
  setup_counter = weft::group_proxy<Counter>::create();
  setup_shelf = weft::nodegroup_proxy<Shelf>::create();
  const int pes = weft::num_pes();
  for (int k = 0; k < early_chares_per_pe; ++k)
    for (int pe = pes - 1; pe >= 0; --pe) weft::create_on<EarlyChare>(pe);
  auto q = quiescence();
  co_await q;
  auto made = weft::make_future<int>();
  setup_counter->broadcast<&Counter::report>(weft::callback<int>(made));
  const int n = co_await made;
  check(n == early_chares_per_pe * pes, "%d chares found the group, expected %d", n,
        early_chares_per_pe * pes);
  passed();
}

// ---- lb_rotate -----------------------------------------------------------------------
// Run with --weft:lb=rotate: elements on a ring exchange messages, call
// at_sync() each step and send more right after it (in flight while they
// move); every element moves one PE on at every step, across processes.
// Each message carries its sender's sequence number for that receiver:
// none may be lost, duplicated or overtaken. Each element carries 4.8 KB of
// ballast that says its index and step, checked after every move (the
// lb_bounded variant moves them with --weft:lb-max-bytes=1K: one at a time).

constexpr int rotate_steps = 5;
constexpr int rotate_late = 3;

struct Rotor : weft::array_element<Rotor, int> {
  Rotor() = default;
  std::map<int, long> next_seq, sent_seq;
  std::map<int, int> got;  // step -> on-time messages
  int step = 0, last_pe = -1;
  long bad = 0, received = 0, moved = 0;
  std::vector<double> ballast;
  void pup(weft::pupper& p) {
    p | next_seq | sent_seq | got | step | last_pe | bad | received | moved | ballast;
  }
  int left() const { return (this_index() + array_size() - 1) % array_size(); }
  int right() const { return (this_index() + 1) % array_size(); }
  void send_to(int to, bool on_time) {
    this_proxy()[to].send<&Rotor::msg>(this_index(), sent_seq[to]++, step, on_time);
  }
  void start() {
    send_to(left(), true);
    send_to(right(), true);
    advance();
  }
  void msg(int from, long seq, int s, bool on_time) {
    if (seq != next_seq[from]) {
      if (bad++ == 0)
        std::fprintf(stderr,
                     "mp_objects: lb_rotate: element %d got seq %ld from %d, expected %ld\n",
                     this_index(), seq, from, next_seq[from]);
    }
    next_seq[from] = seq + 1;
    ++received;
    if (on_time && ++got[s] == 2 && s == step) advance();
  }
  double ballast_value(std::size_t k) const { return this_index() * 1e4 + double(k) + step; }
  void advance() {
    if (got[step] < 2 || step >= rotate_steps) return;
    got.erase(step);
    last_pe = weft::my_pe();
    ballast.resize(600);
    for (std::size_t k = 0; k < ballast.size(); ++k) ballast[k] = ballast_value(k);
    at_sync();
    for (int k = 0; k < rotate_late; ++k) send_to(k % 2 ? left() : right(), false);
  }
  void resume_from_sync() override {
    if (weft::my_pe() != last_pe) ++moved;
    for (std::size_t k = 0; k < 600; ++k)
      if (k >= ballast.size() || ballast[k] != ballast_value(k)) {
        if (bad++ == 0)
          std::fprintf(stderr, "mp_objects: lb_rotate: element %d's ballast[%zu] is wrong\n",
                       this_index(), k);
        break;
      }
    if (++step < rotate_steps) {
      start();
      return;
    }
  }
  void report(weft::callback<std::vector<long>> cb) {
    contribute(std::vector<long>{bad, received, moved}, weft::op::sum, cb);
  }
};

weft::task<> case_lb_rotate() {
  check(weft::config().lb == "rotate", "run lb_rotate with --weft:lb=rotate (got %s)",
        weft::config().lb.c_str());
  // With --weft:lb-arrays=together, two rings (two arrays) move in joint
  // steps placed on PE 0.
  const int rings = weft::config().lb_together ? 2 : 1;
  const int n = 3 * weft::num_pes() + 1;
  std::vector<weft::array<Rotor>> arrays;
  for (int r = 0; r < rings; ++r) arrays.push_back(weft::array<Rotor>::create(n + r));
  for (auto& a : arrays) a.broadcast<&Rotor::start>();
  auto q = quiescence();
  co_await q;
  for (int r = 0; r < rings; ++r) {
    const long size = n + r;
    auto f = weft::make_future<std::vector<long>>();
    arrays[std::size_t(r)].broadcast<&Rotor::report>(weft::callback<std::vector<long>>(f));
    const std::vector<long> t = co_await f;
    check(t[0] == 0, "ring %d: %ld messages arrived out of order or elements with wrong state", r,
          t[0]);
    const long want = size * rotate_steps * (2 + rotate_late);
    check(t[1] == want, "ring %d: %ld messages arrived, expected %ld", r, t[1], want);
    check(t[2] == size * rotate_steps, "ring %d: elements moved %ld times, expected %ld", r, t[2],
          size * rotate_steps);
  }
  passed();
}

// ---- lb_unassisted -----------------------------------------------------------------
// Run with --weft:lb=rotate and --weft:lb-period (or on demand: element 0
// calls weft::lb::balance() every few rounds): steps without at_sync move
// the elements across processes while they keep sending. In each round
// every element sends a numbered message to its two neighbours and goes on
// once both of theirs came (so that at most a few rounds are in flight);
// each carries 4.8 KB of ballast checked after every move. None lost,
// duplicated or overtaken, per sender (src/objects/sync_pause.cpp).

constexpr int unassisted_rounds = 2000;

struct Wanderer : weft::array_element<Wanderer, int> {
  Wanderer() = default;
  std::map<int, long> next_seq;
  std::map<int, int> got;  // round -> neighbours' messages
  long bad = 0, received = 0, moved = 0;
  int round = 0;
  std::vector<double> ballast;
  void pup(weft::pupper& p) { p | next_seq | got | bad | received | moved | round | ballast; }
  double ballast_value(std::size_t k) const { return this_index() * 1e4 + double(k); }
  void on_migrated() override {
    ++moved;
    for (std::size_t k = 0; k < 600; ++k)
      if (k >= ballast.size() || ballast[k] != ballast_value(k)) {
        if (bad++ == 0)
          std::fprintf(stderr, "mp_objects: lb_unassisted: element %d's ballast[%zu] is wrong\n",
                       this_index(), k);
        break;
      }
  }
  void send_round() {
    const int n = array_size(), i = this_index();
    this_proxy()[(i + 1) % n].send<&Wanderer::msg>(i, long(round));
    this_proxy()[(i + n - 1) % n].send<&Wanderer::msg>(i, long(round));
    // On demand every 50 rounds; with a period, once half way as well, so
    // that a fast run has a step too.
    const bool periodic = weft::config().lb_period_s > 0;
    if (i == 0 && (periodic ? round == unassisted_rounds / 2 : round % 50 == 25))
      weft::lb::balance();
  }
  void start() {
    ballast.resize(600);
    for (std::size_t k = 0; k < ballast.size(); ++k) ballast[k] = ballast_value(k);
    send_round();
  }
  void msg(int from, long seq) {
    if (seq != next_seq[from] && bad++ == 0)
      std::fprintf(stderr,
                   "mp_objects: lb_unassisted: element %d got seq %ld from %d, expected %ld\n",
                   this_index(), seq, from, next_seq[from]);
    next_seq[from] = seq + 1;
    ++received;
    ++got[int(seq)];
    while (round < unassisted_rounds && got[round] == 2) {
      got.erase(round);
      if (++round < unassisted_rounds) send_round();
    }
  }
  void report(weft::callback<std::vector<long>> cb) {
    contribute(std::vector<long>{bad, received, moved}, weft::op::sum, cb);
  }
};

weft::task<> case_lb_unassisted() {
  check(weft::config().lb != "off", "run lb_unassisted with a --weft:lb strategy");
  const int n = 3 * weft::num_pes() + 1;
  auto a = weft::array<Wanderer>::create(n);
  a.broadcast<&Wanderer::start>();
  co_await quiescence();
  auto f = weft::make_future<std::vector<long>>();
  a.broadcast<&Wanderer::report>(weft::callback<std::vector<long>>(f));
  const std::vector<long> t = co_await f;
  check(t[0] == 0, "%ld messages arrived out of order or elements with wrong state", t[0]);
  check(t[1] == 2L * n * unassisted_rounds, "%ld messages arrived, expected %ld", t[1],
        2L * n * unassisted_rounds);
  check(t[2] > 0, "no element moved");
  passed();
}

// ---- flood ---------------------------------------------------------------------------
// Run with --weft:lb=rotate --weft:lb-period=0.002: elements that never wait
// (each tick sends a message to both neighbours and the next tick to itself)
// flood the network while periodic steps move them, 4.8 KB of state each,
// across processes. Every message must be handled: a PE that sleeps while
// messages for it sit in a queue would leave the job idle until its timeout.

constexpr int flood_rounds = 40000;

struct Flooder : weft::array_element<Flooder, int> {
  long received = 0;
  std::vector<double> ballast = std::vector<double>(600, 1.0);
  void pup(weft::pupper& p) { p | received | ballast; }
  void msg(int, long) { ++received; }
  void tick(int r) {
    const int n = array_size(), i = this_index();
    this_proxy()[(i + 1) % n].send<&Flooder::msg>(i, long(r));
    this_proxy()[(i + n - 1) % n].send<&Flooder::msg>(i, long(r));
    if (r + 1 < flood_rounds) this_proxy()[i].send<&Flooder::tick>(r + 1);
  }
  void report(weft::callback<long> cb) { contribute(received, weft::op::sum, cb); }
};

weft::task<> case_flood() {
  const int n = 3 * weft::num_pes() + 1;
  auto a = weft::array<Flooder>::create(n);
  a.broadcast<&Flooder::tick>(0);
  co_await quiescence();
  auto f = weft::make_future<long>();
  a.broadcast<&Flooder::report>(weft::callback<long>(f));
  const long got = co_await f;
  check(got == 2L * n * flood_rounds, "%ld messages arrived, expected %ld", got,
        2L * n * flood_rounds);
  passed();
}

// ---- lb_tree -------------------------------------------------------------------------
// Run with --weft:lb=hierarchical: the step is a tree over the processes
// (src/objects/sync_tree.cpp). The elements on the first half of the PEs
// (node 0 of 2 processes) weigh 3, the rest 1: node 0 offers load, the
// root sends it to the other node, which places it on its PEs; with
// --weft:lb-tree-group (mp_objects.cmake) the heavy nodes' group offers it
// to the others through the groups' leaders. Every element sends a
// numbered message to its right neighbour per step: none lost or
// overtaken; the nodes end within 1.25 of their share. Also run with
// --weft:lb-comm=element (comm places each node's elements on its PEs)
// and with --weft:lb-arrays=together (two arrays, placed on PE 0).

constexpr int tree_steps = 3;

struct Weighted : weft::array_element<Weighted, int> {
  Weighted() = default;
  int step = 0, got = 0, home_node = -1;
  long sent = 0, next_seq = 0, bad = 0, received = 0;
  bool waiting = false;
  void pup(weft::pupper& p) {
    p | step | got | home_node | sent | next_seq | bad | received | waiting;
  }
  double load_estimate() const override { return this_index() < array_size() / 2 ? 3.0 : 1.0; }
  void start() {
    if (home_node < 0) home_node = weft::my_node();
    this_proxy()[(this_index() + 1) % array_size()].send<&Weighted::msg>(sent++);
    sync_if_ready();
  }
  void msg(long seq) {
    if (seq != next_seq && bad++ == 0)
      std::fprintf(stderr, "mp_objects: lb_tree: element %d got seq %ld, expected %ld\n",
                   this_index(), seq, next_seq);
    next_seq = seq + 1;
    ++received;
    ++got;
    sync_if_ready();
  }
  void sync_if_ready() {
    if (waiting || got <= step || sent <= step) return;
    waiting = true;
    at_sync();
  }
  void resume_from_sync() override {
    waiting = false;
    if (++step < tree_steps) start();
  }
  // {bad, received, moved to another node}, then the load on each node.
  void report(weft::callback<std::vector<double>> cb) {
    std::vector<double> v(3 + std::size_t(weft::num_nodes()), 0.0);
    v[0] = double(bad);
    v[1] = double(received);
    v[2] = weft::my_node() != home_node ? 1 : 0;
    v[3 + std::size_t(weft::my_node())] = load_estimate();
    contribute(v, weft::op::sum, cb);
  }
};

weft::task<> case_lb_tree() {
  check(weft::config().lb == "hierarchical", "run lb_tree with --weft:lb=hierarchical (got %s)",
        weft::config().lb.c_str());
  // With --weft:lb-arrays=together, two such arrays placed in joint steps
  // on PE 0 (the offline strategy there): their loads on each node add up.
  const int count = weft::config().lb_together ? 2 : 1;
  const int n = 4 * weft::num_pes();
  std::vector<weft::array<Weighted>> arrays;
  for (int k = 0; k < count; ++k) arrays.push_back(weft::array<Weighted>::create(n));
  for (auto& a : arrays) a.broadcast<&Weighted::start>();
  co_await quiescence();
  std::vector<double> t;
  for (auto& a : arrays) {
    auto f = weft::make_future<std::vector<double>>();
    a.broadcast<&Weighted::report>(weft::callback<std::vector<double>>(f));
    const std::vector<double> one = co_await f;
    if (t.empty()) t.assign(one.size(), 0.0);
    for (std::size_t k = 0; k < one.size(); ++k) t[k] += one[k];
  }
  check(t[0] == 0, "%g messages arrived out of order", t[0]);
  check(t[1] == double(count * n) * tree_steps, "%g messages arrived, expected %d", t[1],
        count * n * tree_steps);
  check(t[2] > 0, "no element changed node");
  const double share = count * (3.0 * (n / 2) + 1.0 * (n - n / 2)) / weft::num_nodes();
  for (int k = 0; k < weft::num_nodes(); ++k)
    check(t[3 + std::size_t(k)] <= 1.25 * share, "node %d ends with load %g, its share is %g", k,
          t[3 + std::size_t(k)], share);
  passed();
}

// ---- buffer ------------------------------------------------------------------------

constexpr std::size_t big_doubles = std::size_t(1) << 17;  // 1 MiB

double buf_value(int from, std::size_t k) {
  return from * 1e6 + double(k) * 0.5;
}
struct packet {
  std::string label;
  weft::buffer<std::int32_t> data;
  void pup(weft::pupper& p) { p | label | data; }
};

// Elements (block map, two per PE) send to elements of another process.
int sink_shift() {
  return weft::num_nodes() > 1 ? 2 * weft::node_size() : 2;
}

struct Sink : weft::array_element<Sink, int> {
  int got_ = 0;
  void start() {
    const int i = this_index(), n = array_size();
    const int to = (i + sink_shift()) % n;
    weft::buffer<double> small(std::size_t(1000 + i));
    for (std::size_t k = 0; k < small.size(); ++k) small[k] = buf_value(i, k);
    this_proxy()[to].send<&Sink::take>(i, weft::my_pe(), std::move(small));
    weft::buffer<double> big(big_doubles);
    for (std::size_t k = 0; k < big.size(); ++k) big[k] = buf_value(i, k);
    this_proxy()[to].send<&Sink::take>(i, weft::my_pe(), std::move(big));
    packet p{"packet from " + std::to_string(i), weft::buffer<std::int32_t>(std::size_t(333))};
    for (std::size_t k = 0; k < p.data.size(); ++k) p.data[k] = i * 1000 + int(k);
    this_proxy()[to].send<&Sink::take_packet>(i, weft::my_pe(), std::move(p));
  }
  void check_from(int from, int from_pe) {
    check_crossed(from_pe, "a buffer");
    const int i = this_index(), n = array_size();
    const int want = (i - sink_shift() + n) % n;
    check(from == want, "element [%d] got a buffer from [%d], expected one from [%d]", i, from,
          want);
  }
  void take(int from, int from_pe, weft::buffer<double> b) {
    check_from(from, from_pe);
    const bool big = b.size() == big_doubles;
    check(big || b.size() == std::size_t(1000 + from),
          "element [%d] got a buffer of %zu doubles from [%d], expected %d or %zu", this_index(),
          b.size(), from, 1000 + from, big_doubles);
    for (std::size_t k = 0; k < b.size(); ++k)
      check(b[k] == buf_value(from, k),
            "element [%d]: value %zu of the %zu-double buffer from [%d] is %g, expected %g",
            this_index(), k, b.size(), from, b[k], buf_value(from, k));
    ++got_;
  }
  void take_packet(int from, int from_pe, packet p) {
    check_from(from, from_pe);
    check(p.label == "packet from " + std::to_string(from) && p.data.size() == 333,
          "element [%d] got a packet \"%s\" of %zu ints from [%d]", this_index(), p.label.c_str(),
          p.data.size(), from);
    for (std::size_t k = 0; k < p.data.size(); ++k)
      check(p.data[k] == from * 1000 + int(k),
            "element [%d]: int %zu of the packet from [%d] is %d, expected %d", this_index(), k,
            from, p.data[k], from * 1000 + int(k));
    ++got_;
  }
  void verify(weft::callback<int> cb) {
    check(got_ == 3, "element [%d] on PE %d got %d of its 3 buffers", this_index(), weft::my_pe(),
          got_);
    contribute(got_, weft::op::sum, cb);
  }
};

weft::task<> case_buffer() {
  const int n = 2 * weft::num_pes();
  auto a = weft::array<Sink>::create(n);
  a.broadcast<&Sink::start>();
  auto q = quiescence();
  co_await q;
  auto f = weft::make_future<int>();
  a.broadcast<&Sink::verify>(weft::callback<int>(f));
  const int t = co_await f;
  check(t == 3 * n, "the elements got %d buffers, expected %d", t, 3 * n);
  passed();
}

// ---- priorities --------------------------------------------------------------------

constexpr int prio_msgs = 40;
int prio_of(int seq) {
  if (seq == 0) return INT_MAX;
  if (seq == 1) return INT_MIN;
  return (seq % 5 - 2) * 1000;
}
int prio_shift() {
  return weft::num_nodes() > 1 ? weft::node_size() : 1;
}

struct Prio : weft::array_element<Prio, int> {
  Prio() : seen_(prio_msgs, false) {}
  std::vector<bool> seen_;
  int got_ = 0;
  void start() {
    const int i = this_index(), n = array_size();
    for (int s = 0; s < prio_msgs; ++s)
      this_proxy()[(i + prio_shift()) % n]
          .priority(prio_of(s))
          .send<&Prio::take>(i, weft::my_pe(), s);
  }
  void take(int from, int from_pe, int seq) {
    check_crossed(from_pe, "a message with a priority");
    const int i = this_index(), n = array_size();
    check(from == (i - prio_shift() + n) % n && seq >= 0 && seq < prio_msgs,
          "element [%d] got message %d from [%d], which sends it no such message", i, seq, from);
    check(!seen_[std::size_t(seq)], "element [%d] got message %d (priority %d) twice", i, seq,
          prio_of(seq));
    seen_[std::size_t(seq)] = true;
    ++got_;
  }
  void verify(weft::callback<int> cb) {
    for (int s = 0; s < prio_msgs; ++s)
      check(seen_[std::size_t(s)], "element [%d] never got message %d (priority %d)", this_index(),
            s, prio_of(s));
    contribute(got_, weft::op::sum, cb);
  }
};

weft::task<> case_priorities() {
  const int n = 2 * weft::num_pes();
  // Round-robin: element i + shift is on a PE of another process.
  auto a = weft::array<Prio>::create(weft::array_options{weft::array_map::round_robin()}, n);
  a.broadcast<&Prio::start>();
  auto q = quiescence();
  co_await q;
  auto f = weft::make_future<int>();
  a.broadcast<&Prio::verify>(weft::callback<int>(f));
  const int t = co_await f;
  check(t == prio_msgs * n, "the elements got %d messages, expected %d", t, prio_msgs * n);
  passed();
}

// ---- exitcode, error, deleted ------------------------------------------------------

struct Victim : weft::array_element<Victim, int> {
  Victim() = default;
  void pup(weft::pupper&) {}
  void ping(int) {}
  void maybe_exit() {
    if (weft::my_pe() == weft::num_pes() - 1) weft::exit(7);
  }
  void misfire() { this_proxy()[array_size() + 5].send<&Victim::ping>(1); }
  void poke_deleted() { this_proxy()[0].send<&Victim::ping>(2); }
};

// The element on node 1 (the last one in a one-process job).
int victim_on_node1() {
  return weft::num_nodes() > 1 ? weft::node_size() : weft::num_pes() - 1;
}

weft::task<> case_exitcode() {
  // Block map, one element per PE: the last one is on the last PE.
  auto a = weft::array<Victim>::create(weft::num_pes());
  a.broadcast<&Victim::maybe_exit>();
  co_return;
}

weft::task<> case_error() {
  auto a = weft::array<Victim>::create(weft::num_pes());
  a[victim_on_node1()].send<&Victim::misfire>();
  auto q = quiescence();
  co_await q;
  fail("the send to index %d of an array of %d was not reported", weft::num_pes() + 5,
       weft::num_pes());
}

weft::task<> case_deleted() {
  // Element 0 is deleted; another must be left to send to it.
  auto a = weft::array<Victim>::create(std::max(weft::num_pes(), 2));
  a[0].destroy();
  auto q = quiescence();
  co_await q;
  a[std::max(victim_on_node1(), 1)].send<&Victim::poke_deleted>();
  auto q2 = quiescence();
  co_await q2;
  fail("the message to the deleted element [0] was not reported");
}

// ---- tree ----------------------------------------------------------------------------

constexpr int tree_rounds = 40;

struct Leaf : weft::group_element<Leaf> {
  int round = 0;
  void step(weft::callback<long> cb) {
    contribute(long(weft::my_pe() + 1) * (round + 1), weft::op::sum, cb);
    ++round;
  }
};

// Reductions combine inside each node, then up the tree of nodes: the root
// PE gets one partial result per round, whatever the number of processes.
weft::task<> case_tree() {
  const long pes = weft::num_pes();
  auto g = weft::group_proxy<Leaf>::create();
  for (int r = 0; r < tree_rounds; ++r) {
    auto f = weft::make_future<long>();
    g.broadcast<&Leaf::step>(weft::callback<long>(f));
    const long got = co_await f;
    const long want = pes * (pes + 1) / 2 * (r + 1);
    check(got == want, "round %d: sum %ld, expected %ld", r, got, want);
  }
  const std::uint64_t partials = weft::objects::detail::reduction_partials_received(g.ref());
  check(partials == std::uint64_t(tree_rounds),
        "the root PE got %llu partial results for %d rounds: nodes were not combined in a tree",
        static_cast<unsigned long long>(partials), tree_rounds);
  passed();
}

struct case_entry {
  const char* name;
  weft::task<> (*fn)();
};
const case_entry cases[] = {
    {"tree", case_tree},
    {"array1d", case_array1d},
    {"array2d", case_array2d},
    {"group", case_group},
    {"nodegroup", case_nodegroup},
    {"chares", case_chares},
    {"migration", case_migration},
    {"insert", case_insert},
    {"bcast_history", case_bcast_history},
    {"futures", case_futures},
    {"coroutines", case_coroutines},
    {"readonly", case_readonly},
    {"setup_group", case_setup_group},
    {"buffer", case_buffer},
    {"priorities", case_priorities},
    {"exitcode", case_exitcode},
    {"error", case_error},
    {"deleted", case_deleted},
    {"lb_rotate", case_lb_rotate},
    {"lb_unassisted", case_lb_unassisted},
    {"flood", case_flood},
    {"lb_tree", case_lb_tree},
};

}  // namespace

int main(int argc, char** argv) {
  // A different build: the objects layer's entry table differs (one entry
  // method more in process 1), while core's handler table is the same.
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (std::getenv("MP_OBJECTS_EXTRA_ENTRY") != nullptr && rank != nullptr && std::atoi(rank) == 1)
    weft::objects::detail::register_entry(weft::objects::detail::entry_info{"mp_objects::extra"});
  weft::task<> (*fn)() = nullptr;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--case=", 7) == 0) g_case = argv[i] + 7;
  for (const case_entry& c : cases)
    if (g_case == c.name) fn = c.fn;
  if (fn == nullptr) {
    std::string names;
    for (const case_entry& c : cases) names += std::string(names.empty() ? "" : ", ") + c.name;
    std::fprintf(stderr, "mp_objects: --case=NAME required; one of %s\n", names.c_str());
    return 2;
  }
  static weft::task<> (*s_fn)() = fn;
  const int rc = weft::run(argc, argv, [](weft::args) -> weft::task<> {
    g_job_pes = weft::num_pes();
    g_job_nodes = weft::num_nodes();
    auto t = s_fn();
    co_await t;
  });
  if (g_case == "exitcode") {
    if (rc != 7) {
      std::fprintf(stderr, "mp_objects: exitcode: weft::run returned %d, expected 7\n", rc);
      return 1;
    }
    // Node 0 ran the main function.
    if (g_job_pes > 0) {
      std::printf("mp_objects: exitcode passed on %d PEs in %d processes\n", g_job_pes,
                  g_job_nodes);
      std::fflush(stdout);
    }
    return 0;
  }
  return rc;
}
