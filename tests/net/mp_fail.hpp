// The failure path of the transport-level test programs (mp_transport,
// mp_ucx, mp_composite), which drive a transport without a weft node: the
// message goes to stderr in one write (several processes share it), and
// the whole job ends through the transport, so that no other process is
// left waiting for this one.
#pragma once
#include <unistd.h>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "weft/net/transport.hpp"

namespace mp_test {

// `live`: the transport to abort through (null before init or after
// finalize).
[[noreturn]] inline void fail_job(const char* program, int node, weft::net::transport* live,
                                  const char* fmt, va_list ap) {
  char what[1024];
  std::vsnprintf(what, sizeof what, fmt, ap);
  char line[1200];
  const int n = std::snprintf(line, sizeof line, "%s: FAIL (node %d): %s\n", program, node, what);
  const ssize_t w = ::write(STDERR_FILENO, line, std::size_t(n > 0 ? n : 0));
  (void)w;
  if (live != nullptr) live->abort(1, (std::string(program) + " failed (see above)").c_str());
  std::_Exit(1);
}

}  // namespace mp_test
