// The error classes, codes and strings a program adds (MPI_Add_error_class,
// MPI_Add_error_code, MPI_Add_error_string), what MPI_Error_class and
// MPI_Error_string say about them, and MPI_LASTUSEDCODE.
//
// One table for the process, under a lock: the ranks of a process add to
// it as MPI processes would each to their own, and a code one rank made
// means the same to every rank of the process (a program cannot count on
// the same value in another MPI process, and does not need to). New
// values start above MPI_ERR_LASTCODE.
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

struct added {
  int error_class;  // itself for a class
  std::string text;
};

std::mutex g_mutex;
std::unordered_map<int, added> g_added;
int g_last_used = MPI_ERR_LASTCODE;  // MPI_LASTUSEDCODE's value

int add(const char* call, int error_class) {
  std::lock_guard lock(g_mutex);
  if (g_last_used == 0x7fffffff)
    fail(call, MPI_ERR_INTERN, "no error code is left (2^31 - 1 used)");
  const int code = ++g_last_used;
  g_added[code] = added{error_class < 0 ? code : error_class, {}};
  return code;
}

}  // namespace

bool added_error(int code, int* error_class, std::string* text) {
  std::lock_guard lock(g_mutex);
  auto it = g_added.find(code);
  if (it == g_added.end()) return false;
  if (error_class != nullptr) *error_class = it->second.error_class;
  if (text != nullptr) *text = it->second.text;
  return true;
}

int* last_used_code() {
  return &g_last_used;
}

}  // namespace weft::mpi

using namespace weft::mpi;

WEFT_MPI_API int MPI_Add_error_class(int* errorclass) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (errorclass == nullptr) fail("MPI_Add_error_class", MPI_ERR_ARG, "errorclass is null");
    *errorclass = add("MPI_Add_error_class", -1);
  });
}

WEFT_MPI_API int MPI_Add_error_code(int errorclass, int* errorcode) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Add_error_code";
    if (errorcode == nullptr) fail(call, MPI_ERR_ARG, "errorcode is null");
    int of = -1;
    const bool known = errorclass >= 0 && errorclass <= MPI_ERR_LASTCODE
                           ? predefined_error_text(errorclass) != nullptr
                           : added_error(errorclass, &of, nullptr) && of == errorclass;
    if (!known)
      fail(call, MPI_ERR_ARG,
           "%d is not an error class (a predefined one, or one of MPI_Add_error_class)",
           errorclass);
    *errorcode = add(call, errorclass);
  });
}

WEFT_MPI_API int MPI_Add_error_string(int errorcode, const char* string) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Add_error_string";
    if (string == nullptr) fail(call, MPI_ERR_ARG, "the string is null");
    const std::size_t n = strnlen(string, MPI_MAX_ERROR_STRING);
    if (n >= MPI_MAX_ERROR_STRING)
      fail(call, MPI_ERR_ARG, "the string is longer than MPI_MAX_ERROR_STRING - 1 (%d) characters",
           MPI_MAX_ERROR_STRING - 1);
    std::lock_guard lock(g_mutex);
    auto it = g_added.find(errorcode);
    if (it == g_added.end())
      fail(call, MPI_ERR_ARG,
           "%d is not an error code or class of MPI_Add_error_code or MPI_Add_error_class (the "
           "predefined ones keep their strings)",
           errorcode);
    it->second.text.assign(string, n);
  });
}
