// Derived datatypes inside (docs/design/mpi.md "Datatypes"): a datatype
// is its flat map -- the runs of bytes one element covers, relative to
// the element's address, in the type map's order -- with its size,
// bounds and signature, made once by its constructor. Sends pack the
// runs one after the other; receives unpack them in the same order.
//
// Handles. The predefined types are 1..kLastPredefined; derived ones are
// kFirstDerived and above, in a table every rank of the process reads (a
// rank on each PE: no lock on the way in). The table is chunks of atomic
// pointers that never move: a lookup is two acquire loads; making or
// freeing a type takes the mutex. A type is reference counted: its
// handle holds one reference, each pending receive of it one, each
// derived type made from it one (the contents keep their types), so that
// MPI_Type_free while a receive waits is safe.
#pragma once
#include <atomic>
#include <cstddef>
#include <vector>
#include "mpi/mpi_internal.hpp"

namespace weft::mpi {

inline constexpr MPI_Datatype kLastNamed = kLastPredefined;
inline constexpr MPI_Datatype kFirstDerived = 1024;

// `bytes` of data at `offset` from an element's address.
struct run {
  std::ptrdiff_t offset;
  std::size_t bytes;
};

// `count` values of predefined type `basic` (the signature, for
// MPI_Get_elements).
struct piece {
  MPI_Datatype basic;
  std::size_t count;
};

struct datatype {
  std::vector<run> runs;     // adjacent runs merged
  std::vector<piece> sig;    // equal neighbours merged
  std::size_t size = 0;      // bytes of data in one element
  std::size_t elements = 0;  // predefined values in one (a MAXLOC pair counts 2)
  std::size_t align = 1;     // the largest alignment of its predefined types
  // Bounds (lb, ub: extent = ub - lb) and the bounds of the data itself.
  std::ptrdiff_t lb = 0, ub = 0, true_lb = 0, true_ub = 0;
  // Bounds set by MPI_Type_create_resized: they hold in the types made
  // from this one, whatever data lies beyond them (the standard's
  // explicit lb and ub markers).
  bool lb_marked = false, ub_marked = false;
  // runs.size() <= 1 and consecutive elements abut: a memcpy moves any
  // count of them.
  bool contiguous = true;
  // basic_of: `units` values of `unit` per element; MPI_DATATYPE_NULL
  // when the type mixes predefined types.
  MPI_Datatype unit = MPI_DATATYPE_NULL;
  std::size_t units = 0;
  MPI_Datatype named = MPI_DATATYPE_NULL;  // a predefined type's handle
  // How it was made (MPI_Type_get_envelope / MPI_Type_get_contents).
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> ints;
  std::vector<MPI_Aint> addrs;
  std::vector<const datatype*> children;  // each retained
  mutable std::atomic<bool> committed{false};
  mutable std::atomic<int> refs{1};

  std::ptrdiff_t extent() const { return ub - lb; }
};

// The type behind `type`; MPI_ERR_TYPE naming `call` for
// MPI_DATATYPE_NULL, a freed or unknown handle, and, when `for_use`
// (communication, pack, unpack), a type not committed.
const datatype& lookup(const char* call, MPI_Datatype type, bool for_use);
// A new handle for `d` (which it then holds).
MPI_Datatype publish(const char* call, datatype* d);
// Drops handle `type` (MPI_Type_free): predefined ones are refused.
void unpublish(const char* call, MPI_Datatype type);

// What an operation that runs after its call returns (a non-blocking
// collective's helper, each MPI_Start of a persistent request) uses in
// place of the program's `type`: the standard fixes the type at the call
// (MPI 3.1, 4.1.9: a type freed meanwhile stays valid for the operations
// made with it), but the layers below look types up by handle, and the
// program may free its handle, which may then name another type. So a
// derived type gets a second handle of the operation's own on the same map
// (retained; MPI_ERR_TYPE naming `call` if `type` is not a datatype);
// `type` itself when predefined. drop_type lets go of it when the
// operation is done with it.
MPI_Datatype hold_type(const char* call, MPI_Datatype type);
void drop_type(MPI_Datatype held);

// Builds a type map out of elements of other types.
class builder {
 public:
  explicit builder(int combiner);
  ~builder();
  builder(const builder&) = delete;
  builder& operator=(const builder&) = delete;
  // `n` elements of `child` end to end (its extent apart) from byte `disp`.
  void add(const datatype& child, std::ptrdiff_t disp, std::size_t n);
  // Keeps `child` (retained) for MPI_Type_get_contents.
  void hold(const datatype& child);
  // MPI_Type_create_resized: these bounds, whatever the data.
  void resize(std::ptrdiff_t lb, std::ptrdiff_t extent);
  // The finished type (the caller publishes it). `padded`: a struct's
  // extent is rounded up to its alignment, as a C struct's size is.
  datatype* finish(bool padded);
  datatype& get() { return *d_; }

 private:
  void append(std::ptrdiff_t offset, std::size_t bytes);
  void append_sig(MPI_Datatype basic, std::size_t count);
  datatype* d_;
  bool any_ = false, has_lb_ = false, has_ub_ = false, has_mlb_ = false, has_mub_ = false;
  std::ptrdiff_t lb_ = 0, ub_ = 0, mlb_ = 0, mub_ = 0;
};

// Predefined values in `bytes` of packed data of `d`; -1 when they end
// inside a value.
long long elements_in(const datatype& d, long long bytes);

}  // namespace weft::mpi
