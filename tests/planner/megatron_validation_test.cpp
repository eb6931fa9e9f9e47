// Validation against published measurements: Narayanan et al. SC'21 table 1 (Megatron-LM on
// Selene, DGX A100 80 GB). One set of device/link figures (the dgx-a100 preset) for all rows;
// per row only what the paper fixes (tp, pp, dp, global batch, fp16, full recompute,
// interleaved where pp > 1) and the micro-batch size / virtual stages, which it does not publish
// and which we choose as the fastest that fits.
// PARALLAX_VALIDATION_COSTDB=costdb.json runs the same rows with measured A100 costs (one
// database for all rows, e.g. from `parallax calibrate` on an A100); without it, the roofline.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "model/json_io.h"
#include "model/presets.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/sim/simulator.h"
#include "tests/planner/validation_util.h"

namespace parallax::planner {
namespace {

ModelSpec ModelFor(const testing::MegatronRow& row) {
  for (const auto& name : ModelPresetNames()) {
    auto m = ModelPreset(name);
    if (name.rfind("megatron-", 0) == 0 && m->hidden == row.hidden && m->layers == row.layers && m->heads == row.heads) {
      return *m;
    }
  }
  ADD_FAILURE() << "no megatron preset for hidden " << row.hidden;
  return {};
}

// Where the first row's time goes (the README's evidence that the gap is kernel throughput): the
// step breakdown, and per op of one layer (forward, recompute, backward) its achieved TFLOP/s.
void PrintLayerBreakdown(const Plan& plan, const SimResult& sim, const CostDb* db) {
  const Breakdown& b = sim.prediction.breakdown;
  const double step = sim.prediction.step_time_s;
  std::printf("first row, step %.3f s: compute %.1f%%, tp comm %.1f%%, dp comm %.1f%%, pp comm %.1f%%, bubble %.1f%%\n",
              step, 100 * b.compute_s / step, 100 * b.tp_comm_s / step, 100 * b.dp_comm_s / step,
              100 * b.pp_comm_s / step, 100 * b.bubble_s / step);
  CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
  const UnitOps& layer = ctx.Units(plan.model, plan.layout, plan.model.seq_len).layer;
  double flops = 0, time = 0;
  for (const auto* ops : {&layer.fwd, &layer.bwd}) {
    for (const CostedOp& o : *ops) {
      flops += o.flops;
      time += o.time_s;
      if (o.flops > 0) {
        const double tflops = o.flops / o.time_s / 1e12;
        std::printf("  %-10s %-9s %7.1f TFLOP/s\n", ToString(o.op), ToString(o.phase), tflops);
        EXPECT_LE(tflops, plan.cluster.device.peak_tflops.For(ComputeDType(plan.training.precision))) << ToString(o.op);
      }
    }
  }
  std::printf("  one layer, micro-batch %lld: %.1f TFLOP/s\n", static_cast<long long>(plan.layout.micro_batch),
              flops / time / 1e12);
}

TEST(MegatronValidation, EveryRowWithinTenPercent) {
  const auto loaded_rows = testing::LoadMegatronRows(PARALLAX_SHARED_DIR "/validation/megatron_sc21_table1.json");
  ASSERT_TRUE(loaded_rows) << loaded_rows.error().message;
  const std::vector<testing::MegatronRow>& rows = *loaded_rows;
  ASSERT_EQ(rows.size(), 10u);
  std::optional<CostDb> db;
  if (const char* path = std::getenv("PARALLAX_VALIDATION_COSTDB"); path != nullptr && *path != '\0') {
    auto loaded = LoadCostDbFile(path);
    ASSERT_TRUE(loaded) << loaded.error().message;
    ASSERT_EQ(loaded->device, "a100-sxm-80g") << path << ": the rows ran on A100-SXM4-80GB";
    db = *loaded;
    std::printf("measured costs: %s\n", path);
  } else {
    std::printf("no measured costs (PARALLAX_VALIDATION_COSTDB unset): device-physics roofline\n");
  }
  const CostDb* dbp = db ? &*db : nullptr;
  double abs_pct_sum = 0;
  std::printf("%8s %4s %4s %4s %5s %3s %3s %10s %10s %8s\n", "params_B", "tp", "pp", "dp", "gpus", "mb", "vp",
              "published", "predicted", "error%");
  for (const auto& row : rows) {
    Plan plan;
    plan.model = ModelFor(row);
    plan.cluster = *ClusterPreset("dgx-a100");
    plan.cluster.nodes = row.gpus / plan.cluster.gpus_per_node;
    plan.training.precision = Precision::kFp16;
    plan.implementation = *ImplementationPreset("megatron-2021");
    plan.training.global_batch = row.global_batch;
    Layout best;
    double best_step = 0;
    for (int64_t mb : {1, 2, 4, 8, 16}) {
      for (int64_t v = 1; v <= row.layers / row.pp; ++v) {
        Layout l;
        l.tp = row.tp;
        l.pp = row.pp;
        l.dp = row.gpus / (row.tp * row.pp);
        l.micro_batch = mb;
        l.global_batch = row.global_batch;
        l.recompute = Recompute::kFull;
        l.schedule = row.pp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
        l.virtual_stages = row.pp > 1 ? v : 1;
        if (row.pp == 1 && v > 1) continue;
        plan.layout = l;
        auto est = Estimate(plan, dbp);
        if (!est || !est->fits) continue;
        if (best_step == 0 || est->step_time_s < best_step) {
          best_step = est->step_time_s;
          best = l;
        }
      }
    }
    ASSERT_GT(best_step, 0) << "no feasible layout for the " << row.params_B << "B row";
    plan.layout = best;
    auto sim = Simulate(plan, dbp);
    ASSERT_TRUE(sim) << sim.error().message;
    const double predicted = sim->prediction.hardware_tflops_per_gpu;
    const double err = (predicted - row.tflops_per_gpu) / row.tflops_per_gpu * 100.0;
    abs_pct_sum += std::abs(err);
    std::printf("%8.1f %4lld %4lld %4lld %5lld %3lld %3lld %10.1f %10.1f %+8.1f\n", row.params_B, (long long)row.tp,
                (long long)row.pp, (long long)best.dp, (long long)row.gpus, (long long)best.micro_batch,
                (long long)best.virtual_stages, row.tflops_per_gpu, predicted, err);
    EXPECT_LT(std::abs(err), 10.0) << row.params_B << "B row";
    if (&row == &rows.front()) PrintLayerBreakdown(plan, *sim, dbp);
  }
  std::printf("MAPE %.2f%%\n", abs_pct_sum / static_cast<double>(rows.size()));
}

}  // namespace
}  // namespace parallax::planner

namespace parallax::planner {
namespace {

// Megatron-Core on H100 (../shared/validation/h100_published.json) with the megatron-core profile:
// the dgx-h100 preset for every row; per row the published model shape and tp/pp/dp, the planner's
// best micro-batch / recompute / virtual stages on them (unpublished).
TEST(MegatronCoreH100Validation, EveryRowWithinTenPercent) {
  auto j = LoadJsonFile(PARALLAX_SHARED_DIR "/validation/h100_published.json");
  ASSERT_TRUE(j) << j.error().message;
  const Json& rows = (*j)["megatron_core_h100"]["rows"];
  double abs_sum = 0;
  int n = 0;
  std::printf("%8s %3s %3s %4s %5s %3s %3s %-9s %10s %10s %8s\n", "params", "tp", "pp", "dp", "gpus", "mb", "vp",
              "recompute", "published", "predicted", "error%");
  for (const Json& r : rows) {
    Plan plan;
    plan.model.name = "mcore-" + r[0].get<std::string>();
    plan.model.heads = r[1].get<int64_t>();
    plan.model.kv_heads = plan.model.heads;
    plan.model.hidden = r[2].get<int64_t>();
    plan.model.layers = r[3].get<int64_t>();
    plan.model.vocab = 131072;
    plan.model.seq_len = 4096;
    plan.model.ffn_hidden = 4 * plan.model.hidden;
    plan.model.mlp = MlpKind::kGelu;
    plan.model.bias = false;
    plan.model.tie_embeddings = false;
    plan.model.position = PositionKind::kRotary;
    const int64_t tp = r[4].get<int64_t>(), pp = r[5].get<int64_t>(), dp = r[6].get<int64_t>();
    plan.cluster = *ClusterPreset("dgx-h100");
    plan.cluster.nodes = r[7].get<int64_t>() / 8;
    plan.training.precision = Precision::kBf16;
    plan.training.global_batch = r[8].get<int64_t>();
    plan.implementation = *ImplementationPreset("megatron-core");
    Layout best;
    double best_step = 0;
    for (int64_t mb : {1, 2, 4}) {
      for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        for (int64_t v = 1; v <= (pp > 1 ? plan.model.layers / pp : 1); ++v) {
          Layout l;
          l.tp = tp;
          l.pp = pp;
          l.dp = dp;
          l.zero_stage = 1;
          l.micro_batch = mb;
          l.global_batch = plan.training.global_batch;
          l.recompute = rc;
          l.sequence_parallel = tp > 1;
          l.schedule = pp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
          l.virtual_stages = v;
          plan.layout = l;
          if (!ValidateLayout(l, plan.model, plan.cluster)) continue;
          auto est = Estimate(plan);
          if (!est || !est->fits) continue;
          if (best_step == 0 || est->step_time_s < best_step) {
            best_step = est->step_time_s;
            best = l;
          }
        }
      }
    }
    ASSERT_GT(best_step, 0) << plan.model.name << ": no feasible layout";
    plan.layout = best;
    auto sim = Simulate(plan);
    ASSERT_TRUE(sim) << sim.error().message;
    const double published = r[9].get<double>();
    const double predicted = sim->prediction.model_tflops_per_gpu;
    const double err = (predicted - published) / published * 100;
    abs_sum += std::abs(err);
    ++n;
    std::printf("%8s %3lld %3lld %4lld %5lld %3lld %3lld %-9s %10.1f %10.1f %+8.1f\n", r[0].get<std::string>().c_str(),
                (long long)tp, (long long)pp, (long long)dp, (long long)r[7].get<int64_t>(),
                (long long)best.micro_batch, (long long)best.virtual_stages, ToString(best.recompute), published,
                predicted, err);
    EXPECT_LT(std::abs(err), 10.0) << plan.model.name;
  }
  std::printf("MAPE %.2f%%\n", abs_sum / n);
}

}  // namespace
}  // namespace parallax::planner
