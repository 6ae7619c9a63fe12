#pragma once
// The two kinds of user-facing failure. The CLI maps UsageError to exit 2 and
// every other error to exit 1, printing the message as one line.
#include <stdexcept>
#include <string>

namespace qkv {

// A mistake in how the program was called: a bad option value, a missing flag.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A bad setting, named by its config key ("lr", "batch_size"): the library
// knows keys, not flags. The CLI reports it under the option that set the key
// (--lr); elsewhere the key is the name.
struct ConfigError : UsageError {
  ConfigError(const std::string& key, const std::string& problem)
      : UsageError(key + " " + problem), key(key), problem(problem) {}
  std::string key, problem;
};

// Something wrong with the data or the environment: a malformed file, NaN input,
// a full disk. The message names the file (or option) and what is wrong.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace qkv
