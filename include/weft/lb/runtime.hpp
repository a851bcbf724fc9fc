// The lb layer at run time: what --weft:lb=NAME runs when the elements of
// an array call at_sync() (docs/lb.md). Strategies are chosen by name from
// the registry (weft/lb/strategy.hpp), a program's own included; the name
// is checked when the node starts.
//
// <weft/weft.hpp> includes this header, which makes sure the layer's
// runtime half is linked into the program: the objects layer calls it only
// through the hook it installs.
#pragma once
#include "weft/base/export.hpp"

namespace weft::lb::detail {
// Installs the balancer (idempotent); true.
WEFT_API bool install_runtime() noexcept;
inline const bool runtime_installed = install_runtime();
}  // namespace weft::lb::detail
