// The executable's TLS block, found once through dl_iterate_phdr, and the
// per-fiber copies of it (program_tls.hpp).
#include "program_tls.hpp"

#include <link.h>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include "weft/base/error.hpp"

namespace weft::threads::detail {

namespace {

struct block_layout {
  std::ptrdiff_t from_tp = 0;            // block address - thread pointer (any thread)
  const unsigned char* image = nullptr;  // .tdata's initial values
  std::size_t image_bytes = 0;
  std::size_t bytes = 0;  // .tdata + .tbss
  std::size_t align = 1;
};

unsigned char* thread_pointer() noexcept {
  return static_cast<unsigned char*>(__builtin_thread_pointer());
}

// The first object dl_iterate_phdr reports is the executable; its TLS is
// module 1, in the static block of every thread.
int find_executable(dl_phdr_info* info, std::size_t, void* out) {
  auto* layout = static_cast<block_layout*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_TLS || ph.p_memsz == 0) continue;
    if (info->dlpi_tls_data == nullptr)
      base::fatal(
          "weft::threads: the program's thread-local block is not allocated in this "
          "thread (module %zu): per-rank thread-local storage needs it static",
          std::size_t(info->dlpi_tls_modid));
    layout->from_tp = static_cast<unsigned char*>(info->dlpi_tls_data) - thread_pointer();
    layout->image = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    layout->image_bytes = ph.p_filesz;
    layout->bytes = ph.p_memsz;
    layout->align = ph.p_align == 0 ? 1 : ph.p_align;
  }
  return 1;  // the executable alone
}

const block_layout& layout() {
  static const block_layout l = [] {
    block_layout found;
    dl_iterate_phdr(&find_executable, &found);
    return found;
  }();
  return l;
}

unsigned char* block() noexcept {
  return thread_pointer() + layout().from_tp;
}

}  // namespace

std::size_t program_tls_bytes() noexcept {
  return layout().bytes;
}

program_tls* program_tls_create() {
  const block_layout& l = layout();
  if (l.bytes == 0) return nullptr;
  auto* t = new program_tls;
  const std::size_t align = std::max<std::size_t>(l.align, alignof(std::max_align_t));
  t->bytes = static_cast<unsigned char*>(::operator new(l.bytes, std::align_val_t(align)));
  std::memcpy(t->bytes, l.image, l.image_bytes);
  std::memset(t->bytes + l.image_bytes, 0, l.bytes - l.image_bytes);
  return t;
}

void program_tls_destroy(program_tls* t) noexcept {
  if (t == nullptr) return;
  const std::size_t align = std::max<std::size_t>(layout().align, alignof(std::max_align_t));
  ::operator delete(t->bytes, std::align_val_t(align));
  delete t;
}

void program_tls_save(program_tls* into) noexcept {
  std::memcpy(into->bytes, block(), layout().bytes);
}

void program_tls_load(const program_tls* from) noexcept {
  std::memcpy(block(), from->bytes, layout().bytes);
}

bool program_tls_holds(const void* object) noexcept {
  const std::size_t n = layout().bytes;
  if (n == 0) return false;
  const auto* p = static_cast<const unsigned char*>(object);
  const unsigned char* a = block();
  return p >= a && p < a + n;
}

void program_tls_run_destructors(program_tls* t) noexcept {
  // A destructor may build another thread_local (it registers then): run
  // until none is left, as the C library does at a thread's exit.
  while (!t->destructors.empty()) {
    const auto [fn, object] = t->destructors.back();
    t->destructors.pop_back();
    fn(object);
  }
}

}  // namespace weft::threads::detail
