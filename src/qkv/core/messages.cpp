#include "qkv/core/messages.h"

#include <cstdio>
#include <mutex>
#include <utility>

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

namespace {
std::mutex g_sink_mutex;
std::function<void(const std::string&)> g_sink;
}  // namespace

void set_line_sink(std::function<void(const std::string& line)> sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = std::move(sink);
}

ScopedLineSink::ScopedLineSink(std::function<void(const std::string& line)> sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  before_ = std::exchange(g_sink, std::move(sink));
}

ScopedLineSink::~ScopedLineSink() {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = std::move(before_);
}

void say_as_is(const std::string& line) {
  std::function<void(const std::string&)> sink;
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    sink = g_sink;
  }
  if (sink)
    sink(line);
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

void say(const std::string& line) { say_as_is(with_setting_names(line)); }

}  // namespace qkv
