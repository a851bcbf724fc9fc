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

namespace weft::lb {
// Balances every array now, without their elements' help: the strategy of
// --weft:lb places their elements by the loads measured since the last
// step, and they move between their entry methods (an element with a
// suspended coroutine, or waiting in at_sync, stays). From any element, or
// from main. Nothing happens with --weft:lb=off. PE.
WEFT_API void balance();
}  // namespace weft::lb

namespace weft::lb::detail {
// Installs the balancer (idempotent); true.
WEFT_API bool install_runtime() noexcept;
inline const bool runtime_installed = install_runtime();
}  // namespace weft::lb::detail
