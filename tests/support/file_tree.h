#pragma once
// The tree of an output as a test sees it, to check that a refused command
// touched nothing: every file's bytes and modification time by path.
#include <filesystem>
#include <map>
#include <string>

#include "support/cli_run.h"

namespace qkv::testing {

struct FileState {
  std::string bytes;  // "<folder>" for a folder
  std::filesystem::file_time_type mtime{};
};
using Tree = std::map<std::string, FileState>;

// Every file and folder below `root` by relative path, with each file's bytes
// and modification time (empty if `root` does not exist).
inline Tree snapshot(const std::string& root) {
  namespace fs = std::filesystem;
  Tree tree;
  if (!fs::exists(root)) return tree;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).generic_string();
    if (e.is_directory())
      tree[rel] = {"<folder>", {}};
    else if (e.is_regular_file())
      tree[rel] = {read_text(e.path().string()), e.last_write_time()};
  }
  return tree;
}

// What differs between two snapshots, one line per path ("" if nothing).
inline std::string changes(const Tree& before, const Tree& after) {
  std::string out;
  for (const auto& [path, state] : before) {
    const auto it = after.find(path);
    if (it == after.end())
      out += "removed " + path + "\n";
    else if (it->second.bytes != state.bytes)
      out += "changed " + path + "\n";
    else if (it->second.mtime != state.mtime)
      out += "rewritten " + path + "\n";
  }
  for (const auto& item : after)
    if (!before.count(item.first)) out += "added " + item.first + "\n";
  return out;
}

}  // namespace qkv::testing
