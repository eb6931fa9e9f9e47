#include "planner/cost/plan_costs.h"

#include <algorithm>

#include "planner/cost/placement.h"
#include "planner/cost/plan_cost_phases.h"
#include "planner/memory/memory_model.h"
#include "model/rank_groups.h"

namespace parallax::planner {

DType ComputeDType(Precision p) {
  switch (p) {
    case Precision::kBf16: return DType::kBf16;
    case Precision::kFp16: return DType::kFp16;
    case Precision::kFp32: return DType::kFp32;
    case Precision::kFp8: return DType::kBf16;  // all but the linear layers' GEMMs
  }
  return DType::kBf16;
}

DType MfuDType(Precision p) { return p == Precision::kFp8 ? DType::kFp8 : ComputeDType(p); }

CostContext::CostContext(const ClusterSpec& cluster, Precision precision, const CostDb* db,
                         const ImplementationProfile* impl)
    : cluster_(cluster),
      precision_(precision),
      impl_(impl ? *impl : DefaultImplementation()),
      compute_(cluster.device, ComputeDType(precision), db),
      fp8_(cluster.device, DType::kFp8, db),
      collectives_(cluster, db, impl_.dp_algorithm.value) {}

void CostContext::UseLayout(const Layout& layout) {
  const double share = layout.ComputeShareOn(cluster_);
  if (share == compute_.time_share()) return;
  compute_.set_time_share(share);
  fp8_.set_time_share(share);
  cache_.clear();  // unit costs priced at the previous share
}

const UnitCosts& CostContext::Units(const ModelSpec& model, const Layout& l, int64_t seq_len) {
  UseLayout(l);
  if (cached_model_ != model) {
    cache_.clear();
    cached_model_ = model;
  }
  UnitKey key{.tp = l.tp,
              .cp = l.cp,
              .micro_batch = l.micro_batch,
              .seq_len = seq_len,
              .sequence_parallel = l.sequence_parallel,
              .recompute = l.recompute,
              .selective_modules = l.selective_modules(),
              .ep = 1,
              .etp = 1,
              .routing = Routing{}};
  if (model.moe()) {
    key.ep = l.ep;
    key.etp = l.expert_tp();
    key.routing = l.routing;
  }
  for (const auto& [k, u] : cache_) {
    if (k == key) return u;
  }
  const ExpertGroups experts{PlaceGroup(l, cluster_, GroupKind::kEp), PlaceEtpGroup(l, cluster_)};
  cache_.emplace_back(key, BuildUnitCosts(model, key, compute_, collectives_, PlaceGroup(l, cluster_, GroupKind::kTp),
                                          PlaceGroup(l, cluster_, GroupKind::kCp), impl_,
                                          precision_ == Precision::kFp8 ? &fp8_ : nullptr, experts));
  return cache_.back().second;
}

PlanCosts CostPlan(CostContext& ctx, const Plan& plan) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : m.seq_len;
  const ImplementationProfile& impl = ctx.implementation();
  // Gradient bytes on the wire: fp32 training sends 4 B; 16-bit training sends what the profile
  // reduces (fp32 main_grad buffers in Megatron-Core, the 16-bit gradients in 2021 / DeepSpeed).
  const CostInputs in{.plan = plan,
                      .ctx = ctx,
                      .units = ctx.Units(m, l, seq),
                      .seq_len = seq,
                      .grad_e = static_cast<double>(GradReduceBytes(plan.training.precision, impl)),
                      .param_e = static_cast<double>(BytesPerElement(plan.training.precision)),
                      .layer_params = MeanLayerParams(m, l)};

  PlanCosts pc;
  pc.units = &in.units;
  pc.microbatches = l.num_microbatches();
  pc.contention = ctx.compute().contention_factor();
  pc.dp_overlapped = DenseReductionRanks(l) > 1 && impl.overlap_dp_reduce.value;
  pc.dp_after_backward = !impl.overlap_dp_reduce.value && l.zero_stage <= 1;
  pc.blocking_p2p = impl.pipeline_p2p.value == P2pSemantics::kBlocking;
  CostPipelineHops(in, pc);
  pc.ranks.resize(static_cast<size_t>(l.pp));
  for (int64_t r = 0; r < l.pp; ++r) {
    RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    CostChunks(in, r, rc);
    CostSequenceParallelGrads(in, rc);
    CostGradAccumulation(in, pc.microbatches, rc);
    if (DenseReductionRanks(l) > 1) CostDp(in, rc);
    CostTiedEmbedding(in, rc);
    CostOptimizerStep(in, rc);
    pc.grad_norm_s = std::max(pc.grad_norm_s, rc.grad_norm_s);
  }
  AddReceiveNoise(in, pc);
  CostGradNormSync(in, pc);
  return pc;
}

}  // namespace parallax::planner
