// Names the frames of a backtrace from the ELF symbol tables of the loaded
// objects (.symtab where the file has one, else .dynsym), so that weft's
// hidden functions and a program's own static functions are named without
// -rdynamic. The watchdog's dump (--weft:timeout) uses it.
//
// The reader is elfutils' libdwfl, loaded with dlopen("libdw.so.1") when a
// symbolizer is made: no weft library links libdw, and without it the caller
// falls back to backtrace_symbols_fd. Rejected: parsing ELF by hand
// (dl_iterate_phdr + <elf.h>): fewer dependencies, but libdwfl already knows
// the cases a small reader gets wrong or skips (prelinked and non-PIE
// objects, the vDSO, symbol sizes of zero, SHN_XINDEX, .gnu_debugdata), and
// it is kept by the people who keep the ELF tools.
//
// Not async-signal-safe (dlopen, malloc, file I/O): use it in normal context,
// never in a signal handler. One thread at a time per object.
#pragma once

namespace weft::base {

class symbolizer {
 public:
  // Loads libdw (once per process) and reads this process's mappings. May
  // block on file I/O; costs a few milliseconds.
  symbolizer();
  ~symbolizer();
  symbolizer(const symbolizer&) = delete;
  symbolizer& operator=(const symbolizer&) = delete;

  // Whether libdw loaded and the mappings were read; when not, write()
  // writes nothing.
  bool ok() const { return session_ != nullptr; }

  // Writes one line per frame to fd:
  //   "    #3 weft::core::scheduler_loop(...)+0x1a2 (libweft.so.0.1)"
  // and, for a frame no symbol covers, "    #7 0x7f12... (libc.so.6+0x271ca)"
  // (the object's file address, which addr2line takes). frames are what
  // backtrace() returned: return addresses, except that of a signal frame.
  // Returns how many frames were not named.
  int write(int fd, void* const* frames, int depth);

 private:
  void* session_ = nullptr;  // a Dwfl*
};

}  // namespace weft::base
