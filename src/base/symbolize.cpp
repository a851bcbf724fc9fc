// libdwfl through dlopen: the header gives the types and, through decltype,
// the function types; nothing here links libdw (symbolize.hpp says why).
#include "base/symbolize.hpp"
#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace weft::base {

namespace {

// The few libdwfl functions used, resolved once per process.
struct libdwfl_api {
  decltype(&::dwfl_begin) begin = nullptr;
  decltype(&::dwfl_end) end = nullptr;
  decltype(&::dwfl_report_begin) report_begin = nullptr;
  decltype(&::dwfl_report_end) report_end = nullptr;
  decltype(&::dwfl_linux_proc_report) proc_report = nullptr;
  decltype(&::dwfl_linux_proc_find_elf) proc_find_elf = nullptr;
  decltype(&::dwfl_addrmodule) addrmodule = nullptr;
  decltype(&::dwfl_module_addrinfo) module_addrinfo = nullptr;
  decltype(&::dwfl_module_info) module_info = nullptr;
  decltype(&::dwfl_module_getelf) module_getelf = nullptr;
  Dwfl_Callbacks callbacks{};
  bool loaded = false;
};

// No separate debuginfo: the symbol tables of the loaded files are what the
// dump needs, and dwfl_standard_find_debuginfo may ask a debuginfod server
// over the network (DEBUGINFOD_URLS), which a timed-out run must not wait for.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*,
                 GElf_Word, char**) {
  return -1;
}

template <class F>
bool resolve(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

const libdwfl_api& api() {
  static const libdwfl_api a = [] {
    libdwfl_api r;
    // Kept loaded: the process ends soon after a dump.
    void* lib = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return r;
    r.loaded = resolve(lib, "dwfl_begin", r.begin) && resolve(lib, "dwfl_end", r.end) &&
               resolve(lib, "dwfl_report_begin", r.report_begin) &&
               resolve(lib, "dwfl_report_end", r.report_end) &&
               resolve(lib, "dwfl_linux_proc_report", r.proc_report) &&
               resolve(lib, "dwfl_linux_proc_find_elf", r.proc_find_elf) &&
               resolve(lib, "dwfl_addrmodule", r.addrmodule) &&
               resolve(lib, "dwfl_module_addrinfo", r.module_addrinfo) &&
               resolve(lib, "dwfl_module_info", r.module_info) &&
               resolve(lib, "dwfl_module_getelf", r.module_getelf);
    r.callbacks.find_elf = r.proc_find_elf;
    r.callbacks.find_debuginfo = no_debuginfo;
    return r;
  }();
  return a;
}

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// The demangled name, or the symbol as it is (C functions, or a name
// __cxa_demangle does not take).
std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (d == nullptr) return name;
  std::string s(d);
  std::free(d);
  return s;
}

}  // namespace

symbolizer::symbolizer() {
  const libdwfl_api& a = api();
  if (!a.loaded) return;
  Dwfl* dwfl = a.begin(&a.callbacks);
  if (dwfl == nullptr) return;
  a.report_begin(dwfl);
  const int rc = a.proc_report(dwfl, getpid());
  if (a.report_end(dwfl, nullptr, nullptr) != 0 || rc != 0) {
    a.end(dwfl);
    return;
  }
  session_ = dwfl;
}

symbolizer::~symbolizer() {
  if (session_ != nullptr) api().end(static_cast<Dwfl*>(session_));
}

int symbolizer::write(int fd, void* const* frames, int depth) {
  if (session_ == nullptr) return depth;
  const libdwfl_api& a = api();
  Dwfl* dwfl = static_cast<Dwfl*>(session_);
  int unnamed = 0;
  std::string out;
  char num[64];
  for (int i = 0; i < depth; ++i) {
    const auto pc = Dwarf_Addr(reinterpret_cast<std::uintptr_t>(frames[i]));
    // A return address may be one past the end of its function (a call to a
    // noreturn function at its end): look up the call instruction. Wrong
    // only for the interrupted frame, whose address is exact, when it is
    // the first instruction of a function.
    const Dwarf_Addr lookup = pc > 0 ? pc - 1 : pc;
    std::snprintf(num, sizeof num, "    #%d ", i);
    out = num;
    Dwfl_Module* mod = a.addrmodule(dwfl, lookup);
    const char* name = nullptr;
    const char* object = "?";
    Dwarf_Addr bias = 0;
    GElf_Off offset = 0;
    if (mod != nullptr) {
      const char* mod_name =
          a.module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
      if (mod_name != nullptr) object = base_name(mod_name);
      GElf_Sym sym;
      name = a.module_addrinfo(mod, lookup, &offset, &sym, nullptr, nullptr, &bias);
      if (name != nullptr && *name == '\0') name = nullptr;
      // No symbol: print the file address, which addr2line takes.
      if (name == nullptr && a.module_getelf(mod, &bias) == nullptr) bias = 0;
    }
    if (name != nullptr) {
      out += demangle(name);
      std::snprintf(num, sizeof num, "+0x%" PRIx64 " (", std::uint64_t(offset + (pc - lookup)));
      out += num;
      out += object;
      out += ")\n";
    } else {
      ++unnamed;
      std::snprintf(num, sizeof num, "0x%" PRIx64 " (", std::uint64_t(pc));
      out += num;
      out += object;
      if (mod != nullptr) {
        std::snprintf(num, sizeof num, "+0x%" PRIx64, std::uint64_t(pc - bias));
        out += num;
      }
      out += ")\n";
    }
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t w = ::write(fd, out.data() + done, out.size() - done);
      if (w <= 0) break;  // stderr is gone: nowhere left to report it
      done += std::size_t(w);
    }
  }
  return unnamed;
}

}  // namespace weft::base
