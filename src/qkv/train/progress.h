#pragma once
// A live one-line progress bar on a terminal (rate, ETA, running loss or a
// note), rewritten in place; nothing at all when stderr is a file or a pipe,
// where the callers' own lines (the trainer's one per epoch) are the record.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace qkv::train {

class ProgressBar {
 public:
  // live: draw at all (callers pass stderr_is_terminal() and their own
  // conditions). delay_seconds: draw nothing until this long after
  // construction, so that work which ends sooner leaves no flicker. out: where
  // to draw (tests pass a file).
  ProgressBar(std::string label, int64_t total, bool live, double delay_seconds = 0, std::FILE* out = stderr);
  ~ProgressBar() { clear(); }  // an exception's message starts on a clean line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(int64_t done, double running_loss);      // "... loss 0.1234"
  void update(int64_t done, const std::string& note);  // "... <note>", e.g. "312 features left"
  void clear();  // erase the bar (if one was drawn) before a normal line is printed

  static bool stderr_is_terminal();

 private:
  void draw(int64_t done, const std::string& tail);

  std::string label_;
  int64_t total_;
  bool live_;
  std::chrono::duration<double> delay_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t start_done_ = -1;
  bool drawn_ = false;
};

std::string format_duration(double seconds);  // "1:05", "2:03:04"

}  // namespace qkv::train
