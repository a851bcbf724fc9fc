// The one export macro: weft builds with hidden visibility, and only what is
// marked WEFT_API is part of the shared-library interface.
#pragma once
#define WEFT_API __attribute__((visibility("default")))
