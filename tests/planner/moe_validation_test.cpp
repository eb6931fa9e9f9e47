// Issue 37 item 7: the published MoE pre-training runs of set moe_h100_bf16 (tests/data/validation/
// moe_h100_bf16.json, copied verbatim with their sources) predicted with their published layouts
// under the megatron-core profile, nothing fitted. Target: mean <= 10%, every row within 20%, and a
// row the planner predicts does not fit, or rejects, counts as a miss (100%).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "model/json_io.h"
#include "model/presets.h"
#include "planner/estimate/step_estimate.h"
#include "planner/sim/simulator.h"

namespace parallax::planner {
namespace {

Plan RowPlan(const Json& row, const ModelSpec& m) {
  const Json& j = row["layout"];
  Plan plan;
  plan.model = m;
  plan.cluster = *ClusterPreset("dgx-h100");
  plan.cluster.nodes = row["gpus"].get<int64_t>() / plan.cluster.gpus_per_node;
  plan.training.precision = Precision::kBf16;
  plan.implementation = *ImplementationPreset("megatron-core");
  // The Megatron-MoE model zoo's Qwen3 table names each run's dispatcher (its "Dispatcher" column):
  // both rows copied here ran DeepEP (--moe-token-dispatcher-type flex).
  if (row["source"].get<std::string>().find("Megatron-MoE-ModelZoo") != std::string::npos) {
    plan.implementation.moe_dispatcher = {MoeDispatcher::kDeepEp, "Megatron-MoE-ModelZoo best_practice/qwen3/readme.md"};
  }
  const std::string source = row["source"].get<std::string>();
  // 16-bit gradient buffers where the run's recipe says so: dgxc v25.02 grok1/grok1_314b.yaml
  // (optim.grad_sync_dtype: bf16, which NeMo's megatron_base_model.py setup_mcore_distributed_parallel
  // turns into grad_reduce_in_fp32 = False) and Megatron-Bridge's benchmark recipes
  // (perf_recipes/_common.py _benchmark_common: ddp.grad_reduce_in_fp32 = False).
  if (source.find("dgxc-benchmarking") != std::string::npos || source.find("Megatron-Bridge") != std::string::npos) {
    plan.implementation.grad_buffer_dtype = {GradDType::kParam, source};
    plan.implementation.grad_reduce_dtype = {GradDType::kParam, source};
  }
  Layout& l = plan.layout;
  l.tp = j.value("tp", 1);
  l.pp = j.value("pp", 1);
  l.dp = j["dp"].get<int64_t>();
  l.cp = j.value("cp", 1);
  l.ep = j.value("ep", 1);
  l.etp = j.value("etp", 0);
  l.virtual_stages = j.value("vp", 1);
  l.schedule = l.virtual_stages > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
  l.micro_batch = j["mbs"].get<int64_t>();
  l.global_batch = j["gbs"].get<int64_t>();
  l.sequence_parallel = l.tp > 1;
  // Megatron-FSDP shards parameters, gradients and optimizer state (ZeRO-3); the others run
  // Megatron-Core's distributed optimizer (ZeRO-1).
  l.zero_stage = j.contains("note") && j["note"].get<std::string>().find("FSDP") != std::string::npos ? 3 : 1;
  // "full" is full recompute; "norm, act" is the model zoo's short form of --recompute-modules
  // layernorm moe_act (selective recompute of the two norms and the experts' activation). The
  // gpt-oss row ran Megatron-Bridge's GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2, which sets the same
  // modules (scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py @ 07eea52d:
  // recompute_modules=["layernorm", "moe_act"]).
  const std::string recompute = j.value("recompute", "");
  l.recompute = recompute == "full" ? Recompute::kFull : Recompute::kNone;
  if (recompute == "norm, act" || row["model_name"].get<std::string>() == "gpt-oss-120b") {
    l.recompute = Recompute::kSelective;
    l.recompute_modules = kRecomputeLayernorm | kRecomputeMoeAct;
  }
  plan.training.global_batch = l.global_batch;
  return plan;
}

double PublishedStepTime(const Json& row, const ModelSpec& m) {
  if (row.contains("step_time_s") && row["step_time_s"].is_number()) return row["step_time_s"].get<double>();
  const double tokens = static_cast<double>(row["layout"]["gbs"].get<int64_t>() * m.seq_len);
  return tokens / (row["tokens_per_s_per_gpu"].get<double>() * row["gpus"].get<double>());
}

TEST(MoeH100Validation, PublishedRunsWithinTwentyPercentMeanTen) {
  auto file = LoadJsonFile(PARALLAX_TEST_DATA_DIR "/validation/moe_h100_bf16.json");
  ASSERT_TRUE(file) << file.error().message;
  double abs_sum = 0;
  int predicted_rows = 0;
  std::printf("%-34s %5s %-40s %9s %9s %8s\n", "row", "gpus", "layout", "published", "predicted", "error%");
  for (const Json& row : (*file)["rows"]) {
    Json mj = row["model"];
    mj["kind"] = "model";
    mj["version"] = 1;
    mj["name"] = row["model_name"];
    auto m = ModelFromJson(mj, "moe_h100_bf16.json", "/rows/model");
    ASSERT_TRUE(m) << m.error().message;
    const std::string name = row["model_name"].get<std::string>();
    const Plan plan = RowPlan(row, *m);
    if (auto ok = ValidateLayout(plan.layout, plan.model, plan.cluster); !ok) {
      std::printf("%-34s %5lld rejected (a miss): %s\n", name.c_str(), (long long)row["gpus"].get<int64_t>(),
                  ok.error().message.c_str());
      ADD_FAILURE() << name << ": the published layout ran, the planner rejects it: " << ok.error().message;
      abs_sum += 100;
      ++predicted_rows;
      continue;
    }
    auto sim = Simulate(plan);
    ASSERT_TRUE(sim) << sim.error().message;
    const double published = PublishedStepTime(row, *m);
    const double predicted = sim->prediction.step_time_s;
    const double err = (published / predicted - 1) * 100;  // throughput error
    std::printf("%-34s %5lld %-40s %9.2f %9.2f %+8.1f%s\n", name.c_str(), (long long)row["gpus"].get<int64_t>(),
                LayoutToString(plan.layout).substr(0, 40).c_str(), published, predicted, err,
                sim->prediction.fits ? "" : "  (predicted not to fit: a miss)");
    EXPECT_TRUE(sim->prediction.fits) << name << ": the published run fitted";
    EXPECT_LT(std::abs(err), 20.0) << name;
    abs_sum += sim->prediction.fits ? std::abs(err) : 100;
    ++predicted_rows;
  }
  std::printf("%d rows predicted; mean absolute throughput error %.1f%%\n", predicted_rows,
              predicted_rows > 0 ? abs_sum / predicted_rows : 0.0);
  ASSERT_GT(predicted_rows, 0);
  EXPECT_LE(abs_sum / predicted_rows, 10.0);
}

}  // namespace
}  // namespace parallax::planner
