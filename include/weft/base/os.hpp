// The operating-system primitives of the runtime, each once, with its
// preconditions and its error convention: futex sleep and wake-up, the
// liveness of another process, names safe in a file name, shared memory
// segments, and reading another process's memory. A failed call that the
// runtime cannot go on from is fatal and names the call, the errno and what
// it was for (the `what` argument); the outcomes a caller must handle (a
// futex wait that returns early, a process that is gone, a segment name that
// exists or does not yet) are results, which the caller reports through
// base::fatal_sys when they end the job.
// (The asymmetric fences built on membarrier: weft/base/fence.hpp.)
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
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

// ------------------------------------------------- shared memory segments
//
// A segment is a POSIX shared memory object (a file in /dev/shm) that other
// processes of this user open by its name, and the mappings of it. A name is
// '/' and then at most NAME_MAX - 1 characters, none of them '/' (build it
// with file_name_safe). The calls that may fail for a reason the caller must
// handle (the name exists, or does not yet; /dev/shm is full) return the
// failure, and leave nothing behind: no name they made, no mapping.

// A failed system call: its name ("shm_open", "ftruncate", ...) and errno.
// err == 0: nothing failed.
struct sys_failure {
  const char* call = nullptr;
  int err = 0;
  explicit operator bool() const noexcept { return err != 0; }
};

// A mapping: its first byte and its length.
struct mapping {
  void* addr = nullptr;
  std::size_t bytes = 0;
};

// Creates the segment `name` (exclusively: EEXIST from shm_open when the name
// exists), readable and writable by this user only, `bytes` long (> 0) with
// every page reserved now -- a tmpfs that runs out later would end the
// process with SIGBUS at the first write to a page it cannot back (ENOSPC
// from posix_fallocate instead; a file system without fallocate is taken as
// it is) -- and maps all of it read-write, shared. On success `out` is the
// mapping and the name exists until unlink_shared_segment.
WEFT_API sys_failure create_shared_segment(const char* name, std::size_t bytes,
                                           mapping& out) noexcept;

// Maps the existing segment `name`, shared, read-write (read-only with
// `writable` false): its first `bytes` bytes, or all of it with `bytes` 0.
// A segment shorter than `min_bytes` (at least `bytes`: its creator has not
// sized it yet) is not mapped: success, with out.addr null. ENOENT from
// shm_open: no such name (not yet, or no longer).
WEFT_API sys_failure map_shared_segment(const char* name, std::size_t min_bytes, std::size_t bytes,
                                        bool writable, mapping& out) noexcept;

// Removes the name `name`; the mappings stay valid until unmapped. Returns 0
// or the errno (ENOENT: no such name). Async-signal-safe: the abort paths
// call it.
WEFT_API int unlink_shared_segment(const char* name) noexcept;

// Unmaps `m` (a mapping of either call above). A failure (EINVAL: not a
// mapping) is fatal, naming `what`.
WEFT_API void unmap(const mapping& m, const char* what);

// Enters the pages of [addr, addr + bytes) of a writable shared mapping into
// this process's page tables now, without changing what they hold
// (MADV_POPULATE_WRITE): a fresh mapping starts empty, and every first touch
// of a page would take a page fault. Best effort: a kernel older than 5.14
// lacks it, and the pages then fault in as they are touched.
WEFT_API void prefault(void* addr, std::size_t bytes) noexcept;

// Bytes that an unprivileged user may still allocate in /dev/shm; empty when
// it cannot be told (no /dev/shm: the segments then fail by name).
WEFT_API std::optional<std::uint64_t> shared_memory_free_bytes() noexcept;

// ------------------------------------------------ another process's memory

// Lets any process of this user read this process's memory
// (read_process_memory) under Yama's ptrace_scope=1, where only an ancestor
// may otherwise, and a job's processes are siblings. Best effort: without
// Yama the call fails, harmlessly.
WEFT_API void allow_memory_reads_by_any_process() noexcept;

// Copies `bytes` (> 0) bytes at address `remote` of process `pid` to `local`
// (process_vm_readv: one copy, nothing to do on the other side). Returns the
// bytes copied (fewer than `bytes` when the range reaches an unmapped page),
// or minus the errno: -ESRCH the process is gone, -EPERM not permitted (the
// ptrace rules: same user, Yama, containers, seccomp), -EFAULT an address not
// mapped, -EINTR a signal (try again).
WEFT_API std::ptrdiff_t read_process_memory(pid_t pid, void* local, std::uint64_t remote,
                                            std::size_t bytes) noexcept;

// --------------------------------------------------------------- membarrier

// Whose threads an expedited membarrier(2) reaches: those of this process
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED, Linux 4.14), or those of every process
// registered for it (MEMBARRIER_CMD_GLOBAL_EXPEDITED, Linux 4.16).
enum class membarrier_scope { this_process, registered_processes };

// Registers this process for the expedited membarrier of `scope`. Returns ""
// once registered, else why not, as a sentence: the system call is missing
// (kernel, or a seccomp filter), the kernel lacks the command (naming the
// Linux version that has it), or the registration was refused.
WEFT_API const char* membarrier_register(membarrier_scope scope) noexcept;

// A full memory barrier in every running thread that `scope` reaches (not
// necessarily the caller's: surround it with fences). Precondition:
// membarrier_register(scope) succeeded, so that it cannot fail with EPERM. A
// signal is retried; any other failure would leave a thread's stores unseen
// and is fatal, naming `what`.
WEFT_API void membarrier(membarrier_scope scope, const char* what);

}  // namespace weft::base::os
