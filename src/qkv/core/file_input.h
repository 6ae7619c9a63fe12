#pragma once
// The one way qkv opens a file it reads: the path must name a regular file (a
// FIFO would block forever, a device such as /dev/zero never ends, a folder
// reads as nothing), and no more is read than the file's size when it was
// opened, so that what a reader allocates is bounded by the file on disk.
// Counts declared inside a file are checked against that size before
// anything is allocated for them.
#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"

namespace qkv {

// The file's size in bytes. DataError "PATH: no such file", "PATH: is a
// folder, not a file" or "PATH: is not a regular file (FIFO, device or socket)".
int64_t regular_file_size(const std::string& path);

// The whole content of the regular file `path`, refused as regular_file_size
// refuses (checked again on the opened file, so that a path swapped for a
// FIFO in between does not block: it is opened without waiting for a
// writer). Reads the size the opened file has, never more: a file that grows
// meanwhile is read to that size, one that shrinks is a DataError ("changed
// while read"). Every reader of a user's file reads through this
// (read_text_file and read_file_bytes do).
std::string read_regular_file(const std::string& path);

// The content of a file of /proc (which stat sizes 0, so read_regular_file
// does not apply), at most `limit` bytes; "" where it cannot be read, as when
// its process has ended meanwhile. A stream would throw there: reading such a
// file fails with ESRCH, which libstdc++'s file buffer throws whatever the
// stream's exception mask.
std::string read_proc_file(const std::string& path, size_t limit = size_t{1} << 20);

// f(), with a std::bad_alloc (or LibTorch's failed allocation) that still
// escapes a reader's own size checks turned into a one-line DataError naming
// the file: "PATH: out of memory reading WHAT". Allocation sizes come from the file, so the file is at fault.
template <typename F>
auto guard_memory(const std::string& path, const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw DataError(path + ": out of memory reading " + what);
  } catch (const std::exception& e) {
    // LibTorch's allocator throws c10::Error, not std::bad_alloc.
    const std::string oom = out_of_memory_line(e.what(), "reading " + what, "");
    if (oom.empty()) throw;
    throw DataError(path + ": " + oom);
  }
}

}  // namespace qkv
