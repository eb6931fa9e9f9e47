#include "planner/cost/noise.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace parallax::planner {

NoiseModel::NoiseModel(const SystemNoise& noise, const RunOpTimes& run)
    : run_mean_over_median_(run.mean_over_median) {
  for (const NoiseWindow& w : noise.windows) {
    if (w.window_s <= 0 || w.detour_s.empty()) continue;
    Window x;
    x.window_s = w.window_s;
    x.quantiles = w.detour_s;
    std::sort(x.quantiles.begin(), x.quantiles.end());
    x.mean = std::accumulate(x.quantiles.begin(), x.quantiles.end(), 0.0) / static_cast<double>(x.quantiles.size());
    windows_.push_back(std::move(x));
  }
  std::sort(windows_.begin(), windows_.end(), [](const Window& a, const Window& b) { return a.window_s < b.window_s; });
}

std::pair<size_t, double> NoiseModel::Bracket(double x) const {
  size_t i = 1;
  while (windows_[i].window_s < x) ++i;
  const Window& a = windows_[i - 1];
  const Window& b = windows_[i];
  return {i, std::log(x / a.window_s) / std::log(b.window_s / a.window_s)};
}

double NoiseModel::MeanExcess(double work_s) const {
  if (work_s <= 0) return 0.0;
  if (run_mean_over_median_ > 0) return (run_mean_over_median_ - 1.0) * work_s;
  if (windows_.empty()) return 0.0;
  auto fraction = [](const Window& w) { return std::max(0.0, w.mean) / w.window_s; };
  if (work_s <= windows_.front().window_s) return fraction(windows_.front()) * work_s;
  if (work_s >= windows_.back().window_s) return fraction(windows_.back()) * work_s;
  const auto [i, t] = Bracket(work_s);
  return ((1 - t) * fraction(windows_[i - 1]) + t * fraction(windows_[i])) * work_s;
}

double NoiseModel::ExcessAt(const Window& w, int64_t group) {
  // E[max of g draws] from n equally likely quantiles: quantile i is the maximum with
  // probability ((i+1)/n)^g - (i/n)^g.
  const auto n = static_cast<double>(w.quantiles.size());
  const auto g = static_cast<double>(group);
  double e = 0;
  for (size_t i = 0; i < w.quantiles.size(); ++i) {
    const double lo = std::pow(static_cast<double>(i) / n, g);
    const double hi = std::pow(static_cast<double>(i + 1) / n, g);
    e += w.quantiles[i] * (hi - lo);
  }
  return std::max(0.0, e - w.mean);
}

double NoiseModel::SyncExcess(double window_s, int64_t group) const {
  if (windows_.empty() || group <= 1 || window_s <= 0) return 0.0;
  const Window& first = windows_.front();
  const Window& last = windows_.back();
  if (window_s <= first.window_s) return ExcessAt(first, group) * window_s / first.window_s;
  if (window_s >= last.window_s) return ExcessAt(last, group) * std::sqrt(window_s / last.window_s);
  const auto [i, t] = Bracket(window_s);
  return (1 - t) * ExcessAt(windows_[i - 1], group) + t * ExcessAt(windows_[i], group);
}

double NoiseModel::DrawAt(const Window& w, double u) {
  const auto i = std::min(w.quantiles.size() - 1, static_cast<size_t>(u * static_cast<double>(w.quantiles.size())));
  return w.quantiles[i] - w.mean;
}

double NoiseModel::Draw(double window_s, double u) const {
  if (windows_.empty() || window_s <= 0) return 0.0;
  const Window& first = windows_.front();
  const Window& last = windows_.back();
  if (window_s <= first.window_s) return DrawAt(first, u) * window_s / first.window_s;
  if (window_s >= last.window_s) return DrawAt(last, u) * std::sqrt(window_s / last.window_s);
  const auto [i, t] = Bracket(window_s);
  return (1 - t) * DrawAt(windows_[i - 1], u) + t * DrawAt(windows_[i], u);
}

}  // namespace parallax::planner
