#include "gui/core/modes_data.h"

#include <algorithm>
#include <fstream>

#include "model/json_io.h"

namespace parallax::gui {
namespace {

Result<std::vector<double>> Numbers(const Json& j, const std::string& where) {
  if (!j.is_array()) return BadInput(where + ": expected an array of numbers");
  std::vector<double> out;
  for (const Json& x : j) {
    if (!x.is_number()) return BadInput(where + ": expected an array of numbers");
    out.push_back(x.get<double>());
  }
  return out;
}

Result<double> Number(const Json& m, const char* key, const std::string& where) {
  if (!m.contains(key) || !m[key].is_number()) return BadInput(where + "/" + key + ": expected a number");
  return m[key].get<double>();
}

Result<ModeCurve> ReadMode(const Json& m, const std::string& where) {
  if (!m.is_object() || !m.contains("mode") || !m["mode"].is_string()) {
    return BadInput(where + "/mode: expected a string");
  }
  ModeCurve c;
  c.mode = m["mode"].get<std::string>();
  if (!m.contains("losses")) return BadInput(where + "/losses: missing");
  PX_ASSIGN(c.losses, Numbers(m["losses"], where + "/losses"));
  if (!m.contains("wall_clock_s")) return BadInput(where + "/wall_clock_s: missing");
  PX_ASSIGN(c.wall_clock_s, Numbers(m["wall_clock_s"], where + "/wall_clock_s"));
  if (c.wall_clock_s.size() != c.losses.size()) {
    return BadInput(where + "/wall_clock_s: " + std::to_string(c.wall_clock_s.size()) + " entries for " +
                    std::to_string(c.losses.size()) + " losses");
  }
  PX_ASSIGN(c.predicted_tokens_per_s, Number(m, "predicted_tokens_per_s", where));
  PX_ASSIGN(c.measured_tokens_per_s, Number(m, "measured_tokens_per_s", where));
  return c;
}

}  // namespace

Result<ModesComparison> LoadModesComparison(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot be read");
  const Json j = Json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return BadInput(path + ": not a JSON object");
  if (!j.contains("modes") || !j["modes"].is_array()) return BadInput(path + ": /modes: expected an array");
  ModesComparison c;
  c.model = j.value("model", "");
  c.workers = j.value("workers", int64_t{0});
  c.inject_slow = j.value("inject_slow", "");
  for (size_t i = 0; i < j["modes"].size(); ++i) {
    auto m = ReadMode(j["modes"][i], "/modes/" + std::to_string(i));
    if (!m) return BadInput(path + ": " + m.error().message);
    c.modes.push_back(std::move(*m));
  }
  return c;
}

Range LossRange(const ModesComparison& c) {
  Range r{1e300, -1e300};
  for (const ModeCurve& m : c.modes) {
    for (double l : m.losses) {
      r.lo = std::min(r.lo, l);
      r.hi = std::max(r.hi, l);
    }
  }
  if (r.lo > r.hi) return {0, 1};
  const double pad = std::max(1e-3, 0.05 * (r.hi - r.lo));
  return {r.lo - pad, r.hi + pad};
}

double LastWallClock(const ModesComparison& c) {
  double t = 0;
  for (const ModeCurve& m : c.modes) {
    if (!m.wall_clock_s.empty()) t = std::max(t, m.wall_clock_s.back());
  }
  return t > 0 ? t : 1;
}

double MaxTokensPerSecond(const ModesComparison& c) {
  double t = 0;
  for (const ModeCurve& m : c.modes) t = std::max({t, m.predicted_tokens_per_s, m.measured_tokens_per_s});
  return t > 0 ? t : 1;
}

}  // namespace parallax::gui
