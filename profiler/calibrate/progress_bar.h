#pragma once
// A one-line progress bar with an ETA for long measurements (stderr). The ETA extrapolates the
// elapsed time over the work done, weighted by each item's expected cost, so a sweep whose last
// points are the largest does not promise to end early.

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace parallax::profiler {

//! "42s", "3m05s", "1h02m".
std::string FormatDuration(double seconds);

class ProgressBar {
 public:
  using Clock = std::function<double()>;  //!< seconds since any fixed origin
  //! `out` null: silent. `total` > 0 in the same units as Advance's `done` argument.
  ProgressBar(std::FILE* out, std::string title, double total, Clock clock = {});

  //! `done` units finished out of `total`; `current` names what runs now. Redraws at most 10 times
  //! a second (always when done == total).
  void Update(double done, std::string_view current);
  //! Grows the total by `more` units (work found on the way: noisy points measured again).
  void Extend(double more) { total_ += std::max(more, 0.0); }
  //! Ends the line (prints the total time).
  void Finish();

  double EtaSeconds(double done) const;  //!< remaining seconds by extrapolation; 0 when done
  //! The bar text for `done` (what Update prints after "\r").
  std::string Line(double done, std::string_view current) const;

 private:
  std::FILE* out_;
  std::string title_;
  double total_;
  Clock clock_;
  double start_s_;
  double last_draw_s_ = -1;
  bool finished_ = false;
};

}  // namespace parallax::profiler
