#include "profiler/refine/cost_db_merge.h"

#include <algorithm>

namespace parallax::profiler {

MergeCounts MergeSamples(const FittedSamples& fitted, CostDb& db) {
  MergeCounts n;
  for (const GemmSample& s : fitted.gemms) {
    auto it = std::find_if(db.gemms.begin(), db.gemms.end(), [&](const GemmSample& g) {
      return g.m == s.m && g.n == s.n && g.k == s.k && g.batch == s.batch && g.dtype == s.dtype &&
             g.accumulate == s.accumulate;
    });
    if (it != db.gemms.end()) {
      *it = s;
      ++n.gemms_replaced;
    } else {
      db.gemms.push_back(s);
      ++n.gemms_added;
    }
  }
  for (const KernelSample& s : fitted.kernels) {
    auto it = std::find_if(db.kernels.begin(), db.kernels.end(),
                           [&](const KernelSample& k) { return k.op == s.op && k.bytes == s.bytes; });
    if (it != db.kernels.end()) {
      *it = s;
      ++n.kernels_replaced;
    } else {
      db.kernels.push_back(s);
      ++n.kernels_added;
    }
  }
  for (const CollectiveSample& s : fitted.collectives) {
    const int64_t size = std::max<int64_t>(s.what.group.size, 2);
    auto curve = std::find_if(db.collectives.begin(), db.collectives.end(), [&](const CollectiveCurve& c) {
      return c.op == s.what.kind && c.group_size == size && c.spans_nodes == s.what.group.spans_nodes();
    });
    if (curve == db.collectives.end()) {
      CollectiveCurve c;
      c.op = s.what.kind;
      c.group_size = size;
      c.spans_nodes = s.what.group.spans_nodes();
      c.source = "refine";
      db.collectives.push_back(c);
      curve = db.collectives.end() - 1;
    }
    auto& pts = curve->points;
    auto at = std::lower_bound(pts.begin(), pts.end(), s.point.bytes,
                               [](const CollectivePoint& p, int64_t b) { return p.bytes < b; });
    if (at != pts.end() && at->bytes == s.point.bytes) {
      *at = s.point;
      ++n.collective_points_replaced;
    } else {
      pts.insert(at, s.point);
      ++n.collective_points_added;
    }
  }
  for (const RunFactor& r : fitted.run_ratios) {
    auto it = std::find_if(db.run_factors.begin(), db.run_factors.end(),
                           [&](const RunFactor& f) { return f.Matches(r.family, r.dtype); });
    if (it == db.run_factors.end()) {
      db.run_factors.push_back(r);
    } else {
      // The trace's ratio is relative to predictions that carried the old factor already.
      it->factor *= r.factor;
      it->ops += r.ops;
      it->source = r.source;
    }
  }
  // Measured directly (times over medians of the same run), not relative to a prediction: replaces.
  if (fitted.run_op_times.measured() && fitted.median_step_over_medians > 0) {
    db.run_op_times = fitted.run_op_times;
    db.run_op_times.mean_over_median = fitted.median_step_over_medians;
  }
  if (fitted.contention_factor) {
    n.contention_ratio = *fitted.contention_factor;
    if (*fitted.contention_factor > db.contention_factor) {
      db.contention_factor = *fitted.contention_factor;
      db.contention = fitted.contention;
      n.contention_raised = true;
    }
  }
  return n;
}

}  // namespace parallax::profiler
