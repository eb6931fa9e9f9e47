#include "profiler/calibrate/calibrator.h"

namespace parallax::profiler {

double Calibrator::Weight(const CalibrationItem& item) const {
  if (item.expected_s <= 0) return 1.0;
  const double runs = static_cast<double>(options_.warmup + options_.repetitions);
  return item.expected_s * runs;
}

double Calibrator::TotalWeight() const {
  double w = 0;
  for (const auto& item : items_) w += Weight(item);
  return w;
}

Result<CalibrationReport> Calibrator::Run(ProgressBar* progress) {
  CalibrationReport report;
  double done = 0;
  for (const CalibrationItem& item : items_) {
    if (Stopped()) return IoError("interrupted: nothing written");
    if (progress) progress->Update(done, item.what);
    auto fail = [&](const Error& e) { report.skipped.push_back({item.what, e.message}); };
    if (options_.warmup > 0) {
      auto warm = item.measure(options_.warmup);
      if (!warm) {
        fail(warm.error());
        done += Weight(item);
        continue;
      }
    }
    Measurement best;
    bool ok = false;
    int64_t attempts = 0;
    for (int64_t attempt = 0; attempt <= options_.max_remeasures; ++attempt) {
      if (Stopped()) return IoError("interrupted: nothing written");
      auto times = item.measure(options_.repetitions);
      if (!times) {
        fail(times.error());
        ok = false;
        break;
      }
      if (static_cast<int64_t>(times->size()) != options_.repetitions) {
        fail(Error{"the measurement returned " + std::to_string(times->size()) + " timings for " +
                       std::to_string(options_.repetitions) + " runs",
                   ErrorKind::kInternal});
        ok = false;
        break;
      }
      ++attempts;
      const Measurement m = Summarize(*times);
      if (!ok || m.relative_spread() < best.relative_spread()) best = m;
      ok = true;
      if (m.relative_spread() <= options_.max_relative_spread) break;
      if (attempt < options_.max_remeasures) ++report.remeasured;
    }
    if (ok) {
      best.remeasured = attempts - 1;
      if (best.relative_spread() > options_.max_relative_spread) ++report.still_noisy;
      item.record(best);
      ++report.measured;
    }
    done += Weight(item);
  }
  if (progress) {
    progress->Update(done, "");
    progress->Finish();
  }
  return report;
}

}  // namespace parallax::profiler
