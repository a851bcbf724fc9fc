// Derived datatypes: the table of handles, the flat maps and what moves
// data with them (datatype.hpp; the entry points are datatype_api.cpp).
#include "mpi/datatype.hpp"
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>

namespace weft::mpi {

namespace {

bool is_pair(MPI_Datatype t) {
  return t >= MPI_FLOAT_INT && t <= MPI_LONG_DOUBLE_INT;
}

std::size_t alignment(MPI_Datatype t) {
  switch (t) {
    case MPI_FLOAT_INT:
      return alignof(value_int<float>);
    case MPI_DOUBLE_INT:
      return alignof(value_int<double>);
    case MPI_LONG_INT:
      return alignof(value_int<long>);
    case MPI_2INT:
      return alignof(value_int<int>);
    case MPI_SHORT_INT:
      return alignof(value_int<short>);
    case MPI_LONG_DOUBLE_INT:
      return alignof(value_int<long double>);
    case MPI_LONG_DOUBLE:
      return alignof(long double);
    // A complex number is aligned as its parts.
    case MPI_C_FLOAT_COMPLEX:
    case MPI_CXX_FLOAT_COMPLEX:
      return alignof(float);
    case MPI_C_DOUBLE_COMPLEX:
    case MPI_CXX_DOUBLE_COMPLEX:
      return alignof(double);
    case MPI_C_LONG_DOUBLE_COMPLEX:
    case MPI_CXX_LONG_DOUBLE_COMPLEX:
      return alignof(long double);
    default:
      return type_bytes("MPI_Init", t);  // the scalars: their size
  }
}

// The predefined types as maps: one run each, the MAXLOC pairs whole
// (padding included, as type_bytes has them).
const datatype* make_named() {
  auto* t = new datatype[kLastNamed + 1];
  for (MPI_Datatype h = 1; h <= kLastNamed; ++h) {
    datatype& d = t[h];
    const std::size_t bytes = type_bytes("MPI_Init", h);
    d.runs = {run{0, bytes}};
    d.sig = {piece{h, 1}};
    d.size = bytes;
    d.elements = is_pair(h) ? 2 : 1;
    d.align = alignment(h);
    d.ub = d.true_ub = std::ptrdiff_t(bytes);
    d.unit = h;
    d.units = 1;
    d.named = h;
    d.committed.store(true, std::memory_order_relaxed);
  }
  return t;
}

const datatype* named_types() {
  static const datatype* const table = make_named();
  return table;
}

// The table of derived types (datatype.hpp).
constexpr int kChunkBits = 10;
constexpr int kChunkSize = 1 << kChunkBits;
constexpr int kChunks = 1024;
struct chunk {
  std::atomic<datatype*> slot[kChunkSize]{};
};
std::atomic<chunk*> g_chunks[kChunks];
std::mutex g_mutex;
int g_used = 0;           // slots handed out so far
std::deque<int> g_freed;  // freed slots, oldest first
// A freed handle is handed out again only once this many others wait:
// until then a stale handle reads as freed, and its error says so.
constexpr std::size_t kReuseAfter = 1024;

std::atomic<datatype*>* slot_of(MPI_Datatype type) {
  if (type < kFirstDerived || type - kFirstDerived >= kChunks * kChunkSize) return nullptr;
  const int i = type - kFirstDerived;
  chunk* c = g_chunks[i >> kChunkBits].load(std::memory_order_acquire);
  return c == nullptr ? nullptr : &c->slot[i & (kChunkSize - 1)];
}

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// buf + offset, where buf may be MPI_BOTTOM (null) and offset an address.
void* displaced(const void* buf, std::ptrdiff_t offset) {
  return reinterpret_cast<void*>(address(buf) + std::uintptr_t(offset));
}

}  // namespace

void retain(const datatype* d) {
  if (d->named == MPI_DATATYPE_NULL) d->refs.fetch_add(1, std::memory_order_relaxed);
}

void release(const datatype* d) {
  if (d->named != MPI_DATATYPE_NULL || d->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (const datatype* c : d->children) release(c);
  delete d;
}

const datatype& lookup(const char* call, MPI_Datatype type, bool for_use) {
  if (type > 0 && type <= kLastNamed) return named_types()[type];
  if (type == MPI_DATATYPE_NULL) fail(call, MPI_ERR_TYPE, "the datatype is MPI_DATATYPE_NULL");
  std::atomic<datatype*>* s = slot_of(type);
  const datatype* d = s == nullptr ? nullptr : s->load(std::memory_order_acquire);
  if (d == nullptr)
    fail(call, MPI_ERR_TYPE,
         "datatype %d is not a datatype: freed by MPI_Type_free, or never made (predefined "
         "ones are 1..%d, derived ones are what the MPI_Type_ constructors return)",
         type, kLastNamed);
  if (for_use && !d->committed.load(std::memory_order_acquire))
    fail(call, MPI_ERR_TYPE,
         "datatype %d is not committed: call MPI_Type_commit before using it to send, "
         "receive, pack or unpack",
         type);
  return *d;
}

MPI_Datatype publish(const char* call, datatype* d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  int i;
  if (g_freed.size() > kReuseAfter) {
    i = g_freed.front();
    g_freed.pop_front();
  } else {
    if (g_used == kChunks * kChunkSize) {
      release(d);
      fail(call, MPI_ERR_INTERN,
           "%d derived datatypes exist at once, the most this library holds: free those no "
           "longer needed (MPI_Type_free)",
           g_used);
    }
    i = g_used++;
    std::atomic<chunk*>& c = g_chunks[i >> kChunkBits];
    if (c.load(std::memory_order_relaxed) == nullptr) c.store(new chunk, std::memory_order_release);
  }
  g_chunks[i >> kChunkBits]
      .load(std::memory_order_relaxed)
      ->slot[i & (kChunkSize - 1)]
      .store(d, std::memory_order_release);
  return kFirstDerived + i;
}

void unpublish(const char* call, MPI_Datatype type) {
  if (type > 0 && type <= kLastNamed)
    fail(call, MPI_ERR_TYPE, "datatype %d is predefined: only derived ones are freed", type);
  const datatype* d = &lookup(call, type, false);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    slot_of(type)->store(nullptr, std::memory_order_release);
    g_freed.push_back(type - kFirstDerived);
  }
  release(d);
}

MPI_Datatype hold_type(const char* call, MPI_Datatype type) {
  if (type > 0 && type <= kLastNamed) return type;
  const datatype& d = lookup(call, type, false);
  retain(&d);  // the new handle's reference (publish lets go of it if it fails)
  return publish(call, const_cast<datatype*>(&d));
}

void drop_type(MPI_Datatype held) {
  if (held >= kFirstDerived) unpublish("MPI_Type_free", held);
}

builder::builder(int combiner) : d_(new datatype) {
  d_->combiner = combiner;
}

builder::~builder() {
  if (d_ != nullptr) release(d_);
}

void builder::append(std::ptrdiff_t offset, std::size_t bytes) {
  if (bytes == 0) return;
  datatype& d = *d_;
  const std::ptrdiff_t end = offset + std::ptrdiff_t(bytes);
  if (d.runs.empty()) {
    d.true_lb = offset;
    d.true_ub = end;
  } else {
    d.true_lb = std::min(d.true_lb, offset);
    d.true_ub = std::max(d.true_ub, end);
  }
  if (!d.runs.empty() && d.runs.back().offset + std::ptrdiff_t(d.runs.back().bytes) == offset)
    d.runs.back().bytes += bytes;
  else
    d.runs.push_back(run{offset, bytes});
  d.size += bytes;
}

void builder::append_sig(MPI_Datatype basic, std::size_t count) {
  if (count == 0) return;
  std::vector<piece>& sig = d_->sig;
  if (!sig.empty() && sig.back().basic == basic)
    sig.back().count += count;
  else
    sig.push_back(piece{basic, count});
}

void builder::add(const datatype& c, std::ptrdiff_t disp, std::size_t n) {
  if (n == 0) return;
  datatype& d = *d_;
  const std::ptrdiff_t ext = c.extent();
  const std::ptrdiff_t last = disp + std::ptrdiff_t(n - 1) * ext;
  const std::ptrdiff_t lo = std::min(disp, last), hi = std::max(disp, last);
  // The standard's bounds: the least lb and greatest ub of the elements,
  // counting only the resized ones' where there are any.
  auto widen = [](bool& has, std::ptrdiff_t& v, std::ptrdiff_t x, bool least) {
    v = !has ? x : least ? std::min(v, x) : std::max(v, x);
    has = true;
  };
  if (c.lb_marked)
    widen(has_mlb_, mlb_, lo + c.lb, true);
  else
    widen(has_lb_, lb_, lo + c.lb, true);
  if (c.ub_marked)
    widen(has_mub_, mub_, hi + c.ub, false);
  else
    widen(has_ub_, ub_, hi + c.ub, false);

  if (c.runs.size() == 1 && std::ptrdiff_t(c.runs[0].bytes) == ext) {
    append(disp + c.runs[0].offset, n * c.runs[0].bytes);  // the elements abut: one run
  } else if (!c.runs.empty()) {
    for (std::size_t k = 0; k < n; ++k)
      for (const run& r : c.runs) append(disp + std::ptrdiff_t(k) * ext + r.offset, r.bytes);
  }
  if (c.sig.size() == 1)
    append_sig(c.sig[0].basic, c.sig[0].count * n);
  else
    for (std::size_t k = 0; k < n; ++k)
      for (const piece& p : c.sig) append_sig(p.basic, p.count);

  d.elements += n * c.elements;
  d.align = std::max(d.align, c.align);
  if (!any_)
    d.unit = c.unit;
  else if (d.unit != c.unit)
    d.unit = MPI_DATATYPE_NULL;
  d.units += n * c.units;
  any_ = true;
}

void builder::hold(const datatype& child) {
  retain(&child);
  d_->children.push_back(&child);
}

void builder::resize(std::ptrdiff_t lb, std::ptrdiff_t extent) {
  has_mlb_ = has_mub_ = true;
  mlb_ = lb;
  mub_ = lb + extent;
}

datatype* builder::finish(bool padded) {
  datatype& d = *d_;
  d.lb_marked = has_mlb_;
  d.ub_marked = has_mub_;
  d.lb = has_mlb_ ? mlb_ : has_lb_ ? lb_ : 0;
  d.ub = has_mub_ ? mub_ : has_ub_ ? ub_ : 0;
  if (padded && !has_mlb_ && !has_mub_ && d.ub > d.lb) {
    const std::ptrdiff_t a = std::ptrdiff_t(d.align), ext = d.ub - d.lb;
    if (ext % a != 0) d.ub += a - ext % a;
  }
  if (d.unit == MPI_DATATYPE_NULL) d.units = 0;
  d.contiguous =
      d.runs.empty() || (d.runs.size() == 1 && std::ptrdiff_t(d.runs[0].bytes) == d.extent());
  datatype* out = d_;
  d_ = nullptr;
  return out;
}

long long elements_in(const datatype& d, long long bytes) {
  if (d.size == 0) return bytes == 0 ? 0 : -1;
  const long long size = static_cast<long long>(d.size);
  long long n = bytes / size * static_cast<long long>(d.elements), rest = bytes % size;
  for (const piece& p : d.sig) {
    if (rest == 0) break;
    const long long each = static_cast<long long>(type_bytes("MPI_Get_elements", p.basic));
    const long long whole = std::min(static_cast<long long>(p.count), rest / each);
    n += whole * (is_pair(p.basic) ? 2 : 1);
    rest -= whole * each;
    if (whole < static_cast<long long>(p.count)) break;
  }
  return rest == 0 ? n : -1;
}

layout derived_layout(const char* call, MPI_Datatype type, int count) {
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
  const datatype& d = lookup(call, type, true);
  return layout{std::size_t(count) * d.size, &d};
}

namespace {

// One run for all `count` elements: they abut, or there is one.
bool one_run(const datatype* map, int count) {
  return map->runs.size() == 1 && (map->contiguous || count == 1);
}

}  // namespace

void pack_map(const datatype* map, int count, const void* buf, unsigned char* out) {
  if (map->runs.empty() || count == 0) return;
  if (one_run(map, count)) {
    std::memcpy(out, displaced(buf, map->runs[0].offset), std::size_t(count) * map->size);
    return;
  }
  std::uintptr_t base = address(buf);
  for (int k = 0; k < count; ++k, base += std::uintptr_t(map->extent()))
    for (const run& r : map->runs) {
      std::memcpy(out, reinterpret_cast<const void*>(base + std::uintptr_t(r.offset)), r.bytes);
      out += r.bytes;
    }
}

void unpack_map(const datatype* map, int count, const unsigned char* in, std::size_t bytes,
                void* buf) {
  if (bytes == 0) return;
  if (one_run(map, count)) {
    std::memcpy(displaced(buf, map->runs[0].offset), in, bytes);
    return;
  }
  std::uintptr_t base = address(buf);
  for (int k = 0; k < count && bytes != 0; ++k, base += std::uintptr_t(map->extent()))
    for (const run& r : map->runs) {
      const std::size_t n = std::min(r.bytes, bytes);
      std::memcpy(reinterpret_cast<void*>(base + std::uintptr_t(r.offset)), in, n);
      in += n;
      bytes -= n;
      if (bytes == 0) return;
    }
}

void pack(const char* call, MPI_Datatype type, int count, const void* src, void* dst) {
  const layout l = layout_of(call, type, count);
  if (l.map != nullptr)
    pack_map(l.map, count, src, static_cast<unsigned char*>(dst));
  else if (l.bytes != 0)
    std::memcpy(dst, src, l.bytes);
}

void unpack(const char* call, MPI_Datatype type, int count, const void* src, void* dst) {
  const layout l = layout_of(call, type, count);
  if (l.map != nullptr)
    unpack_map(l.map, count, static_cast<const unsigned char*>(src), l.bytes, dst);
  else if (l.bytes != 0)
    std::memcpy(dst, src, l.bytes);
}

std::size_t type_size(const char* call, MPI_Datatype type) {
  return lookup(call, type, false).size;
}

std::ptrdiff_t type_extent(const char* call, MPI_Datatype type) {
  return lookup(call, type, false).extent();
}

bool basic_of(const char* call, MPI_Datatype type, MPI_Datatype* basic, int* per_element) {
  const datatype& d = lookup(call, type, true);
  if (d.unit == MPI_DATATYPE_NULL) return false;
  *basic = d.unit;
  *per_element = int(d.units);
  return true;
}

}  // namespace weft::mpi
