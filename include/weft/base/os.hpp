// The operating-system primitives more than one layer uses, each once, with
// its preconditions and its error convention: futex sleep and wake-up, the
// liveness of another process, and names safe in a file name. A failed call
// that the runtime cannot go on from is fatal and names the call, the errno
// and what it was for (the `what` argument); the outcomes a caller must
// handle (a futex wait that returns early, a process that is gone) are
// results.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include "weft/base/export.hpp"

namespace weft::base::os {

// Who may wait on and wake a futex word: threads of this process only (the
// PEs' sleep words: the kernel skips the shared-mapping lookup), or any
// process that maps the word (the shm transport's doorbells).
enum class futex_scope { this_process, shared };

// Sleeps while `word` holds `expected`, for at most `timeout_ns` (0: no
// limit). Returns on a wake-up, a signal, the timeout or a word that no
// longer holds `expected` (spurious returns too): the caller checks the
// word again. Any other failure is fatal, naming `what`.
WEFT_API void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                         std::uint64_t timeout_ns, futex_scope scope, const char* what);
WEFT_API void futex_wait(std::atomic<int>& word, int expected, std::uint64_t timeout_ns,
                         futex_scope scope, const char* what);
// Wakes up to `count` threads asleep on `word` (returns how many woke). A
// failure is fatal, naming `what`.
WEFT_API int futex_wake(std::atomic<std::uint32_t>& word, int count, futex_scope scope,
                        const char* what);
WEFT_API int futex_wake(std::atomic<int>& word, int count, futex_scope scope, const char* what);

// Whether process `pid` exists (a process of another user counts: kill()
// answers EPERM for it). A pid of 0 or less is no process.
WEFT_API bool process_alive(pid_t pid) noexcept;

// `s` with every character but letters, digits, '.', '_' and '-' replaced by
// '_': a file name's field that '/', '@' and spaces can neither end nor
// split.
WEFT_API std::string file_name_safe(std::string_view s);

}  // namespace weft::base::os
