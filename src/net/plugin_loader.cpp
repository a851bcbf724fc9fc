// The runtime side of the transport plugins (plugin.hpp): the mpi and ucx
// constructors of the shared libraries' weft_net load weft-net-<name>.so
// from weft/ beside the library, the first time a run needs it, and keep it
// for the life of the process (a later weft::run reuses it; Open MPI and UCX
// do not survive being unloaded).
//
// Errors say what to install. A module that is not there means this weft was
// built without that backend's library, or installed without lib/weft/; a
// module that does not load means the backend's own libraries are missing
// (dlopen names the first one). Both end the run with a fatal error (exit 3)
// in every process that asked for the transport.
#include <dlfcn.h>
#include <unistd.h>
#include <cstring>
#include <mutex>
#include <string>
#include "backends.hpp"
#include "plugin.hpp"
#include "weft/base/error.hpp"
#include "weft/config.hpp"

namespace weft::net {
namespace {

struct plugin_need {
  const char* name;      // the transport
  const char* library;   // what its module links
  const char* packages;  // Debian packages that bring it (scripts/install-deps.sh)
};

const plugin_need& need_of(const char* name) {
  static const plugin_need mpi{"mpi", "Open MPI", "openmpi-bin libopenmpi-dev"};
  static const plugin_need ucx{"ucx", "UCX and PMIx", "libucx-dev libpmix-dev"};
  return std::strcmp(name, "mpi") == 0 ? mpi : ucx;
}

[[noreturn]] void host_fatal(const char* text) {
  base::fatal("%s", text);
}
void host_warn(const char* text) {
  base::warn("%s", text);
}

// weft/ in the directory of the shared library this code is in.
std::string plugin_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_directory), &info) == 0 ||
      info.dli_fname == nullptr)
    base::fatal("transport plugins: cannot tell which library weft is in (dladdr failed)");
  std::string lib = info.dli_fname;
  const std::size_t slash = lib.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : lib.substr(0, slash);
  return dir + "/weft";
}

const plugin::module& load(const char* name) {
  static std::mutex mutex;
  static const plugin::module* loaded_mpi = nullptr;
  static const plugin::module* loaded_ucx = nullptr;
  static const plugin::host_services services{plugin::abi_version, host_fatal, host_warn};
  std::lock_guard<std::mutex> lock(mutex);
  const bool is_mpi = std::strcmp(name, "mpi") == 0;
  const plugin::module*& slot = is_mpi ? loaded_mpi : loaded_ucx;
  if (slot != nullptr) return *slot;

  const plugin_need& need = need_of(name);
  const std::string path = plugin_directory() + "/weft-net-" + name + ".so";
  if (::access(path.c_str(), F_OK) != 0)
    base::fatal(
        "the %s transport is a plugin, and %s does not exist: this weft was installed "
        "without it, or built where %s was missing (its Debian packages: %s; "
        "scripts/install-deps.sh installs them). Build and install weft again, or choose "
        "another --weft:transport (this build has: %s)",
        name, path.c_str(), need.library, need.packages, available_transports().c_str());
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    base::fatal(
        "the %s transport needs %s, which did not load (%s): install the Debian packages %s "
        "(scripts/install-deps.sh installs them), or choose another --weft:transport",
        name, need.library, why != nullptr ? why : "dlopen failed", need.packages);
  }
  auto entry = reinterpret_cast<plugin::entry_function>(::dlsym(handle, plugin::entry_name));
  if (entry == nullptr)
    base::fatal("%s is not a weft transport plugin (it has no %s)", path.c_str(),
                plugin::entry_name);
  const plugin::module* m = entry(&services);
  if (m == nullptr || m->abi != plugin::abi_version || m->weft_version == nullptr ||
      std::strcmp(m->weft_version, build_info::version) != 0 ||
      m->ucx_options_size != sizeof(ucx_options))
    base::fatal("%s belongs to another build of weft (%s; this is weft %s): install weft's "
                "libraries and lib/weft/ together",
                path.c_str(), m != nullptr && m->weft_version ? m->weft_version : "unknown",
                build_info::version);
  if ((is_mpi && m->make_mpi == nullptr) || (!is_mpi && m->make_ucx == nullptr))
    base::fatal("%s has no %s transport", path.c_str(), name);
  slot = m;
  return *m;
}

}  // namespace

#if WEFT_HAVE_MPI_TRANSPORT
std::unique_ptr<transport> make_mpi_transport(bool watch_local_peers) {
  return std::unique_ptr<transport>(load("mpi").make_mpi(watch_local_peers));
}
#endif

#if WEFT_HAVE_UCX_TRANSPORT
std::unique_ptr<transport> make_ucx_transport(const ucx_options& options) {
  return std::unique_ptr<transport>(load("ucx").make_ucx(options));
}

std::unique_ptr<transport> make_ucx_transport() {
  return make_ucx_transport(ucx_options{});
}
#endif

}  // namespace weft::net
