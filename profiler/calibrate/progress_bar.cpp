#include "profiler/calibrate/progress_bar.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unistd.h>

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

ProgressBar::ProgressBar(std::FILE* out, std::string title, double total, Clock clock, ProgressStyle style)
    : out_(out),
      title_(std::move(title)),
      total_(std::max(total, 1e-12)),
      clock_(std::move(clock)),
      redraw_(style == ProgressStyle::kRedraw ||
              (style == ProgressStyle::kAuto && out != nullptr && isatty(fileno(out)) != 0)) {
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

double ProgressBar::Fraction(double done) const {
  const double rest = total_ - base_done_;
  if (rest <= 0) return 1;
  return std::clamp(base_fraction_ + (1 - base_fraction_) * (done - base_done_) / rest, base_fraction_, 1.0);
}

void ProgressBar::Extend(double more) {
  if (more <= 0) return;
  base_fraction_ = Fraction(last_done_);
  base_done_ = last_done_;
  total_ += more;
}

std::string ProgressBar::Line(double done, std::string_view current) const {
  constexpr int kWidth = 24;
  const double f = Fraction(done);
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
  last_done_ = std::max(last_done_, done);
  if (out_ == nullptr) return;
  if (!redraw_) {
    const int percent = static_cast<int>(std::lround(Fraction(done) * 100));
    if (percent < next_line_percent_ && done < total_) return;
    next_line_percent_ = (percent / 10 + 1) * 10;
    std::fprintf(out_, "%s\n", Line(done, current).c_str());
    std::fflush(out_);
    return;
  }
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
  const std::string took = FormatDuration(clock_() - start_s_);
  if (redraw_) {
    std::fprintf(out_, "\r%s done in %s\033[K\n", title_.c_str(), took.c_str());
  } else {
    std::fprintf(out_, "%s done in %s\n", title_.c_str(), took.c_str());
  }
  std::fflush(out_);
}

}  // namespace parallax::profiler
