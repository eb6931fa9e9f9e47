#include "planner/export/megatron.h"

#include "model/stage_split.h"
#include "planner/export/moe_export.h"

namespace parallax::planner {

std::string MegatronArgs::CommandLine() const {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

namespace {

//! --context-parallel-size and --cp-comm-type (Megatron's values: p2p, all_gather, a2a, a2a+p2p;
//! megatron/training/arguments.py, passed to Transformer Engine) when cp > 1.
void AddContextParallel(const Plan& plan, MegatronArgs& out) {
  const Layout& l = plan.layout;
  if (l.cp <= 1) return;
  out.args.insert(out.args.end(), {"--context-parallel-size", std::to_string(l.cp)});
  const CpCommType type = plan.implementation.cp_comm_type.value;
  if (type == CpCommType::kNone) {
    out.warnings.push_back("cp=" + std::to_string(l.cp) + ": the profile " + plan.implementation.name +
                           " has no context parallelism; predicted as if it ran Megatron-Core's p2p ring");
    return;
  }
  out.args.insert(out.args.end(), {"--cp-comm-type", ToString(type)});
}

//! The layers per stage: --num-layers-per-virtual-pipeline-stage for an even interleaved split;
//! Megatron-Core's embedding-and-loss split (model/stage_split.h) with its two flags, or the explicit
//! first/last rank's layers (--decoder-first/last-pipeline-num-layers), and
//! --num-virtual-stages-per-pipeline-rank when interleaved.
void AddPipelineSplit(const Plan& plan, MegatronArgs& out) {
  const Layout& l = plan.layout;
  const bool interleaved = l.schedule == ScheduleKind::kInterleaved && l.virtual_stages > 1;
  switch (StageSplitOf(l, plan.model.layers)) {
    case StageSplit::kEven:
      if (interleaved) {
        out.args.insert(out.args.end(), {"--num-layers-per-virtual-pipeline-stage",
                                         std::to_string(plan.model.layers / ModelStages(l))});
      }
      return;
    case StageSplit::kEmbeddingAndLossAsLayers:
      out.args.insert(out.args.end(), {"--account-for-embedding-in-pipeline-split",
                                       "--account-for-loss-in-pipeline-split"});
      if (interleaved) {
        out.args.insert(out.args.end(),
                        {"--num-virtual-stages-per-pipeline-rank", std::to_string(l.virtual_stages)});
      }
      return;
    case StageSplit::kExplicit:
      if (l.first_stage_layers > 0) {
        out.args.insert(out.args.end(), {"--decoder-first-pipeline-num-layers", std::to_string(l.first_stage_layers)});
      }
      if (l.last_stage_layers > 0) {
        out.args.insert(out.args.end(), {"--decoder-last-pipeline-num-layers", std::to_string(l.last_stage_layers)});
      }
      if (interleaved) {
        out.args.insert(out.args.end(),
                        {"--num-virtual-stages-per-pipeline-rank", std::to_string(l.virtual_stages)});
      }
      return;
    case StageSplit::kLayout:
      out.args.insert(out.args.end(), {"--pipeline-model-parallel-layout", l.pipeline_layout});
      return;
    case StageSplit::kNone:  // ValidateLayout rejects such a plan before it is exported
      out.warnings.push_back(StageSplitProblem(l, plan.model.layers));
      return;
  }
}

}  // namespace

MegatronArgs ExportMegatron(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  MegatronArgs out;
  auto add = [&](const std::string& k, auto v) {
    out.args.push_back(k);
    if constexpr (std::is_convertible_v<decltype(v), std::string>) {
      out.args.push_back(v);
    } else {
      out.args.push_back(std::to_string(v));
    }
  };
  auto flag = [&](const std::string& k) { out.args.push_back(k); };
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : m.seq_len;
  add("--tensor-model-parallel-size", l.tp);
  add("--pipeline-model-parallel-size", l.pp);
  AddContextParallel(plan, out);
  AddPipelineSplit(plan, out);
  if (l.schedule == ScheduleKind::kGpipe) out.warnings.push_back("Megatron-LM has no GPipe schedule; it runs 1F1B");
  if (l.sequence_parallel) flag("--sequence-parallel");
  add("--micro-batch-size", l.micro_batch);
  add("--global-batch-size", l.global_batch);
  add("--num-layers", m.layers);
  add("--hidden-size", m.hidden);
  add("--ffn-hidden-size", m.ffn_hidden);
  add("--num-attention-heads", m.heads);
  if (m.kv_heads != m.heads) {
    flag("--group-query-attention");
    add("--num-query-groups", m.kv_heads);
  }
  add("--seq-length", seq);
  add("--max-position-embeddings", m.seq_len);
  if (m.mlp == MlpKind::kSwiglu) flag("--swiglu");
  if (m.norm == NormKind::kRmsNorm) add("--normalization", std::string("RMSNorm"));
  if (m.position == PositionKind::kRotary) add("--position-embedding-type", std::string("rope"));
  if (!m.tie_embeddings) flag("--untie-embeddings-and-output-weights");
  if (!m.bias) flag("--disable-bias-linear");
  if (!m.dropout) {
    add("--attention-dropout", 0);
    add("--hidden-dropout", 0);
  }
  switch (plan.training.precision) {
    case Precision::kBf16: flag("--bf16"); break;
    case Precision::kFp16: flag("--fp16"); break;
    case Precision::kFp32: break;
    case Precision::kFp8:
      // Transformer Engine's delayed-scaling recipe as Megatron-LM exposes it: E4M3 forward, E5M2
      // gradients ("hybrid"), an amax history of 1024 reduced by max (TE's DelayedScaling defaults;
      // Megatron-LM's own defaults are a history of 1, "most_recent").
      // Another recipe of the plan's implementation profile (fp8_recipe) goes as --fp8-recipe.
      flag("--bf16");
      add("--fp8-format", std::string("hybrid"));
      add("--fp8-amax-history-len", 1024);
      add("--fp8-amax-compute-algo", std::string("max"));
      if (plan.implementation.fp8_recipe.value != Fp8Recipe::kDelayed) {
        add("--fp8-recipe", std::string(ToString(plan.implementation.fp8_recipe.value)));
      }
      break;
  }
  // Megatron-Core's precision-aware optimizer, where the profile keeps smaller optimizer state or
  // steps on the 16-bit gradients (megatron/training/arguments.py --use-precision-aware-optimizer,
  // --main-grads-dtype, --exp-avg-dtype, --exp-avg-sq-dtype).
  // What the plan runs with comes from OptimizerStateBytes / OptimizerReadsGradBuffer, as priced.
  const ImplementationProfile& impl = plan.implementation;
  const int64_t state_bytes = OptimizerStateBytes(impl, l.zero_stage);
  const bool reads_buffer = OptimizerReadsGradBuffer(impl, l.zero_stage);
  if (l.zero_stage < 1 && (impl.optimizer_state_bytes.value != 12 || impl.optimizer_reads_grad_buffer.value)) {
    out.warnings.push_back("the profile's precision-aware optimizer (optimizer_state_bytes, optimizer_reads_grad_buffer) "
                           "runs only with the distributed optimizer (zero_stage >= 1): not exported, priced without it");
  }
  if (plan.training.precision != Precision::kFp32 && (state_bytes == 8 || reads_buffer)) {
    flag("--use-precision-aware-optimizer");
    if (reads_buffer) add("--main-grads-dtype", std::string("bf16"));
    if (state_bytes == 8) {
      add("--exp-avg-dtype", std::string("bf16"));
      add("--exp-avg-sq-dtype", std::string("bf16"));
    }
  }
  if (plan.training.precision != Precision::kFp32 && state_bytes != 12 && state_bytes != 8) {
    out.warnings.push_back("optimizer_state_bytes=" + std::to_string(state_bytes) +
                           ": Megatron-LM's optimizer keeps 12 (fp32 moments) or 8 (bf16 moments); not exported");
  }
  if (l.recompute == Recompute::kFull) {
    add("--recompute-granularity", std::string("full"));
    add("--recompute-method", std::string("uniform"));
    add("--recompute-num-layers", 1);
  } else if (l.recompute == Recompute::kSelective) {
    add("--recompute-granularity", std::string("selective"));
    if (l.selective_modules() != kRecomputeCoreAttn) {
      // --recompute-modules takes the names space-separated (one argument each).
      out.args.push_back("--recompute-modules");
      const uint32_t mods = l.selective_modules();
      for (uint32_t bit = 1; bit <= kRecomputeAllModules; bit <<= 1) {
        if ((mods & bit) != 0) out.args.push_back(RecomputeModulesToString(bit));
      }
    }
  }
  if (l.zero_stage >= 1) flag("--use-distributed-optimizer");
  if (l.zero_stage >= 2) {
    out.warnings.push_back("zero_stage=" + std::to_string(l.zero_stage) +
                           ": Megatron-LM shards only the optimizer state (ZeRO-1); use --export deepspeed");
  }
  add("--lr", std::to_string(plan.training.lr));
  add("--weight-decay", std::to_string(plan.training.weight_decay));
  add("--clip-grad", std::to_string(plan.training.grad_clip));
  add("--adam-beta1", std::to_string(plan.training.adam_beta1));
  add("--adam-beta2", std::to_string(plan.training.adam_beta2));
  add("--seed", plan.training.seed);
  AddMegatronMoeArgs(plan, out);
  return out;
}

}  // namespace parallax::planner
