#include "planner/estimate/prediction.h"

#include "model/counting.h"
#include "planner/cost/plan_costs.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {

Prediction FinishPrediction(const Plan& plan, double step_time_s, const Breakdown& breakdown) {
  Prediction p;
  p.step_time_s = step_time_s;
  p.breakdown = breakdown;
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
  const double tokens = static_cast<double>(plan.layout.global_batch) * static_cast<double>(seq);
  const double gpus = static_cast<double>(plan.layout.world_size());
  p.tokens_per_s = step_time_s > 0 ? tokens / step_time_s : 0;
  const double model_flops = TrainingFlopsPerToken(plan.model, seq, Recompute::kNone) * tokens;
  const double hw_flops = TrainingFlopsPerToken(plan.model, seq, plan.layout.recompute, plan.layout.selective_modules()) * tokens;
  if (step_time_s > 0) {
    p.model_tflops_per_gpu = model_flops / step_time_s / gpus / 1e12;
    p.hardware_tflops_per_gpu = hw_flops / step_time_s / gpus / 1e12;
  }
  const double peak = plan.cluster.device.peak_tflops.For(MfuDType(plan.training.precision));
  p.mfu = peak > 0 ? p.model_tflops_per_gpu / peak : 0;
  p.peak_memory_bytes = PeakMemoryBytes(plan);
  p.fits = p.peak_memory_bytes <= plan.cluster.device.memory_bytes();
  return p;
}

Json PredictionToJson(const Prediction& p) {
  return Json{{"step_time_s", p.step_time_s},
              {"tokens_per_s", p.tokens_per_s},
              {"model_tflops_per_gpu", p.model_tflops_per_gpu},
              {"hardware_tflops_per_gpu", p.hardware_tflops_per_gpu},
              {"mfu", p.mfu},
              {"peak_memory_bytes", p.peak_memory_bytes},
              {"fits", p.fits},
              {"step_time_source", p.simulated ? "simulator" : "closed_form"},
              {"breakdown",
               {{"compute_s", p.breakdown.compute_s},
                {"tp_comm_s", p.breakdown.tp_comm_s},
                {"dp_comm_s", p.breakdown.dp_comm_s},
                {"pp_comm_s", p.breakdown.pp_comm_s},
                {"bubble_s", p.breakdown.bubble_s}}}};
}

Json PlanEntryJson(const Layout& l, const Prediction& p) {
  Json j = PredictionToJson(p);
  j["layout"] = LayoutToJson(l);
  j["layout_inline"] = LayoutToString(l);
  return j;
}

}  // namespace parallax::planner
