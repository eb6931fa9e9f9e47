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

#include "model/presets.h"
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

TEST(MegatronValidation, EveryRowWithinTenPercent) {
  const auto rows = testing::LoadMegatronRows(PARALLAX_SHARED_DIR "/validation/megatron_sc21_table1.json");
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
  }
  std::printf("MAPE %.2f%%\n", abs_pct_sum / static_cast<double>(rows.size()));
}

}  // namespace
}  // namespace parallax::planner
