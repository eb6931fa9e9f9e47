// The planner's pricing of the classic modes, stragglers and failures (planner/estimate/sync_modes.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/compression_kernels.h"
#include "model/load.h"
#include "model/presets.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/sync_modes.h"

namespace parallax::planner {
namespace {

Plan MakePlan(const std::string& layout, const std::string& cluster = "dgx-a100", int64_t nodes = 1) {
  Plan p;
  p.model = *ModelPreset("gpt-tiny");
  p.cluster = *ResolveCluster(cluster, nodes);
  p.layout = *ParseInlineLayout(layout);
  p.training.global_batch = p.layout.global_batch;
  return p;
}

ModeEstimate Mode(const Plan& p) {
  CostContext ctx(p.cluster, p.training.precision, nullptr, &p.implementation);
  const PlanCosts pc = CostPlan(ctx, p);
  return EstimateSyncMode(p, pc, EstimateStepTime(p, pc));
}

TEST(SyncModes, AllReduceWithoutStragglersKeepsTheClosedForm) {
  const Plan p = MakePlan("dp=8,global_batch=64");
  CostContext ctx(p.cluster, p.training.precision, nullptr, &p.implementation);
  const PlanCosts pc = CostPlan(ctx, p);
  const StepTime ar = EstimateStepTime(p, pc);
  EXPECT_EQ(WithSyncMode(p, pc, ar).step_time_s, ar.step_time_s);
  EXPECT_NEAR(Mode(p).step_time_s / ar.step_time_s, 1.0, 1e-12);
}

TEST(SyncModes, BackupWorkersHideAStragglerThatSlowsAllReduce) {
  Plan p = MakePlan("dp=8,global_batch=64");
  p.cluster.stragglers.ranks.push_back({.index = 1, .factor = 3});
  const ModeEstimate ar = Mode(p);
  p.layout.sync = ParseInlineLayout("sync=backup:1")->sync;
  const ModeEstimate backup = Mode(p);
  // All-reduce waits for the 3x rank; backup workers take the 7 fastest.
  EXPECT_GT(ar.step_time_s / ar.compute_s, 2.5);
  EXPECT_LT(backup.step_time_s / ar.step_time_s, 0.6);
}

TEST(SyncModes, JitterMakesTheSlowestOfManyWorkersSlowerThanTheMedian) {
  Plan p = MakePlan("dp=8,global_batch=64");
  p.cluster.stragglers.jitter_sigma = 0.3;
  const ModeEstimate e = Mode(p);
  // E[max of 8 lognormal(0, 0.3)] is about exp(0.3 * 1.42) = 1.53 times the median.
  EXPECT_GT(e.allreduce_step_time_s / e.compute_s, 1.3);
}

TEST(SyncModes, AsyncReportsTheStalenessOfItsWorkers) {
  const ModeEstimate e = Mode(MakePlan("dp=4,global_batch=8,sync=async,servers=colocated:1"));
  ASSERT_FALSE(e.staleness.empty());
  double total = 0;
  for (double x : e.staleness) total += x;
  EXPECT_NEAR(total, 1.0, 1e-9);
  // Four equal workers: each push sees about the other three's updates.
  EXPECT_GT(e.mean_staleness, 2.0);
  EXPECT_LT(e.mean_staleness, 4.0);
}

TEST(SyncModes, SspBoundsHowFarTheFastestRunsAhead) {
  Plan p = MakePlan("dp=4,global_batch=8,sync=async,servers=colocated:1");
  // Not the shard's host (worker 0): a slow host holds every push back, async or not.
  p.cluster.stragglers.ranks.push_back({.index = 3, .factor = 4});
  const ModeEstimate async = Mode(p);
  p.layout.sync = ParseInlineLayout("sync=ssp:1,servers=colocated:1")->sync;
  const ModeEstimate ssp = Mode(p);
  // The slow worker's gradients are very stale under async; SSP keeps them within the bound
  // (staleness <= (S+1)(W-1) updates) at the price of waiting.
  EXPECT_GT(async.staleness.size(), ssp.staleness.size());
  EXPECT_LE(ssp.staleness.size(), 2U * 3U + 1U);
  EXPECT_GT(ssp.step_time_s, async.step_time_s);
}

TEST(SyncModes, AColocatedServerServesOnlyBetweenItsHostsIterations) {
  // The shard's host (worker 0) is 3x slow: a dedicated server answers worker 1 at once, a
  // colocated one only when worker 0 finishes its iteration, so worker 1 keeps its pace.
  Plan p = MakePlan("dp=2,global_batch=8,sync=async,servers=1");
  p.cluster.stragglers.ranks.push_back({.index = 0, .factor = 3});
  const ModeEstimate dedicated = Mode(p);
  p.layout.sync = ParseInlineLayout("sync=async,servers=colocated:1")->sync;
  const ModeEstimate colocated = Mode(p);
  EXPECT_GT(colocated.step_time_s, 1.5 * dedicated.step_time_s);
}

TEST(SyncModes, OneParameterServerIsTheIncastBottleneck) {
  // 16 nodes, one worker per GPU: every gradient funnels into the servers' links.
  const ModeEstimate one = Mode(MakePlan("dp=127,global_batch=127,sync=ps,servers=1", "dgx-a100", 16));
  const ModeEstimate many = Mode(MakePlan("dp=64,global_batch=128,sync=ps,servers=64", "dgx-a100", 16));
  EXPECT_GT(one.exchange_s, 20 * many.exchange_s);
}

TEST(SyncModes, TopKSendsFewerBytesOnASlowNetwork) {
  Plan p = MakePlan("dp=16,global_batch=64", "dgx-a100", 2);
  p.model = *ModelPreset("gpt-1.3b");
  p.cluster.inter_node.bandwidth_GBps = 1;  // a shared 8 Gb/s network
  const ModeEstimate dense = Mode(p);
  p.layout.sync = ParseInlineLayout("compression=topk:0.01")->sync;
  const ModeEstimate topk = Mode(p);
  EXPECT_LT(topk.step_time_s, dense.step_time_s);
  p.layout.sync = ParseInlineLayout("compression=powersgd:4")->sync;
  EXPECT_LT(Mode(p).exchange_s, dense.exchange_s);
}

// The executor's bf16 compression all-gathers every worker's bf16 copy and sums them: its traffic
// grows with the workers, where a dense all-reduce's per-rank traffic does not, so on a slow
// network it loses to the all-reduce at many workers (priced as an all-reduce of half the bytes
// until 2026-11-28, it always won).
TEST(SyncModes, Bf16CompressionIsAnAllGatherThatGrowsWithTheWorkers) {
  Plan p = MakePlan("dp=16,global_batch=64", "dgx-a100", 2);
  p.model = *ModelPreset("gpt-1.3b");
  p.cluster.inter_node.bandwidth_GBps = 1;
  const ModeEstimate dense = Mode(p);
  p.layout.sync = ParseInlineLayout("compression=bf16")->sync;
  const ModeEstimate bf16 = Mode(p);
  EXPECT_GT(bf16.exchange_s, 2 * dense.exchange_s);
}

ModeEstimate ModeWith(const Plan& p, const CostDb& db) {
  CostContext ctx(p.cluster, p.training.precision, &db, &p.implementation);
  const PlanCosts pc = CostPlan(ctx, p);
  return EstimateSyncMode(p, pc, EstimateStepTime(p, pc), &db);
}

// Compression's host kernels are priced from their calibrated CostDb families
// (model/compression_kernels.h): a slower top-k selection slows top-k's exchange and no other
// method's; without the families the estimate prices them at the streaming bandwidth.
TEST(SyncModes, ASlowerCalibratedCompressionKernelSlowsOnlyTheMethodThatRunsIt) {
  Plan p = MakePlan("dp=4,global_batch=8");
  CostDb db;
  for (int k = 0; k < kCompressionKernels; ++k) {
    for (int64_t bytes : {int64_t{1} << 12, int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 24}) {
      db.kernels.push_back({KernelFamily(static_cast<CompressionKernel>(k)), bytes, static_cast<double>(bytes) / 1e9});
    }
  }
  CostDb slow = db;
  for (KernelSample& s : slow.kernels) {
    if (s.op == KernelFamily(CompressionKernel::kTopKSelect)) s.time_s *= 10;
  }
  auto exchange = [&](const CostDb& d, const std::string& c) {
    p.layout.sync = ParseInlineLayout("compression=" + c)->sync;
    return ModeWith(p, d).exchange_s;
  };
  EXPECT_GT(exchange(slow, "topk:0.1"), 1.5 * exchange(db, "topk:0.1"));
  for (const char* c : {"bf16", "int8", "powersgd:4"}) EXPECT_EQ(exchange(slow, c), exchange(db, c)) << c;
  EXPECT_NE(exchange(CostDb{}, "topk:0.1"), exchange(db, "topk:0.1"));
}

TEST(SyncModes, LocalSgdAveragesOnlyEveryHSteps) {
  Plan p = MakePlan("dp=16,global_batch=64", "dgx-a100", 2);
  p.cluster.inter_node.bandwidth_GBps = 1;
  const ModeEstimate ar = Mode(p);
  p.layout.sync = ParseInlineLayout("sync=local:8")->sync;
  EXPECT_LT(Mode(p).step_time_s, ar.step_time_s);
}

//! gpt-tiny on one CPU node of `ranks` ranks and `cpus` CPUs (0: a CPU per rank, as before).
Plan CpuPlan(const std::string& layout, int64_t ranks, int64_t cpus) {
  Plan p = MakePlan(layout, "local-cpu");
  p.cluster.gpus_per_node = ranks;
  p.cluster.cpus_per_node = cpus;
  p.training.precision = Precision::kFp32;
  return p;
}

// Ranks that outnumber their CPUs (ClusterSpec::SlowestCoreShare): a synchronous step goes at the
// pace of the CPU holding the most of them, every compute time priced that much longer; a dedicated
// server waits while the workers compute and does not count.
TEST(SyncModes, RanksOutnumberingTheCpusComputeAtTheCrowdedCpusPace) {
  const std::string sync = "dp=3,global_batch=12,sync=ps,servers=colocated:1";
  const ModeEstimate own = Mode(CpuPlan(sync, 3, 0));
  const ModeEstimate two = Mode(CpuPlan(sync, 3, 2));  // CPUs of 2 and 1 rank: the pace of the pair
  EXPECT_NEAR(two.compute_s / own.compute_s, 2.0, 0.05);
  EXPECT_DOUBLE_EQ(Mode(CpuPlan(sync, 3, 3)).compute_s, own.compute_s);
  const std::string dedicated = "dp=2,global_batch=12,sync=ps,servers=1";
  EXPECT_DOUBLE_EQ(Mode(CpuPlan(dedicated, 3, 2)).compute_s, Mode(CpuPlan(dedicated, 3, 0)).compute_s);
}

// A straggler that lags (sleeps) leaves its CPU to the others: with 3 workers on 2 CPUs its 3x lag
// compounds with the sharing only when it drew the shared CPU (2 of 3 spreads): 2/3 x 6 + 1/3 x 3 =
// 5 unshared computes per step, not 3 x 2 = 6; without sharing, 3 as before.
TEST(SyncModes, AStragglersLagCompoundsWithSharingOnlyWhenItSharesACpu) {
  const auto step_over_alone = [](int64_t cpus) {
    Plan p = CpuPlan("dp=3,global_batch=12", 3, cpus);
    p.cluster.stragglers.ranks.push_back({.index = 1, .factor = 3});
    const ModeEstimate e = Mode(p);
    const double alone = Mode(CpuPlan("dp=3,global_batch=12", 3, 0)).compute_s;
    return (e.step_time_s - e.exchange_s) / alone;
  };
  EXPECT_NEAR(step_over_alone(0), 3.0, 0.05);
  EXPECT_NEAR(step_over_alone(2), 5.0, 0.3);
}

// Local SGD's workers run their H iterations at their own pace between averages: while the
// straggler lags away from its CPU the others compute, and once they wait for the average it has a
// CPU of its own. With 3 workers on 2 CPUs its iterations cost about 3 unshared computes, not the
// 5 of a period taken in lockstep (every worker restarting together each iteration).
TEST(SyncModes, LocalSgdsStragglerRunsMostlyAloneOnSharedCpus) {
  Plan p = CpuPlan("dp=3,global_batch=12,sync=local:8", 3, 2);
  p.cluster.stragglers.ranks.push_back({.index = 1, .factor = 3});
  const ModeEstimate e = Mode(p);
  const double alone = Mode(CpuPlan("dp=3,global_batch=12,sync=local:8", 3, 0)).compute_s;
  const double per_iteration = (e.step_time_s - e.exchange_s) / alone;
  EXPECT_GT(per_iteration, 3.0);
  EXPECT_LT(per_iteration, 4.0);
}

// A synchronous server answers the workers one after another in worker order
// (ShardServer::FinishSyncStep): a straggler answered first (worker 0) starts its slow iteration
// (W - 1) answers ahead of one answered last, and the step is that much shorter.
TEST(SyncModes, ASynchronousServerAnswersTheWorkersInTurn) {
  const auto step_with_straggler = [](int64_t rank) {
    Plan p = MakePlan("dp=4,global_batch=8,sync=ps,servers=1", "dgx-a100", 1);
    p.cluster.intra_node.bandwidth_GBps = 0.5;  // answers long enough to see
    p.cluster.stragglers.ranks.push_back({.index = rank, .factor = 3});
    return Mode(p);
  };
  const ModeEstimate first = step_with_straggler(0), last = step_with_straggler(3);
  // Answered last, the straggler ends the step at 4 answers + 3 computes; answered first, at
  // 1 answer + 3 computes or (the last fast worker) 4 answers + 1 compute. An answer carries the
  // whole model, as a push does: about a quarter of the 4 pushes into the server (exchange_s).
  const double answer = first.exchange_s / 4;
  EXPECT_NEAR(last.step_time_s - first.step_time_s, std::min(3 * answer, 2 * first.compute_s), 0.1 * answer);
}

// Compression's kernels on a worker's own gradient (error feedback, top-k selection) run right
// after its backward, at its own pace: where a straggler sleeps after its backward, the others run
// theirs meanwhile, and it runs its own on a CPU the waiting workers left. What top-k adds to the
// all-reduce step shrinks with the straggler (before, it was added after the slowest worker,
// shared as in step).
TEST(SyncModes, CompressionsOwnKernelsRunAtEachWorkersPace) {
  const auto extra = [](bool straggler) {
    Plan p = CpuPlan("dp=3,global_batch=12,compression=topk:0.1", 3, 2);
    if (straggler) p.cluster.stragglers.ranks.push_back({.index = 1, .factor = 3});
    const ModeEstimate e = Mode(p);
    return e.step_time_s - e.allreduce_step_time_s;
  };
  const double even = extra(false), slow = extra(true);
  EXPECT_GT(even, 0);
  EXPECT_LT(slow, 0.75 * even);
}

// Unsynchronised workers keep both CPUs busy: async's round with 4 workers on 2 CPUs (two a CPU)
// takes about twice the unshared one, and never the 4x of a rank-per-turn model.
TEST(SyncModes, AsyncWorkersShareTheCpusEvenly) {
  const std::string async = "dp=4,global_batch=12,sync=async,servers=colocated:1";
  const double ratio = Mode(CpuPlan(async, 4, 2)).step_time_s / Mode(CpuPlan(async, 4, 0)).step_time_s;
  EXPECT_GT(ratio, 1.3);
  EXPECT_LT(ratio, 2.2);
}

TEST(Goodput, YoungDalyIntervalAtSixteenThousandGpus) {
  Plan p = MakePlan("dp=2048,tp=8,global_batch=4096", "dgx-h100", 2048);
  p.model = *ModelPreset("llama3-70b");
  p.cluster.failures.mtbf_hours = 50000;
  p.cluster.failures.checkpoint_write_s = 60;
  p.cluster.failures.checkpoint_restore_s = 600;
  const Goodput g = EstimateGoodput(p, 10.0, 4096.0 * 8192);
  const double m = 50000.0 * 3600 / 16384;
  EXPECT_NEAR(g.job_mtbf_s, m, 1e-6);
  EXPECT_NEAR(g.interval_s, std::sqrt(2 * 60 * m) - 60, 1e-6);
  EXPECT_GT(g.goodput, 0.5);
  EXPECT_LT(g.goodput, 0.95);
  // The Young/Daly interval beats checkpointing twice or half as often.
  auto goodput_at = [&](double tau) { return tau / (tau + 60) * (1 - (600 + (tau + 60) / 2) / m); };
  EXPECT_GE(g.goodput, goodput_at(2 * g.interval_s));
  EXPECT_GE(g.goodput, goodput_at(g.interval_s / 2));
}

TEST(Goodput, NoFailureRateMeansNoLoss) {
  const Goodput g = EstimateGoodput(MakePlan("dp=8,global_batch=64"), 1.0, 1000.0);
  EXPECT_EQ(g.goodput, 1.0);
}

}  // namespace
}  // namespace parallax::planner
