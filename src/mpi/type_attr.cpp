// Attributes on datatypes: MPI_Type_create_keyval, MPI_Type_free_keyval,
// MPI_Type_set_attr, MPI_Type_get_attr, MPI_Type_delete_attr, and what
// MPI_Type_dup (copy functions) and MPI_Type_free (delete functions) do
// with them.
//
// As for communicators (attr.cpp): the keyvals are one table of the
// process, numbered apart from the communicators' (from 1,000,000: a
// communicator's keyval given here is MPI_ERR_KEYVAL), and the values are
// each rank's own (rank_state::type_attributes).
#include <map>
#include <mutex>
#include <vector>
#include "mpi/datatype.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

struct keyval_entry {
  MPI_Type_copy_attr_function* copy;
  MPI_Type_delete_attr_function* del;
  void* extra;
};

constexpr int first_type_keyval = 1000000;
std::mutex g_mutex;
std::vector<keyval_entry> g_keyvals;  // keyval first_type_keyval + i; freed ones stay

keyval_entry keyval_of(const char* call, int key) {
  std::lock_guard lock(g_mutex);
  if (key < first_type_keyval || std::size_t(key - first_type_keyval) >= g_keyvals.size())
    fail(call, MPI_ERR_KEYVAL, "%d is not a keyval of MPI_Type_create_keyval", key);
  return g_keyvals[std::size_t(key - first_type_keyval)];
}

void call_delete(const char* call, MPI_Datatype type, int key, void* value) {
  const keyval_entry k = keyval_of(call, key);
  if (k.del == MPI_TYPE_NULL_DELETE_FN) return;
  const int code = k.del(type, key, value, k.extra);
  if (code != MPI_SUCCESS)
    fail(call, code, "the delete function of keyval %d returned error %d", key, code);
}

}  // namespace

void copy_type_attributes(const char* call, rank_state& me, MPI_Datatype from, MPI_Datatype to) {
  const auto at = me.type_attributes.find(from);
  if (at == me.type_attributes.end()) return;
  const std::map<int, void*> source = at->second;  // a copy function may set attributes
  for (const auto& [key, value] : source) {
    const keyval_entry k = keyval_of(call, key);
    if (k.copy == MPI_TYPE_NULL_COPY_FN) continue;
    void* out = value;
    int flag = 1;
    if (k.copy != MPI_TYPE_DUP_FN) {
      flag = 0;
      const int code = k.copy(from, key, k.extra, value, &out, &flag);
      if (code != MPI_SUCCESS)
        fail(call, code, "the copy function of keyval %d returned error %d", key, code);
    }
    if (flag) me.type_attributes[to][key] = out;
  }
}

void delete_type_attributes(const char* call, rank_state& me, MPI_Datatype type) {
  const auto at = me.type_attributes.find(type);
  if (at == me.type_attributes.end()) return;
  const std::map<int, void*> attrs = at->second;
  me.type_attributes.erase(type);
  for (const auto& [key, value] : attrs) call_delete(call, type, key, value);
}

}  // namespace weft::mpi

using namespace weft::mpi;

WEFT_MPI_API int MPI_Type_create_keyval(MPI_Type_copy_attr_function* type_copy_attr_fn,
                                        MPI_Type_delete_attr_function* type_delete_attr_fn,
                                        int* type_keyval, void* extra_state) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    if (type_keyval == nullptr) fail("MPI_Type_create_keyval", MPI_ERR_ARG, "type_keyval is null");
    std::lock_guard lock(g_mutex);
    g_keyvals.push_back(keyval_entry{type_copy_attr_fn, type_delete_attr_fn, extra_state});
    *type_keyval = first_type_keyval + int(g_keyvals.size()) - 1;
  });
}

WEFT_MPI_API int MPI_Type_free_keyval(int* type_keyval) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    keyval_of("MPI_Type_free_keyval", *type_keyval);
    // Attributes still set with it keep their functions until deleted.
    *type_keyval = MPI_KEYVAL_INVALID;
  });
}

WEFT_MPI_API int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_set_attr";
    rank_state& me = self(call);
    lookup(call, datatype, false);
    keyval_of(call, type_keyval);
    auto& attrs = me.type_attributes[datatype];
    if (const auto at = attrs.find(type_keyval); at != attrs.end())
      call_delete(call, datatype, type_keyval, at->second);
    me.type_attributes[datatype][type_keyval] = attribute_val;
  });
}

WEFT_MPI_API int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val,
                                   int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_get_attr";
    rank_state& me = self(call);
    lookup(call, datatype, false);
    keyval_of(call, type_keyval);
    *flag = 0;
    const auto at = me.type_attributes.find(datatype);
    if (at == me.type_attributes.end()) return;
    const auto value = at->second.find(type_keyval);
    if (value == at->second.end()) return;
    *static_cast<void**>(attribute_val) = value->second;
    *flag = 1;
  });
}

WEFT_MPI_API int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_delete_attr";
    rank_state& me = self(call);
    lookup(call, datatype, false);
    keyval_of(call, type_keyval);
    auto at = me.type_attributes.find(datatype);
    if (at == me.type_attributes.end() || at->second.count(type_keyval) == 0)
      fail(call, MPI_ERR_KEYVAL, "datatype %d has no attribute of keyval %d", datatype,
           type_keyval);
    void* value = at->second[type_keyval];
    at->second.erase(type_keyval);
    call_delete(call, datatype, type_keyval, value);
  });
}
