// System noise in the cost model (planner/cost/noise.h): the expected wait for the latest of g
// ranks from one rank's detour quantiles, and where the planner charges it (compute ops, TP
// collectives, the step's grad-norm barrier). Expected values are computed here from the
// definitions: order statistics of equally likely quantiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/load.h"
#include "planner/cost/noise.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/sim/simulator.h"

namespace parallax::planner {
namespace {

SystemNoise TwoWindows() {
  // Time - median of 1 ms of work: uniform over {-10, 0, 10, 20} us (mean 5 us); of 10 ms:
  // {-100, 0, 0, 300} us (mean 50 us).
  return {"calibrate", 1e-4, 2, 1.0, {{1e-3, {-10e-6, 0, 10e-6, 20e-6}}, {1e-2, {-100e-6, 0, 0, 300e-6}}}};
}

TEST(NoiseModel, ExpectedMaximumOfEquallyLikelyQuantiles) {
  const NoiseModel n(TwoWindows());
  ASSERT_TRUE(n.measured());
  // g = 2 over {-10,0,10,20}: P(max = q_i) = ((i+1)^2 - i^2) / 16 = 1/16, 3/16, 5/16, 7/16.
  const double e2 = (-10 * 1 + 0 * 3 + 10 * 5 + 20 * 7) / 16.0 * 1e-6;
  EXPECT_NEAR(n.SyncExcess(1e-3, 2), e2 - 5e-6, 1e-12);
  // g = 3: ((i+1)^3 - i^3) / 64 = 1, 7, 19, 37.
  const double e3 = (-10 * 1 + 10 * 19 + 20 * 37) / 64.0 * 1e-6;
  EXPECT_NEAR(n.SyncExcess(1e-3, 3), e3 - 5e-6, 1e-12);
  // A larger group waits longer; one rank waits for nobody.
  EXPECT_GT(n.SyncExcess(1e-3, 64), n.SyncExcess(1e-3, 8));
  EXPECT_LT(n.SyncExcess(1e-3, 100000), 20e-6 - 5e-6 + 1e-12);  // never beyond the top quantile
  EXPECT_EQ(n.SyncExcess(1e-3, 1), 0.0);
  // Mean above the median: 5 us per ms at 1 ms, 50 us per 10 ms at 10 ms (both 0.5%), and
  // in between the fractions interpolate in log length.
  EXPECT_NEAR(n.MeanExcess(1e-3), 5e-6, 1e-15);
  EXPECT_NEAR(n.MeanExcess(1e-2), 50e-6, 1e-15);
  EXPECT_NEAR(n.MeanExcess(1e-4), 0.5e-6, 1e-15);  // held below the shortest window
  EXPECT_NEAR(n.MeanExcess(1.0), 5e-3, 1e-12);     // and beyond the longest
}

TEST(NoiseModel, BetweenAndBeyondTheMeasuredWindows) {
  const NoiseModel n(TwoWindows());
  const double a = n.SyncExcess(1e-3, 2), b = n.SyncExcess(1e-2, 2);
  // Linear in log window between the two: halfway in log is sqrt(1e-3 * 1e-2).
  EXPECT_NEAR(n.SyncExcess(std::sqrt(1e-3 * 1e-2), 2), 0.5 * (a + b), 1e-12);
  EXPECT_NEAR(n.SyncExcess(0.25e-3, 2), a / 4, 1e-12);    // proportional below the shortest
  EXPECT_NEAR(n.SyncExcess(4e-2, 2), b * 2, 1e-12);       // sqrt(4) beyond the longest
  EXPECT_EQ(NoiseModel().SyncExcess(1e-2, 8), 0.0);       // not measured: no noise
}

// What the classic modes' event simulation draws per worker iteration (planner/estimate/sync_modes):
// a quantile of one window's detours less their mean, scaled as SyncExcess between and beyond.
TEST(NoiseModel, DrawsAreTheQuantilesLessTheirMean) {
  const NoiseModel n(TwoWindows());
  EXPECT_NEAR(n.Draw(1e-3, 0.0), -10e-6 - 5e-6, 1e-15);
  EXPECT_NEAR(n.Draw(1e-3, 0.6), 10e-6 - 5e-6, 1e-15);
  EXPECT_NEAR(n.Draw(1e-3, 0.999), 20e-6 - 5e-6, 1e-15);
  EXPECT_NEAR(n.Draw(1e-2, 0.9), 300e-6 - 50e-6, 1e-15);
  EXPECT_NEAR(n.Draw(0.5e-3, 0.0), (-10e-6 - 5e-6) / 2, 1e-15);  // proportional below the shortest
  EXPECT_NEAR(n.Draw(4e-2, 0.9), (300e-6 - 50e-6) * 2, 1e-15);   // sqrt(4) beyond the longest
  // Equally likely quantiles: the draws average to zero (the mean is in MeanExcess).
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += n.Draw(1e-3, (i + 0.5) / 4);
  EXPECT_NEAR(sum, 0.0, 1e-15);
  EXPECT_EQ(NoiseModel().Draw(1e-2, 0.9), 0.0);
}

// A run's measured op times over their medians (refine) replace the calibrated mean excess, which
// may then be negative; the synchronization waits still come from the calibrated windows.
TEST(NoiseModel, RunOpTimesReplaceTheMeanExcess) {
  const NoiseModel calibrated(TwoWindows());
  const NoiseModel run(TwoWindows(), {0.9, 1000, "refine"});
  EXPECT_NEAR(run.MeanExcess(1e-3), -1e-4, 1e-15);
  EXPECT_NEAR(run.MeanExcess(1e-2), -1e-3, 1e-15);
  EXPECT_EQ(run.SyncExcess(1e-3, 4), calibrated.SyncExcess(1e-3, 4));
  const NoiseModel only_run(SystemNoise{}, {1.05, 10, "refine"});
  EXPECT_TRUE(only_run.measured());
  EXPECT_NEAR(only_run.MeanExcess(2e-3), 1e-4, 1e-15);
  EXPECT_EQ(only_run.SyncExcess(1e-2, 8), 0.0);
}

Plan MakePlan(const char* model, const char* layout) {
  Plan p;
  p.model = *ResolveModel(model);
  p.cluster = *ResolveCluster("dgx-a100", 1);
  p.layout = *ParseInlineLayout(layout);
  p.training.global_batch = p.layout.global_batch;
  p.training.precision = Precision::kFp32;
  return p;
}

// One plan costed with a database without noise and with TwoWindows() (the contexts own the unit
// costs the PlanCosts point to, so they live here too).
struct QuietAndNoisy {
  explicit QuietAndNoisy(const Plan& plan)
      : quiet(Db(plan, false)),
        noisy(Db(plan, true)),
        cq(plan.cluster, plan.training.precision, &quiet),
        cn(plan.cluster, plan.training.precision, &noisy),
        q(CostPlan(cq, plan)),
        n(CostPlan(cn, plan)),
        model(noisy.noise) {}
  static CostDb Db(const Plan& plan, bool noise) {
    CostDb db;
    db.device = plan.cluster.device.name;
    if (noise) db.noise = TwoWindows();
    return db;
  }
  CostDb quiet, noisy;
  CostContext cq, cn;
  PlanCosts q, n;
  NoiseModel model;
};

TEST(NoiseModel, ChargedOnComputeTpCollectivesAndTheStepBarrier) {
  const Plan plan = MakePlan("gpt-tiny", "dp=4,tp=2,pp=1,micro_batch=1,global_batch=8");
  const QuietAndNoisy c(plan);
  const PlanCosts& q = c.q;
  const PlanCosts& n = c.n;
  const NoiseModel& model = c.model;
  // Each compute op runs its mean excess longer; each TP collective waits for the later TP rank
  // after the compute since the previous collective (the unit's ops read as a cycle).
  const auto& qo = q.units->layer.fwd;
  const auto& no = n.units->layer.fwd;
  ASSERT_EQ(qo.size(), no.size());
  double since = 0, tail = 0;
  for (const CostedOp& o : qo) tail = o.tp_comm ? 0 : tail + o.time_s;
  bool first = true;
  int collectives = 0;
  for (size_t i = 0; i < qo.size(); ++i) {
    if (qo[i].tp_comm) {
      const double window = since + (first ? tail : 0.0);
      EXPECT_NEAR(no[i].time_s - qo[i].time_s, model.SyncExcess(window, 2), 1e-15) << i;
      EXPECT_NEAR(no[i].noise_s, model.SyncExcess(window, 2), 1e-15);
      first = false;
      since = 0;
      ++collectives;
    } else {
      EXPECT_NEAR(no[i].time_s, qo[i].time_s + model.MeanExcess(qo[i].time_s), 1e-15) << i;
      since += qo[i].time_s;
    }
  }
  EXPECT_EQ(collectives, 2);  // attention and MLP all-reduce
  // The step barrier: the four TP groups (dp = 4) wait for the latest one over the step's compute.
  EXPECT_GT(n.clip_sync_noise_s, 0.0);
  EXPECT_NEAR(n.clip_sync_s - q.clip_sync_s, n.clip_sync_noise_s, 1e-15);
  EXPECT_NEAR(n.ranks[0].optimizer_s, q.ranks[0].optimizer_s + model.MeanExcess(q.ranks[0].optimizer_s), 1e-15);
  // Both evaluators see it: the simulated and the closed-form step grow alike.
  auto sq = Simulate(plan, &c.quiet);
  auto sn = Simulate(plan, &c.noisy);
  ASSERT_TRUE(sq) << sq.error().message;
  ASSERT_TRUE(sn) << sn.error().message;
  EXPECT_GT(sn->prediction.step_time_s, sq->prediction.step_time_s + model.MeanExcess(sq->prediction.step_time_s));
  const double closed_q = EstimateStepTime(plan, q).step_time_s, closed_n = EstimateStepTime(plan, n).step_time_s;
  EXPECT_NEAR(closed_n / closed_q, sn->prediction.step_time_s / sq->prediction.step_time_s, 0.01);
}

TEST(NoiseModel, ChargedAtPipelineBoundaries) {
  const Plan plan = MakePlan("gpt-tiny", "dp=1,tp=1,pp=8,micro_batch=1,global_batch=8");
  const QuietAndNoisy c(plan);
  const PlanCosts& q = c.q;
  const PlanCosts& n = c.n;
  const NoiseModel& model = c.model;
  ASSERT_EQ(n.boundary_p2p_s.size(), 7u);
  double worst = 0;
  for (size_t s = 0; s < n.boundary_p2p_s.size(); ++s) {
    // Boundary s -> s + 1: the later of two ranks after the sender's pass over stage s's chunk.
    const ChunkCost& sender = n.ranks[s].chunks[0];
    EXPECT_NEAR(n.boundary_p2p_s[s] - q.boundary_p2p_s[s], model.SyncExcess(0.5 * (sender.fwd_s + sender.bwd_s), 2),
                1e-15)
        << s;
    worst = std::max(worst, n.boundary_p2p_s[s]);
  }
  EXPECT_DOUBLE_EQ(n.p2p_s, worst);
}

}  // namespace
}  // namespace parallax::planner
