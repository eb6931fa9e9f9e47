#pragma once
// Adds refined samples to a cost database. A sample at a shape the database already holds
// replaces it (the newer measurement of the same shape wins); a collective point joins the curve
// the planner reads for its (op, group size, node span), or starts a "refine" curve. A family's
// run ratio multiplies its run factor (the ratio was measured against predictions that used it).

#include "model/cost_db.h"
#include "profiler/refine/sample_fit.h"

namespace parallax::profiler {

struct MergeCounts {
  int64_t gemms_added = 0, gemms_replaced = 0;
  int64_t kernels_added = 0, kernels_replaced = 0;
  int64_t collective_points_added = 0, collective_points_replaced = 0;
  //! The trace's compute-side contention ratio (when the trace had one) and whether it raised the
  //! database's factor. A compute op's duration shows how much the collective beside it slowed it,
  //! not how much the collective itself stretched, so the ratio is a lower bound of the end-to-end
  //! factor calibrate measures: it raises the factor, never lowers it.
  double contention_ratio = 0;
  bool contention_raised = false;
};

MergeCounts MergeSamples(const FittedSamples& fitted, CostDb& db);

}  // namespace parallax::profiler
