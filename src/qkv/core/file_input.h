#pragma once
// What every file reader does before it reads: the path must name a regular
// file (a FIFO would block forever, a device never ends), and its size is
// the bound that counts declared inside the file are checked against before
// anything is allocated for them.
#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "qkv/core/errors.h"

namespace qkv {

// The file's size in bytes. DataError "PATH: no such file", "PATH: is a
// folder, not a file" or "PATH: is not a regular file (FIFO, device or socket)".
int64_t regular_file_size(const std::string& path);

// f(), with a std::bad_alloc that still escapes a reader's own size checks
// turned into a one-line DataError naming the file: "PATH: out of memory
// reading WHAT". Allocation sizes come from the file, so the file is at fault.
template <typename F>
auto guard_memory(const std::string& path, const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw DataError(path + ": out of memory reading " + what);
  }
}

}  // namespace qkv
