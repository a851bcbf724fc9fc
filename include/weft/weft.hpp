// The one header most weft programs need.
#pragma once
#include "weft/config.hpp"
#include "weft/core/config.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"
#include "weft/core/runtime.hpp"
#include "weft/objects/buffer.hpp"
#include "weft/objects/pup.hpp"
