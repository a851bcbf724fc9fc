// The module side of a transport plugin (plugin.hpp): compiled into
// weft-net-mpi.so with WEFT_HAVE_MPI_TRANSPORT, into weft-net-ucx.so with
// WEFT_HAVE_UCX_TRANSPORT. Exports weft_net_plugin_v1 alone (plugin.map).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "backends.hpp"
#include "plugin.hpp"
#include "weft/base/error.hpp"
#include "weft/config.hpp"

namespace {

// Set once at load, before any transport of the module exists.
const weft::net::plugin::host_services* g_host = nullptr;

[[noreturn]] void host_fatal(const char* text) {
  if (g_host != nullptr && g_host->fatal != nullptr) g_host->fatal(text);
  std::fprintf(stderr, "weft: fatal: %s\n", text);  // no runtime to tell: still loud
  std::_Exit(weft::base::exit_fatal);
}

}  // namespace

// The module's copies of the error functions its sources call: they format
// here and report through the runtime that loaded the module.
namespace weft::base {

namespace {
// printf-style text, cut to what one report line holds.
struct report_text {
  char text[1536];
};
report_text vformat(const char* fmt, va_list ap) {
  report_text t;
  std::vsnprintf(t.text, sizeof t.text, fmt, ap);
  return t;
}
}  // namespace

void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const report_text t = vformat(fmt, ap);
  va_end(ap);
  host_fatal(t.text);
}

const char* errno_text::describe(int err, char* buf, unsigned long size) noexcept {
  return strerror_r(err, buf, size);  // GNU variant
}

void fatal_errno(int err, const char* what) {
  const errno_text text(err);
  fatal("%s failed: %s (errno %d)", what, text.c_str(), err);
}

void fatal_sys(int err, const char* call, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const report_text purpose = vformat(fmt, ap);
  va_end(ap);
  const errno_text text(err);
  fatal("%s failed %s: %s (errno %d)", call, purpose.text, text.c_str(), err);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const report_text t = vformat(fmt, ap);
  va_end(ap);
  if (g_host != nullptr && g_host->warn != nullptr)
    g_host->warn(t.text);
  else
    std::fprintf(stderr, "weft: warning: %s\n", t.text);
}

}  // namespace weft::base

namespace weft::net {
namespace {

#if WEFT_HAVE_MPI_TRANSPORT
transport* make_mpi(bool watch_local_peers) {
  return make_mpi_transport(watch_local_peers).release();
}
#endif
#if WEFT_HAVE_UCX_TRANSPORT
transport* make_ucx(const ucx_options& options) {
  return make_ucx_transport(options).release();
}
#endif

}  // namespace
}  // namespace weft::net

extern "C" __attribute__((visibility("default"))) const weft::net::plugin::module*
weft_net_plugin_v1(const weft::net::plugin::host_services* host) {
  static weft::net::plugin::module m;
  if (host == nullptr || host->abi != weft::net::plugin::abi_version) return nullptr;
  g_host = host;
  m.weft_version = weft::build_info::version;
  m.ucx_options_size = sizeof(weft::net::ucx_options);
#if WEFT_HAVE_MPI_TRANSPORT
  m.make_mpi = weft::net::make_mpi;
#endif
#if WEFT_HAVE_UCX_TRANSPORT
  m.make_ucx = weft::net::make_ucx;
#endif
  return &m;
}
