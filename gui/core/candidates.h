#pragma once
// The plan explorer's data: the file `parallax plan --candidates` writes (docs/gui.md), the
// layout dimensions a user filters and colours by, and the scatter's value <-> pixel mapping.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cluster_spec.h"
#include "model/model_spec.h"
#include "model/plan.h"
#include "model/result.h"
#include "model/training_spec.h"

namespace parallax::gui {

struct Candidate {
  Layout layout;
  std::string rejected;    //!< empty: evaluated
  double step_time_s = 0;  //!< evaluated only
  double tokens_per_s = 0;
  double mfu = 0;
  int64_t peak_memory_bytes = 0;  //!< evaluated and out_of_memory
  bool evaluated() const { return rejected.empty(); }
  //! Drawn in the scatter: evaluated, or rejected for memory (its peak is known).
  bool plottable() const { return peak_memory_bytes > 0; }
};

struct CandidateSet {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  int64_t device_memory_bytes = 0;
  std::vector<Candidate> candidates;
};

//! Reads a candidates file; errors name the file and JSON path.
Result<CandidateSet> LoadCandidates(const std::string& path);
Result<CandidateSet> CandidatesFromJson(const Json& j, const std::string& file);

//! A layout dimension the explorer filters and colours by.
enum class Dimension {
  kTp,
  kPp,
  kDp,
  kZero,
  kMicroBatch,
  kSchedule,
  kRecompute,
  kSequenceParallel,
  kVirtualStages
};
inline constexpr Dimension kAllDimensions[] = {
    Dimension::kTp,           Dimension::kPp,
    Dimension::kDp,           Dimension::kZero,
    Dimension::kMicroBatch,   Dimension::kSchedule,
    Dimension::kRecompute,    Dimension::kSequenceParallel,
    Dimension::kVirtualStages};
const char* ToString(Dimension d);  //!< "tp", "pp", "dp", "zero", "micro_batch", "schedule", ...
int64_t ValueOf(const Layout& l, Dimension d);   //!< enums as their integer value
std::string ValueLabel(Dimension d, int64_t v);  //!< "1f1b", "selective", "4", ...
//! Distinct values of `d` over the plottable candidates, ascending.
std::vector<int64_t> DistinctValues(const CandidateSet& set, Dimension d);

//! Per dimension an optional required value.
struct CandidateFilter {
  std::vector<std::optional<int64_t>> required =
      std::vector<std::optional<int64_t>>(std::size(kAllDimensions));
  bool Admits(const Candidate& c) const;
};

//! Scatter axes: x = peak memory per GPU (GiB), y = step time (s) or tokens/s.
struct ScatterAxes {
  bool tokens_per_s = false;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;   //!< data range shown
  std::vector<double> x_ticks, y_ticks;                //!< round values, x_max/y_max the last
  int left = 70, top = 20, width = 600, height = 400;  //!< plot rectangle, px

  double XOf(const Candidate& c) const;  //!< pixel
  double YOf(const Candidate& c) const;
  double XOfValue(double gib) const;
  double YOfValue(double v) const;
  double ValueY(const Candidate& c) const { return tokens_per_s ? c.tokens_per_s : c.step_time_s; }
};

//! Axis ticks 0, s, 2s, ... with s = 1, 2 or 5 x 10^k: the fewest ticks whose last one reaches
//! `hi`, with at most `max_intervals` intervals. {0, 1} when hi <= 0.
std::vector<double> NiceTicks(double hi, int max_intervals = 6);
//! A y tick label: step time in the unit of the largest tick ("0 s", "5 s", "12.5 ms"), or
//! tokens/s ("150k", "1.2M").
std::string ScatterYLabel(double v, double max_tick, bool tokens_per_s);

//! Fits the axes to the plotted candidates (evaluated; out-of-memory ones at step time 0 are not
//! plotted on y) and the device memory line, in a plot rectangle of the given size.
ScatterAxes FitScatter(const CandidateSet& set, const CandidateFilter& filter, bool tokens_per_s,
                       int width_px, int height_px);
//! The evaluated, admitted candidate nearest to (x, y) within `radius_px`, or -1.
int64_t PickCandidate(const CandidateSet& set, const CandidateFilter& filter,
                      const ScatterAxes& axes, double x, double y, double radius_px);

}  // namespace parallax::gui
