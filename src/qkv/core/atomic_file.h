#pragma once
// Files that are either completely written or not there at all: write to a
// temporary file in the same folder, fsync, rename over the target, fsync the
// folder. A crash or a full disk mid-write leaves the previous version intact.
#include <string>
#include <vector>

namespace qkv {

void write_file_atomic(const std::string& path, const void* data, size_t size);
void write_file_atomic(const std::string& path, const std::string& contents);
void write_file_atomic(const std::string& path, const std::vector<char>& contents);

// Reads a whole file; throws DataError naming the file if it cannot.
std::vector<char> read_file_bytes(const std::string& path);

// Creates the folder and its parents; throws DataError naming it on failure.
void make_directories(const std::string& path);

}  // namespace qkv
