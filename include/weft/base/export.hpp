// The one export macro: weft builds with hidden visibility, and only what is
// marked WEFT_API is part of the shared-library interface.
#pragma once
#define WEFT_API __attribute__((visibility("default")))

// Thread-locals on the hot paths (the PE's state, the running logical
// thread, the message block cache): one %fs-relative load even inside the
// shared libraries, where the default model calls __tls_get_addr for each
// read (~320 instructions a round trip of libweft-mpi's 8-byte ping-pong).
// Safe for a library loaded at start-up, and for one opened with dlopen
// as long as these stay small (glibc keeps a few hundred bytes of static
// TLS for such libraries; the marked ones take about 230). Only the
// layers' own: weft::detail::t_pe_local, which programs read through
// weft::my_pe() inline, keeps the default model (with initial-exec, a
// program linked with the static libraries under the sanitizers read it
// at a null address).
#define WEFT_TLS_FAST __attribute__((tls_model("initial-exec")))
