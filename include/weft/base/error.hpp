// Errors. Two kinds, both loud and both final for the whole job:
//  - usage errors (bad option, bad value): one line naming the option and what
//    is accepted, exit code 2;
//  - fatal errors (a failed system call, a program error such as an
//    unregistered handler): "weft: fatal: ..." and exit code 3.
// (A job that is quiescent without weft::exit is a third, milder end:
// "weft: error: ..." and exit code 4, through the job's normal exit.)
// Checks stay on in release builds: a failed call is never an assert
// compiled away.
#pragma once
#include <cerrno>
#include "weft/base/export.hpp"

namespace weft::base {

inline constexpr int exit_usage = 2;      // bad option or value
inline constexpr int exit_fatal = 3;      // runtime or program error
inline constexpr int exit_quiescent = 4;  // the job went quiescent without weft::exit
inline constexpr int exit_timeout = 124;  // --weft:timeout expired (as GNU timeout)

// Prints "weft: error: <msg>" and exits with exit_usage. Any thread.
[[noreturn]] WEFT_API void usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "weft: fatal: <msg>" and ends the whole job with exit_fatal. Any thread.
[[noreturn]] WEFT_API void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "weft: error: <msg>" and returns: for an error that ends the job
// by the caller's own path (the job-wide exit). Any thread.
WEFT_API void error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "weft: warning: <msg>". Any thread.
WEFT_API void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "weft: <msg>" unless quiet. Any thread.
WEFT_API void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A hook run (once) before a fatal exit, e.g. to dump PE state. Set by core.
using fatal_hook = void (*)();
WEFT_API void set_fatal_hook(fatal_hook hook);
// The text of the fatal error being reported (without "weft: fatal: "), for
// the hook; empty before any. A static buffer: valid until the process ends.
WEFT_API const char* fatal_message() noexcept;

// In a job of several processes, every message starts with "node N: "
// (N < 0: no prefix, a one-process run). Main thread, before other weft
// threads run.
WEFT_API void set_message_origin(int node);

// The checked helper every failed system call goes through. Both name the
// call and the errno, in one shape: "<call> failed: <strerror> (errno N)",
// with fatal_sys adding what the call was for ("mmap failed for the shm
// segment /weft-1-0 of 4096 bytes: ..."): the values a user needs to tell
// which of many such calls it was.
//
// fatal() for a failed call whose `what` is the call itself ("eventfd()").
[[noreturn]] WEFT_API void fatal_errno(int err, const char* what);
// fatal() for a failed call `call`; `fmt` says what it was for.
[[noreturn]] WEFT_API void fatal_sys(int err, const char* call, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// strerror's text for `err`, safe in any thread: for a failed call the caller
// reports without ending the job (a hardware counter refused, a trace file
// that cannot be written). Lives as long as the object.
class errno_text {
 public:
  explicit errno_text(int err) noexcept : err_(err), text_(describe(err, buf_, sizeof buf_)) {}
  errno_text(const errno_text&) = delete;
  errno_text& operator=(const errno_text&) = delete;
  const char* c_str() const noexcept { return text_; }
  int code() const noexcept { return err_; }

 private:
  WEFT_API static const char* describe(int err, char* buf, unsigned long size) noexcept;
  int err_;
  char buf_[128];
  const char* text_;
};

}  // namespace weft::base

// Checks a system call that returns -1 and sets errno on failure.
#define WEFT_CHECK_SYS(call)                                   \
  do {                                                         \
    if ((call) == -1) ::weft::base::fatal_errno(errno, #call); \
  } while (0)

// Checks a pthread-style call that returns an error number.
#define WEFT_CHECK_RC(call)                                                               \
  do {                                                                                    \
    if (int weft_rc_ = (call); weft_rc_ != 0) ::weft::base::fatal_errno(weft_rc_, #call); \
  } while (0)
