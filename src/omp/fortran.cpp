// The Fortran names of the omp_* routines, as gfortran calls them through
// `use omp_lib` or `include 'omp_lib.h'`: the C name with a trailing
// underscore, every argument by reference (but omp_fulfill_event's handle,
// which omp_lib declares `value`), a character argument followed by its
// length as a hidden size_t at the end of the list, and an _8 twin for each
// routine with an integer argument, which omp_lib's generic interfaces pick
// for integer(8) arguments (-fdefault-integer-8 code). Each is a thin
// wrapper of the C routine, so that the two languages read and write the
// same ICVs and locks.
//
// Why they are needed at all: without them a Fortran program linked
// against libweft-omp does not link, and one run with LD_PRELOAD takes them
// from libgomp, which knows nothing of weft's threads and answers, e.g.,
// omp_get_thread_num() = 0 on every one of them.
//
// Locks. omp_lib gives a lock variable omp_lock_kind = 4 bytes and a
// nestable one omp_nest_lock_kind = 8. weft's omp_lock_t is one 32-bit
// spin word (spin_lock.hpp), so the Fortran integer is the lock itself and
// the C routines take its address. The nestable lock (a word, a count and
// an owner pointer: GCC's <omp.h> size, 8 + sizeof(void*) bytes) does not
// fit in 8, so the integer holds a pointer to one allocated by
// omp_init_nest_lock_ and freed by omp_destroy_nest_lock_.
//
// Not here: omp_target_* and omp_alloc & co., which omp_lib declares
// bind(c): Fortran calls the C names. The allocator routines that omp_lib
// does not declare bind(c) (omp_init_allocator_ & co.) are here: a handle
// of libgomp's passed to our omp_alloc would be a bad handle.
//
// Every routine may be called from any OpenMP thread, as its C routine;
// the lock routines may block (set) as theirs do.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>
#include "omp/gomp_abi.hpp"
#include "omp/spin_lock.hpp"

extern "C" {
// The C routines (api.cpp, affinity.cpp, target.cpp, task.cpp), with the
// types of GCC's <omp.h>.
int omp_get_thread_num();
int omp_get_num_threads();
int omp_get_max_threads();
void omp_set_num_threads(int);
int omp_in_parallel();
int omp_get_num_procs();
int omp_get_level();
int omp_get_active_level();
int omp_get_ancestor_thread_num(int);
int omp_get_team_size(int);
int omp_get_thread_limit();
void omp_set_dynamic(int);
int omp_get_dynamic();
void omp_set_nested(int);
int omp_get_nested();
void omp_set_max_active_levels(int);
int omp_get_max_active_levels();
int omp_get_supported_active_levels();
int omp_in_final();
int omp_get_cancellation();
int omp_get_max_task_priority();
void omp_set_schedule(int, int);
void omp_get_schedule(int*, int*);
int omp_get_num_devices();
int omp_get_default_device();
void omp_set_default_device(int);
int omp_is_initial_device();
int omp_get_initial_device();
int omp_get_device_num();
int omp_get_num_teams();
int omp_get_team_num();
void omp_set_num_teams(int);
int omp_get_max_teams();
void omp_set_teams_thread_limit(int);
int omp_get_teams_thread_limit();
double omp_get_wtime();
double omp_get_wtick();
void omp_init_lock(void*);
void omp_init_lock_with_hint(void*, int);
void omp_destroy_lock(void*);
void omp_set_lock(void*);
void omp_unset_lock(void*);
int omp_test_lock(void*);
void omp_init_nest_lock(void*);
void omp_init_nest_lock_with_hint(void*, int);
void omp_destroy_nest_lock(void*);
void omp_set_nest_lock(void*);
void omp_unset_nest_lock(void*);
int omp_test_nest_lock(void*);
int omp_get_proc_bind();
int omp_get_num_places();
int omp_get_place_num_procs(int);
void omp_get_place_proc_ids(int, int*);
int omp_get_place_num();
int omp_get_partition_num_places();
void omp_get_partition_place_nums(int*);
void omp_set_affinity_format(const char*);
std::size_t omp_get_affinity_format(char*, std::size_t);
std::size_t omp_capture_affinity(char*, std::size_t, const char*);
void omp_display_affinity(const char*);
void omp_display_env(int);
void omp_fulfill_event(std::uintptr_t);
// allocator.cpp; a trait is {int key; uintptr_t value;}, the layout of
// gfortran's type(omp_alloctrait) (integer(4) key, integer(8) value) too.
std::uintptr_t omp_init_allocator(std::uintptr_t, int, const void*);
void omp_destroy_allocator(std::uintptr_t);
void omp_set_default_allocator(std::uintptr_t);
std::uintptr_t omp_get_default_allocator();
int omp_pause_resource(int, int);
int omp_pause_resource_all(int);
}

namespace {

using std::int32_t;
using std::int64_t;

// An integer(8) argument where the C routine takes an int: out-of-range
// values saturate, so that a huge count stays huge and a negative one stays
// negative (and invalid) instead of wrapping into a valid one.
int narrow(int64_t v) {
  return int(std::clamp<int64_t>(v, INT_MIN, INT_MAX));
}

// A logical(8) argument: any nonzero value is true.
int truth(int64_t v) {
  return v != 0 ? 1 : 0;
}

// The lock held in place in an integer(omp_lock_kind) variable.
static_assert(sizeof(weft::omp::spin_word) == sizeof(int32_t) &&
                  alignof(weft::omp::spin_word) <= alignof(int32_t),
              "omp_lock_t must fit in gfortran's integer(omp_lock_kind = 4)");

// The storage of a C omp_nest_lock_t (GCC's <omp.h>), what
// omp_init_nest_lock initialises; an integer(omp_nest_lock_kind = 8)
// variable holds a pointer to one.
struct nest_lock_storage {
  alignas(void*) unsigned char bytes[8 + sizeof(void*)];
};
static_assert(sizeof(void*) <= sizeof(int64_t),
              "a pointer must fit in gfortran's integer(omp_nest_lock_kind = 8)");

void* nest_lock_of(int64_t* var) {
  void* p;
  std::memcpy(&p, var, sizeof p);
  return p;
}

void new_nest_lock(int64_t* var, int hint, bool with_hint) {
  void* p = new nest_lock_storage;
  if (with_hint)
    omp_init_nest_lock_with_hint(p, hint);
  else
    omp_init_nest_lock(p);
  *var = 0;
  std::memcpy(var, &p, sizeof p);
}

// A Fortran character argument as a C string: its `len` characters, blanks
// included (as libgomp takes them).
std::string c_string(const char* s, std::size_t len) {
  return std::string(s, len);
}

// Writes `text` into a Fortran character buffer of `len` characters:
// truncated when longer, blank-padded when shorter (Fortran strings carry
// no terminator).
void to_fortran(const std::string& text, char* buffer, std::size_t len) {
  if (len == 0) return;
  const std::size_t n = std::min(len, text.size());
  std::memcpy(buffer, text.data(), n);
  std::memset(buffer + n, ' ', len - n);
}

}  // namespace

extern "C" {

// ---- locks -----------------------------------------------------------------------------

WEFT_GOMP void omp_init_lock_(int32_t* lock) {
  omp_init_lock(lock);
}
// omp_lib declares the _with_hint routines, which GCC 12's libgomp does not
// define (a Fortran program that calls them links only against libweft-omp).
WEFT_GOMP void omp_init_lock_with_hint_(int32_t* lock, const int32_t* hint) {
  omp_init_lock_with_hint(lock, *hint);
}
WEFT_GOMP void omp_destroy_lock_(int32_t* lock) {
  omp_destroy_lock(lock);
}
WEFT_GOMP void omp_set_lock_(int32_t* lock) {
  omp_set_lock(lock);
}
WEFT_GOMP void omp_unset_lock_(int32_t* lock) {
  omp_unset_lock(lock);
}
WEFT_GOMP int32_t omp_test_lock_(int32_t* lock) {
  return omp_test_lock(lock);
}

WEFT_GOMP void omp_init_nest_lock_(int64_t* lock) {
  new_nest_lock(lock, 0, false);
}
WEFT_GOMP void omp_init_nest_lock_with_hint_(int64_t* lock, const int32_t* hint) {
  new_nest_lock(lock, *hint, true);
}
// The variable is zeroed, as libgomp does, so that a use after destruction
// faults on a null pointer instead of reaching freed memory.
WEFT_GOMP void omp_destroy_nest_lock_(int64_t* lock) {
  void* p = nest_lock_of(lock);
  omp_destroy_nest_lock(p);
  delete static_cast<nest_lock_storage*>(p);
  *lock = 0;
}
WEFT_GOMP void omp_set_nest_lock_(int64_t* lock) {
  omp_set_nest_lock(nest_lock_of(lock));
}
WEFT_GOMP void omp_unset_nest_lock_(int64_t* lock) {
  omp_unset_nest_lock(nest_lock_of(lock));
}
WEFT_GOMP int32_t omp_test_nest_lock_(int64_t* lock) {
  return omp_test_nest_lock(nest_lock_of(lock));
}

// ---- threads and teams -----------------------------------------------------------------

WEFT_GOMP void omp_set_num_threads_(const int32_t* n) {
  omp_set_num_threads(*n);
}
WEFT_GOMP void omp_set_num_threads_8_(const int64_t* n) {
  omp_set_num_threads(narrow(*n));
}
WEFT_GOMP int32_t omp_get_num_threads_() {
  return omp_get_num_threads();
}
WEFT_GOMP int32_t omp_get_max_threads_() {
  return omp_get_max_threads();
}
WEFT_GOMP int32_t omp_get_thread_num_() {
  return omp_get_thread_num();
}
WEFT_GOMP int32_t omp_in_parallel_() {
  return omp_in_parallel();
}
WEFT_GOMP int32_t omp_get_num_procs_() {
  return omp_get_num_procs();
}
WEFT_GOMP void omp_set_dynamic_(const int32_t* v) {
  omp_set_dynamic(*v);
}
WEFT_GOMP void omp_set_dynamic_8_(const int64_t* v) {
  omp_set_dynamic(truth(*v));
}
WEFT_GOMP int32_t omp_get_dynamic_() {
  return omp_get_dynamic();
}
WEFT_GOMP void omp_set_nested_(const int32_t* v) {
  omp_set_nested(*v);
}
WEFT_GOMP void omp_set_nested_8_(const int64_t* v) {
  omp_set_nested(truth(*v));
}
WEFT_GOMP int32_t omp_get_nested_() {
  return omp_get_nested();
}
WEFT_GOMP int32_t omp_get_thread_limit_() {
  return omp_get_thread_limit();
}
WEFT_GOMP void omp_set_max_active_levels_(const int32_t* n) {
  omp_set_max_active_levels(*n);
}
WEFT_GOMP void omp_set_max_active_levels_8_(const int64_t* n) {
  omp_set_max_active_levels(narrow(*n));
}
WEFT_GOMP int32_t omp_get_max_active_levels_() {
  return omp_get_max_active_levels();
}
WEFT_GOMP int32_t omp_get_supported_active_levels_() {
  return omp_get_supported_active_levels();
}
WEFT_GOMP int32_t omp_get_level_() {
  return omp_get_level();
}
WEFT_GOMP int32_t omp_get_active_level_() {
  return omp_get_active_level();
}
WEFT_GOMP int32_t omp_get_ancestor_thread_num_(const int32_t* level) {
  return omp_get_ancestor_thread_num(*level);
}
WEFT_GOMP int32_t omp_get_ancestor_thread_num_8_(const int64_t* level) {
  return omp_get_ancestor_thread_num(narrow(*level));
}
WEFT_GOMP int32_t omp_get_team_size_(const int32_t* level) {
  return omp_get_team_size(*level);
}
WEFT_GOMP int32_t omp_get_team_size_8_(const int64_t* level) {
  return omp_get_team_size(narrow(*level));
}
WEFT_GOMP int32_t omp_in_final_() {
  return omp_in_final();
}
WEFT_GOMP int32_t omp_get_cancellation_() {
  return omp_get_cancellation();
}
WEFT_GOMP int32_t omp_get_max_task_priority_() {
  return omp_get_max_task_priority();
}
WEFT_GOMP void omp_fulfill_event_(std::intptr_t event) {
  omp_fulfill_event(std::uintptr_t(event));
}

// ---- schedule --------------------------------------------------------------------------

WEFT_GOMP void omp_set_schedule_(const int32_t* kind, const int32_t* chunk) {
  omp_set_schedule(*kind, *chunk);
}
WEFT_GOMP void omp_set_schedule_8_(const int32_t* kind, const int64_t* chunk) {
  omp_set_schedule(*kind, narrow(*chunk));
}
// The monotonic flag is masked off as libgomp does: omp_lib names the four
// plain kinds only, and Fortran code compares the kind with them.
WEFT_GOMP void omp_get_schedule_(int32_t* kind, int32_t* chunk) {
  int k = 0, c = 0;
  omp_get_schedule(&k, &c);
  *kind = k & 0x7fffffff;
  *chunk = c;
}
WEFT_GOMP void omp_get_schedule_8_(int32_t* kind, int64_t* chunk) {
  int k = 0, c = 0;
  omp_get_schedule(&k, &c);
  *kind = k & 0x7fffffff;
  *chunk = c;
}

// ---- teams and devices -----------------------------------------------------------------

WEFT_GOMP int32_t omp_get_num_teams_() {
  return omp_get_num_teams();
}
WEFT_GOMP int32_t omp_get_team_num_() {
  return omp_get_team_num();
}
WEFT_GOMP void omp_set_num_teams_(const int32_t* n) {
  omp_set_num_teams(*n);
}
WEFT_GOMP void omp_set_num_teams_8_(const int64_t* n) {
  omp_set_num_teams(narrow(*n));
}
WEFT_GOMP int32_t omp_get_max_teams_() {
  return omp_get_max_teams();
}
WEFT_GOMP void omp_set_teams_thread_limit_(const int32_t* n) {
  omp_set_teams_thread_limit(*n);
}
WEFT_GOMP void omp_set_teams_thread_limit_8_(const int64_t* n) {
  omp_set_teams_thread_limit(narrow(*n));
}
WEFT_GOMP int32_t omp_get_teams_thread_limit_() {
  return omp_get_teams_thread_limit();
}
WEFT_GOMP void omp_set_default_device_(const int32_t* device) {
  omp_set_default_device(*device);
}
WEFT_GOMP void omp_set_default_device_8_(const int64_t* device) {
  omp_set_default_device(narrow(*device));
}
WEFT_GOMP int32_t omp_get_default_device_() {
  return omp_get_default_device();
}
WEFT_GOMP int32_t omp_get_num_devices_() {
  return omp_get_num_devices();
}
WEFT_GOMP int32_t omp_is_initial_device_() {
  return omp_is_initial_device();
}
WEFT_GOMP int32_t omp_get_initial_device_() {
  return omp_get_initial_device();
}
WEFT_GOMP int32_t omp_get_device_num_() {
  return omp_get_device_num();
}

// ---- time ------------------------------------------------------------------------------

WEFT_GOMP double omp_get_wtime_() {
  return omp_get_wtime();
}
WEFT_GOMP double omp_get_wtick_() {
  return omp_get_wtick();
}

// ---- places ----------------------------------------------------------------------------

WEFT_GOMP int32_t omp_get_proc_bind_() {
  return omp_get_proc_bind();
}
WEFT_GOMP int32_t omp_get_num_places_() {
  return omp_get_num_places();
}
WEFT_GOMP int32_t omp_get_place_num_procs_(const int32_t* place) {
  return omp_get_place_num_procs(*place);
}
WEFT_GOMP int32_t omp_get_place_num_procs_8_(const int64_t* place) {
  return omp_get_place_num_procs(narrow(*place));
}
WEFT_GOMP void omp_get_place_proc_ids_(const int32_t* place, int32_t* ids) {
  omp_get_place_proc_ids(*place, ids);
}
// The C routine writes ints: read into a buffer of the place's size, then
// widened into the integer(8) array.
WEFT_GOMP void omp_get_place_proc_ids_8_(const int64_t* place, int64_t* ids) {
  const int p = narrow(*place);
  std::vector<int> v(std::size_t(std::max(0, omp_get_place_num_procs(p))));
  if (v.empty()) return;
  omp_get_place_proc_ids(p, v.data());
  std::copy(v.begin(), v.end(), ids);
}
WEFT_GOMP int32_t omp_get_place_num_() {
  return omp_get_place_num();
}
WEFT_GOMP int32_t omp_get_partition_num_places_() {
  return omp_get_partition_num_places();
}
WEFT_GOMP void omp_get_partition_place_nums_(int32_t* nums) {
  omp_get_partition_place_nums(nums);
}
WEFT_GOMP void omp_get_partition_place_nums_8_(int64_t* nums) {
  std::vector<int> v(std::size_t(std::max(0, omp_get_partition_num_places())));
  if (v.empty()) return;
  omp_get_partition_place_nums(v.data());
  std::copy(v.begin(), v.end(), nums);
}

// ---- allocators and pause -------------------------------------------------------------

WEFT_GOMP std::intptr_t omp_init_allocator_(const std::intptr_t* memspace, const int32_t* ntraits,
                                            const void* traits) {
  return std::intptr_t(omp_init_allocator(std::uintptr_t(*memspace), *ntraits, traits));
}
WEFT_GOMP std::intptr_t omp_init_allocator_8_(const std::intptr_t* memspace, const int64_t* ntraits,
                                              const void* traits) {
  return std::intptr_t(omp_init_allocator(std::uintptr_t(*memspace), narrow(*ntraits), traits));
}
WEFT_GOMP void omp_destroy_allocator_(const std::intptr_t* allocator) {
  omp_destroy_allocator(std::uintptr_t(*allocator));
}
WEFT_GOMP void omp_set_default_allocator_(const std::intptr_t* allocator) {
  omp_set_default_allocator(std::uintptr_t(*allocator));
}
WEFT_GOMP std::intptr_t omp_get_default_allocator_() {
  return std::intptr_t(omp_get_default_allocator());
}
WEFT_GOMP int32_t omp_pause_resource_(const int32_t* kind, const int32_t* device) {
  return omp_pause_resource(*kind, *device);
}
WEFT_GOMP int32_t omp_pause_resource_all_(const int32_t* kind) {
  return omp_pause_resource_all(*kind);
}

// ---- affinity format and environment display -------------------------------------------

WEFT_GOMP void omp_set_affinity_format_(const char* format, std::size_t format_len) {
  omp_set_affinity_format(c_string(format, format_len).c_str());
}
// Returns the format's length, which may exceed the buffer's (the caller
// then knows how much it missed), as the C routine does.
WEFT_GOMP int32_t omp_get_affinity_format_(char* buffer, std::size_t buffer_len) {
  // Asked again if another thread set a longer format in between.
  std::string f(omp_get_affinity_format(nullptr, 0) + 1, '\0');
  std::size_t n;
  while ((n = omp_get_affinity_format(f.data(), f.size())) >= f.size()) f.assign(n + 1, '\0');
  f.resize(n);
  to_fortran(f, buffer, buffer_len);
  return int32_t(n);
}
// A blank format (length 0) means the affinity-format-var, as in C an empty
// or null one does.
WEFT_GOMP void omp_display_affinity_(const char* format, std::size_t format_len) {
  omp_display_affinity(c_string(format, format_len).c_str());
}
WEFT_GOMP int32_t omp_capture_affinity_(char* buffer, const char* format, std::size_t buffer_len,
                                        std::size_t format_len) {
  const std::string f = c_string(format, format_len);
  // One call in the common case; the text names the calling thread only,
  // so a second call for a longer one gives the same text.
  std::string text(256, '\0');
  std::size_t n = omp_capture_affinity(text.data(), text.size(), f.c_str());
  if (n >= text.size()) {
    text.assign(n + 1, '\0');
    n = omp_capture_affinity(text.data(), text.size(), f.c_str());
  }
  text.resize(std::min(n, text.size()));
  to_fortran(text, buffer, buffer_len);
  return int32_t(n);
}
WEFT_GOMP void omp_display_env_(const int32_t* verbose) {
  omp_display_env(*verbose);
}
WEFT_GOMP void omp_display_env_8_(const int64_t* verbose) {
  omp_display_env(truth(*verbose));
}

}  // extern "C"
