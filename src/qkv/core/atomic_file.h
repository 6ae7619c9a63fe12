#pragma once
// Files that are either completely written or not there at all: write to a
// temporary file in the same folder, fsync, rename over the target, fsync the
// folder. A crash or a full disk mid-write leaves the previous version intact;
// a failure or a fatal signal during the write removes the temporary.
#include <set>
#include <string>
#include <vector>

namespace qkv {

void write_file_atomic(const std::string& path, const void* data, size_t size);
void write_file_atomic(const std::string& path, const std::string& contents);
void write_file_atomic(const std::string& path, const std::vector<char>& contents);

// Whether a file name has the form of write_file_atomic's temporaries,
// ".NAME.tmp.XXXXXX" (six letters or digits).
bool is_atomic_temp_name(const std::string& name);
// The file such a temporary is for (".NAME.tmp.XXXXXX" -> "NAME"); "" for any other name.
std::string atomic_temp_target(const std::string& name);

// Removes the temporaries a killed or crashed write_file_atomic left in `dir`
// for the files named in `targets` (regular files named ".NAME.tmp.XXXXXX"
// for a NAME in targets; not recursive). Call it only on a folder qkv owns,
// when no other process writes there. Returns what it removed; a folder it
// cannot read, or that is a symbolic link, is left alone.
std::vector<std::string> remove_stale_temp_files(const std::string& dir, const std::set<std::string>& targets);

// Reads a whole file; throws DataError naming the file if it cannot.
std::vector<char> read_file_bytes(const std::string& path);

// Creates the folder and its parents; throws DataError naming it on failure.
void make_directories(const std::string& path);

}  // namespace qkv
