#pragma once
// Shared by the libFuzzer targets: each writes its input to a file (the
// readers take paths, and the path is where their size checks start) and
// calls its reader. The exceptions a reader documents are the expected
// outcomes; anything else escapes to libFuzzer and is a finding, as are
// crashes, sanitizer reports and allocations over -malloc_limit_mb.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "qkv/core/errors.h"
#ifdef QKV_FUZZ_TORCH
#include <c10/util/Exception.h>
#endif

namespace qkv::fuzz {

// A scratch file path unique to this process, ending in `suffix`.
inline std::string scratch_path(const std::string& name, const std::string& suffix) {
  const auto dir = std::filesystem::temp_directory_path() / ("qkv_fuzz_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / (name + suffix)).string();
}

inline void write_input(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the harness itself failed, not the reader
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

template <typename F>
void expect_documented(F&& f) {
  try {
    f();
  } catch (const DataError&) {
  } catch (const UsageError&) {
#ifdef QKV_FUZZ_TORCH
  } catch (const c10::Error&) {
#endif
  }
}

}  // namespace qkv::fuzz
