// Correctness contract (issue 5): for the same seed and data, every layout's first 10 losses equal
// the single-process reference within 1e-4 relative in fp32, and within 1e-3 in bf16 and fp8 against
// the single-process reference of the same precision (fp8 with tp > 1: 1.6e-2, see the test). Runs under mpirun; each rank also trains the reference itself on a
// one-rank communicator. ctest starts this binary once per case with a filter and the case's -np
// (tests/executor/CMakeLists.txt); a case run under another world size fails loudly (it once
// skipped silently). The memory-truth suite alone is filtered by name under 2 and 4 ranks and
// skips the layouts of the other size (tests/expected_skips.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "executor/cpu/local_communicator.h"
#include "executor/launch.h"
#include "executor/runtime/checkpoint.h"
#include "planner/memory/memory_model.h"
#include "planner/sim/simulator.h"
#include "tests/executor/mpi_main.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

using testing::MaxRelDiff;
using testing::TinyPlan;
using testing::Train;

constexpr int kSteps = 10;
constexpr int64_t kGlobalBatch = 8;
std::unique_ptr<Communicator> g_world;

//! Empty when the launch has `ranks` ranks; else the message a wrongly listed case fails with.
std::string WrongWorldSize(int64_t ranks) {
  if (g_world->size() == ranks) return "";
  return "this case needs mpirun -np " + std::to_string(ranks) + " but runs under -np " +
         std::to_string(g_world->size()) + ": fix its parallax_mpi_test line in tests/executor/CMakeLists.txt";
}

Plan InPrecision(Plan p, Precision precision) {
  p.training.precision = precision;
  return p;
}

const testing::TrainOutcome& Reference(int64_t global_batch, Precision precision = Precision::kFp32) {
  static std::map<std::pair<int64_t, Precision>, testing::TrainOutcome> cache;
  auto it = cache.find({global_batch, precision});
  if (it != cache.end()) return it->second;
  auto local = LocalCommunicator();
  auto r = Train(InPrecision(TinyPlan("micro_batch=2", global_batch), precision), *local, kSteps);
  if (!r) throw std::runtime_error(r.error().message);
  return cache[{global_batch, precision}] = *r;
}

struct Case {
  const char* name;
  const char* layout;
};

class Layouts : public ::testing::TestWithParam<std::tuple<Case, const char*, Precision>> {};

TEST_P(Layouts, LossesMatchSingleProcessReference) {
  const auto [c, recompute, precision] = GetParam();
  Plan plan = InPrecision(TinyPlan(std::string(c.layout) + ",recompute=" + recompute, kGlobalBatch), precision);
  if (const std::string wrong = WrongWorldSize(plan.layout.world_size()); !wrong.empty()) FAIL() << wrong;
  auto r = Train(plan, *g_world, kSteps);
  ASSERT_TRUE(r) << r.error().message;
  const testing::TrainOutcome& reference = Reference(kGlobalBatch, precision);
  // fp8 with tp > 1: TP sums partial GEMM products in another order, and a bf16 activation or
  // gradient that differs in its last bit can round to the neighbouring FP8 value, a unit 16 times
  // bf16's (E4M3's 2^-3 against bf16's 2^-7): the bf16 bar times 16 (tp2 measured 3.5e-3 against
  // bf16's 3.3e-4). Without tp (dp, pp, ZeRO) the casts see the reference's exact values and the
  // amax reduction gives the reference's scales: the bf16 bar holds (1e-9 measured).
  const double tolerance = precision == Precision::kFp32                  ? 1e-4
                           : precision == Precision::kFp8 && plan.layout.tp > 1 ? 1.6e-2
                                                                           : 1e-3;
  const std::vector<double>& ref = reference.losses;
  const double diff = MaxRelDiff(r->losses, ref);
  // Losses alone cannot see a gradient scaled by a constant (AdamW normalises it away); the global
  // gradient norm before clipping can. In bf16 a 1e-7 difference in an fp32 main weight (another
  // summation order) can flip the rounding of its bf16 copy by one unit (2^-8 relative), and the
  // norm, a sum over every weight's gradient, drifts by up to ~1% over 10 steps while losses stay
  // within 1e-3; so bf16 holds the first step's norm (where a scale error would show) to the
  // tolerance and prints the later drift (1-2.3% seen) without asserting it.
  const double norm_diff = precision == Precision::kFp32
                               ? MaxRelDiff(r->grad_norms, reference.grad_norms)
                               : MaxRelDiff({r->grad_norms.front()}, {reference.grad_norms.front()});
  const double norm_drift = MaxRelDiff(r->grad_norms, reference.grad_norms);
  if (g_world->rank() == 0) {
    std::printf("%-28s %-5s %-4s loss[0]=%.6f loss[9]=%.6f ref[9]=%.6f max rel diff %.2e, grad norm %.2e (%.2e)\n",
                c.name, recompute, ToString(precision), r->losses[0], r->losses[9], ref[9], diff, norm_diff, norm_drift);
  }
  EXPECT_LT(diff, tolerance) << c.layout;
  EXPECT_LT(norm_diff, tolerance) << c.layout << ": gradient norms differ from the reference";
  EXPECT_LT(ref[9], ref[0] - 0.05) << "reference does not learn; the comparison would be weak";
}

const Case kCases[] = {
    {"dp2", "dp=2,micro_batch=2"},
    {"tp2", "tp=2,micro_batch=2"},
    {"tp2_sp", "tp=2,micro_batch=2,sequence_parallel=1"},
    {"pp2_gpipe", "pp=2,micro_batch=2,schedule=gpipe"},
    {"pp2_1f1b", "pp=2,micro_batch=2,schedule=1f1b"},
    {"pp2_interleaved_v2", "pp=2,micro_batch=2,schedule=interleaved,virtual_stages=2"},
    {"pp2_first1", "pp=2,micro_batch=2,first_stage_layers=1"},  // the explicit split: 1 + 3 layers
    {"dp2_zero1", "dp=2,micro_batch=2,zero=1"},
    {"dp2_zero2", "dp=2,micro_batch=2,zero=2"},
    {"dp2_zero3", "dp=2,micro_batch=2,zero=3"},
    {"dp2_tp2", "dp=2,tp=2,micro_batch=2"},
    {"tp2_pp2", "tp=2,pp=2,micro_batch=2"},
    {"dp2_pp2_zero1", "dp=2,pp=2,micro_batch=2,zero=1"},
    {"dp2_tp2_sp_zero3", "dp=2,tp=2,micro_batch=1,zero=3,sequence_parallel=1"},
    {"tp2_pp2_interleaved_sp", "tp=2,pp=2,micro_batch=1,schedule=interleaved,virtual_stages=2,sequence_parallel=1"},
};

INSTANTIATE_TEST_SUITE_P(Executor, Layouts,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values("none", "full"),
                                            ::testing::Values(Precision::kFp32, Precision::kBf16, Precision::kFp8)),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).name) + "_" +
                                  std::get<1>(param_info.param) + "_" + ToString(std::get<2>(param_info.param));
                         });

// Context parallelism (issue 36): ring attention with the causal load balance, alone and with the
// other dimensions, under every recompute mode. Names end in cp2/cp4 so the filters of the cases
// above (*/Layouts.*/<name>_<recompute>_<precision>) select none of them.
const Case kCpCases[] = {
    {"cp2", "cp=2,micro_batch=2"},
    {"cp4", "cp=4,micro_batch=2"},
    {"tp2_sp_cp2", "cp=2,tp=2,micro_batch=2,sequence_parallel=1"},
    {"dp2_zero1_cp2", "cp=2,dp=2,micro_batch=2,zero=1"},
    {"dp2_zero3_cp2", "cp=2,dp=2,micro_batch=2,zero=3"},
    {"pp2_cp2", "cp=2,pp=2,micro_batch=2"},
};

INSTANTIATE_TEST_SUITE_P(ContextParallel, Layouts,
                         ::testing::Combine(::testing::ValuesIn(kCpCases),
                                            ::testing::Values("none", "selective", "full"),
                                            ::testing::Values(Precision::kFp32, Precision::kBf16)),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).name) + "_" +
                                  std::get<1>(param_info.param) + "_" + ToString(std::get<2>(param_info.param));
                         });

// Mixture of experts (issue 37): testing::MoePlan (4 experts, top-2, a shared expert, a dense first
// layer) in every layout with expert parallelism against its own single-process reference, losses
// and the auxiliary loss (the router's counts over tp x cp make it layout independent). Names start
// with moe_ so the filters above select none of them.
const Case kMoeCases[] = {
    {"moe_ep2", "dp=2,ep=2,etp=1,micro_batch=2"},
    {"moe_tp2_sp_etp1", "tp=2,etp=1,micro_batch=2,sequence_parallel=1"},
    {"moe_tp2_sp_ep2", "tp=2,ep=2,etp=1,micro_batch=2,sequence_parallel=1"},
    {"moe_ep2_edp2", "dp=4,ep=2,etp=1,micro_batch=2"},
    {"moe_dp2_tp2_sp_ep4", "dp=2,tp=2,ep=4,etp=1,micro_batch=2,sequence_parallel=1"},
    {"moe_ep2_pp2", "dp=2,pp=2,ep=2,etp=1,micro_batch=2"},
    {"moe_ep2_edp2_zero1", "dp=4,ep=2,etp=1,micro_batch=2,zero=1"},
    {"moe_ep2_edp2_zero2", "dp=4,ep=2,etp=1,micro_batch=2,zero=2"},
    {"moe_ep2_edp2_zero3", "dp=4,ep=2,etp=1,micro_batch=2,zero=3"},
    {"moe_cp2_dp2_ep2", "cp=2,dp=2,ep=2,etp=1,micro_batch=2"},
};

class MoeLayouts : public ::testing::TestWithParam<std::tuple<Case, const char*>> {};

TEST_P(MoeLayouts, LossesAndAuxLossesMatchSingleProcessReference) {
  const auto [c, recompute] = GetParam();
  const Plan plan = testing::MoePlan(std::string(c.layout) + ",recompute=" + recompute, kGlobalBatch);
  if (const std::string wrong = WrongWorldSize(plan.layout.world_size()); !wrong.empty()) FAIL() << wrong;
  auto r = Train(plan, *g_world, kSteps);
  ASSERT_TRUE(r) << r.error().message;
  static const testing::TrainOutcome reference = [] {
    auto local = LocalCommunicator();
    auto ref = Train(testing::MoePlan("micro_batch=2", kGlobalBatch), *local, kSteps);
    if (!ref) throw std::runtime_error(ref.error().message);
    return *ref;
  }();
  const double diff = MaxRelDiff(r->losses, reference.losses);
  const double aux = MaxRelDiff(r->aux_losses, reference.aux_losses);
  const double norm = MaxRelDiff(r->grad_norms, reference.grad_norms);
  if (g_world->rank() == 0) {
    std::printf("%-22s %-5s loss[9]=%.6f ref[9]=%.6f aux[9]=%.6f max rel diff: loss %.2e, aux %.2e, grad norm %.2e\n",
                c.name, recompute, r->losses[9], reference.losses[9], r->aux_losses[9], diff, aux, norm);
  }
  EXPECT_LT(diff, 1e-4) << c.layout;
  EXPECT_LT(aux, 1e-4) << c.layout;
  EXPECT_LT(norm, 1e-4) << c.layout << ": gradient norms differ from the reference";
  EXPECT_GT(reference.aux_losses[0], 0.0);
  EXPECT_LT(reference.losses[9], reference.losses[0] - 0.05) << "reference does not learn";
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeLayouts,
                         ::testing::Combine(::testing::ValuesIn(kMoeCases), ::testing::Values("none", "full")),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).name) + "_" + std::get<1>(param_info.param);
                         });

// Multi-head latent attention (issue 37 item 5): testing::MlaPlan in each dimension against its own
// single-process reference; its down-projections are whole on every TP rank with gradients summed
// over TP, its rotary parts follow the cp chunks. Checked against central differences in
// mla_gradient_test.cpp. "mla_moe_*" adds MoePlan's experts (DeepSeek-V3's combination).
struct MlaCase {
  const char* name;
  const char* layout;
  bool query_latent;
  bool experts;
};

Plan MlaCasePlan(const MlaCase& c, const std::string& layout) {
  Plan p = testing::MlaPlan(layout, kGlobalBatch, c.query_latent);
  if (c.experts) {
    const Plan moe = testing::MoePlan(layout, kGlobalBatch);
    p.model.experts = moe.model.experts;
    p.model.experts_per_token = moe.model.experts_per_token;
    p.model.moe_ffn_hidden = moe.model.moe_ffn_hidden;
    p.model.shared_experts = moe.model.shared_experts;
    p.model.dense_layers = moe.model.dense_layers;
  }
  return p;
}

const MlaCase kMlaCases[] = {
    {"mla_tp2_sp", "tp=2,micro_batch=2,sequence_parallel=1", true, false},
    {"mla_tp2", "tp=2,micro_batch=2", true, false},
    {"mla_noqlatent_tp2_sp", "tp=2,micro_batch=2,sequence_parallel=1", false, false},
    {"mla_cp2", "cp=2,micro_batch=2", true, false},
    {"mla_pp2", "pp=2,micro_batch=2", true, false},
    {"mla_dp2_zero1", "dp=2,micro_batch=2,zero=1", true, false},
    {"mla_moe_ep2", "dp=2,ep=2,etp=1,micro_batch=2", true, true},
    {"mla_moe_tp2_sp_ep2", "tp=2,ep=2,etp=1,micro_batch=2,sequence_parallel=1", true, true},
};

class MlaLayouts : public ::testing::TestWithParam<std::tuple<MlaCase, const char*>> {};

//! `plan` on the world against `reference` in one process: losses and gradient norms within 1e-4
//! relative, and the reference learns. `name` and `recompute` label the printed line.
void ExpectMatchesSingleProcess(const char* name, const char* recompute, const Plan& plan, const Plan& reference) {
  if (const std::string wrong = WrongWorldSize(plan.layout.world_size()); !wrong.empty()) FAIL() << wrong;
  auto r = Train(plan, *g_world, kSteps);
  ASSERT_TRUE(r) << r.error().message;
  auto local = LocalCommunicator();
  auto ref = Train(reference, *local, kSteps);
  ASSERT_TRUE(ref) << ref.error().message;
  const double diff = MaxRelDiff(r->losses, ref->losses);
  const double norm = MaxRelDiff(r->grad_norms, ref->grad_norms);
  if (g_world->rank() == 0) {
    std::printf("%-22s %-5s loss[9]=%.6f ref[9]=%.6f max rel diff: loss %.2e, grad norm %.2e\n", name, recompute,
                r->losses[9], ref->losses[9], diff, norm);
  }
  const std::string layout = LayoutToString(plan.layout);
  EXPECT_LT(diff, 1e-4) << layout;
  EXPECT_LT(norm, 1e-4) << layout << ": gradient norms differ from the reference";
  EXPECT_LT(ref->losses[9], ref->losses[0] - 0.05) << "reference does not learn";
}

TEST_P(MlaLayouts, LossesMatchSingleProcessReference) {
  const auto [c, recompute] = GetParam();
  ExpectMatchesSingleProcess(c.name, recompute, MlaCasePlan(c, std::string(c.layout) + ",recompute=" + recompute),
                             MlaCasePlan(c, "micro_batch=2"));
}

INSTANTIATE_TEST_SUITE_P(Mla, MlaLayouts,
                         ::testing::Combine(::testing::ValuesIn(kMlaCases), ::testing::Values("none", "full")),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).name) + "_" + std::get<1>(param_info.param);
                         });

// Local attention (sliding and chunked windows, issue 37 item 1's gpt-oss and Llama 4 patterns):
// testing::LocalAttentionPlan in each dimension that cuts the sequence (cp: ring blocks by absolute
// position; tp with SP; pp) against its own single-process reference.
struct LocalCase {
  const char* name;
  const char* layout;
  bool chunked;
};

const LocalCase kLocalCases[] = {
    {"sliding_cp2", "cp=2,micro_batch=2", false},
    {"sliding_tp2_sp", "tp=2,micro_batch=2,sequence_parallel=1", false},
    {"sliding_pp2", "pp=2,micro_batch=2", false},
    {"chunked_cp2", "cp=2,micro_batch=2", true},
};

class LocalLayouts : public ::testing::TestWithParam<std::tuple<LocalCase, const char*>> {};

TEST_P(LocalLayouts, LossesMatchSingleProcessReference) {
  const auto [c, recompute] = GetParam();
  ExpectMatchesSingleProcess(
      c.name, recompute,
      testing::LocalAttentionPlan(std::string(c.layout) + ",recompute=" + recompute, kGlobalBatch, c.chunked),
      testing::LocalAttentionPlan("micro_batch=2", kGlobalBatch, c.chunked));
}

INSTANTIATE_TEST_SUITE_P(Local, LocalLayouts,
                         ::testing::Combine(::testing::ValuesIn(kLocalCases), ::testing::Values("none", "full")),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).name) + "_" + std::get<1>(param_info.param);
                         });

// Rotary positions follow each cp rank's chunks; grouped-query heads travel as K/V blocks.
TEST(ContextParallel, LlamaStyleModelMatchesItsSingleProcessReference) {
  auto llama = [](const std::string& layout) { return testing::LlamaTinyPlan(layout, kGlobalBatch); };
  const Plan plan = llama("cp=" + std::to_string(g_world->size()) + ",micro_batch=2");
  auto r = Train(plan, *g_world, kSteps);
  ASSERT_TRUE(r) << r.error().message;
  auto local = LocalCommunicator();
  auto ref = Train(llama("micro_batch=2"), *local, kSteps);
  ASSERT_TRUE(ref) << ref.error().message;
  EXPECT_LT(MaxRelDiff(r->losses, ref->losses), 1e-4);
  EXPECT_LT(MaxRelDiff(r->grad_norms, ref->grad_norms), 1e-4);
  EXPECT_LT(ref->losses[9], ref->losses[0] - 0.05);
}

// Memory truth on multi-rank layouts: the planner's estimate for every rank's pipeline rank is an
// upper bound on its measured peak, at most 15% above it.
class MemoryTruthMultiRank : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(MemoryTruthMultiRank, PerRankPeakAtMostThePlannerModelWithinFifteenPercent) {
  const auto [layout, wide] = GetParam();
  const Plan plan = wide ? testing::WidePlan(layout, kGlobalBatch) : TinyPlan(layout, kGlobalBatch);
  if (plan.layout.world_size() != g_world->size()) GTEST_SKIP() << "a " << plan.layout.world_size() << "-rank layout";
  auto r = Train(plan, *g_world, 2);
  ASSERT_TRUE(r) << r.error().message;
  const int64_t pp_idx = CoordsOf(plan.layout, g_world->rank()).pp_idx;
  const int64_t predicted = planner::EstimateRankMemory(plan, pp_idx).total;
  const double ratio = static_cast<double>(predicted) / static_cast<double>(r->peak_bytes);
  if (g_world->rank() == 0 || pp_idx > 0) {
    std::printf("memory %-10s %-44s rank %d measured %10lld planner %10lld planner/measured %.3f\n", plan.model.name.c_str(),
                layout, g_world->rank(), static_cast<long long>(r->peak_bytes), static_cast<long long>(predicted),
                ratio);
  }
  EXPECT_GE(ratio, 1.0) << layout << " rank " << g_world->rank() << ": measured peak above the prediction";
  EXPECT_LE(ratio, 1.15) << layout << " rank " << g_world->rank() << ": prediction more than 15% above the peak";
}

INSTANTIATE_TEST_SUITE_P(
    Executor, MemoryTruthMultiRank,
    ::testing::Combine(::testing::Values("dp=2,micro_batch=2,zero=1", "tp=2,micro_batch=2",
                                         "tp=2,micro_batch=2,sequence_parallel=1", "pp=2,micro_batch=1,schedule=1f1b",
                                         "pp=2,micro_batch=1,schedule=gpipe", "dp=2,tp=2,micro_batch=2,zero=1",
                                         "tp=2,pp=2,micro_batch=1,recompute=full"),
                       ::testing::Bool()));

// ZeRO-2/3: gradients sharded over dp; the planner's DP bucket term is capped at the rank's
// unsharded gradient bytes, which is what the executor's reduce-scatter staging holds.
INSTANTIATE_TEST_SUITE_P(ZeroBuckets, MemoryTruthMultiRank,
                         ::testing::Combine(::testing::Values("dp=2,micro_batch=2,zero=2", "dp=2,micro_batch=2,zero=3"),
                                            ::testing::Bool()));

// Reduce-scatter on the dp stream against the sum computed here: every rank regenerates every
// rank's random input. Out of place and in place (NCCL's convention: recv is this rank's block).
TEST(MultiRank, ReduceScatterOnAStreamEqualsTheSumOfEveryRanksBlock) {
  const int n = g_world->size(), me = g_world->rank();
  CpuBackend be;
  Stream& dp = be.stream(StreamKind::kDpComm);
  for (const int64_t count : {int64_t{1}, int64_t{37}, int64_t{4099}}) {
    std::vector<std::vector<float>> inputs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      std::mt19937 rng(static_cast<unsigned>(1000 * count + r));
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      inputs[static_cast<size_t>(r)].resize(static_cast<size_t>(n * count));
      for (float& x : inputs[static_cast<size_t>(r)]) x = u(rng);
    }
    std::vector<double> expect(static_cast<size_t>(count), 0.0);
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < count; ++i) {
        expect[static_cast<size_t>(i)] += inputs[static_cast<size_t>(r)][static_cast<size_t>(me * count + i)];
      }
    }
    auto check = [&](DevPtr got_dev, const char* mode) {
      std::vector<float> got(static_cast<size_t>(count));
      be.CopyToHost(got.data(), DType::kF32, got_dev, count);
      double err = 0, ref = 0;
      for (int64_t i = 0; i < count; ++i) {
        err += std::pow(got[static_cast<size_t>(i)] - expect[static_cast<size_t>(i)], 2);
        ref += std::pow(expect[static_cast<size_t>(i)], 2);
      }
      EXPECT_LT(std::sqrt(err / ref), 1e-6) << mode << " count " << count << " rank " << me;
    };
    const std::vector<float>& mine = inputs[static_cast<size_t>(me)];
    auto send = be.Allocate(n * count, DType::kF32, MemoryKind::kWorkspace);
    auto out = be.Allocate(count, DType::kF32, MemoryKind::kWorkspace);
    ASSERT_TRUE(send && out);
    be.CopyToDevice(send->ptr(), mine.data(), DType::kF32, n * count);
    ASSERT_TRUE(g_world->ReduceScatter(send->ptr(), out->ptr(), count, dp));
    ASSERT_TRUE(be.SynchronizeEvent(be.RecordEvent(StreamKind::kDpComm)));
    check(out->ptr(), "out of place");
    be.CopyToDevice(send->ptr(), mine.data(), DType::kF32, n * count);
    const DevPtr block = send->at(me * count);
    ASSERT_TRUE(g_world->ReduceScatter(send->ptr(), block, count, dp));
    ASSERT_TRUE(be.Synchronize());
    check(block, "in place");
  }
}

// ZeRO-1 is Megatron's distributed optimizer: after the last backward each gradient bucket is
// reduce-scattered (not all-reduced) over dp, with the identity and bytes the simulator predicts.
// ZeRO-0 keeps the all-reduce. Either way the losses equal the single-process reference.
TEST(MultiRank, Zero1ReduceScattersGradientsAsTheSimulatorPredicts) {
  if (const std::string wrong = WrongWorldSize(2); !wrong.empty()) FAIL() << wrong;
  constexpr int kRecordedSteps = 3;
  for (const int64_t zero : {0, 1}) {
    const Plan plan = TinyPlan("dp=2,micro_batch=2,zero=" + std::to_string(zero), kGlobalBatch);
    CpuBackend be;
    TrainerOptions options;
    options.record_ops = true;
    auto t = Trainer::Create(plan, be, *g_world, options);
    ASSERT_TRUE(t) << t.error().message;
    std::vector<double> losses;
    for (int i = 0; i < kRecordedSteps; ++i) {
      auto r = (*t)->Step();
      ASSERT_TRUE(r) << r.error().message;
      losses.push_back(r->loss);
    }
    const std::vector<double>& ref = Reference(kGlobalBatch).losses;
    EXPECT_LT(MaxRelDiff(losses, std::vector<double>(ref.begin(), ref.begin() + kRecordedSteps)), 1e-4)
        << "zero=" << zero;

    const OpKind expected = zero == 0 ? OpKind::kDpAllReduce : OpKind::kDpReduceScatter;
    const OpKind other = zero == 0 ? OpKind::kDpReduceScatter : OpKind::kDpAllReduce;
    std::map<std::pair<int64_t, int64_t>, int64_t> padded_bytes;  // (stage, layer) -> bytes per group
    for (const ParamGroup* g : (*t)->model().groups()) padded_bytes[{g->stage, g->layer}] += g->padded() * 4;
    std::set<std::tuple<int64_t, int64_t, int64_t>> measured;  // (microbatch, stage, layer)
    std::map<std::pair<int64_t, int64_t>, int64_t> measured_bytes;
    int wrong_kind = 0;
    for (const MeasuredOp& op : (*t)->recorder().ops()) {
      wrong_kind += op.id.op == other;
      if (op.id.op != expected || op.id.step != 0) continue;
      EXPECT_EQ(op.group_size, 2);
      EXPECT_EQ(op.id.phase, Phase::kComm);
      measured.insert({op.id.microbatch, op.id.stage, op.id.layer});
      measured_bytes[{op.id.stage, op.id.layer}] += op.bytes;
    }
    EXPECT_EQ(wrong_kind, 0) << "zero=" << zero << ": gradient syncs recorded as " << ToString(other);
    EXPECT_EQ(measured_bytes, padded_bytes) << "zero=" << zero << ": one sync of each whole bucket";

    planner::SimOptions so;
    so.record_trace = true;
    Plan sim_plan = plan;  // local-cpu stands for any number of processes; the simulator needs 2
    sim_plan.cluster.nodes = 1;
    sim_plan.cluster.gpus_per_node = 2;
    auto sim = planner::Simulate(sim_plan, nullptr, so);
    ASSERT_TRUE(sim) << sim.error().message;
    ASSERT_TRUE(sim->trace);
    std::set<std::tuple<int64_t, int64_t, int64_t>> predicted;
    const traces::Trace& trace = *sim->trace;
    wrong_kind = 0;
    for (size_t i = 0; i < trace.slices().size(); ++i) {
      const auto id = trace.identity(trace.slice(i));
      if (!id) continue;
      wrong_kind += id->op == other;
      if (id->op == expected && id->rank == 0) predicted.insert({id->microbatch, id->stage, id->layer});
    }
    EXPECT_EQ(wrong_kind, 0) << "zero=" << zero << ": the simulator predicts " << ToString(other);
    EXPECT_EQ(measured, predicted) << "zero=" << zero << ": (microbatch, stage, layer) of the gradient syncs";
  }
}

// ZeRO-3 prefetch (issue order, not timing): in forward the all-gather of layer l+1 is issued
// before layer l's first compute op, in backward the gather of layer l-1 before layer l's
// backward ops, and no layer is gathered twice per pass.
TEST(MultiRank, ZeroThreeGathersAreIssuedOneLayerAhead) {
  if (const std::string wrong = WrongWorldSize(2); !wrong.empty()) FAIL() << wrong;
  CpuBackend be;
  TrainerOptions topt;
  topt.record_ops = true;
  // One micro-batch per rank: each pass gathers every layer once.
  auto t = Trainer::Create(TinyPlan("dp=2,micro_batch=2,zero=3", 4), be, *g_world, topt);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE((*t)->Step());
  const std::vector<MeasuredOp>& ops = (*t)->recorder().ops();
  auto first_index = [&](OpKind op, Phase phase, int64_t layer) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].id.op == op && ops[i].id.phase == phase && ops[i].id.layer == layer) return static_cast<int64_t>(i);
    }
    return static_cast<int64_t>(-1);
  };
  auto gathers = [&](Phase phase, int64_t layer) {
    int64_t n = 0;
    for (const MeasuredOp& o : ops) n += o.id.op == OpKind::kDpAllGather && o.id.phase == phase && o.id.layer == layer;
    return n;
  };
  const int64_t layers = TinyPlan("dp=2", kGlobalBatch).model.layers;
  ASSERT_GE(layers, 2);
  for (int64_t l = 0; l + 1 < layers; ++l) {
    const int64_t gather_next = first_index(OpKind::kDpAllGather, Phase::kFwd, l + 1);
    const int64_t compute = first_index(OpKind::kQkv, Phase::kFwd, l);
    ASSERT_GE(gather_next, 0) << "layer " << l + 1;
    EXPECT_LT(gather_next, compute) << "forward: layer " << l + 1 << "'s gather must be issued before layer " << l
                                    << " computes";
    EXPECT_EQ(gathers(Phase::kFwd, l + 1), 1);
  }
  for (int64_t l = layers - 1; l > 0; --l) {
    const int64_t gather_prev = first_index(OpKind::kDpAllGather, Phase::kBwd, l - 1);
    const int64_t compute = first_index(OpKind::kFc2, Phase::kBwd, l);
    ASSERT_GE(gather_prev, 0) << "layer " << l - 1;
    EXPECT_LT(gather_prev, compute) << "backward: layer " << l - 1 << "'s gather must be issued before layer " << l
                                    << " computes";
    EXPECT_EQ(gathers(Phase::kBwd, l - 1), 1);
  }
}

// The ZeRO bookkeeping passes on the compute stream (planner/cost/plan_costs.h ZeroPasses) are
// recorded by the executor with the identities and bytes the simulator predicts: the step's
// zero-fill of the accumulators under every stage; under ZeRO-2/3 each group's transient-gradient
// zero-fill and the fold of each reduce-scatter; under ZeRO-3 the shard copy before each gather.
TEST(MultiRank, ZeroPassesAreRecordedAsTheSimulatorPredicts) {
  if (const std::string wrong = WrongWorldSize(2); !wrong.empty()) FAIL() << wrong;
  using Key = std::tuple<std::string, int64_t, int64_t, int64_t, std::string, int64_t>;  // op, mb, stage, layer, phase, bytes
  for (const char* layout : {"dp=2,micro_batch=2,zero=1", "dp=2,micro_batch=2,zero=2", "dp=2,micro_batch=2,zero=3",
                             "dp=2,micro_batch=1,zero=3,recompute=full"}) {
    const Plan plan = TinyPlan(layout, kGlobalBatch);
    CpuBackend be;
    TrainerOptions options;
    options.record_ops = true;
    auto t = Trainer::Create(plan, be, *g_world, options);
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_TRUE((*t)->Step());
    std::map<Key, int> measured;
    for (const MeasuredOp& op : (*t)->recorder().ops()) {
      if (!IsMemoryPass(op.id.op) || op.id.step != 0) continue;
      EXPECT_EQ(op.stream, traces::Stream::kCompute) << layout;
      ++measured[{ToString(op.id.op), op.id.microbatch, op.id.stage, op.id.layer, ToString(op.id.phase), op.bytes}];
    }

    planner::SimOptions so;
    so.record_trace = true;
    Plan sim_plan = plan;
    sim_plan.cluster.nodes = 1;
    sim_plan.cluster.gpus_per_node = 2;
    auto sim = planner::Simulate(sim_plan, nullptr, so);
    ASSERT_TRUE(sim && sim->trace);
    const traces::Trace& trace = *sim->trace;
    std::map<Key, int> predicted;
    for (size_t i = 0; i < trace.slices().size(); ++i) {
      const auto id = trace.identity(trace.slice(i));
      if (!id || !IsMemoryPass(id->op) || id->rank != 0) continue;  // dp ranks are alike
      const traces::SliceArgs* args = trace.args(trace.slice(i));
      ASSERT_NE(args, nullptr);
      ++predicted[{ToString(id->op), id->microbatch, id->stage, id->layer, ToString(id->phase),
                   static_cast<int64_t>(std::llround(static_cast<double>(args->bytes)))}];
    }
    EXPECT_FALSE(measured.empty()) << layout;
    EXPECT_EQ(measured, predicted) << layout << ": (op, microbatch, stage, layer, phase, bytes) of the passes";
  }
}

TEST(MultiRank, GradientAccumulationMatchesAcrossMicroBatchSizes) {
  if (const std::string wrong = WrongWorldSize(2); !wrong.empty()) FAIL() << wrong;
  auto a = Train(TinyPlan("dp=2,micro_batch=4", kGlobalBatch), *g_world, 6);
  auto b = Train(TinyPlan("dp=2,micro_batch=1", kGlobalBatch), *g_world, 6);
  ASSERT_TRUE(a && b);
  EXPECT_LT(MaxRelDiff(a->losses, b->losses), 1e-4);
}

TEST(MultiRank, ResumeReproducesUninterruptedRun) {
  if (const std::string wrong = WrongWorldSize(2); !wrong.empty()) FAIL() << wrong;
  for (const char* layout : {"dp=2,micro_batch=2,zero=3", "pp=2,micro_batch=2", "tp=2,micro_batch=2,zero=1"}) {
    const Plan p = TinyPlan(layout, kGlobalBatch);
    auto straight = Train(p, *g_world, 6);
    ASSERT_TRUE(straight);
    const std::string dir = ::testing::TempDir() + "/parallax_ckpt_mpi";
    if (g_world->rank() == 0) std::filesystem::remove_all(dir);
    ASSERT_TRUE(g_world->Barrier());
    std::vector<double> resumed;
    {
      CpuBackend be;
      auto t = Trainer::Create(p, be, *g_world, {});
      ASSERT_TRUE(t);
      for (int i = 0; i < 3; ++i) resumed.push_back((*t)->Step()->loss);
      ASSERT_TRUE(PrepareCheckpointDir(*g_world, dir));
      ASSERT_TRUE((*t)->SaveCheckpoint(dir));
    }
    {
      CpuBackend be;
      auto t = Trainer::Create(p, be, *g_world, {});
      ASSERT_TRUE(t);
      Status st = (*t)->LoadCheckpoint(dir);
      ASSERT_TRUE(st) << st.error().message;
      for (int i = 0; i < 3; ++i) resumed.push_back((*t)->Step()->loss);
    }
    EXPECT_EQ(resumed, straight->losses) << layout;
  }
}

TEST(MultiRank, UnwritableCheckpointDirFailsOnEveryRank) {
  if (const std::string wrong = WrongWorldSize(2); !wrong.empty()) FAIL() << wrong;
  // Only rank 1 gets an impossible path (a file in the way): everyone must see the failure.
  const std::string blocker = ::testing::TempDir() + "/parallax_blocker_file";
  if (g_world->rank() == 1) std::ofstream(blocker) << "not a directory";
  ASSERT_TRUE(g_world->Barrier());
  const std::string dir = g_world->rank() == 1 ? blocker + "/sub" : ::testing::TempDir() + "/parallax_ok_dir";
  Status st = PrepareCheckpointDir(*g_world, dir);
  EXPECT_FALSE(st);
  if (!st && g_world->rank() != 1) {
    EXPECT_NE(st.error().message.find("rank 1"), std::string::npos) << st.error().message;
  }
}

}  // namespace
}  // namespace parallax::executor

int main(int argc, char** argv) {
  return parallax::executor::testing::RunOnWorld(&argc, &argv, parallax::executor::g_world, 60);
}
