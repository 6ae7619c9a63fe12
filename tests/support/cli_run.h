#pragma once
// Running the qkv binary from a test as a user would: exit status and the
// combined output, and the check that a failure is one clean line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/paths.h"

namespace qkv::testing {

// Starts qkv with `args` (no shell, no quoting), its output dropped, and
// returns its pid (-1 if it could not start): for tests that signal it or
// read its resource use.
inline pid_t start_qkv_quietly(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  const char* qkv = qkv_binary();
  argv.push_back(const_cast<char*>(qkv));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, qkv, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return spawned == 0 ? pid : -1;
}

// Runs qkv as start_qkv_quietly does and returns its exit status (128 +
// the signal when killed) and peak resident memory in KiB (wait4's rusage of
// that one child).
inline std::pair<int, long> qkv_status_and_peak_kib(const std::vector<std::string>& args) {
  const pid_t pid = start_qkv_quietly(args);
  if (pid < 0) return {-1, 0};
  int raw = 0;
  struct rusage usage {};
  wait4(pid, &raw, 0, &usage);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), usage.ru_maxrss};
}

// The peak resident memory of qkv doing next to nothing (LibTorch's own
// start-up, and a sanitizer's shadow memory in make check-asan), in KiB.
inline long qkv_baseline_peak_kib() {
  static const long peak = qkv_status_and_peak_kib({"params", "--model", "vnt", "--count"}).second;
  return peak;
}

struct CliResult {
  int status = -1;
  std::string output;  // stdout and stderr together (run_qkv), or stdout alone (run_qkv_stderr_to)
};

inline CliResult run_shell(const std::string& cmd) {
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

inline CliResult run_qkv(const std::string& args) {
  return run_shell(std::string(qkv_command()) + " " + args + " 2>&1");
}

// stdout alone in `output`; stderr goes to the file stderr_path.
inline CliResult run_qkv_stderr_to(const std::string& args, const std::string& stderr_path) {
  return run_shell(std::string(qkv_command()) + " " + args + " 2>" + stderr_path);
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Exit `status`, `needle` in the output, one line, no stack trace or abort.
inline void expect_clean_failure(const CliResult& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << "one line expected:\n" << r.output;
  for (const char* bad : {"terminate called", "Exception raised from", "frame #", "Aborted"})
    EXPECT_EQ(r.output.find(bad), std::string::npos) << r.output;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The JSON document (object or array) at the end of a command's output, after
// its stderr lines: from the first line that starts with '{' or '['.
inline nlohmann::json trailing_json(const std::string& output) {
  size_t start = 0;
  while (start < output.size() && output[start] != '{' && output[start] != '[') {
    const auto next = output.find('\n', start);
    if (next == std::string::npos) break;
    start = next + 1;
  }
  return nlohmann::json::parse(output.substr(start));
}

}  // namespace qkv::testing
