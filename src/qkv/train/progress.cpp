#include "qkv/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace qkv::train {

ProgressBar::ProgressBar(std::string label, int64_t total, bool live, double delay_seconds, std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      live_(live),
      delay_(delay_seconds),
      out_(out),
      start_(std::chrono::steady_clock::now()) {}

bool ProgressBar::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void ProgressBar::update(int64_t done, double running_loss) {
  if (!live_) return;
  char buf[32];
  std::snprintf(buf, sizeof buf, "loss %.4f", running_loss);
  draw(done, buf);
}

void ProgressBar::update(int64_t done, const std::string& note) {
  if (!live_) return;
  draw(done, note);
}

void ProgressBar::draw(int64_t done, const std::string& tail) {
  const auto now = std::chrono::steady_clock::now();
  if (start_done_ < 0) {
    start_done_ = done - 1;  // the first update already counts one step
  }
  if (now - start_ < delay_) return;
  // Redraw at most ~10 times a second, and always for the last step.
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done - start_done_) / elapsed : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * std::min(done, total_) / total_) : kWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  // Slow steps (a fold's batch of volumes, an RFE round) read better as seconds per step.
  char speed[32];
  if (rate >= 1 || rate <= 0)
    std::snprintf(speed, sizeof speed, "%.1f it/s", rate);
  else
    std::snprintf(speed, sizeof speed, "%.1f s/it", 1.0 / rate);
  std::fprintf(out_, "\r\033[K%s [%s] %lld/%lld %s ETA %s %s", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), speed, format_duration(eta).c_str(),
               tail.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!live_ || !drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

}  // namespace qkv::train
