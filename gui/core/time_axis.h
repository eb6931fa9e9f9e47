#pragma once
// Time <-> pixel mapping of a timeline (hotspot's TimeLineDelegate idea, without a widget):
// x = (t_ns - start_ns) / ns_per_px. Zoom keeps the time under the cursor fixed; the ruler picks
// a 1-2-5 tick step and a unit (ns, us, ms, s) from the zoom.

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::gui {

inline constexpr double kMinNsPerPx = 0.01;  //!< deepest zoom: 100 pixels per ns
inline constexpr double kMaxNsPerPx = 1e12;

class TimeAxis {
 public:
  TimeAxis() = default;
  TimeAxis(double start_ns, double ns_per_px);

  double start_ns() const { return start_ns_; }
  double ns_per_px() const { return ns_per_px_; }
  double ToPx(double t_ns) const { return (t_ns - start_ns_) / ns_per_px_; }
  double ToNs(double x_px) const { return start_ns_ + x_px * ns_per_px_; }

  //! Shows [t0_ns, t1_ns] across `width_px` (an empty range shows 1 us).
  void Fit(int64_t t0_ns, int64_t t1_ns, int width_px);
  //! Multiplies ns_per_px by `factor` (< 1 zooms in) keeping the time at `x_px` where it is.
  void ZoomAround(double x_px, double factor);
  //! Moves the view by `dx_px` pixels (positive: the content moves right, earlier times show).
  void Pan(double dx_px);

 private:
  double start_ns_ = 0;
  double ns_per_px_ = 1;
};

struct RulerTick {
  int64_t ns = 0;
  double x_px = 0;
  std::string label;  //!< relative to the ruler's origin, in the step's unit
};

//! Ticks across [0, width_px): a 1/2/5 x 10^k ns step at least `min_spacing_px` apart, labelled
//! relative to `origin_ns` (the trace start).
std::vector<RulerTick> RulerTicks(const TimeAxis& axis, int width_px, int64_t origin_ns,
                                  int min_spacing_px = 90);

//! "850 ns", "12.5 us", "3.20 ms", "1.250 s": three significant digits, adaptive unit.
std::string FormatDuration(double ns);

}  // namespace parallax::gui
