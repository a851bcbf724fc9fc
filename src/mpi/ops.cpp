// Reduction ops: the predefined ones on the types the standard defines
// them for (MPI 3.1, 5.9.2), and user ops (MPI_Op_create).
//
// User ops live in one table for the process: ranks on different PEs
// create and free them at once, so it takes a lock; a collective resolves
// its op once, when it is called (op_ref), never per element.
#include <complex>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>
#include "mpi/coll.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi::coll {

namespace {

constexpr MPI_Op first_user_op = 32;

struct user_op {
  MPI_User_function* fn;
  bool commutative;
  bool live;
};

std::mutex g_lock;
std::vector<user_op> g_user;  // handle first_user_op + i

// The standard's groups of types (5.9.2).
enum group : unsigned {
  c_integer = 1,
  floating = 2,
  logical = 4,
  byte = 8,
  multi_language = 16,  // MPI_AINT, MPI_COUNT
  pair = 32,            // MPI_FLOAT_INT ... (MAXLOC, MINLOC)
  complex = 64,         // MPI_C_FLOAT_COMPLEX ... (SUM, PROD)
};

unsigned group_of(MPI_Datatype t) {
  switch (t) {
    case MPI_INT:
    case MPI_LONG:
    case MPI_SHORT:
    case MPI_UNSIGNED_SHORT:
    case MPI_UNSIGNED:
    case MPI_UNSIGNED_LONG:
    case MPI_LONG_LONG_INT:
    case MPI_UNSIGNED_LONG_LONG:
    case MPI_SIGNED_CHAR:
    case MPI_UNSIGNED_CHAR:
    case MPI_INT8_T:
    case MPI_INT16_T:
    case MPI_INT32_T:
    case MPI_INT64_T:
    case MPI_UINT8_T:
    case MPI_UINT16_T:
    case MPI_UINT32_T:
    case MPI_UINT64_T:
      return c_integer;
    case MPI_FLOAT:
    case MPI_DOUBLE:
    case MPI_LONG_DOUBLE:
      return floating;
    case MPI_C_BOOL:
    case MPI_CXX_BOOL:
      return logical;
    case MPI_C_FLOAT_COMPLEX:
    case MPI_C_DOUBLE_COMPLEX:
    case MPI_C_LONG_DOUBLE_COMPLEX:
    case MPI_CXX_FLOAT_COMPLEX:
    case MPI_CXX_DOUBLE_COMPLEX:
    case MPI_CXX_LONG_DOUBLE_COMPLEX:
      return complex;
    case MPI_BYTE:
      return byte;
    case MPI_AINT:
    case MPI_COUNT:
      return multi_language;
    case MPI_FLOAT_INT:
    case MPI_DOUBLE_INT:
    case MPI_LONG_INT:
    case MPI_2INT:
    case MPI_SHORT_INT:
    case MPI_LONG_DOUBLE_INT:
      return pair;
    default:
      return 0;  // MPI_CHAR, MPI_WCHAR: no predefined op takes them
  }
}

// The groups each predefined op is defined for, and their names.
unsigned groups_of(MPI_Op op) {
  switch (op) {
    case MPI_MAX:
    case MPI_MIN:
      return c_integer | floating | multi_language;
    case MPI_SUM:
    case MPI_PROD:
      return c_integer | floating | multi_language | complex;
    case MPI_LAND:
    case MPI_LOR:
    case MPI_LXOR:
      return c_integer | logical;
    case MPI_BAND:
    case MPI_BOR:
    case MPI_BXOR:
      return c_integer | byte | multi_language;
    case MPI_MAXLOC:
    case MPI_MINLOC:
      return pair;
    default:
      return 0;
  }
}

const char* accepted(MPI_Op op) {
  switch (groups_of(op)) {
    case c_integer | floating | multi_language:
      return "C integer and floating-point types, MPI_AINT, MPI_COUNT";
    case c_integer | floating | multi_language | complex:
      return "C integer, floating-point and complex types, MPI_AINT, MPI_COUNT";
    case c_integer | logical:
      return "C integer types, MPI_C_BOOL and MPI_CXX_BOOL";
    case c_integer | byte | multi_language:
      return "C integer types, MPI_BYTE, MPI_AINT, MPI_COUNT";
    default:
      return "the pair types MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, "
             "MPI_SHORT_INT, MPI_LONG_DOUBLE_INT";
  }
}

// What sums and products of T are computed in: integers wrap (as the
// hardware does) rather than overflow signed arithmetic.
template <class T, bool = std::is_integral_v<T>>
struct wrap {
  using type = T;
};
template <class T>
struct wrap<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <class T>
void arith(MPI_Op op, const T* in, T* io, int n) {
  if constexpr (std::is_same_v<T, bool>) {
    for (int i = 0; i < n; ++i) {
      if (op == MPI_LAND) io[i] = in[i] && io[i];
      if (op == MPI_LOR) io[i] = in[i] || io[i];
      if (op == MPI_LXOR) io[i] = in[i] != io[i];
    }
  } else {
    using W = typename wrap<T>::type;
    switch (op) {
      case MPI_SUM:
        for (int i = 0; i < n; ++i) io[i] = T(W(in[i]) + W(io[i]));
        break;
      case MPI_PROD:
        for (int i = 0; i < n; ++i) io[i] = T(W(in[i]) * W(io[i]));
        break;
      case MPI_MAX:
        for (int i = 0; i < n; ++i) io[i] = in[i] > io[i] ? in[i] : io[i];
        break;
      case MPI_MIN:
        for (int i = 0; i < n; ++i) io[i] = in[i] < io[i] ? in[i] : io[i];
        break;
      case MPI_LAND:
        for (int i = 0; i < n; ++i) io[i] = T(in[i] != 0 && io[i] != 0);
        break;
      case MPI_LOR:
        for (int i = 0; i < n; ++i) io[i] = T(in[i] != 0 || io[i] != 0);
        break;
      case MPI_LXOR:
        for (int i = 0; i < n; ++i) io[i] = T((in[i] != 0) != (io[i] != 0));
        break;
      default:
        if constexpr (std::is_integral_v<T>) {
          if (op == MPI_BAND)
            for (int i = 0; i < n; ++i) io[i] = T(in[i] & io[i]);
          if (op == MPI_BOR)
            for (int i = 0; i < n; ++i) io[i] = T(in[i] | io[i]);
          if (op == MPI_BXOR)
            for (int i = 0; i < n; ++i) io[i] = T(in[i] ^ io[i]);
        }
    }
  }
}

// MAXLOC / MINLOC: the greater (lesser) value with its index; of equal
// values, the lesser index.
template <class T>
void loc(MPI_Op op, const value_int<T>* in, value_int<T>* io, int n) {
  for (int i = 0; i < n; ++i) {
    const bool in_wins = op == MPI_MAXLOC ? in[i].value > io[i].value : in[i].value < io[i].value;
    if (in_wins)
      io[i] = in[i];
    else if (in[i].value == io[i].value && in[i].index < io[i].index)
      io[i].index = in[i].index;
  }
}

template <class T>
void run(MPI_Op op, const void* in, void* io, int n) {
  arith(op, static_cast<const T*>(in), static_cast<T*>(io), n);
}

// Complex numbers: sums and products only (std::complex<T> has C's
// _Complex layout: the real part, then the imaginary).
template <class T>
void run_complex(MPI_Op op, const void* in, void* io, int n) {
  const auto* a = static_cast<const std::complex<T>*>(in);
  auto* b = static_cast<std::complex<T>*>(io);
  if (op == MPI_SUM)
    for (int i = 0; i < n; ++i) b[i] = a[i] + b[i];
  if (op == MPI_PROD)
    for (int i = 0; i < n; ++i) b[i] = a[i] * b[i];
}

template <class T>
void run_loc(MPI_Op op, const void* in, void* io, int n) {
  loc(op, static_cast<const value_int<T>*>(in), static_cast<value_int<T>*>(io), n);
}

void predefined(MPI_Op op, const void* in, void* io, int n, MPI_Datatype t) {
  switch (t) {
    case MPI_SIGNED_CHAR:
    case MPI_INT8_T:
      return run<signed char>(op, in, io, n);
    case MPI_UNSIGNED_CHAR:
    case MPI_UINT8_T:
    case MPI_BYTE:
      return run<unsigned char>(op, in, io, n);
    case MPI_C_BOOL:
    case MPI_CXX_BOOL:
      return run<bool>(op, in, io, n);
    case MPI_C_FLOAT_COMPLEX:
    case MPI_CXX_FLOAT_COMPLEX:
      return run_complex<float>(op, in, io, n);
    case MPI_C_DOUBLE_COMPLEX:
    case MPI_CXX_DOUBLE_COMPLEX:
      return run_complex<double>(op, in, io, n);
    case MPI_C_LONG_DOUBLE_COMPLEX:
    case MPI_CXX_LONG_DOUBLE_COMPLEX:
      return run_complex<long double>(op, in, io, n);
    case MPI_SHORT:
    case MPI_INT16_T:
      return run<short>(op, in, io, n);
    case MPI_UNSIGNED_SHORT:
    case MPI_UINT16_T:
      return run<unsigned short>(op, in, io, n);
    case MPI_INT:
    case MPI_INT32_T:
      return run<int>(op, in, io, n);
    case MPI_UNSIGNED:
    case MPI_UINT32_T:
      return run<unsigned>(op, in, io, n);
    case MPI_LONG:
    case MPI_AINT:
      return run<long>(op, in, io, n);
    case MPI_UNSIGNED_LONG:
      return run<unsigned long>(op, in, io, n);
    case MPI_LONG_LONG_INT:
    case MPI_INT64_T:
    case MPI_COUNT:
      return run<long long>(op, in, io, n);
    case MPI_UNSIGNED_LONG_LONG:
    case MPI_UINT64_T:
      return run<unsigned long long>(op, in, io, n);
    case MPI_FLOAT:
      return run<float>(op, in, io, n);
    case MPI_DOUBLE:
      return run<double>(op, in, io, n);
    case MPI_LONG_DOUBLE:
      return run<long double>(op, in, io, n);
    case MPI_FLOAT_INT:
      return run_loc<float>(op, in, io, n);
    case MPI_DOUBLE_INT:
      return run_loc<double>(op, in, io, n);
    case MPI_LONG_INT:
      return run_loc<long>(op, in, io, n);
    case MPI_2INT:
      return run_loc<int>(op, in, io, n);
    case MPI_SHORT_INT:
      return run_loc<short>(op, in, io, n);
    case MPI_LONG_DOUBLE_INT:
      return run_loc<long double>(op, in, io, n);
    default:
      break;
  }
}

}  // namespace

const char* type_name(MPI_Datatype t) {
  static const char* const names[] = {"MPI_DATATYPE_NULL",
                                      "MPI_CHAR",
                                      "MPI_SIGNED_CHAR",
                                      "MPI_UNSIGNED_CHAR",
                                      "MPI_BYTE",
                                      "MPI_SHORT",
                                      "MPI_UNSIGNED_SHORT",
                                      "MPI_INT",
                                      "MPI_UNSIGNED",
                                      "MPI_LONG",
                                      "MPI_UNSIGNED_LONG",
                                      "MPI_LONG_LONG_INT",
                                      "MPI_UNSIGNED_LONG_LONG",
                                      "MPI_FLOAT",
                                      "MPI_DOUBLE",
                                      "MPI_LONG_DOUBLE",
                                      "MPI_C_BOOL",
                                      "MPI_INT8_T",
                                      "MPI_INT16_T",
                                      "MPI_INT32_T",
                                      "MPI_INT64_T",
                                      "MPI_UINT8_T",
                                      "MPI_UINT16_T",
                                      "MPI_UINT32_T",
                                      "MPI_UINT64_T",
                                      "MPI_WCHAR",
                                      "MPI_AINT",
                                      "MPI_COUNT",
                                      "MPI_FLOAT_INT",
                                      "MPI_DOUBLE_INT",
                                      "MPI_LONG_INT",
                                      "MPI_2INT",
                                      "MPI_SHORT_INT",
                                      "MPI_LONG_DOUBLE_INT",
                                      "MPI_PACKED",
                                      "MPI_C_FLOAT_COMPLEX",
                                      "MPI_C_DOUBLE_COMPLEX",
                                      "MPI_C_LONG_DOUBLE_COMPLEX",
                                      "MPI_CXX_BOOL",
                                      "MPI_CXX_FLOAT_COMPLEX",
                                      "MPI_CXX_DOUBLE_COMPLEX",
                                      "MPI_CXX_LONG_DOUBLE_COMPLEX"};
  return t >= 0 && t < int(sizeof names / sizeof names[0]) ? names[t] : "a derived datatype";
}

const char* op_name(MPI_Op op) {
  static const char* const names[] = {"MPI_OP_NULL", "MPI_MAX",     "MPI_MIN",  "MPI_SUM",
                                      "MPI_PROD",    "MPI_LAND",    "MPI_BAND", "MPI_LOR",
                                      "MPI_BOR",     "MPI_LXOR",    "MPI_BXOR", "MPI_MINLOC",
                                      "MPI_MAXLOC",  "MPI_REPLACE", "MPI_NO_OP"};
  return op >= 0 && op <= MPI_NO_OP ? names[op] : "a user op";
}

op_ref resolve_op(const char* call, MPI_Op op, MPI_Datatype type) {
  // MPI_ERR_TYPE first: the type is not one (or a derived one not
  // committed).
  if (is_predefined(type))
    type_bytes(call, type);
  else
    type_size(call, type);
  op_ref r;
  r.op = op;
  if (op >= first_user_op) {
    std::lock_guard<std::mutex> hold(g_lock);
    const std::size_t i = std::size_t(op - first_user_op);
    if (i >= g_user.size() || !g_user[i].live)
      fail(call, MPI_ERR_OP, "op %d is not an op (freed, or never created by MPI_Op_create)", op);
    r.user = g_user[i].fn;
    r.commutative = g_user[i].commutative;
    return r;
  }
  if (op == MPI_REPLACE || op == MPI_NO_OP)
    fail(call, MPI_ERR_OP, "%s is for one-sided accumulate only, not for a collective",
         op_name(op));
  if (op <= MPI_OP_NULL || op > MPI_NO_OP)
    fail(call, MPI_ERR_OP, "op %d is not an op (MPI_MAX ... MPI_MAXLOC, or one of MPI_Op_create)",
         op);
  if ((groups_of(op) & group_of(type)) == 0)
    fail(call, MPI_ERR_OP, "%s is not defined for %s (it takes %s)", op_name(op), type_name(type),
         accepted(op));
  return r;
}

void apply(const op_ref& op, const void* in, void* inout, int count, MPI_Datatype type) {
  if (count == 0) return;
  if (op.user != nullptr) {
    int n = count;
    MPI_Datatype t = type;
    op.user(const_cast<void*>(in), inout, &n, &t);
    return;
  }
  predefined(op.op, in, inout, count, type);
}

}  // namespace weft::mpi::coll

using namespace weft::mpi;
using namespace weft::mpi::coll;

WEFT_MPI_API int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Op_create");
    if (user_fn == nullptr) fail("MPI_Op_create", MPI_ERR_ARG, "the user function is null");
    std::lock_guard<std::mutex> hold(g_lock);
    g_user.push_back(user_op{user_fn, commute != 0, true});
    *op = first_user_op + MPI_Op(g_user.size() - 1);
  });
}

WEFT_MPI_API int MPI_Op_free(MPI_Op* op) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Op_free");
    if (*op < first_user_op)
      fail("MPI_Op_free", MPI_ERR_OP, "%s is not an op of MPI_Op_create (predefined ops stay)",
           op_name(*op));
    std::lock_guard<std::mutex> hold(g_lock);
    const std::size_t i = std::size_t(*op - first_user_op);
    if (i >= g_user.size() || !g_user[i].live)
      fail("MPI_Op_free", MPI_ERR_OP, "op %d is not an op (freed, or never created)", *op);
    g_user[i].live = false;
    *op = MPI_OP_NULL;
  });
}

WEFT_MPI_API int MPI_Op_commutative(MPI_Op op, int* commute) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (op >= first_user_op) {
      std::lock_guard<std::mutex> hold(g_lock);
      const std::size_t i = std::size_t(op - first_user_op);
      if (i >= g_user.size() || !g_user[i].live)
        fail("MPI_Op_commutative", MPI_ERR_OP, "op %d is not an op (freed, or never created)", op);
      *commute = g_user[i].commutative ? 1 : 0;
      return;
    }
    if (op <= MPI_OP_NULL || op > MPI_NO_OP)
      fail("MPI_Op_commutative", MPI_ERR_OP, "op %d is not an op", op);
    *commute = 1;
  });
}
