// Private to weft_net: the contract between the runtime and a transport
// plugin, weft-net-<name>.so (name: mpi, ucx).
//
// Why plugins. libweft-omp.so stands in for libgomp in plain OpenMP programs,
// and libweft.so is linked by programs that may never leave one host: neither
// should load Open MPI, UCX and PMIx (and their own plugins and threads) into
// every process. So in the shared libraries the mpi and ucx backends live in
// modules of their own, dlopen()ed the first time a run asks for that
// transport, as Open MPI and UCX load their components. The static weft_net
// links them directly: a static program is self-contained and has no library
// directory to look in (docs/install.md).
//
// Where. A plugin lies in weft/ beside the shared library that loads it:
// <prefix>/lib/weft/ when installed, <build>/lib/weft/ in the build tree
// (the shared libraries are written to <build>/lib).
//
// Lifecycle. plugin_loader.cpp dlopen()s the module (RTLD_NOW, so a missing
// library is seen at once and named), calls its one exported function,
// weft_net_plugin_v1, with the runtime's services, checks that the module
// was built from the same weft (version and ABI number), and keeps it loaded
// for the life of the process. The module's make_* functions then return
// transports that behave exactly as the linked-in backends; core deletes
// them through the virtual destructor, which runs the module's code.
//
// What a module holds: its backend's sources, peer_watch.cpp and the
// transport interface's defaults (transport.cpp), each a private copy. It
// does not link weft_base: its weft::base::fatal / fatal_errno / warn format
// the message and hand it to the runtime's (host_services), so that a fatal
// error in a transport ends the job as any other (message prefix, fatal
// hook, one exit).
#pragma once
#include <cstddef>
#include "ucx/ucx.hpp"
#include "weft/net/transport.hpp"

namespace weft::net::plugin {

// Bumped whenever host_services, module or what they pass changes.
inline constexpr unsigned abi_version = 1;

// The runtime's side, given to the module at load. Any thread.
struct host_services {
  unsigned abi = abi_version;
  // base::fatal("%s", text): never returns.
  void (*fatal)(const char* text) = nullptr;
  // base::warn("%s", text).
  void (*warn)(const char* text) = nullptr;
};

// The module's side. Its make function for another backend is null.
struct module {
  unsigned abi = abi_version;
  const char* weft_version = nullptr;    // weft::build_info::version it was built from
  std::size_t ucx_options_size = 0;      // sizeof(ucx_options) it was built with
  transport* (*make_mpi)(bool watch_local_peers) = nullptr;
  transport* (*make_ucx)(const ucx_options& options) = nullptr;
};

// The one symbol a module exports.
inline constexpr const char* entry_name = "weft_net_plugin_v1";
using entry_function = const module* (*)(const host_services* host);

}  // namespace weft::net::plugin
