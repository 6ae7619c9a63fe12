#include "qkv/core/messages.h"

#include <cstdio>
#include <mutex>

#include "qkv/core/errors.h"

namespace qkv {
namespace {
std::mutex g_namer_mutex;
std::function<std::string(const std::string&)> g_namer;
}  // namespace

void set_setting_namer(std::function<std::string(const std::string& key)> namer) {
  std::lock_guard<std::mutex> lock(g_namer_mutex);
  g_namer = std::move(namer);
}

std::string with_setting_names(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_namer_mutex);
  return name_keys(text, [](const std::string& key) { return g_namer ? g_namer(key) : key; });
}

void say(const std::string& line) { std::fprintf(stderr, "%s\n", with_setting_names(line).c_str()); }

}  // namespace qkv
