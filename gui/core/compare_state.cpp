#include "gui/core/compare_state.h"

#include <algorithm>
#include <map>

namespace parallax::gui {
namespace {

//! Copies a track into `out` under a per-rank, per-side process: pid 2 * rank + side.
traces::TrackId DisplayTrack(traces::Trace& out, const traces::Trace& in, traces::TrackId id,
                             int side,
                             std::map<std::pair<traces::TrackId, int>, traces::TrackId>& cache) {
  if (auto it = cache.find({id, side}); it != cache.end()) return it->second;
  const traces::Track& src = in.track(id);
  const int64_t rank = src.rank >= 0 ? src.rank : src.pid;
  traces::Track t = src;
  t.pid = 2 * rank + side;
  t.rank = -1;  // lanes by pid: one lane per (rank, side)
  t.process_name = "rank " + std::to_string(rank) + (side == 0 ? " predicted" : " measured");
  const traces::TrackId out_id = out.AddTrack(std::move(t));
  cache[{id, side}] = out_id;
  return out_id;
}

std::string Describe(const traces::Trace& t, const traces::Slice& s) {
  std::string what;
  if (auto id = t.identity(s)) {
    what = "rank " + std::to_string(id->rank);
    if (id->layer >= 0) what += " layer " + std::to_string(id->layer);
    what += std::string(" ") + ToString(id->op) + " " + ToString(id->phase);
    if (id->microbatch >= 0) what += " mb " + std::to_string(id->microbatch);
  } else {
    what = std::string(t.Str(s.name));
  }
  return what;
}

}  // namespace

CompareState::CompareState(traces::Trace predicted, traces::Trace measured)
    : predicted_(std::move(predicted)), measured_(std::move(measured)) {
  SelectStep(-1);
}

void CompareState::SelectStep(int64_t measured_step) {
  traces::StepSelection sel;
  sel.measured_step = measured_step;
  traces::Alignment al = traces::AlignSlices(predicted_, measured_, sel);
  mode_ = al.mode;
  steps_ =
      mode_ == traces::AlignMode::kIdentity ? traces::StepsOf(measured_) : std::vector<int64_t>{};
  only_predicted_ = al.only_predicted;
  only_measured_ = al.only_measured;
  // The measured step shown: the chosen one, else the step of the first matched measured slice.
  step_ = measured_step;
  if (step_ < 0 && mode_ == traces::AlignMode::kIdentity && !al.pairs.empty()) {
    int64_t first = INT64_MAX;
    for (const auto& [p, m] : al.pairs) {
      if (auto id = measured_.identity(measured_.slice(m))) first = std::min(first, id->step);
    }
    step_ = first == INT64_MAX ? -1 : first;
  }
  // Slices without an identity (a framework's kernels beside the ops they were attributed to,
  // `refine --attributed-trace`) show with the step whose ops' span holds their start.
  int64_t step_begin = INT64_MAX, step_end = INT64_MIN;
  measured_.slices().ForEach([&](const traces::Slice& s) {
    auto id = measured_.identity(s);
    if (!id || id->step != step_) return;
    step_begin = std::min(step_begin, s.start_ns);
    step_end = std::max(step_end, s.end_ns());
  });
  auto in_step = [&](const traces::Slice& s) {
    if (mode_ != traces::AlignMode::kIdentity || step_ < 0) return true;
    auto id = measured_.identity(s);
    if (!id) return s.start_ns >= step_begin && s.start_ns < step_end;
    return id->step == step_;
  };

  display_ = traces::Trace();
  display_.metadata.kind = "compare";
  std::map<std::pair<traces::TrackId, int>, traces::TrackId> tracks;
  std::vector<uint32_t> measured_display(measured_.slices().size(), UINT32_MAX);
  auto copy = [&](const traces::Trace& in, const traces::Slice& s, int side, int64_t shift) {
    traces::Slice d = s;
    d.track = DisplayTrack(display_, in, s.track, side, tracks);
    d.name = display_.Intern(in.Str(s.name));
    d.category = display_.Intern(in.Str(s.category));
    d.start_ns = s.start_ns + shift;
    if (const traces::SliceArgs* a = in.args(s)) {
      traces::SliceArgs c = *a;
      c.collective = display_.Intern(in.Str(a->collective));
      d.args = display_.AddArgs(c);
    }
    return static_cast<uint32_t>(display_.AddSlice(d));
  };
  int64_t pred_start = INT64_MAX, meas_start = INT64_MAX;
  predicted_.slices().ForEach(
      [&](const traces::Slice& s) { pred_start = std::min(pred_start, s.start_ns); });
  measured_.slices().ForEach([&](const traces::Slice& s) {
    if (in_step(s)) meas_start = std::min(meas_start, s.start_ns);
  });
  const int64_t shift =
      (pred_start == INT64_MAX || meas_start == INT64_MAX) ? 0 : pred_start - meas_start;
  predicted_.slices().ForEach([&](const traces::Slice& s) { copy(predicted_, s, 0, 0); });
  predicted_count_ = static_cast<uint32_t>(display_.slices().size());
  for (size_t i = 0; i < measured_.slices().size(); ++i) {
    const traces::Slice& s = measured_.slice(i);
    if (in_step(s)) measured_display[i] = copy(measured_, s, 1, shift);
  }
  const size_t n = display_.slices().size();
  error_.assign(n, std::numeric_limits<float>::quiet_NaN());
  partner_.assign(n, -1);
  ops_.clear();
  for (const auto& [p, m] : al.pairs) {
    const uint32_t dm = measured_display[m];
    if (dm == UINT32_MAX) continue;  // a measured step not shown
    const traces::Slice& ps = predicted_.slice(p);
    const traces::Slice& ms = measured_.slice(m);
    const double err =
        ms.dur_ns > 0 ? static_cast<double>(ps.dur_ns - ms.dur_ns) / static_cast<double>(ms.dur_ns)
                      : 0;
    error_[p] = error_[dm] = static_cast<float>(err);
    partner_[p] = dm;
    partner_[dm] = p;
    ops_.push_back({p, dm, Describe(predicted_, ps), ps.dur_ns, ms.dur_ns, err});
  }
  std::stable_sort(ops_.begin(), ops_.end(), [](const ComparedOp& a, const ComparedOp& b) {
    return std::llabs(a.predicted_ns - a.measured_ns) > std::llabs(b.predicted_ns - b.measured_ns);
  });
}

}  // namespace parallax::gui
