#pragma once
// Whether this build runs under AddressSanitizer (make check-asan): qkv's
// exit then keeps the atexit handlers, where the sanitizer's leak check runs
// (cli/command_line.h, end_process), and the tests leave out the few checks
// whose measure is then the sanitizer's: resident memory, where freed blocks
// wait in its quarantine and its shadow maps the address space.

namespace qkv {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace qkv
