#include "gui/core/candidates.h"

#include <algorithm>
#include <cmath>
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
    auto m = ModelFromJson(j.at("model"), file, "/model");
    if (!m) return m.error();
    set.model = *m;
    auto c = ClusterFromJson(j.at("cluster"), file, "/cluster");
    if (!c) return c.error();
    set.cluster = *c;
    if (j.contains("training")) {
      auto t = TrainingFromJson(j.at("training"), file, "/training");
      if (!t) return t.error();
      set.training = *t;
    }
    set.device_memory_bytes = j.value("device_memory_bytes", set.cluster.device.memory_bytes());
    const Json& list = j.at("candidates");
    if (!list.is_array()) return BadInput(file + ": /candidates: expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      const Json& e = list[i];
      const std::string path = "/candidates/" + std::to_string(i);
      Candidate cand;
      if (!e.is_object() || !e.contains("layout"))
        return BadInput(file + ": " + path + "/layout: missing");
      auto l = LayoutFromJson(e.at("layout"), file, path + "/layout");
      if (!l) return l.error();
      cand.layout = *l;
      cand.rejected = e.value("rejected", "");
      cand.step_time_s = e.value("step_time_s", 0.0);
      cand.tokens_per_s = e.value("tokens_per_s", 0.0);
      cand.mfu = e.value("mfu", 0.0);
      cand.peak_memory_bytes = e.value("peak_memory_bytes", int64_t{0});
      if (cand.evaluated() && !(cand.step_time_s > 0)) {
        return BadInput(file + ": " + path +
                        "/step_time_s: an evaluated candidate needs a step time > 0");
      }
      set.candidates.push_back(cand);
    }
    return set;
  }
}

Result<CandidateSet> LoadCandidates(const std::string& path) {
  auto j = LoadJsonFile(path);
  if (!j) return j.error();
  return CandidatesFromJson(*j, path);
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
  a.x_max = x_max > 0 ? x_max * 1.05 : 1;
  a.y_min = 0;
  a.y_max = y_max > 0 ? y_max * 1.05 : 1;
  return a;
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
