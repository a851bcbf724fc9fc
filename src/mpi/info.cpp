// MPI_Info objects (MPI 3.1, 9): sets of (key, value) strings a program
// hands to calls as hints, and MPI_Comm_set_info / MPI_Comm_get_info.
//
// The objects are a table of the process, behind a mutex, that the ranks
// of a process share as they share the datatype table; each object is
// its rank's own, as an MPI process's handles are its own: another
// rank's handle -- say one this rank freed and another then got back --
// is refused as not an info object.
// Keys keep the order they were first set in, which MPI_Info_get_nthkey
// numbers.
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;

namespace {

using entries = std::vector<std::pair<std::string, std::string>>;

struct info_object {
  entries kv;
  int owner = -1;  // the world rank that made it (-1: off a rank)
  bool live = false;
};

int caller() {
  const rank_state* me = current_rank();
  return me != nullptr ? me->rank : -1;
}

std::mutex g_mutex;
// Objects by handle - 2 (MPI_INFO_ENV is 1, made when first named).
std::vector<info_object> g_infos;
std::vector<int> g_unused;
info_object g_env;
bool g_env_made = false;

// MPI_INFO_ENV: how the process was started (MPI 3.1, 9.4), from what
// weft knows -- the command and its arguments as the rank got them, and
// the job's ranks; the keys it cannot know (host, wdir, ...) are absent,
// as the standard allows.
void make_env(const rank_state* me) {
  if (g_env_made) return;
  g_env_made = true;
  g_env.live = true;
  if (me != nullptr && !me->args.empty()) {
    g_env.kv.emplace_back("command", me->args[0]);
    std::string argv;
    for (std::size_t i = 1; i < me->args.size(); ++i) {
      if (i > 1) argv += ' ';
      argv += me->args[i];
    }
    g_env.kv.emplace_back("argv", argv);
  }
  g_env.kv.emplace_back("maxprocs", std::to_string(world().size));
  g_env.kv.emplace_back("thread_level", "MPI_THREAD_FUNNELED");
}

// The object of `info` (the mutex held); MPI_ERR_INFO naming `call` for
// MPI_INFO_NULL, a freed or unknown handle. MPI_INFO_ENV is refused where
// the program would change it (`changes`).
info_object& object(const char* call, MPI_Info info, bool changes = false) {
  if (info == MPI_INFO_ENV) {
    if (changes)
      fail(call, MPI_ERR_INFO,
           "MPI_INFO_ENV is predefined and read-only (MPI_Info_dup it to change a copy)");
    make_env(current_rank());
    return g_env;
  }
  if (info < 2 || std::size_t(info - 2) >= g_infos.size() || !g_infos[std::size_t(info - 2)].live ||
      g_infos[std::size_t(info - 2)].owner != caller())
    fail(call, MPI_ERR_INFO,
         "%d is not an info object of this rank (MPI_INFO_NULL, freed, or never made by "
         "MPI_Info_create or MPI_Info_dup)",
         info);
  return g_infos[std::size_t(info - 2)];
}

MPI_Info add(entries kv) {
  int handle;
  if (!g_unused.empty()) {
    handle = g_unused.back();
    g_unused.pop_back();
  } else {
    g_infos.emplace_back();
    handle = int(g_infos.size()) + 1;
  }
  info_object& o = g_infos[std::size_t(handle - 2)];
  o.kv = std::move(kv);
  o.owner = caller();
  o.live = true;
  return handle;
}

// A key's length is checked before any lookup: an empty or overlong key
// is an error even where no such key could be present.
std::string checked_key(const char* call, const char* key) {
  if (key == nullptr) fail(call, MPI_ERR_INFO_KEY, "the key is a null pointer");
  const std::size_t n = std::strlen(key);
  if (n == 0 || n > MPI_MAX_INFO_KEY)
    fail(call, MPI_ERR_INFO_KEY, "the key is %zu characters long; keys have 1 to %d", n,
         MPI_MAX_INFO_KEY);
  return std::string(key, n);
}

entries::iterator find(entries& kv, const std::string& key) {
  for (auto it = kv.begin(); it != kv.end(); ++it)
    if (it->first == key) return it;
  return kv.end();
}

void check_arg(const char* call, const void* p, const char* what) {
  if (p == nullptr) fail(call, MPI_ERR_ARG, "%s is a null pointer", what);
}

// At most `room` characters of `value`, then a terminating NUL.
void copy_out(const std::string& value, std::size_t room, char* out) {
  const std::size_t n = value.size() < room ? value.size() : room;
  std::memcpy(out, value.data(), n);
  out[n] = '\0';
}

}  // namespace

WEFT_MPI_API int MPI_Info_create(MPI_Info* info) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Info_create", info, "info");
    std::lock_guard lock(g_mutex);
    *info = add({});
  });
}

WEFT_MPI_API int MPI_Info_set(MPI_Info info, const char* key, const char* value) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Info_set";
    const std::string k = checked_key(call, key);
    if (value == nullptr) fail(call, MPI_ERR_INFO_VALUE, "the value is a null pointer");
    const std::size_t n = std::strlen(value);
    if (n > MPI_MAX_INFO_VAL)
      fail(call, MPI_ERR_INFO_VALUE,
           "the value of key \"%s\" is %zu characters long; values have at most %d", k.c_str(), n,
           MPI_MAX_INFO_VAL);
    std::lock_guard lock(g_mutex);
    entries& kv = object(call, info, true).kv;
    const auto at = find(kv, k);
    if (at != kv.end())
      at->second.assign(value, n);
    else
      kv.emplace_back(k, std::string(value, n));
  });
}

WEFT_MPI_API int MPI_Info_delete(MPI_Info info, const char* key) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Info_delete";
    const std::string k = checked_key(call, key);
    std::lock_guard lock(g_mutex);
    entries& kv = object(call, info, true).kv;
    const auto at = find(kv, k);
    if (at == kv.end())
      fail(call, MPI_ERR_INFO_NOKEY, "info %d has no key \"%s\"", info, k.c_str());
    kv.erase(at);
  });
}

WEFT_MPI_API int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value,
                              int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Info_get";
    const std::string k = checked_key(call, key);
    check_arg(call, flag, "flag");
    if (valuelen < 0) fail(call, MPI_ERR_ARG, "valuelen %d is negative", valuelen);
    std::lock_guard lock(g_mutex);
    entries& kv = object(call, info).kv;
    const auto at = find(kv, k);
    *flag = at != kv.end();
    if (!*flag) return;
    check_arg(call, value, "value");
    // valuelen excludes the NUL the standard has C programs leave room for.
    copy_out(at->second, std::size_t(valuelen), value);
  });
}

WEFT_MPI_API int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Info_get_valuelen";
    const std::string k = checked_key(call, key);
    check_arg(call, flag, "flag");
    check_arg(call, valuelen, "valuelen");
    std::lock_guard lock(g_mutex);
    entries& kv = object(call, info).kv;
    const auto at = find(kv, k);
    *flag = at != kv.end();
    if (*flag) *valuelen = int(at->second.size());
  });
}

// MPI 4.0's form: *buflen in is the buffer's size, NUL included; out, the
// size the whole value needs.
WEFT_MPI_API int MPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value,
                                     int* flag) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Info_get_string";
    const std::string k = checked_key(call, key);
    check_arg(call, flag, "flag");
    check_arg(call, buflen, "buflen");
    if (*buflen < 0) fail(call, MPI_ERR_ARG, "buflen %d is negative", *buflen);
    std::lock_guard lock(g_mutex);
    entries& kv = object(call, info).kv;
    const auto at = find(kv, k);
    *flag = at != kv.end();
    if (!*flag) return;
    if (*buflen > 0) {
      check_arg(call, value, "value");
      copy_out(at->second, std::size_t(*buflen - 1), value);
    }
    *buflen = int(at->second.size()) + 1;
  });
}

WEFT_MPI_API int MPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Info_get_nkeys", nkeys, "nkeys");
    std::lock_guard lock(g_mutex);
    *nkeys = int(object("MPI_Info_get_nkeys", info).kv.size());
  });
}

WEFT_MPI_API int MPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Info_get_nthkey";
    check_arg(call, key, "key");
    std::lock_guard lock(g_mutex);
    const entries& kv = object(call, info).kv;
    if (n < 0 || std::size_t(n) >= kv.size())
      fail(call, MPI_ERR_ARG, "key number %d is not one of info %d's (0..%d)", n, info,
           int(kv.size()) - 1);
    copy_out(kv[std::size_t(n)].first, MPI_MAX_INFO_KEY, key);
  });
}

WEFT_MPI_API int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Info_dup", newinfo, "newinfo");
    std::lock_guard lock(g_mutex);
    // A copy first: add() may grow the table under the reference.
    entries kv = object("MPI_Info_dup", info).kv;
    *newinfo = add(std::move(kv));
  });
}

WEFT_MPI_API int MPI_Info_free(MPI_Info* info) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Info_free", info, "info");
    std::lock_guard lock(g_mutex);
    info_object& o = object("MPI_Info_free", *info, true);
    o.kv.clear();
    o.live = false;
    g_unused.push_back(*info);
    *info = MPI_INFO_NULL;
  });
}

// The hints are kept as given (weft acts on none of them) and handed back
// by MPI_Comm_get_info, as the standard allows an implementation to
// return the hints it was given.
WEFT_MPI_API int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_set_info";
    comm_view& v = view(call, self(call), comm);
    entries kv;
    {
      std::lock_guard lock(g_mutex);
      kv = object(call, info).kv;
    }
    for (auto& [key, value] : kv) {
      bool replaced = false;
      for (auto& h : v.hints)
        if (h.first == key) {
          h.second = value;
          replaced = true;
        }
      if (!replaced) v.hints.emplace_back(key, value);
    }
  });
}

WEFT_MPI_API int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_get_info";
    check_arg(call, info_used, "info_used");
    const comm_view& v = view(call, self(call), comm);
    std::lock_guard lock(g_mutex);
    *info_used = add(v.hints);
  });
}

// A dup whose hints are `info`'s, not the parent's (MPI_INFO_NULL: none).
WEFT_MPI_API int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_dup_with_info";
    rank_state& me = self(call);
    check_arg(call, newcomm, "newcomm");
    entries kv;
    if (info != MPI_INFO_NULL) {
      std::lock_guard lock(g_mutex);
      kv = object(call, info).kv;
    }
    const int code = MPI_Comm_dup(comm, newcomm);
    if (code != MPI_SUCCESS) fail(call, code, "the dup failed (error class %d)", code);
    view(call, me, *newcomm).hints = std::move(kv);
  });
}
