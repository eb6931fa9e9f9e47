#pragma once
// Predicted vs measured (the traces library's AlignSlices): both traces on one time axis, per rank
// the predicted rows above the measured rows, the measured step shifted so that it starts where
// the predicted step starts. Every matched slice carries its signed relative error
// (predicted - measured) / measured; unmatched slices are flagged. The op table lists the
// matched pairs by absolute error, largest first.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "traces/diff.h"
#include "traces/trace.h"

namespace parallax::gui {

struct ComparedOp {
  uint32_t display_predicted = 0;  //!< slice indices in display()
  uint32_t display_measured = 0;
  std::string what;  //!< "rank 0 layer 3 qkv fwd mb 2" or the name
  int64_t predicted_ns = 0;
  int64_t measured_ns = 0;
  double rel_error = 0;  //!< (predicted - measured) / measured
};

class CompareState {
 public:
  //! Owns both traces. `measured_step` -1: the library's automatic choice (see StepSelection).
  CompareState(traces::Trace predicted, traces::Trace measured);

  //! Re-aligns for one measured step (-1: automatic; in identity mode the first compared step).
  void SelectStep(int64_t measured_step);
  int64_t selected_step() const { return step_; }
  //! Measured steps a user can pick (empty in name-order mode).
  const std::vector<int64_t>& steps() const { return steps_; }
  traces::AlignMode mode() const { return mode_; }

  //! Predicted slices (pid 2r, "rank r predicted") and the selected measured step (pid 2r+1).
  const traces::Trace& display() const { return display_; }
  //! Signed relative error of a display slice; NaN when it is unmatched.
  float ErrorOf(uint32_t display_slice) const { return error_[display_slice]; }
  bool IsPredicted(uint32_t display_slice) const { return display_slice < predicted_count_; }
  //! The other side of a matched display slice, or -1.
  int64_t PartnerOf(uint32_t display_slice) const { return partner_[display_slice]; }
  //! Matched pairs by |predicted - measured|, largest first.
  const std::vector<ComparedOp>& ops() const { return ops_; }
  int64_t only_predicted() const { return only_predicted_; }
  int64_t only_measured() const { return only_measured_; }

  const traces::Trace& predicted() const { return predicted_; }
  const traces::Trace& measured() const { return measured_; }

 private:
  traces::Trace predicted_, measured_;
  traces::Trace display_;
  std::vector<float> error_;
  std::vector<int64_t> partner_;
  std::vector<ComparedOp> ops_;
  std::vector<int64_t> steps_;
  int64_t step_ = -1;
  uint32_t predicted_count_ = 0;
  int64_t only_predicted_ = 0, only_measured_ = 0;
  traces::AlignMode mode_ = traces::AlignMode::kIdentity;
};

}  // namespace parallax::gui
