#pragma once
// A live one-line progress bar on a terminal (rate, ETA, running loss),
// rewritten in place; nothing at all when stderr is a file or a pipe, where
// the trainer's one line per epoch is the whole record.
#include <chrono>
#include <cstdint>
#include <string>

namespace qkv::train {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool live);
  void update(int64_t done, double running_loss);
  void clear();  // erase the bar before a normal line is printed

  static bool stderr_is_terminal();

 private:
  std::string label_;
  int64_t total_;
  bool live_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t start_done_ = -1;
};

std::string format_duration(double seconds);  // "1:05", "2:03:04"

}  // namespace qkv::train
