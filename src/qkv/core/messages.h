#pragma once
// Lines for the user from the library. A line names another setting as
// "{key}" (core/errors.h); the front end that runs says how a key is named
// (the CLI by its flag, Python by the keyword argument, which is the key).
#include <functional>
#include <string>

namespace qkv {

// How settings are named from now on; an empty function names them by key.
void set_setting_namer(std::function<std::string(const std::string& key)> namer);

// `text` with each "{key}" named as the front end names it.
std::string with_setting_names(const std::string& text);

// One line for the user (the newline added), settings named so: on stderr,
// or to the front end's line sink. say_as_is takes the line verbatim (it
// holds paths or other text of the user's, where "{x}" is not a key).
void say(const std::string& line);
void say_as_is(const std::string& line);

// Where say's lines go from now on; an empty function: stderr. The Python
// package sends them to the `logging` logger "qkv". Called from any thread
// that says something, so it must be thread-safe.
void set_line_sink(std::function<void(const std::string& line)> sink);

// Sends say's lines to `sink` while it lives, then back where they went
// before (a data-parallel rank other than 0 drops them: rank 0 says them).
// Process-wide, like set_line_sink: scopes must end in reverse order, and a
// set_line_sink made while one lives is undone when it ends.
class ScopedLineSink {
 public:
  explicit ScopedLineSink(std::function<void(const std::string& line)> sink);
  ~ScopedLineSink();
  ScopedLineSink(const ScopedLineSink&) = delete;
  ScopedLineSink& operator=(const ScopedLineSink&) = delete;

 private:
  std::function<void(const std::string& line)> before_;
};

}  // namespace qkv
