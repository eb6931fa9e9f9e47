#pragma once
// What slows a cluster's ranks and what stops them: per-rank / per-node slowdowns, per-step jitter,
// and a failure rate with the checkpoint costs that bound the work a failure loses. Part of the
// cluster description (ClusterSpec::stragglers, ClusterSpec::failures); read by the planner's
// pricing of the classic modes and goodput, and by `run --inject-slow` in tests.

#include <cstdint>
#include <vector>

#include "model/json_io.h"

namespace parallax {

struct Slowdown {
  int64_t index = 0;  //!< a rank (ClusterSpec::stragglers.ranks) or a node (.nodes)
  double factor = 1;  //!< compute time multiplier, >= 1
};

//! Stragglers: a rank's step time is its compute time times its rank and node factors, times a
//! per-step draw exp(N(0, jitter_sigma^2)) (lognormal, median 1; Dean & Barroso 2013's tail at scale).
struct StragglerSpec {
  std::vector<Slowdown> ranks;
  std::vector<Slowdown> nodes;
  double jitter_sigma = 0;  //!< lognormal sigma of the per-step multiplier; 0: no jitter

  bool empty() const { return ranks.empty() && nodes.empty() && jitter_sigma == 0; }
  //! The fixed slowdown of `rank` (rank and node factors multiplied); 1 when none applies.
  double FactorOf(int64_t rank, int64_t gpus_per_node) const;
};

enum class FailureScope { kGpu, kNode };

//! Failures: each GPU (or node) fails independently with this mean time between failures; a
//! failure costs the work since the last checkpoint plus the restore (Young 1974, Daly 2006).
struct FailureSpec {
  double mtbf_hours = 0;  //!< per GPU or per node (scope); 0: no failures
  FailureScope scope = FailureScope::kGpu;
  double checkpoint_write_s = 0;    //!< time a step is stalled to write a checkpoint
  double checkpoint_restore_s = 0;  //!< time from a failure to training again (restart + restore)

  bool empty() const { return mtbf_hours == 0; }
  //! The job's mean time between failures in seconds over `gpus` GPUs (`gpus_per_node` per node).
  double JobMtbfSeconds(int64_t gpus, int64_t gpus_per_node) const;
};

//! Reads the cluster's optional "stragglers" object (errors name file and JSON path).
StragglerSpec StragglersFromJson(ObjectReader r);
Json StragglersToJson(const StragglerSpec& s);
FailureSpec FailuresFromJson(ObjectReader r);
Json FailuresToJson(const FailureSpec& f);

}  // namespace parallax
