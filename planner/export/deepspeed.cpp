#include "planner/export/deepspeed.h"

#include "planner/export/moe_export.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {

Json ExportDeepSpeed(const Plan& plan) {
  const Layout& l = plan.layout;
  const TrainingSpec& t = plan.training;
  Json ds{{"train_batch_size", l.global_batch},
          {"train_micro_batch_size_per_gpu", l.micro_batch},
          {"gradient_accumulation_steps", l.num_microbatches()},
          {"gradient_clipping", t.grad_clip},
          {"steps_per_print", 10},
          {"optimizer",
           {{"type", "AdamW"},
            {"params", {{"lr", t.lr}, {"betas", {t.adam_beta1, t.adam_beta2}}, {"eps", t.adam_eps}, {"weight_decay", t.weight_decay}}}}},
          {"zero_optimization", {{"stage", l.zero_stage}, {"overlap_comm", true}, {"contiguous_gradients", true}}},
          {"bf16", {{"enabled", t.precision == Precision::kBf16 || t.precision == Precision::kFp8}}},
          {"fp16", {{"enabled", t.precision == Precision::kFp16}}},
          {"parallax", {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"schedule", ToString(l.schedule)},
                        {"virtual_stages", l.virtual_stages}, {"sequence_parallel", l.sequence_parallel},
                        {"recompute", ToString(l.recompute)}}}};
  // The bucket sizes the prediction was priced with (the plan's implementation profile), in
  // elements as DeepSpeed counts them: the reduction bucket in the gradient-reduction dtype, the
  // ZeRO-3 prefetch budget in parameters. A profile without them leaves DeepSpeed's defaults.
  if (t.precision == Precision::kFp8) {
    // DeepSpeed's config has no FP8 switch: bf16 here, FP8 from Transformer Engine's layers.
    ds["parallax"]["fp8"] = "wrap the model's linear layers in te.fp8_autocast(DelayedScaling(fp8_format=HYBRID, "
                            "amax_history_len=1024, amax_compute_algo='max'))";
  }
  const ImplementationProfile& impl = plan.implementation;
  Json& zero = ds["zero_optimization"];
  if (impl.dp_bucket_MiB.value > 0) {
    zero["reduce_bucket_size"] = impl.dp_bucket_MiB.value * 1024 * 1024 / GradReduceBytes(t.precision, impl);
  }
  if (l.zero_stage == 3 && impl.zero3_prefetch_params.value > 0) {
    zero["stage3_prefetch_bucket_size"] = impl.zero3_prefetch_params.value;
  }
  if (l.cp > 1) {
    // Not a DeepSpeed key: DeepSpeed has no ring-attention context parallelism. DeepSpeed-Ulysses
    // (sequence_parallel_size, all-to-alls over heads) is another scheme, not what was predicted.
    ds["parallax"]["cp"] = l.cp;
    ds["parallax"]["warning"] = "cp=" + std::to_string(l.cp) +
                                ": DeepSpeed has no ring-attention context parallelism (DeepSpeed-Ulysses is a "
                                "different scheme, all-to-alls over heads); this config cannot run the plan as "
                                "predicted";
  }
  if (l.recompute != Recompute::kNone) {
    ds["activation_checkpointing"] = {{"partition_activations", l.sequence_parallel},
                                      {"contiguous_memory_optimization", false},
                                      {"number_checkpoints", plan.model.layers}};
  }
  AddDeepSpeedMoe(plan, ds);
  return ds;
}

}  // namespace parallax::planner
