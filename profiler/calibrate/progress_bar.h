#pragma once
// A one-line progress bar with an ETA for long measurements (stderr). The ETA extrapolates the
// elapsed time over the work done, weighted by each item's expected cost, so a sweep whose last
// points are the largest does not promise to end early. On a terminal the line redraws in place;
// into a file or a pipe it writes plain lines (no carriage returns or escape codes), one per tenth.
// The percentage never goes back: work found on the way shares out what is left of the bar.

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace parallax::profiler {

//! "42s", "3m05s", "1h02m".
std::string FormatDuration(double seconds);

//! How the bar is written: redrawn in place (a terminal), or as plain lines (a log file, a pipe).
enum class ProgressStyle { kAuto, kRedraw, kLines };

class ProgressBar {
 public:
  using Clock = std::function<double()>;  //!< seconds since any fixed origin
  //! `out` null: silent. `total` > 0 in the same units as Update's `done` argument. kAuto: redraw
  //! when `out` is a terminal, plain lines otherwise.
  ProgressBar(std::FILE* out, std::string title, double total, Clock clock = {},
              ProgressStyle style = ProgressStyle::kAuto);

  //! `done` units finished out of `total`; `current` names what runs now. Redraws at most 10 times
  //! a second (always when done == total); as lines, once per tenth of the bar.
  void Update(double done, std::string_view current);
  //! Grows the total by `more` units (work found on the way: noisy points measured again). The
  //! part of the bar not yet filled stands for the remaining work from then on.
  void Extend(double more);
  //! Ends the line (prints the total time).
  void Finish();

  double EtaSeconds(double done) const;  //!< remaining seconds by extrapolation; 0 when done
  //! Filled part of the bar for `done`, in [0, 1]; never less than at the last Extend.
  double Fraction(double done) const;
  //! The bar text for `done` (what Update prints after "\r", or as a line).
  std::string Line(double done, std::string_view current) const;

 private:
  std::FILE* out_;
  std::string title_;
  double total_;
  Clock clock_;
  bool redraw_;
  double start_s_;
  double last_draw_s_ = -1;
  double last_done_ = 0;       //!< `done` of the latest Update
  double base_done_ = 0;       //!< `done` at the latest Extend
  double base_fraction_ = 0;   //!< the bar filled at the latest Extend
  int next_line_percent_ = 0;  //!< lines: the percentage the next line waits for
  bool finished_ = false;
};

}  // namespace parallax::profiler
