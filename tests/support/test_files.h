#pragma once
// Scratch files and error capture shared by the test executables. (This folder
// holds no .cpp, so CMake makes no test executable of it.)
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"

namespace qkv::testing {

// The one folder that holds every scratch path of this test process, so that
// its main() can remove them all (test_main.cpp).
inline std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("qkv_test_" + std::to_string(::getpid()));
}

// A folder path unique to this process and name, removed if present, not
// created (its parent, the scratch root, is).
inline std::string fresh_dir(const std::string& name) {
  std::filesystem::create_directories(scratch_root());
  auto dir = scratch_root() / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

// A file path in this process's scratch folder (the folder is created). Apart
// from fresh_dir's folders, whose names start with no underscore.
inline std::string temp_path(const std::string& name) {
  auto dir = scratch_root() / "_files";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The message of the DataError that f throws, or "(no DataError)".
inline std::string data_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

// The message of the UsageError f throws, or "(no UsageError)".
inline std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

// The key of the ConfigError f throws (the setting it names), or
// "(no ConfigError)".
inline std::string config_error_key_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.key;
  }
  return "(no ConfigError)";
}

// Writes a text file, creating its folder (atomic, like the product's writes).
inline void write_text_file(const std::filesystem::path& path, const std::string& contents) {
  make_directories(path.parent_path().string());
  write_file_atomic(path.string(), contents);
}

// Expects a qkv::UsageError whose one-line message contains `needle`.
inline void expect_usage_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no UsageError; expected one mentioning '" << needle << "'";
  } catch (const qkv::UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << "message: " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "message is not one line: " << what;
  }
}

// f throws a DataError whose message holds both `names` (the file at fault)
// and `what`.
inline void expect_data_error(const std::function<void()>& f, const std::string& names, const std::string& what) {
  const auto message = data_error_of(f);
  EXPECT_NE(message.find(names), std::string::npos) << "expected '" << names << "' in: " << message;
  EXPECT_NE(message.find(what), std::string::npos) << "expected '" << what << "' in: " << message;
}

}  // namespace qkv::testing
