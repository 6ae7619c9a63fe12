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

// One line on stderr (the newline added), settings named so.
void say(const std::string& line);

}  // namespace qkv
