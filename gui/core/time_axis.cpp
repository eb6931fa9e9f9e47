#include "gui/core/time_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace parallax::gui {

TimeAxis::TimeAxis(double start_ns, double ns_per_px)
    : start_ns_(start_ns), ns_per_px_(std::clamp(ns_per_px, kMinNsPerPx, kMaxNsPerPx)) {}

void TimeAxis::Fit(int64_t t0_ns, int64_t t1_ns, int width_px) {
  const double span = t1_ns > t0_ns ? static_cast<double>(t1_ns - t0_ns) : 1000.0;
  const double w = std::max(width_px, 1);
  ns_per_px_ = std::clamp(span / w, kMinNsPerPx, kMaxNsPerPx);
  start_ns_ = static_cast<double>(t0_ns);
}

void TimeAxis::ZoomAround(double x_px, double factor) {
  const double t = ToNs(x_px);
  ns_per_px_ = std::clamp(ns_per_px_ * factor, kMinNsPerPx, kMaxNsPerPx);
  start_ns_ = t - x_px * ns_per_px_;
}

void TimeAxis::Pan(double dx_px) { start_ns_ -= dx_px * ns_per_px_; }

std::string FormatDuration(double ns) {
  const double a = std::fabs(ns);
  char buf[48];
  if (a < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (a < 1e6) {
    std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  } else if (a < 1e9) {
    std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g s", ns / 1e9);
  }
  return buf;
}

namespace {

//! Labels in one unit for the whole ruler, chosen by the largest label (so "36.5 ms", not
//! "36500 us"), with as many decimals as the step needs.
std::string TickLabel(int64_t rel_ns, double step_ns, double max_abs_ns) {
  char buf[48];
  const char* unit = "ns";
  double scale = 1;
  if (max_abs_ns >= 1e9) {
    unit = "s", scale = 1e9;
  } else if (max_abs_ns >= 1e6) {
    unit = "ms", scale = 1e6;
  } else if (max_abs_ns >= 1e3) {
    unit = "us", scale = 1e3;
  }
  const double step_units = step_ns / scale;
  const int decimals = step_units >= 1 ? 0 : step_units >= 0.1 ? 1 : step_units >= 0.01 ? 2 : 3;
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, static_cast<double>(rel_ns) / scale, unit);
  return buf;
}

}  // namespace

std::vector<RulerTick> RulerTicks(const TimeAxis& axis, int width_px, int64_t origin_ns,
                                  int min_spacing_px) {
  std::vector<RulerTick> out;
  if (width_px <= 0) return out;
  const double min_step = axis.ns_per_px() * std::max(min_spacing_px, 1);
  double step = 1;
  while (step < min_step) {
    const double mant = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    step *= mant < 1.5 ? 2.0 : mant < 3.0 ? 2.5 : 2.0;  // 1 -> 2 -> 5 -> 10
  }
  const int64_t istep = static_cast<int64_t>(std::llround(step));
  const double t_first = axis.ToNs(0) - static_cast<double>(origin_ns);
  int64_t rel = static_cast<int64_t>(std::ceil(t_first / static_cast<double>(istep))) * istep;
  double max_abs = 0;
  for (;; rel += istep) {
    const double x = axis.ToPx(static_cast<double>(origin_ns + rel));
    if (x >= width_px) break;
    out.push_back({origin_ns + rel, x, ""});
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(rel)));
  }
  for (RulerTick& t : out)
    t.label = TickLabel(t.ns - origin_ns, static_cast<double>(istep), max_abs);
  return out;
}

}  // namespace parallax::gui
