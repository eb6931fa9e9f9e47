#pragma once
// Shared by the MoE validation tests (moe_validation_test.cpp, moe_more_validation_test.cpp): a
// published MoE pre-training row (tests/data/validation/moe_h100_bf16.json, moe_more.json) as a
// plan with its published layout under the megatron-core profile, nothing fitted, and the loop that
// predicts a file's rows and prints their table. A row that the planner predicts does not fit, or
// rejects, is a miss (100%): these runs did fit.
//
// A row may carry "recipe": {fact: {"value": ..., "source": ...}} with the facts of the recipe it
// ran (dispatcher, recompute, TP overlap, gradient dtype, CUDA graphs, ...), each cited by file and
// line in the row. Facts the planner cannot express are listed beside the row's prediction. A
// row's "label", where given, names it in the table (else its model_name).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/json_io.h"
#include "model/plan.h"
#include "model/presets.h"
#include "planner/estimate/step_estimate.h"
#include "planner/sim/simulator.h"

namespace parallax::planner::testing {

//! The cluster preset of a row's "gpu" text: GB200 / GB300 NVL72 racks, DGX B200, else DGX H100.
inline ClusterSpec MoeRowCluster(const Json& row) {
  const std::string gpu = row["gpu"].get<std::string>();
  const char* preset = gpu.find("GB300") != std::string::npos   ? "gb300-nvl72"
                       : gpu.find("GB200") != std::string::npos ? "gb200-nvl72"
                       : gpu.find("B200") != std::string::npos  ? "dgx-b200"
                                                                : "dgx-h100";
  ClusterSpec c = *ClusterPreset(preset);
  c.nodes = row["gpus"].get<int64_t>() / c.gpus_per_node;
  // Megatron-Bridge's Slurm executor asks for NVLink segments on 4-GPU-per-node racks: all the
  // job's nodes when at most 18, else the largest divisor of the node count up to 18
  // (scripts/performance/utils/executors.py:127-135 @ 21d102f5: "add --segment flag to sbatch if
  // job uses GB200"); the job's NVLink domain is that segment.
  if (c.gpus_per_node == 4 && row["source"].get<std::string>().find("Megatron-Bridge") != std::string::npos) {
    int64_t segment = c.nodes;
    for (int64_t s = 18; c.nodes > 18 && s > 0; --s) {
      if (c.nodes % s == 0) {
        segment = s;
        break;
      }
    }
    c.nvlink_domain = segment * c.gpus_per_node;
  }
  return c;
}

//! Recompute modules by Megatron-Core's --recompute-modules names; those the planner has no module
//! for are appended to `unexpressed`.
inline uint32_t MoeRecipeModules(const Json& names, std::vector<std::string>& unexpressed) {
  uint32_t bits = 0;
  for (const Json& n : names) {
    const std::string name = n.get<std::string>();
    if (auto b = RecomputeModulesFromString(name)) {
      bits |= *b;
    } else {
      unexpressed.push_back("recompute module " + name);
    }
  }
  return bits;
}

//! Applies a row's "recipe" facts to the plan; what the planner cannot express goes to `unexpressed`.
inline void ApplyMoeRecipe(const Json& recipe, Plan& plan, std::vector<std::string>& unexpressed) {
  Layout& l = plan.layout;
  ImplementationProfile& impl = plan.implementation;
  for (const auto& [key, fact] : recipe.items()) {
    const Json& v = fact["value"];
    const std::string source = fact["source"].get<std::string>();
    if (key == "dispatcher") {
      impl.moe_dispatcher = {v == "flex" ? MoeDispatcher::kDeepEp
                             : v == "allgather" ? MoeDispatcher::kAllGather
                                                : MoeDispatcher::kAllToAll,
                             source};
    } else if (key == "recompute") {
      l.recompute = v == "full" ? Recompute::kFull : Recompute::kNone;
      l.recompute_modules = 0;
    } else if (key == "recompute_modules") {
      const uint32_t bits = MoeRecipeModules(v, unexpressed);
      l.recompute = bits != 0 ? Recompute::kSelective : Recompute::kNone;
      l.recompute_modules = bits;
    } else if (key == "tp_comm_overlap") {
      impl.overlap_tp_comm = {v.get<bool>(), source};
    } else if (key == "grad_reduce_in_fp32") {
      const GradDType d = v.get<bool>() ? GradDType::kFp32 : GradDType::kParam;
      impl.grad_buffer_dtype = {d, source};
      impl.grad_reduce_dtype = {d, source};
    } else if (key == "pipeline_split") {
      // account_for_embedding/loss_in_pipeline_split: the planner applies it wherever it splits
      // the layers (model/stage_split.h), nothing to set.
    } else if (key == "pipeline_layout") {
      l.pipeline_layout = v.get<std::string>();
    } else if (key == "flash_attention_2") {
      impl.flash_attention_2 = {v.get<bool>(), source};
    } else if (key == "nccl_nvls") {
      plan.cluster.device.arch.nvlink_sharp = plan.cluster.device.arch.nvlink_sharp && v.get<bool>();
    } else if (key == "fp8_param_gather") {
      impl.fp8_params = {v.get<bool>(), source};
    } else if (key == "fp8_recipe") {
      // Megatron-Bridge's names: "MXFP8" (mxfp8), "FP8-CS" (per-tensor current scaling: tensorwise),
      // "delayed scaling". The memory model and the casts read the recipe; every recipe's GEMMs run
      // at the device's FP8 rate.
      const std::string name = v.get<std::string>();
      const Fp8Recipe r = name == "MXFP8" ? Fp8Recipe::kMxfp8 : name.find("FP8-CS") != std::string::npos ? Fp8Recipe::kTensorwise : Fp8Recipe::kDelayed;
      impl.fp8_recipe = {r, source};
    } else if (key == "optimizer_dtypes") {
      // Megatron-Core's precision-aware optimizer: main params + the two moments in their dtypes,
      // and bf16 main grads read from the gradient buffer.
      auto bytes = [&](const char* k) { return v.value(k, "fp32") == "fp32" ? 4 : 2; };
      impl.optimizer_state_bytes = {bytes("main_params") + bytes("exp_avg") + bytes("exp_avg_sq"), source};
      impl.optimizer_reads_grad_buffer = {v.value("main_grads", "fp32") != "fp32", source};
    } else if (key == "cuda_graph_scope") {
      if (!v.empty()) unexpressed.push_back("CUDA graphs " + v.dump());
    } else if (key == "moe_a2a_overlap") {
      if (v.get<bool>()) unexpressed.push_back("EP all-to-all overlapped with the other micro-batch (moe_a2a_overlap)");
    } else {
      unexpressed.push_back(key + " " + v.dump());
    }
  }
}

//! The row's published layout and recipe facts as a plan under the megatron-core profile.
inline Plan MoeRowPlan(const Json& row, const ModelSpec& m, std::vector<std::string>& unexpressed) {
  const Json& j = row["layout"];
  Plan plan;
  plan.model = m;
  plan.cluster = MoeRowCluster(row);
  const std::string precision = row["precision"].get<std::string>();
  plan.training.precision = precision.find("FP8") != std::string::npos ? Precision::kFp8 : Precision::kBf16;
  plan.implementation = *ImplementationPreset("megatron-core");
  // The Megatron-MoE model zoo's Qwen3 table names each run's dispatcher (its "Dispatcher" column):
  // moe_h100_bf16's two rows ran DeepEP (--moe-token-dispatcher-type flex); moe_more's rows state
  // theirs in their recipe (applied below).
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
  // Megatron-Bridge 21d102f5 runs the Megatron-LM it pins (3rdparty/Megatron-LM @ 44151194, 2026-05-26),
  // where the probabilities multiply the experts' activation (since core_r0.12.0).
  if (source.find("Megatron-Bridge") != std::string::npos) {
    plan.implementation.moe_probs_in_activation = {
        true, "github:NVIDIA-NeMo/Megatron-Bridge @ 21d102f5 3rdparty/Megatron-LM -> 44151194: "
              "megatron/core/transformer/moe/experts.py activation_func_with_probs"};
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
  if (row.contains("recipe")) ApplyMoeRecipe(row["recipe"], plan, unexpressed);
  plan.training.global_batch = l.global_batch;
  return plan;
}

//! The published step time: as given, or from tokens/s/GPU (gbs * seq_len / (tokens/s/GPU * gpus)).
inline double MoeRowPublishedStepTime(const Json& row, const ModelSpec& m) {
  if (row.contains("step_time_s") && row["step_time_s"].is_number()) return row["step_time_s"].get<double>();
  const double tokens = static_cast<double>(row["layout"]["gbs"].get<int64_t>() * m.seq_len);
  return tokens / (row["tokens_per_s_per_gpu"].get<double>() * row["gpus"].get<double>());
}

struct MoeRowsSummary {
  int rows = 0;
  double abs_sum = 0;  //!< sum of |throughput error| in percent, a miss counted as 100
};

//! Predicts every row of `path` (`file` names it in messages) with the simulator, prints the table,
//! and fails (EXPECT) each row that misses by 20% or more, does not fit, or is rejected.
inline MoeRowsSummary PredictMoeRows(const std::string& path, const std::string& file) {
  MoeRowsSummary out;
  auto rows = LoadJsonFile(path);
  EXPECT_TRUE(rows) << rows.error().message;
  if (!rows) return out;
  std::printf("%-34s %5s %-40s %9s %9s %8s\n", "row", "gpus", "layout", "published", "predicted", "error%");
  for (const Json& row : (*rows)["rows"]) {
    Json mj = row["model"];
    mj["kind"] = "model";
    mj["version"] = 1;
    mj["name"] = row["model_name"];
    auto m = ModelFromJson(mj, file, "/rows/model");
    const std::string name = row.value("label", row["model_name"].get<std::string>());
    const auto gpus = static_cast<long long>(row["gpus"].get<int64_t>());
    ++out.rows;
    if (!m) {
      ADD_FAILURE() << name << ": " << m.error().message;
      out.abs_sum += 100;
      continue;
    }
    std::vector<std::string> unexpressed;
    const Plan plan = MoeRowPlan(row, *m, unexpressed);
    if (auto ok = ValidateLayout(plan.layout, plan.model, plan.cluster); !ok) {
      std::printf("%-34s %5lld rejected (a miss): %s\n", name.c_str(), gpus, ok.error().message.c_str());
      ADD_FAILURE() << name << ": the published layout ran, the planner rejects it: " << ok.error().message;
      out.abs_sum += 100;
      continue;
    }
    auto sim = Simulate(plan);
    if (!sim) {
      std::printf("%-34s %5lld refused (a miss): %s\n", name.c_str(), gpus, sim.error().message.c_str());
      ADD_FAILURE() << name << ": " << sim.error().message;
      out.abs_sum += 100;
      continue;
    }
    const double published = MoeRowPublishedStepTime(row, *m);
    const double predicted = sim->prediction.step_time_s;
    const double err = (published / predicted - 1) * 100;  // throughput error
    char fit[96] = "";
    if (!sim->prediction.fits) {
      std::snprintf(fit, sizeof fit, "  (predicted not to fit: %.1f of %.1f GiB, a miss)",
                    static_cast<double>(sim->prediction.peak_memory_bytes) / (1 << 30), plan.cluster.device.memory_GiB);
    }
    std::printf("%-34s %5lld %-40s %9.2f %9.2f %+8.1f%s\n", name.c_str(), gpus, LayoutToString(plan.layout).substr(0, 40).c_str(),
                published, predicted, err, fit);
    for (const std::string& u : unexpressed) std::printf("%-34s   not expressed: %s\n", "", u.c_str());
    EXPECT_TRUE(sim->prediction.fits) << name << ": the published run fitted";
    EXPECT_LT(std::abs(err), 20.0) << name;
    out.abs_sum += sim->prediction.fits ? std::abs(err) : 100;
  }
  std::printf("%d rows predicted; mean absolute throughput error %.1f%%\n", out.rows,
              out.rows > 0 ? out.abs_sum / out.rows : 0.0);
  return out;
}

}  // namespace parallax::planner::testing
