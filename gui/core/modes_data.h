#pragma once
// The curves of `parallax compare-modes` (cli/cmd_compare_modes.cpp): per mode, loss against step
// and against wall clock, and the predicted beside the measured throughput. Read headless; the
// view (gui/views/modes_view.h) draws them.

#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::gui {

struct ModeCurve {
  std::string mode;
  std::vector<double> losses;        //!< one per step
  std::vector<double> wall_clock_s;  //!< end of each step since the job's start
  double predicted_tokens_per_s = 0;
  double measured_tokens_per_s = 0;
};

struct ModesComparison {
  std::string model;
  int64_t workers = 0;
  std::string inject_slow;  //!< empty: no straggler
  std::vector<ModeCurve> modes;
};

//! Reads a compare-modes JSON file; errors name the file and the JSON path ("out.json: /modes/1/losses: ...").
Result<ModesComparison> LoadModesComparison(const std::string& path);

//! The round axis range [lo, hi] covering every mode's values of `pick` (losses or wall clock).
struct Range {
  double lo = 0, hi = 1;
};
Range LossRange(const ModesComparison& c);
double LastWallClock(const ModesComparison& c);
double MaxTokensPerSecond(const ModesComparison& c);

}  // namespace parallax::gui
