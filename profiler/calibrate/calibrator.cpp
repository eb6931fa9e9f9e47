#include "profiler/calibrate/calibrator.h"

#include <algorithm>
#include <optional>

namespace parallax::profiler {

struct Calibrator::Attempt {
  std::vector<double> times;   //!< the timed runs of every chunk, pooled
  std::optional<Error> error;  //!< set when a chunk could not run
};

int64_t Calibrator::RoundCount() const {
  return std::clamp<int64_t>(options_.rounds, 1, std::max<int64_t>(options_.repetitions, 1));
}

std::vector<int64_t> Calibrator::Chunks() const {
  const int64_t reps = std::max<int64_t>(options_.repetitions, 1);
  const int64_t r = RoundCount();
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r; ++i) out.push_back(reps / r + (i < reps % r ? 1 : 0));
  return out;
}

int64_t Calibrator::LaterWarmup() const { return std::min(options_.warmup, options_.round_warmup); }

double Calibrator::Runs(const CalibrationItem& item) const {
  const int64_t later_chunks = item.interleave ? RoundCount() - 1 : 0;
  return static_cast<double>(options_.warmup + options_.repetitions + later_chunks * LaterWarmup());
}

double Calibrator::Weight(const CalibrationItem& item) const {
  return item.expected_s > 0 ? item.expected_s * Runs(item) : 1.0;
}

double Calibrator::PerRun(const CalibrationItem& item) const { return Weight(item) / std::max(Runs(item), 1.0); }

Result<std::vector<double>> Calibrator::Timed(const CalibrationItem& item, int64_t n) const {
  auto times = item.measure(n);
  if (times && static_cast<int64_t>(times->size()) != n) {
    return Error{"the measurement returned " + std::to_string(times->size()) + " timings for " + std::to_string(n) +
                     " runs",
                 ErrorKind::kInternal};
  }
  return times;
}

double Calibrator::TotalWeight() const {
  double w = 0;
  for (const auto& item : items_) w += Weight(item);
  return w;
}

Status Calibrator::MeasureInRounds(const std::vector<size_t>& which, bool first, std::vector<Attempt>& out,
                                   ProgressBar* progress, double& done) {
  const std::vector<int64_t> chunks = Chunks();
  const int64_t later_warmup = LaterWarmup();
  for (size_t r = 0; r < chunks.size(); ++r) {
    for (size_t i : which) {
      Attempt& a = out[i];
      if (a.error) continue;
      if (Stopped()) return IoError("interrupted: nothing written");
      const CalibrationItem& item = items_[i];
      const int64_t warm = first && r == 0 ? options_.warmup : later_warmup;
      const double per_run = PerRun(item);
      if (progress) {
        progress->Update(done, (first ? "round " : "again, round ") + std::to_string(r + 1) + "/" +
                                   std::to_string(chunks.size()) + ": " + item.what);
      }
      if (warm > 0) {
        if (auto w = item.measure(warm); !w) a.error = w.error();
      }
      if (!a.error) {
        if (auto t = Timed(item, chunks[r]); !t) {
          a.error = t.error();
        } else {
          a.times.insert(a.times.end(), t->begin(), t->end());
        }
      }
      if (item.release) item.release();
      done += per_run * static_cast<double>(warm + chunks[r]);
      if (a.error) {
        // The chunks it will not run, so the bar still reaches its total.
        for (size_t later = r + 1; later < chunks.size(); ++later) {
          done += per_run * static_cast<double>(later_warmup + chunks[later]);
        }
      }
    }
  }
  if (Stopped()) return IoError("interrupted: nothing written");
  return {};
}

Result<CalibrationReport> Calibrator::Run(ProgressBar* progress) {
  CalibrationReport report;
  double done = 0;
  const bool rounds = RoundCount() > 1;
  std::vector<size_t> interleaved, in_order;
  for (size_t i = 0; i < items_.size(); ++i) (rounds && items_[i].interleave ? interleaved : in_order).push_back(i);

  if (!interleaved.empty()) {
    std::vector<Measurement> best(items_.size());
    std::vector<int64_t> attempts(items_.size(), 0);
    std::vector<bool> skipped(items_.size(), false);
    std::vector<size_t> pending = interleaved;
    for (int64_t pass = 0; pass <= options_.max_remeasures && !pending.empty(); ++pass) {
      if (pass > 0) {
        report.remeasured += static_cast<int64_t>(pending.size());
        if (progress) {
          double more = 0;
          const double runs = static_cast<double>(options_.repetitions + RoundCount() * LaterWarmup());
          for (size_t i : pending) more += PerRun(items_[i]) * runs;
          progress->Extend(more);
        }
      }
      std::vector<Attempt> got(items_.size());
      PX_TRY(MeasureInRounds(pending, pass == 0, got, progress, done));
      std::vector<size_t> noisy;
      for (size_t i : pending) {
        if (got[i].error) {
          // A point that measured before keeps its earlier attempt; one that never ran is skipped.
          if (attempts[i] == 0) {
            report.skipped.push_back({items_[i].what, got[i].error->message});
            skipped[i] = true;
          }
          continue;
        }
        const Measurement m = Summarize(got[i].times);
        ++attempts[i];
        if (attempts[i] == 1 || m.relative_spread() < best[i].relative_spread()) best[i] = m;
        if (m.relative_spread() > options_.max_relative_spread) noisy.push_back(i);
      }
      pending = std::move(noisy);
    }
    for (size_t i : interleaved) {
      if (skipped[i]) continue;
      best[i].remeasured = attempts[i] - 1;
      if (best[i].relative_spread() > options_.max_relative_spread) ++report.still_noisy;
      items_[i].record(best[i]);
      ++report.measured;
    }
  }

  for (size_t index : in_order) {
    const CalibrationItem& item = items_[index];
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
      auto times = Timed(item, options_.repetitions);
      if (!times) {
        // A point that measured before keeps its earlier attempt (as in rounds); one that never
        // ran is skipped.
        if (!ok) fail(times.error());
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
    if (item.release) item.release();
    done += Weight(item);
  }
  if (progress) {
    progress->Update(done, "");
    progress->Finish();
  }
  return report;
}

}  // namespace parallax::profiler
