// GPU checks of the CUDA backend (label gpu: they need an NVIDIA GPU; CI builds them, a GPU
// machine runs them, docs/cuda.md). Whole training runs against the CPU backend and against
// fp32, memory truth against the planner, out of memory and kernel misuse as errors.
#include <gtest/gtest.h>

#include <cstdio>

#include "executor/backend_registry.h"
#include "executor/cpu/local_communicator.h"
#include "executor/cuda/cuda_backend.h"
#include "planner/memory/memory_model.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

std::unique_ptr<LaunchContext>& Launch() {
  static std::unique_ptr<LaunchContext> launch = InitLaunch(nullptr, nullptr);
  return launch;
}

struct GpuRun {
  std::vector<double> losses;
  int64_t peak_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};

Result<GpuRun> TrainOnGpu(const Plan& plan, int steps) {
  auto be = CreateBackend("cuda");
  if (!be) return be.error();
  auto world = (*be)->ConnectWorld(*Launch(), 120);
  if (!world) return world.error();
  auto t = Trainer::Create(plan, **be, **world, TrainerOptions{});
  if (!t) return t.error();
  GpuRun out;
  for (int i = 0; i < steps; ++i) {
    auto r = (*t)->Step();
    if (!r) return r.error();
    out.losses.push_back(r->loss);
  }
  out.peak_bytes = (*be)->memory().peak_bytes;
  out.peak_reserved_bytes = (*be)->memory().peak_reserved_bytes;
  return out;
}

//! GPT-3 Small (Brown et al. 2020, table 2.1): 12 layers, d_model 768, 12 heads, ~125M parameters.
Plan Gpt125m(const std::string& layout, int64_t global_batch, Precision p) {
  Plan plan = testing::TinyPlan(layout, global_batch);
  plan.model.name = "gpt-125m";
  plan.model.layers = 12;
  plan.model.hidden = 768;
  plan.model.heads = 12;
  plan.model.kv_heads = 12;
  plan.model.ffn_hidden = int64_t{4} * 768;
  plan.model.vocab = 50304;
  plan.model.seq_len = 512;
  plan.training.precision = p;
  plan.training.lr = 6e-4;
  return plan;
}

double RelAt(const std::vector<double>& a, const std::vector<double>& b, size_t i) {
  return std::abs(a[i] - b[i]) / std::abs(b[i]);
}

TEST(CudaGpu, Fp32FirstTenLossesEqualTheCpuBackend) {
  const Plan plan = testing::TinyPlan("micro_batch=2", 8);  // fp32; TF32 is off unless asked for
  auto cpu_world = LocalCommunicator();
  auto cpu = testing::Train(plan, *cpu_world, 10);
  ASSERT_TRUE(cpu) << cpu.error().message;
  auto gpu = TrainOnGpu(plan, 10);
  ASSERT_TRUE(gpu) << gpu.error().message;
  for (size_t i = 0; i < 10; ++i) std::printf("step %zu  cpu %.7f  cuda %.7f\n", i, cpu->losses[i], gpu->losses[i]);
  EXPECT_LE(testing::MaxRelDiff(gpu->losses, cpu->losses), 1e-3);
}

TEST(CudaGpu, Fp32WideModelWithRecomputeEqualsTheCpuBackend) {
  const Plan plan = testing::WidePlan("micro_batch=2,recompute=selective", 4);
  auto cpu_world = LocalCommunicator();
  auto cpu = testing::Train(plan, *cpu_world, 5);
  ASSERT_TRUE(cpu) << cpu.error().message;
  auto gpu = TrainOnGpu(plan, 5);
  ASSERT_TRUE(gpu) << gpu.error().message;
  EXPECT_LE(testing::MaxRelDiff(gpu->losses, cpu->losses), 1e-3);
}

TEST(CudaGpu, Bf16GptTinyFollowsFp32After50Steps) {
  Plan plan = testing::TinyPlan("micro_batch=2", 8);
  auto fp32 = TrainOnGpu(plan, 50);
  ASSERT_TRUE(fp32) << fp32.error().message;
  plan.training.precision = Precision::kBf16;
  auto bf16 = TrainOnGpu(plan, 50);
  ASSERT_TRUE(bf16) << bf16.error().message;
  std::printf("gpt-tiny step 50: fp32 %.5f  bf16 %.5f\n", fp32->losses.back(), bf16->losses.back());
  EXPECT_LE(RelAt(bf16->losses, fp32->losses, 49), 0.02);
}

TEST(CudaGpu, Bf16Gpt125mFollowsFp32After50Steps) {
  auto fp32 = TrainOnGpu(Gpt125m("micro_batch=4", 8, Precision::kFp32), 50);
  ASSERT_TRUE(fp32) << fp32.error().message;
  auto bf16 = TrainOnGpu(Gpt125m("micro_batch=4", 8, Precision::kBf16), 50);
  ASSERT_TRUE(bf16) << bf16.error().message;
  std::printf("gpt-125m step 50: fp32 %.5f  bf16 %.5f\n", fp32->losses.back(), bf16->losses.back());
  EXPECT_LE(RelAt(bf16->losses, fp32->losses, 49), 0.02);
}

// The planner's feasibility promise on the GPU: a plan it calls feasible does not need more
// memory than it predicted (measured = the allocator's peak of live tensors, cuBLASLt workspace
// and kernel scratch included).
TEST(CudaGpu, MeasuredPeakWithinThePlannerPrediction) {
  for (const Plan& plan : {testing::TinyPlan("micro_batch=8", 8), testing::WidePlan("micro_batch=4", 8),
                           Gpt125m("micro_batch=4", 8, Precision::kBf16),
                           Gpt125m("micro_batch=4,recompute=full", 8, Precision::kBf16)}) {
    auto r = TrainOnGpu(plan, 2);
    ASSERT_TRUE(r) << r.error().message;
    const int64_t predicted = planner::PeakMemoryBytes(plan);
    std::printf("%s %s: measured peak %lld B (reserved %lld B), planner %lld B\n", plan.model.name.c_str(),
                LayoutToString(plan.layout).c_str(), static_cast<long long>(r->peak_bytes),
                static_cast<long long>(r->peak_reserved_bytes), static_cast<long long>(predicted));
    EXPECT_LE(r->peak_bytes, predicted) << plan.model.name << " " << LayoutToString(plan.layout);
  }
}

TEST(CudaGpu, OutOfMemoryIsAnErrorNamingTheBytes) {
  auto be = CreateBackend("cuda");
  ASSERT_TRUE(be) << be.error().message;
  const int64_t too_much = (*be)->DeviceMemoryBytes() * 2;
  auto t = (*be)->Allocate(too_much / 4, DType::kF32, MemoryKind::kActivations);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("out of memory"), std::string::npos) << t.error().message;
  // The backend still works afterwards.
  auto ok = (*be)->AllocateZeroed(1024, DType::kF32, MemoryKind::kWorkspace);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE((*be)->Synchronize());
}

TEST(CudaGpu, KernelMisuseBecomesTheNextSynchronizeError) {
  auto be = CreateBackend("cuda");
  ASSERT_TRUE(be) << be.error().message;
  const AttentionShape s{1, 4, 1, 1, 512};  // head_dim beyond the tiled kernel
  auto q = (*be)->Allocate(int64_t{4} * 512, DType::kF32, MemoryKind::kActivations);
  ASSERT_TRUE(q);
  (*be)->AttentionForward(s, q->ptr(), q->ptr(), q->ptr(), q->ptr(), DevPtr{});
  Status st = (*be)->Synchronize();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("head_dim 512"), std::string::npos) << st.error().message;
}

TEST(CudaGpu, EventsTimeAKernelOnTheComputeStream) {
  auto be = CreateBackend("cuda");
  ASSERT_TRUE(be) << be.error().message;
  const int64_t n = 4096;
  auto a = (*be)->AllocateZeroed(n * n, DType::kBf16, MemoryKind::kActivations);
  auto c = (*be)->Allocate(n * n, DType::kF32, MemoryKind::kActivations);
  ASSERT_TRUE(a && c);
  const Event origin = (*be)->RecordEvent(StreamKind::kCompute);
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = g.b = a->ptr();
  g.c = c->ptr();
  g.lda = g.ldb = g.ldc = n;
  (*be)->Gemm(g);
  const Event done = (*be)->RecordEvent(StreamKind::kCompute);
  const Event evs[] = {origin, done};
  auto times = (*be)->EventTimesNs(origin, evs);
  ASSERT_TRUE(times) << times.error().message;
  EXPECT_EQ((*times)[0], 0);
  EXPECT_GT((*times)[1], 0);
  (*be)->ReleaseEvents(evs);
}

}  // namespace
}  // namespace parallax::executor
