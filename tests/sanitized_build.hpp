// Whether this test is built with AddressSanitizer (FLASHDEBERTA_SANITIZE; the clang build of scripts/test.sh):
// tests that bound their own time or memory loosen the bounds there, for ASan's slowdown and shadow memory.
#pragma once

namespace flashdeberta::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitized = true;
#else
inline constexpr bool kAddressSanitized = false;
#endif
#else
inline constexpr bool kAddressSanitized = false;
#endif

}  // namespace flashdeberta::testing
