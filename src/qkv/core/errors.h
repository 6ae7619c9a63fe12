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

// `text` with every setting it mentions, written "{key}" (lower case,
// digits, '_'), named by `name_of(key)`. The library writes keys; the CLI
// names them by their flags, Python by its keyword arguments (the keys).
template <typename NameOf>
std::string name_keys(const std::string& text, NameOf&& name_of) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    size_t end = i + 1;
    while (text[i] == '{' && end < text.size() &&
           ((text[end] >= 'a' && text[end] <= 'z') || (text[end] >= '0' && text[end] <= '9') || text[end] == '_'))
      ++end;
    if (text[i] == '{' && end > i + 1 && end < text.size() && text[end] == '}') {
      out += name_of(text.substr(i + 1, end - i - 1));
      i = end;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A setting's problem as one line: the setting named by `name_of(key)`, a
// space unless the problem begins with ':' or ',', then the problem.
template <typename NameOf>
std::string setting_message(const std::string& key, const std::string& problem, NameOf&& name_of) {
  const bool spaced = !problem.empty() && problem[0] != ':' && problem[0] != ',';
  return name_of(key) + (spaced ? " " : "") + name_keys(problem, name_of);
}

// A bad setting, named by its config key ("lr", "batch_size"): the library
// knows keys, not flags. The CLI reports it under the option that set the key
// (--lr); elsewhere (Python, config.json) the key is the name. Other settings
// the problem mentions are written "{key}" (setting_message).
struct ConfigError : UsageError {
  ConfigError(const std::string& key, const std::string& problem)
      : UsageError(setting_message(key, problem, [](const std::string& k) { return k; })), key(key), problem(problem) {}
  std::string key, problem;
};

// Something wrong with the data or the environment: a malformed file, NaN input,
// a full disk. The message names the file (or option) and what is wrong.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace qkv
