#include "profiler/calibrate/progress_bar.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace parallax::profiler {

std::string FormatDuration(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

ProgressBar::ProgressBar(std::FILE* out, std::string title, double total, Clock clock)
    : out_(out), title_(std::move(title)), total_(std::max(total, 1e-12)), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
  start_s_ = clock_();
}

double ProgressBar::EtaSeconds(double done) const {
  if (done <= 0) return 0;
  if (done >= total_) return 0;
  const double elapsed = clock_() - start_s_;
  return elapsed * (total_ - done) / done;
}

std::string ProgressBar::Line(double done, std::string_view current) const {
  constexpr int kWidth = 24;
  const double f = std::clamp(done / total_, 0.0, 1.0);
  const int filled = static_cast<int>(std::lround(f * kWidth));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  char head[96];
  std::snprintf(head, sizeof head, " [%s] %3d%% ", bar.c_str(), static_cast<int>(std::lround(f * 100)));
  std::string line = title_ + head;
  line += done > 0 ? "ETA " + FormatDuration(EtaSeconds(done)) : std::string("ETA ?");
  if (!current.empty()) {
    line += "  ";
    line += current.substr(0, 48);
  }
  return line;
}

void ProgressBar::Update(double done, std::string_view current) {
  if (out_ == nullptr) return;
  const double now = clock_();
  if (done < total_ && last_draw_s_ >= 0 && now - last_draw_s_ < 0.1) return;
  last_draw_s_ = now;
  // Clear to the end of the line so a shorter label leaves no residue.
  std::fprintf(out_, "\r%s\033[K", Line(done, current).c_str());
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (out_ == nullptr || finished_) return;
  finished_ = true;
  std::fprintf(out_, "\r%s done in %s\033[K\n", title_.c_str(), FormatDuration(clock_() - start_s_).c_str());
  std::fflush(out_);
}

}  // namespace parallax::profiler
