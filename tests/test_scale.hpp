// Stress sizes for tests: millions of items normally, fewer under ASan/TSan,
// which run the same tests 5-20x slower. make test (CI) runs all three
// builds: build/test (ASan+UBSan) and build/tsan at the reduced sizes,
// build/full (optimised, no sanitizer) at the full ones.
#pragma once
#include <cstddef>

namespace weft_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

// `full` in normal builds, `reduced` under a sanitizer.
constexpr long scaled(long full, long reduced) {
  return sanitized ? reduced : full;
}

}  // namespace weft_test
