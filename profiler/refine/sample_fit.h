#pragma once
// Measured op instances -> CostDb samples at the planner's shapes. Instances of the same op
// description (every layer, micro-batch, rank and step of one op) pool into one median with its
// interquartile range. A compute op's measured time is shared among its GEMMs and memory-bound
// parts in proportion to their predicted times (the only apportioning there is: an op that is one
// GEMM becomes exactly one sample at that GEMM's shape). Compute instances overlapped by measured
// DP communication on their rank are kept apart: the samples come from the others, and the ratio
// overlapped / alone of the ops that have both is the contention factor. Each family's measured
// and predicted totals give its run ratio: how much longer the family's ops ran inside steps than
// the database (calibrated in isolation) predicted, which the planner applies to the shapes no
// trace has sampled.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "planner/cost/priced_ops.h"

namespace parallax::profiler {

struct OpInstance {
  OpIdentity id;
  int64_t predicted_bytes = -1;  //!< bytes arg of the predicted slice
  int64_t measured_step = 0;     //!< the step of the measured slice (`id` is the predicted one's)
  double measured_s = 0;
  bool overlapped = false;  //!< a DP-communication slice of the same rank overlaps it (measured)
  //! DP-communication slices only: the part of the measured window that no compute op of the rank
  //! covers, and the compute inside the window at the pace those ops run without communication
  //! beside them (each op's median over its instances no DP slice overlaps). Negative: not known.
  double window_uncovered_s = -1;
  double window_compute_alone_s = -1;
};

//! The group a compute op's instances pool into (every layer, micro-batch and step of one op; the
//! optimizer per rank, whose shard differs; a memory pass described by its bytes alone, such as
//! the embedding's and the head's gradient passes that share an identity but not a size, per
//! `bytes`, the predicted op's): its samples, and refine's alone pace of it.
std::string ComputeGroupKey(const OpIdentity& id, int64_t bytes);

//! The collective time t_m a measured DP slice stands for in the simulator's overlap model (compute
//! beside a collective of length t_m runs k times slower while it runs). The slice's window W holds
//! uncovered time U and compute that would take A alone; what the collective cost the rank is
//! D = W - A (never below U). The model charges a collective that compute covers t_m (1 - 1/k), so
//! t_m = D k / (k - 1), and at most W (the model's window is t_m). Where communication runs beside
//! compute (a GPU's NCCL kernels) compute hides most of it, D k / (k - 1) reaches W and the slice's
//! length is the sample; where it progresses on the compute thread (MPI on a CPU rank: the slice
//! lasts until the next op boundary that polls it) D is the work and W overstates it.
double WindowedCollectiveTime(double window_s, double uncovered_s, double compute_alone_s, double contention);

struct CollectiveSample {
  planner::CollectiveDescription what;
  CollectivePoint point;
};

//! The smallest measured time per kernel call of the trace's compute ops: an op's median over
//! its kernel count (ComputeDescription::kernels). An op timed by the clock that timed it spent
//! at most that on each launch, so the launch floor the planner charges (kernels x the launch
//! overhead) cannot exceed it (launch_floor.h).
struct LaunchBound {
  double per_kernel_s = 0;
  std::string group;  //!< the op group it comes from (ComputeGroupKey)
  int64_t kernels = 0;
};

struct FittedSamples {
  std::vector<GemmSample> gemms;
  std::vector<KernelSample> kernels;
  std::vector<CollectiveSample> collectives;
  //! Per family, how much longer its ops ran in the trace than the database predicted: the sum
  //! over op descriptions of (median measured share x instances) / (predicted x instances).
  //! Merged into the database as run factors (multiplying any it had).
  std::vector<RunFactor> run_ratios;
  //! The compute ops' measured times over their groups' medians (the same instances the samples
  //! come from), over every instance: how far a disturbance moved the run (refine.h RunDisturbed).
  RunOpTimes run_op_times;
  //! The same ratio per measured step (its instances' times over their groups' medians), the
  //! median over the steps: what the step the run is measured by (model/step_time.h, the median
  //! step) paid above the samples, and what the refined database charges (CostDb::run_op_times).
  //! A minority of slowed steps moves the mean of every op, not the median step. 0: none.
  double median_step_over_medians = 0;
  std::optional<LaunchBound> launch_bound;  //!< when some sampled op has a kernel count
  //! The launch overhead per kernel call for the refined database: the priced ops' figure, or the
  //! trace's bound where that is lower. The samples share each op's median against its work or
  //! this floor, whichever is longer.
  double launch_s = 0;
  std::optional<double> contention_factor;  //!< when some op ran both overlapped and alone
  ContentionFit contention;
  std::map<std::string, int64_t> not_sampled;  //!< reason -> op instances left out for it
  int64_t instances_used = 0;
};

//! `contention`: the factor the refined database will hold at least (the database's, the trace's
//! end-to-end one); the instances' own overlapped/alone ratio may raise it unless
//! `fit_contention` is false (a disturbed run's: refine.h). DP slices become collective points
//! through WindowedCollectiveTime with it.
FittedSamples FitSamples(const planner::PricedOps& priced, const std::vector<OpInstance>& instances,
                         double contention = 1.0, bool fit_contention = true);

}  // namespace parallax::profiler
