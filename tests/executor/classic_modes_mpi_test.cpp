// The classic modes run for real (issue 41): parameter servers as MPI ranks holding shards, async
// and SSP with real staleness, backup workers with a slow rank, compression inside the DP
// reduction, local SGD / federated averaging. Equivalence: synchronous PS and full-fraction /
// full-rank compression reproduce the all-reduce losses within 1e-4 relative, and backup workers
// with an always-late rank synchronous SGD over the other ranks' gradients. Convergence: on
// gpt-tiny, global batch 8, 12 steps, every other mode's loss falls at least half as much as
// all-reduce's (the table is printed). ctest runs the binary under -np 2 and -np 4 with filters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "executor/cpu/local_communicator.h"
#include "executor/launch.h"
#include "executor/runtime/classic/classic_modes.h"
#include "executor/runtime/classic/flat_model.h"
#include "executor/runtime/classic/worker_data.h"
#include "executor/runtime/training_loop.h"
#include "tests/executor/mpi_main.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

using testing::MaxRelDiff;
using testing::TinyPlan;

constexpr int64_t kGlobalBatch = 8;
std::unique_ptr<Communicator> g_world;

//! Runs `plan` on the first job_ranks() ranks of the world; the others wait. Every rank returns
//! rank 0's report losses (the other fields only on the ranks that ran).
Result<TrainingReport> RunPlan(const Plan& plan, int steps, const std::string& inject_slow = "") {
  const int need = static_cast<int>(plan.layout.job_ranks());
  const bool active = g_world->rank() < need;
  std::vector<int> group;
  for (int r = 0; r < g_world->size(); ++r) {
    if ((r < need) == active) group.push_back(r);
  }
  auto sub = g_world->Split(group);
  if (!sub) return sub.error();
  Result<TrainingReport> report = TrainingReport{};
  if (active && need <= g_world->size()) {
    CpuBackend backend;
    TrainingRunOptions o;
    o.steps = steps;
    o.threads = 1;
    o.inject_slow = inject_slow;
    o.trainer.data.seed = plan.training.seed;
    bool failed = false;
    report = RunTraining(plan, backend, **sub, o, {}, {}, &failed);
  }
  std::vector<double> losses(static_cast<size_t>(steps), 0.0);
  if (g_world->rank() == 0 && report) losses = report->losses;
  losses.resize(static_cast<size_t>(steps), 0.0);
  if (Status st = g_world->HostAllReduce(losses.data(), steps, ReduceOp::kSum); !st) return st.error();
  if (report) report->losses = losses;
  return report;
}

//! The single-process reference every rank trains for itself (the all-reduce contract's reference).
std::vector<double> Reference(int steps) {
  auto local = LocalCommunicator();
  const Plan plan = TinyPlan("micro_batch=1", kGlobalBatch);
  TrainerOptions options;
  options.data.seed = plan.training.seed;  // as RunTraining's callers (parallax run) seed the data
  auto r = testing::Train(plan, *local, steps, options);
  if (!r) throw std::runtime_error(r.error().message);
  return r->losses;
}

std::vector<double> Losses(const std::string& layout, int steps, const std::string& inject_slow = "") {
  auto r = RunPlan(TinyPlan(layout, kGlobalBatch), steps, inject_slow);
  if (!r) throw std::runtime_error(layout + ": " + r.error().message);
  return r->losses;
}

void ExpectEqualsReference(const std::string& layout) {
  const auto ref = Reference(6);
  const auto got = Losses(layout, 6);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_LT(MaxRelDiff(got, ref), 1e-4) << layout << ": first loss " << got[0] << " vs " << ref[0] << ", last "
                                        << got.back() << " vs " << ref.back();
}

TEST(ClassicModes, SynchronousParameterServersEqualAllReduce) {
  if (g_world->size() == 4) {
    ExpectEqualsReference("dp=2,sync=ps,servers=2");  // dedicated: ranks 2 and 3 hold the shards
    ExpectEqualsReference("dp=4,sync=ps,servers=colocated:3");
  } else {
    ExpectEqualsReference("dp=1,sync=ps,servers=1");
    ExpectEqualsReference("dp=2,sync=ps,servers=colocated:2");
    // One worker has no one to be stale against: async and SSP are then synchronous.
    ExpectEqualsReference("dp=1,sync=async,servers=1");
    ExpectEqualsReference("dp=1,sync=ssp:1,servers=1");
  }
}

TEST(ClassicModes, FullFractionAndFullRankCompressionEqualUncompressed) {
  const std::string dp = "dp=" + std::to_string(g_world->size());
  ExpectEqualsReference(dp + ",compression=topk:1");
  ExpectEqualsReference(dp + ",compression=powersgd:1000000");
}

TEST(ClassicModes, PartialCompressionDiffersFromUncompressed) {
  // The equivalence above is not vacuous: a real compression changes the losses.
  const std::string dp = "dp=" + std::to_string(g_world->size());
  const auto ref = Reference(4);
  EXPECT_GT(MaxRelDiff(Losses(dp + ",compression=topk:0.01", 4), ref), 1e-4);
  EXPECT_GT(MaxRelDiff(Losses(dp + ",compression=powersgd:1", 4), ref), 1e-4);
}

TEST(ClassicModes, AsyncServersSeeRealStaleness) {
  ASSERT_EQ(g_world->size(), 4);
  auto r = RunPlan(TinyPlan("dp=3,micro_batch=1,sync=async,servers=1", 6), 6, "rank=1,factor=3");
  ASSERT_TRUE(r) << r.error().message;
  int64_t pushes = 0, stale = 0;
  for (size_t k = 0; k < r->staleness_histogram.size(); ++k) {
    pushes += r->staleness_histogram[k];
    if (k > 0) stale += r->staleness_histogram[k];
  }
  EXPECT_EQ(pushes, 3 * 6);
  EXPECT_GT(stale, 0) << "three workers pushing to one server, none stale";
}

//! Losses of synchronous SGD that drops one worker's gradient every step, without timing.
struct DroppedWorkerLosses {
  std::vector<double> all;   //!< per step, the mean over the four workers' samples
  std::vector<double> kept;  //!< per step, the mean over the three kept workers' samples
};

//! The backup mode's arithmetic in one process: four dp=1 replicas reading the workers' samples;
//! each step the mean of every gradient but worker `dropped`'s (-1: none), one AdamW step on
//! worker 0, the new weights copied to the others.
Result<DroppedWorkerLosses> DroppedWorkerSgd(int steps, int dropped) {
  constexpr int kWorkers = 4;
  const Plan plan = TinyPlan("dp=1", kGlobalBatch / kWorkers);
  TrainerOptions options;
  options.data.seed = plan.training.seed;
  std::vector<std::unique_ptr<CpuBackend>> backends;
  std::vector<std::unique_ptr<Communicator>> selves;
  std::vector<std::unique_ptr<Trainer>> workers;
  std::vector<FlatModel> flat;
  for (int w = 0; w < kWorkers; ++w) {
    backends.push_back(std::make_unique<CpuBackend>());
    selves.push_back(LocalCommunicator());
    PX_ASSIGN(auto t, Trainer::Create(plan, *backends.back(), *selves.back(), options));
    PX_ASSIGN(auto base, DataSource::Create(options.data, plan.model.vocab, plan.model.seq_len));
    t->set_data(WorkerData(std::move(base), FederatedRule::kIid, w, kWorkers, kGlobalBatch, plan.model.vocab));
    flat.emplace_back(t->model().groups());
    workers.push_back(std::move(t));
  }
  DroppedWorkerLosses out;
  std::vector<std::vector<float>> grads(kWorkers);
  std::vector<double> loss(kWorkers);
  for (int s = 0; s < steps; ++s) {
    for (int w = 1; w < kWorkers; ++w) {
      PX_ASSIGN(loss[static_cast<size_t>(w)], workers[static_cast<size_t>(w)]->ComputeGradients());
      flat[static_cast<size_t>(w)].ReadGrads(*backends[static_cast<size_t>(w)], &grads[static_cast<size_t>(w)]);
    }
    const GradientHook mean = [&](Trainer&) -> Result<bool> {
      flat[0].ReadGrads(*backends[0], &grads[0]);
      std::vector<float> sum(grads[0].size(), 0.0f);
      for (int w = 0; w < kWorkers; ++w) {
        if (w == dropped) continue;
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += grads[static_cast<size_t>(w)][k];
      }
      for (float& x : sum) x /= static_cast<float>(dropped < 0 ? kWorkers : kWorkers - 1);
      flat[0].WriteGrads(*backends[0], sum);
      return true;
    };
    PX_ASSIGN(const StepResult r, workers[0]->Step(mean));
    loss[0] = r.loss;
    std::vector<float> weights;
    flat[0].ReadWeights(*backends[0], &weights);
    double all = 0, kept = 0;
    for (int w = 0; w < kWorkers; ++w) {
      if (w > 0) {
        flat[static_cast<size_t>(w)].WriteWeights(*backends[static_cast<size_t>(w)], weights);
        workers[static_cast<size_t>(w)]->set_step(s + 1);
      }
      all += loss[static_cast<size_t>(w)];
      if (w != dropped) kept += loss[static_cast<size_t>(w)];
    }
    out.all.push_back(all / kWorkers);
    out.kept.push_back(kept / (dropped < 0 ? kWorkers : kWorkers - 1));
  }
  return out;
}

TEST(ClassicModes, BackupWorkersWithAnAlwaysLateRankAreSgdOnTheOtherRanksGradients) {
  // Backup workers' curve is synchronous SGD over the kept gradients, no more and no less: with
  // rank 1 always last (20x slow) every step's update is the mean of ranks 0, 2 and 3, and each
  // reported loss the mean over the workers that ran the step (rank 1 skips some). The oracle
  // dropping none is all-reduce, so the comparison is not vacuous.
  ASSERT_EQ(g_world->size(), 4);
  constexpr int kSteps = 6;
  auto r = RunPlan(TinyPlan("dp=4,sync=backup:1", kGlobalBatch), kSteps, "rank=1,factor=20");
  ASSERT_TRUE(r) << r.error().message;
  if (g_world->rank() != 0) return;
  auto none = DroppedWorkerSgd(kSteps, -1);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_LT(MaxRelDiff(none->all, Reference(kSteps)), 1e-4);
  auto oracle = DroppedWorkerSgd(kSteps, 1);
  ASSERT_TRUE(oracle) << oracle.error().message;
  EXPECT_GT(MaxRelDiff(oracle->all, none->all), 1e-3);
  for (size_t s = 0; s < kSteps; ++s) {
    const double got = r->losses[s];
    const bool matches = std::abs(got - oracle->all[s]) < 1e-4 * got || std::abs(got - oracle->kept[s]) < 1e-4 * got;
    EXPECT_TRUE(matches) << "step " << s << ": " << got << ", SGD without rank 1: " << oracle->all[s]
                         << " (all four ranks' samples) or " << oracle->kept[s] << " (ranks 0, 2, 3)";
  }
}

TEST(ClassicModes, BackupWorkersDropTheSlowRanksGradients) {
  ASSERT_EQ(g_world->size(), 4);
  auto r = RunPlan(TinyPlan("dp=4,sync=backup:1", kGlobalBatch), 6, "rank=1,factor=4");
  ASSERT_TRUE(r) << r.error().message;
  // How many of the six steps drop a gradient is timing: on an idle 2-core VM at least 3 (20+ runs),
  // but four ranks on two cores under a parallel ctest make the others late too (it failed twice
  // at >= 3). That the dropped gradient is the slow rank's, and the update SGD over the others',
  // BackupWorkersWithAnAlwaysLateRank... checks without timing.
  EXPECT_GE(r->dropped_gradients, 1);
  EXPECT_EQ(r->losses.size(), 6U);
}

TEST(ClassicModes, EveryModeConvergesAtLeastHalfAsMuchAsAllReduce) {
  ASSERT_EQ(g_world->size(), 4);
  constexpr int kSteps = 12;
  const auto base = Losses("dp=4", kSteps);
  const double base_drop = base.front() - base.back();
  struct Mode {
    const char* name;
    const char* layout;
    const char* slow;
  };
  const Mode modes[] = {
      {"ps, 2 workers + 2 servers", "dp=2,sync=ps,servers=2", ""},
      {"async, 2 workers + 1 server", "dp=2,sync=async,servers=1", ""},
      {"ssp:1, 2 workers + 1 server", "dp=2,sync=ssp:1,servers=1", ""},
      {"backup:1 of 4, rank 1 slow x20", "dp=4,sync=backup:1", "rank=1,factor=20"},
      {"local:4, 2 workers", "dp=2,sync=local:4", ""},
      {"local:2, 4 workers", "dp=4,sync=local:2", ""},
      {"local:4 federated label_skew, 4", "dp=4,sync=local:4,data=federated:label_skew", ""},
      {"compression=bf16, 4 workers", "dp=4,compression=bf16", ""},
      {"compression=int8, 4 workers", "dp=4,compression=int8", ""},
      {"compression=topk:0.1, 4 workers", "dp=4,compression=topk:0.1", ""},
      {"compression=powersgd:8, 4 workers", "dp=4,compression=powersgd:8", ""},
  };
  if (g_world->rank() == 0) {
    std::printf("gpt-tiny, global batch %lld, %d steps, lr 3e-3 (fall = first - last loss)\n%-34s %10s %10s %8s\n", static_cast<long long>(kGlobalBatch),
                kSteps, "mode", "first", "last", "fall/ar");
    std::printf("%-34s %10.4f %10.4f %8.2f\n", "allreduce, 4 workers", base.front(), base.back(), 1.0);
  }
  for (const Mode& m : modes) {
    const auto l = Losses(m.layout, kSteps, m.slow);
    const double ratio = (l.front() - l.back()) / base_drop;
    if (g_world->rank() == 0) std::printf("%-34s %10.4f %10.4f %8.2f\n", m.name, l.front(), l.back(), ratio);
    EXPECT_GE(ratio, 0.5) << m.name;
  }
}

TEST(ClassicModes, BadCombinationsAreRejectedBeforeTraining) {
  if (g_world->size() != 4) GTEST_SKIP() << "a 4-rank layout";
  auto r = RunPlan(TinyPlan("dp=2,tp=2,compression=topk:0.5", kGlobalBatch), 1);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("tp=1, pp=1, zero=0"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace parallax::executor

int main(int argc, char** argv) {
  return parallax::executor::testing::RunOnWorld(&argc, &argv, parallax::executor::g_world, 120);
}
