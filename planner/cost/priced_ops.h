#pragma once
// What the planner says each op of a plan is: for an op identity of the plan's predicted trace,
// the costed op with its GEMM shapes and memory-bound part (planner/cost/layer_ops.h), or the
// collective (kind, message bytes, placed group) it prices. `refine` turns a measured time into
// CostDb samples at exactly these shapes, so the planner's next query of the same op returns the
// measured time.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/op_identity.h"
#include "model/plan.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_costs.h"

namespace parallax::planner {

//! A memory-bound part of an op: a CostDb kernel family at a byte count, and its predicted time.
struct MemoryPart {
  std::string family;
  int64_t bytes = 0;
  double time_s = 0;
};

//! A compute op as priced: its GEMMs and memory-bound parts; `time_s` is its work (their sum, with
//! a flash attention's time), before the launch floor and any contention slowdown the simulator
//! applies.
struct ComputeDescription {
  std::vector<GemmPart> gemms;
  std::vector<MemoryPart> memory;
  double time_s = 0;
  int64_t kernels = 0;  //!< the op's kernel calls (0: not known, as for the optimizer and memory passes)
};

//! A collective as priced: nccl-tests size and the group it runs over.
struct CollectiveDescription {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t bytes = 0;
  PlacedGroup group;
};

//! The description of one op identity, or why there is none.
struct OpDescription {
  std::optional<ComputeDescription> compute;
  std::optional<CollectiveDescription> collective;
  std::string not_sampled;  //!< non-empty: the op is not turned into samples, and why
};

//! The plan's ops as the cost model prices them, looked up by op identity.
class PricedOps {
 public:
  //! `plan` must pass ValidateLayout; `db` (may be null) must outlive this object.
  PricedOps(const Plan& plan, const CostDb* db);

  //! `predicted_bytes`: the bytes arg of the predicted slice (-1 when absent).
  OpDescription Describe(const OpIdentity& id, int64_t predicted_bytes) const;

  DType dtype() const { return ComputeDType(plan_.training.precision); }
  //! The per-kernel launch overhead the ops' launch floors use (LaunchOverhead), seconds.
  double launch_overhead_s() const { return LaunchOverhead(ctx_.compute(), plan_.implementation); }

 private:
  std::optional<ComputeDescription> FromCostedOp(const OpIdentity& id) const;
  ComputeDescription Optimizer(int64_t pp_rank) const;

  Plan plan_;
  CostContext ctx_;
  const UnitCosts* units_ = nullptr;
};

}  // namespace parallax::planner
