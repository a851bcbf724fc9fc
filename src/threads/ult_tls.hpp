// The running logical thread, read inline: the omp layer asks for it on
// every entry point (which OpenMP thread am I?), where a call into
// threads::current() was a tenth of an included task's cost. Inside the
// runtime only; programs use threads::current().
#pragma once
#include "weft/base/export.hpp"
#include "weft/threads/ult.hpp"

namespace weft::threads::detail {
extern constinit thread_local ult* t_ult WEFT_TLS_FAST;
}  // namespace weft::threads::detail
