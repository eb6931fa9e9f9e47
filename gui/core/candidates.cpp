#include "gui/core/candidates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "model/json_io.h"

namespace parallax::gui {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

Result<CandidateSet> ParseCandidates(const Json& j, const std::string& file);

Result<CandidateSet> CandidatesFromJson(const Json& j, const std::string& file) {
  try {
    return CatchJsonErrors([&]() -> Result<CandidateSet> { return ParseCandidates(j, file); });
  } catch (const Json::exception& e) {
    return BadInput(file + ": " + e.what());
  }
}

Result<CandidateSet> ParseCandidates(const Json& j, const std::string& file) {
  {
    if (!j.is_object() || j.value("kind", "") != "candidates")
      return BadInput(file + ": /kind: expected \"candidates\"");
    for (const char* key : {"model", "cluster", "candidates"}) {
      if (!j.contains(key)) return BadInput(file + ": /" + key + ": missing");
    }
    CandidateSet set;
    PX_ASSIGN(set.model, ModelFromJson(j.at("model"), file, "/model"));
    PX_ASSIGN(set.cluster, ClusterFromJson(j.at("cluster"), file, "/cluster"));
    if (j.contains("training")) {
      PX_ASSIGN(set.training, TrainingFromJson(j.at("training"), file, "/training"));
    }
    set.device_memory_bytes = j.value("device_memory_bytes", set.cluster.device.memory_bytes());
    const Json& list = j.at("candidates");
    if (!list.is_array()) return BadInput(file + ": /candidates: expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      const Json& e = list[i];
      const std::string path = "/candidates/" + std::to_string(i);
      Candidate cand;
      std::string where = file;
      where += ": ";
      where += path;
      if (!e.is_object() || !e.contains("layout")) return BadInput(where + "/layout: missing");
      PX_ASSIGN(cand.layout, LayoutFromJson(e.at("layout"), file, path + "/layout"));
      cand.rejected = e.value("rejected", "");
      cand.step_time_s = e.value("step_time_s", 0.0);
      cand.tokens_per_s = e.value("tokens_per_s", 0.0);
      cand.mfu = e.value("mfu", 0.0);
      cand.peak_memory_bytes = e.value("peak_memory_bytes", int64_t{0});
      if (cand.evaluated() && !(cand.step_time_s > 0)) {
        return BadInput(where + "/step_time_s: an evaluated candidate needs a step time > 0");
      }
      set.candidates.push_back(cand);
    }
    return set;
  }
}

Result<CandidateSet> LoadCandidates(const std::string& path) {
  PX_ASSIGN(const Json j, LoadJsonFile(path));
  return CandidatesFromJson(j, path);
}

const char* ToString(Dimension d) {
  switch (d) {
    case Dimension::kTp:
      return "tp";
    case Dimension::kPp:
      return "pp";
    case Dimension::kDp:
      return "dp";
    case Dimension::kZero:
      return "zero";
    case Dimension::kMicroBatch:
      return "micro_batch";
    case Dimension::kSchedule:
      return "schedule";
    case Dimension::kRecompute:
      return "recompute";
    case Dimension::kSequenceParallel:
      return "sequence_parallel";
    case Dimension::kVirtualStages:
      return "virtual_stages";
  }
  return "?";
}

int64_t ValueOf(const Layout& l, Dimension d) {
  switch (d) {
    case Dimension::kTp:
      return l.tp;
    case Dimension::kPp:
      return l.pp;
    case Dimension::kDp:
      return l.dp;
    case Dimension::kZero:
      return l.zero_stage;
    case Dimension::kMicroBatch:
      return l.micro_batch;
    case Dimension::kSchedule:
      return static_cast<int64_t>(l.schedule);
    case Dimension::kRecompute:
      return static_cast<int64_t>(l.recompute);
    case Dimension::kSequenceParallel:
      return l.sequence_parallel ? 1 : 0;
    case Dimension::kVirtualStages:
      return l.virtual_stages;
  }
  return 0;
}

std::string ValueLabel(Dimension d, int64_t v) {
  if (d == Dimension::kSchedule) return ToString(static_cast<ScheduleKind>(v));
  if (d == Dimension::kRecompute) return ToString(static_cast<Recompute>(v));
  if (d == Dimension::kSequenceParallel) return v ? "on" : "off";
  return std::to_string(v);
}

std::vector<int64_t> DistinctValues(const CandidateSet& set, Dimension d) {
  std::set<int64_t> v;
  for (const auto& c : set.candidates) {
    if (c.plottable()) v.insert(ValueOf(c.layout, d));
  }
  return {v.begin(), v.end()};
}

bool CandidateFilter::Admits(const Candidate& c) const {
  for (size_t i = 0; i < required.size(); ++i) {
    if (required[i] && ValueOf(c.layout, kAllDimensions[i]) != *required[i]) return false;
  }
  return true;
}

double ScatterAxes::XOfValue(double gib) const {
  return left + (gib - x_min) / (x_max - x_min) * width;
}
double ScatterAxes::YOfValue(double v) const {
  return top + height - (v - y_min) / (y_max - y_min) * height;
}
double ScatterAxes::XOf(const Candidate& c) const {
  return XOfValue(static_cast<double>(c.peak_memory_bytes) / kGiB);
}
double ScatterAxes::YOf(const Candidate& c) const { return YOfValue(ValueY(c)); }

ScatterAxes FitScatter(const CandidateSet& set, const CandidateFilter& filter, bool tokens_per_s,
                       int width_px, int height_px) {
  ScatterAxes a;
  a.tokens_per_s = tokens_per_s;
  a.width = std::max(width_px - a.left - 20, 50);
  a.height = std::max(height_px - a.top - 50, 50);
  double x_max = static_cast<double>(set.device_memory_bytes) / kGiB, y_max = 0;
  for (const auto& c : set.candidates) {
    if (!c.evaluated() || !filter.Admits(c)) continue;
    x_max = std::max(x_max, static_cast<double>(c.peak_memory_bytes) / kGiB);
    y_max = std::max(y_max, a.ValueY(c));
  }
  a.x_min = 0;
  a.x_ticks = NiceTicks(x_max * 1.02, 10);
  a.x_max = a.x_ticks.back();
  a.y_min = 0;
  a.y_ticks = NiceTicks(y_max * 1.02);
  a.y_max = a.y_ticks.back();
  return a;
}

std::vector<double> NiceTicks(double hi, int max_intervals) {
  if (!(hi > 0) || !std::isfinite(hi)) return {0, 1};
  max_intervals = std::max(max_intervals, 1);
  double step = std::pow(10.0, std::floor(std::log10(hi / max_intervals)));
  for (int guard = 0; guard < 8 && std::ceil(hi / step - 1e-9) > max_intervals; ++guard) {
    const double mant = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    step *= mant < 1.5 ? 2 : (mant < 3 ? 2.5 : 2);  // 1 -> 2 -> 5 -> 10
  }
  const int n = static_cast<int>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int i = 0; i <= n; ++i) ticks.push_back(step * i);
  return ticks;
}

std::string ScatterYLabel(double v, double max_tick, bool tokens_per_s) {
  char buf[48];
  if (tokens_per_s) {
    if (max_tick >= 1e6) std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
    else if (max_tick >= 1e3) std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
    else std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  if (max_tick >= 1) std::snprintf(buf, sizeof buf, "%g s", v);
  else if (max_tick >= 1e-3) std::snprintf(buf, sizeof buf, "%g ms", v * 1e3);
  else std::snprintf(buf, sizeof buf, "%g us", v * 1e6);
  return buf;
}

int64_t PickCandidate(const CandidateSet& set, const CandidateFilter& filter,
                      const ScatterAxes& axes, double x, double y, double radius_px) {
  int64_t best = -1;
  double best_d2 = radius_px * radius_px;
  for (size_t i = 0; i < set.candidates.size(); ++i) {
    const Candidate& c = set.candidates[i];
    if (!c.evaluated() || !filter.Admits(c)) continue;
    const double dx = axes.XOf(c) - x, dy = axes.YOf(c) - y;
    if (dx * dx + dy * dy <= best_d2) best_d2 = dx * dx + dy * dy, best = static_cast<int64_t>(i);
  }
  return best;
}

}  // namespace parallax::gui
