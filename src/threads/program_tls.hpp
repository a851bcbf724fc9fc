// The program's own thread-local storage made private to a fiber: each MPI
// rank sees its own copy of the executable's `thread_local` and `__thread`
// variables although the ranks of a PE run on its one OS thread (issue:
// AMPI's tlsglobals; include/weft/threads/fiber.hpp, give_private_tls).
//
// How. The executable's variables lie in its static TLS block, at a fixed
// offset from each thread's thread pointer (the same offset in every
// thread: module 1 of the ELF TLS model). The block holds one owner's
// contents at a time: the thread's own, or a fiber's. A fiber with a
// private copy is installed as it is switched in, unless it owns the block
// already: the owner's contents are saved to its copy and the fiber's
// loaded (fiber.cpp). Nothing happens as it is switched out, so a PE that
// runs one rank copies nothing after the first switch, and ranks that
// alternate on a PE cost one save and one load per switch between them;
// between ranks, the PE's scheduler sees the contents of the rank that ran
// last (it runs none of the program's code there). A fiber that ends gives
// the thread its own contents back. The program's code keeps its addresses
// and its local-exec accesses, and nothing else of the thread moves.
//
// Why a copy of the executable's block and not a thread pointer per fiber
// (wrfsbase / arch_prctl): the thread pointer also reaches glibc's struct
// pthread, the runtime's own per-PE variables, the sanitizers' state and
// every shared library's TLS, all of which must stay the OS thread's
// (ult.hpp says more). The shared libraries' variables (the runtime's,
// libc's errno -- the fiber saves errno itself) are per OS thread.
//
// Cost: the block's size twice per switch between two fibers with copies;
// a program without thread-locals pays nothing.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace weft::threads::detail {

// One fiber's copy of the block, and the destructors of the C++
// thread_local objects it built (they run when the fiber ends, on its copy).
struct program_tls {
  unsigned char* bytes = nullptr;  // program_tls_bytes() of them
  std::vector<std::pair<void (*)(void*), void*>> destructors;
};

// The size of the executable's TLS block (0: it has none).
std::size_t program_tls_bytes() noexcept;

// A copy as a new thread's block starts: the initialized variables' image,
// the rest zero. Null when the executable has no TLS.
program_tls* program_tls_create();
void program_tls_destroy(program_tls* t) noexcept;

// The calling thread's block into the copy, and the copy into the block.
void program_tls_save(program_tls* into) noexcept;
void program_tls_load(const program_tls* from) noexcept;

// Whether `object` lies in the calling thread's block: a thread_local of
// the program, whose destructor belongs to the fiber that built it.
bool program_tls_holds(const void* object) noexcept;

// Runs the copy's destructors, last built first (on the fiber, its copy
// in the block).
void program_tls_run_destructors(program_tls* t) noexcept;

}  // namespace weft::threads::detail
