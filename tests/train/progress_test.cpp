// The progress bar as a terminal sees it, drawn into a file: what it prints,
// when it prints nothing, and that clearing erases only what was drawn.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "qkv/train/progress.h"

using qkv::train::format_duration;
using qkv::train::ProgressBar;

namespace {

// Everything written to a temporary file so far.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() { std::fclose(file_); }
  std::FILE* file() const { return file_; }
  std::string text() const {
    std::fflush(file_);
    std::rewind(file_);
    std::string s;
    char buf[256];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) s.append(buf, n);
    return s;
  }

 private:
  std::FILE* file_;
};

int occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

const std::string kErase = "\r\033[K";

}  // namespace

TEST(ProgressBar, DrawsTheLossOrANoteAndAlwaysTheLastStep) {
  Capture out;
  {
    ProgressBar bar("RFE", 4, true, 0, out.file());
    bar.update(1, 0.25);
    // Within 100 ms of the last draw: skipped, except for the last step.
    bar.update(2, "2 left");
    bar.update(4, "12 features left");
    const auto text = out.text();
    EXPECT_NE(text.find("RFE [######..................] 1/4 "), std::string::npos) << text;
    EXPECT_NE(text.find("loss 0.2500"), std::string::npos) << text;
    EXPECT_EQ(text.find("2 left"), std::string::npos) << text;
    EXPECT_NE(text.find("RFE [########################] 4/4 "), std::string::npos) << text;
    EXPECT_EQ(text.substr(text.size() - std::string(" 12 features left").size()), " 12 features left") << text;
    EXPECT_EQ(text.find("loss", text.rfind(kErase)), std::string::npos) << "a note replaces the loss: " << text;
    EXPECT_EQ(occurrences(text, kErase), 2);
    bar.clear();
    EXPECT_EQ(occurrences(out.text(), kErase), 3);
  }
  EXPECT_EQ(occurrences(out.text(), kErase), 3) << "cleared once: the destructor has nothing left to erase";
}

TEST(ProgressBar, ADelayedBarThatEndsSoonerLeavesNoTrace) {
  Capture out;
  {
    ProgressBar bar("evaluating", 3, true, /*delay_seconds=*/60, out.file());
    for (int64_t i = 1; i <= 3; ++i) bar.update(i, 0.5);
    bar.clear();
  }
  EXPECT_EQ(out.text(), "");
}

TEST(ProgressBar, ADelayedBarDrawsOnceTheDelayHasPassed) {
  Capture out;
  ProgressBar bar("evaluating", 3, true, /*delay_seconds=*/0.05, out.file());
  bar.update(1, 0.5);
  EXPECT_EQ(out.text(), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  bar.update(2, 0.5);
  EXPECT_NE(out.text().find("evaluating ["), std::string::npos) << out.text();
}

TEST(ProgressBar, NotLiveDrawsNothing) {
  Capture out;
  {
    ProgressBar bar("epoch 1/2", 2, false, 0, out.file());
    bar.update(1, 0.5);
    bar.update(2, "done");
    bar.clear();
  }
  EXPECT_EQ(out.text(), "");
}

TEST(ProgressBar, SlowStepsShowSecondsPerStep) {
  Capture fast, slow;
  ProgressBar quick("batch", 10, true, 0, fast.file()), fold("fold", 10, true, 0, slow.file());
  quick.update(1, 0.5);
  EXPECT_NE(fast.text().find(" it/s ETA "), std::string::npos) << fast.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  fold.update(1, 0.5);  // one step in ~1.1 s
  EXPECT_NE(slow.text().find(" s/it ETA "), std::string::npos) << slow.text();
  EXPECT_EQ(slow.text().find("it/s"), std::string::npos) << slow.text();
}

TEST(FormatDuration, MinutesThenHours) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(format_duration(7384), "2:03:04");
  EXPECT_EQ(format_duration(-1), "0:00");
}
