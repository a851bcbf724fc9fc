// Attributes (keyvals, the predefined attributes of MPI_COMM_WORLD) and
// error handlers (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN and the
// program's), and the handling of an error an entry point raised.
//
// Keyvals and error handlers are tables of the process, shared by its
// ranks (a keyval made by one rank is a number every rank may use, as the
// standard has every process make the same ones in the same order); the
// values of attributes are each rank's own (comm_view::attributes).
#include <cstdint>
#include <cstdio>
#include <mutex>
#include "mpi/mpi_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/core/pe.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

struct keyval {
  MPI_Comm_copy_attr_function* copy = MPI_COMM_NULL_COPY_FN;
  MPI_Comm_delete_attr_function* del = MPI_COMM_NULL_DELETE_FN;
  void* extra = nullptr;
  bool live = false;
};

// Keyvals from first_keyval on (the predefined attributes are below it).
constexpr int first_keyval = 100;
std::mutex g_mutex;
std::vector<keyval> g_keyvals;
std::vector<MPI_Comm_errhandler_function*> g_errhandlers;  // handle - 3

keyval keyval_of(const char* call, int key) {
  std::lock_guard lock(g_mutex);
  if (key < first_keyval || std::size_t(key - first_keyval) >= g_keyvals.size() ||
      !g_keyvals[std::size_t(key - first_keyval)].live)
    fail(call, MPI_ERR_KEYVAL, "%d is not a keyval of MPI_Comm_create_keyval (or it was freed)",
         key);
  return g_keyvals[std::size_t(key - first_keyval)];
}

// The predefined attributes' values (MPI_Comm_get_attr hands out their
// addresses).
int g_tag_ub = MPI_TAG_UB_VALUE, g_host = MPI_PROC_NULL, g_io = MPI_ANY_SOURCE,
    g_wtime_is_global = 0, g_universe_size = 0, g_appnum = 0;

void* predefined(int key) {
  switch (key) {
    case MPI_TAG_UB:
      return &g_tag_ub;
    case MPI_HOST:
      return &g_host;
    case MPI_IO:
      return &g_io;
    case MPI_WTIME_IS_GLOBAL:
      return &g_wtime_is_global;
    case MPI_UNIVERSE_SIZE:
      return &g_universe_size;
    case MPI_APPNUM:
      return &g_appnum;
    case MPI_LASTUSEDCODE:
      return last_used_code();
    default:
      return nullptr;
  }
}

void call_delete(const char* call, MPI_Comm comm, int key, void* value) {
  const keyval k = keyval_of(call, key);
  if (k.del == MPI_COMM_NULL_DELETE_FN) return;
  const int code = k.del(comm, key, value, k.extra);
  if (code != MPI_SUCCESS)
    fail(call, code, "the delete function of keyval %d returned error %d", key, code);
}

MPI_Errhandler errhandler_of(MPI_Comm comm) {
  rank_state* me = current_rank();
  if (me == nullptr) return MPI_ERRORS_ARE_FATAL;
  // An error about the communicator itself goes to MPI_COMM_WORLD's.
  if (comm < 1 || std::size_t(comm) > me->comms.size() ||
      me->comms[std::size_t(comm - 1)].core == nullptr)
    comm = MPI_COMM_WORLD;
  if (std::size_t(comm) > me->comms.size()) return MPI_ERRORS_ARE_FATAL;
  return me->comms[std::size_t(comm - 1)].errhandler;
}

}  // namespace

void set_predefined_attributes(int world_size) {
  g_universe_size = world_size;
}

void copy_attributes(const char* call, rank_state& me, MPI_Comm from, MPI_Comm to) {
  // A copy of the map: a copy function may itself set attributes.
  const std::map<int, void*> source = me.comms[std::size_t(from - 1)].attributes;
  for (const auto& [key, value] : source) {
    const keyval k = keyval_of(call, key);
    if (k.copy == MPI_COMM_NULL_COPY_FN) continue;
    void* out = value;
    int flag = 1;
    if (k.copy != MPI_COMM_DUP_FN) {
      flag = 0;
      const int code = k.copy(from, key, k.extra, value, &out, &flag);
      if (code != MPI_SUCCESS)
        fail(call, code, "the copy function of keyval %d returned error %d", key, code);
    }
    if (flag) me.comms[std::size_t(to - 1)].attributes[key] = out;
  }
}

void delete_attributes(const char* call, rank_state& me, MPI_Comm comm) {
  const std::map<int, void*> attrs = me.comms[std::size_t(comm - 1)].attributes;
  for (const auto& [key, value] : attrs) call_delete(call, comm, key, value);
  me.comms[std::size_t(comm - 1)].attributes.clear();
}

int handle_error(MPI_Comm comm, const raised& e) {
  const rank_state* me = current_rank();
  const MPI_Errhandler h = errhandler_of(comm);
  if (h == MPI_ERRORS_RETURN) return e.error_class;
  if (h >= 3) {
    MPI_Comm_errhandler_function* fn;
    {
      std::lock_guard lock(g_mutex);
      fn = g_errhandlers[std::size_t(h - 3)];
    }
    int code = e.error_class;
    MPI_Comm c = comm;
    fn(&c, &code);
    return code;
  }
  base::fatal("%s on rank %d: %s (error class %d; MPI_ERRORS_ARE_FATAL)", e.call,
              me != nullptr ? me->rank : -1, e.what, e.error_class);
}

}  // namespace weft::mpi

using namespace weft::mpi;

WEFT_MPI_API int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                                        MPI_Comm_delete_attr_function* comm_delete_attr_fn,
                                        int* comm_keyval, void* extra_state) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Comm_create_keyval");
    std::lock_guard lock(g_mutex);
    g_keyvals.push_back(keyval{comm_copy_attr_fn, comm_delete_attr_fn, extra_state, true});
    *comm_keyval = first_keyval + int(g_keyvals.size()) - 1;
  });
}

WEFT_MPI_API int MPI_Comm_free_keyval(int* comm_keyval) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Comm_free_keyval");
    keyval_of("MPI_Comm_free_keyval", *comm_keyval);
    // Attributes still set with it keep their copy and delete functions
    // until deleted (the standard's rule), so it stays in the table, a
    // few words, and only the program's handle goes.
    *comm_keyval = MPI_KEYVAL_INVALID;
  });
}

WEFT_MPI_API int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_set_attr";
    rank_state& me = self(call);
    view(call, me, comm);
    if (comm_keyval < first_keyval)
      fail(call, MPI_ERR_KEYVAL, "keyval %d is predefined: its attribute cannot be set",
           comm_keyval);
    keyval_of(call, comm_keyval);
    auto& attrs = view(call, me, comm).attributes;
    const auto at = attrs.find(comm_keyval);
    if (at != attrs.end()) call_delete(call, comm, comm_keyval, at->second);
    view(call, me, comm).attributes[comm_keyval] = attribute_val;
  });
}

WEFT_MPI_API int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_get_attr";
    rank_state& me = self(call);
    const comm_view& v = view(call, me, comm);
    *flag = 0;
    if (comm_keyval < first_keyval) {
      void* value = predefined(comm_keyval);
      if (value == nullptr)
        fail(call, MPI_ERR_KEYVAL, "keyval %d is neither predefined nor made", comm_keyval);
      if (comm == MPI_COMM_WORLD) {
        *static_cast<void**>(attribute_val) = value;
        *flag = 1;
      }
      return;
    }
    keyval_of(call, comm_keyval);
    const auto at = v.attributes.find(comm_keyval);
    if (at == v.attributes.end()) return;
    *static_cast<void**>(attribute_val) = at->second;
    *flag = 1;
  });
}

WEFT_MPI_API int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_delete_attr";
    rank_state& me = self(call);
    auto& attrs = view(call, me, comm).attributes;
    const auto at = attrs.find(comm_keyval);
    if (at == attrs.end())
      fail(call, MPI_ERR_KEYVAL, "keyval %d has no attribute on this communicator", comm_keyval);
    void* value = at->second;
    call_delete(call, comm, comm_keyval, value);
    view(call, me, comm).attributes.erase(comm_keyval);
  });
}

WEFT_MPI_API int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* comm_errhandler_fn,
                                            MPI_Errhandler* errhandler) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    self("MPI_Comm_create_errhandler");
    if (comm_errhandler_fn == nullptr)
      fail("MPI_Comm_create_errhandler", MPI_ERR_ARG, "the function is null");
    std::lock_guard lock(g_mutex);
    g_errhandlers.push_back(comm_errhandler_fn);
    *errhandler = MPI_Errhandler(g_errhandlers.size() + 2);
  });
}

namespace {

void check_errhandler(const char* call, MPI_Errhandler h) {
  std::lock_guard lock(g_mutex);
  if (h != MPI_ERRORS_ARE_FATAL && h != MPI_ERRORS_RETURN &&
      (h < 3 || std::size_t(h - 3) >= g_errhandlers.size()))
    fail(call, MPI_ERR_ARG,
         "%d is not an error handler (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN, or one of "
         "MPI_Comm_create_errhandler)",
         h);
}

}  // namespace

WEFT_MPI_API int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_set_errhandler";
    comm_view& v = view(call, self(call), comm);
    check_errhandler(call, errhandler);
    v.errhandler = errhandler;
  });
}

WEFT_MPI_API int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_get_errhandler";
    *errhandler = view(call, self(call), comm).errhandler;
  });
}

WEFT_MPI_API int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_call_errhandler";
    view(call, self(call), comm);
    raised e{call, errorcode, {}};
    std::snprintf(e.what, sizeof e.what, "the program raised error code %d", errorcode);
    handle_error(comm, e);
  });
}

WEFT_MPI_API int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_errhandler("MPI_Errhandler_free", *errhandler);
    // Communicators that use it keep it (the standard's rule): the table
    // keeps every handler the process made, a few words each.
    *errhandler = MPI_ERRHANDLER_NULL;
  });
}
