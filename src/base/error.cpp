#include "weft/base/error.hpp"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::base {

namespace {
std::atomic<fatal_hook> g_fatal_hook{nullptr};
std::atomic<bool> g_dying{false};
// "node 3: " in a job of several processes, so every line names its process.
char g_origin[32] = "";
// The first fatal error's text, for the hook (the trace's end record).
char g_fatal_text[512] = "";
std::atomic<bool> g_fatal_text_set{false};

void vprint(const char* prefix, const char* fmt, va_list ap) {
  // One write per message so lines from several PEs do not interleave.
  char buf[2048];
  int n = std::snprintf(buf, sizeof buf, "weft: %s%s", g_origin, prefix);
  if (n < 0) n = 0;
  int m = std::vsnprintf(buf + n, sizeof buf - size_t(n) - 1, fmt, ap);
  size_t len = size_t(n) + (m < 0 ? 0 : std::min<size_t>(size_t(m), sizeof buf - size_t(n) - 2));
  buf[len++] = '\n';
  std::fflush(stdout);
  ssize_t w = ::write(STDERR_FILENO, buf, len);
  (void)w;
}

[[noreturn]] void die(int code) {
  // Only the first fatal error runs the hook and exits; a second thread that
  // fails meanwhile waits for the process to go.
  if (g_dying.exchange(true)) {
    for (;;) pause();
  }
  if (fatal_hook h = g_fatal_hook.load()) h();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}
}  // namespace

void usage_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("error: ", fmt, ap);
  va_end(ap);
  std::fflush(stdout);
  std::_Exit(exit_usage);
}

void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (!g_fatal_text_set.exchange(true)) {
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(g_fatal_text, sizeof g_fatal_text, fmt, copy);
    va_end(copy);
  }
  vprint("fatal: ", fmt, ap);
  va_end(ap);
  die(exit_fatal);
}

const char* fatal_message() noexcept {
  return g_fatal_text;
}

void error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("error: ", fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("warning: ", fmt, ap);
  va_end(ap);
}

void info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("", fmt, ap);
  va_end(ap);
}

void set_message_origin(int node) {
  if (node < 0)
    g_origin[0] = '\0';
  else
    std::snprintf(g_origin, sizeof g_origin, "node %d: ", node);
}

void set_fatal_hook(fatal_hook hook) {
  g_fatal_hook.store(hook);
}

const char* errno_text::describe(int err, char* buf, unsigned long size) noexcept {
  return strerror_r(err, buf, size);  // GNU variant: may return a static string instead
}

void fatal_errno(int err, const char* what) {
  const errno_text text(err);
  fatal("%s failed: %s (errno %d)", what, text.c_str(), err);
}

void fatal_sys(int err, const char* call, const char* fmt, ...) {
  char purpose[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(purpose, sizeof purpose, fmt, ap);
  va_end(ap);
  const errno_text text(err);
  fatal("%s failed %s: %s (errno %d)", call, purpose, text.c_str(), err);
}

}  // namespace weft::base
