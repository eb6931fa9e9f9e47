// The seam's memory: typed tensors, per-kind byte accounting, the caching allocator and
// out-of-memory as an error a caller survives.
#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/runtime/trainer.h"
#include "executor/cpu/local_communicator.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

TEST(BackendMemory, CountsCurrentAndPeakBytesByKind) {
  CpuBackend be;
  {
    auto a = be.AllocateZeroed(100, DType::kF32, MemoryKind::kWeights);
    ASSERT_TRUE(a);
    EXPECT_EQ(be.memory().current_bytes, 400);
    {
      auto b = be.AllocateZeroed(50, DType::kBf16, MemoryKind::kActivations);
      ASSERT_TRUE(b);
      EXPECT_EQ(b->bytes(), 100);
      EXPECT_EQ(be.memory().current_bytes, 500);
      float last = -1;
      be.CopyToHost(&last, DType::kF32, b->at(49), 1);
      EXPECT_EQ(last, 0.0f);  // zeroed
    }
    EXPECT_EQ(be.memory().current_bytes, 400);
    Tensor c = std::move(*a);
    EXPECT_TRUE(a->empty());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(be.memory().current_bytes, 400);
  }
  EXPECT_EQ(be.memory().current_bytes, 0);
  EXPECT_EQ(be.memory().peak_bytes, 500);
  EXPECT_EQ(be.memory().at_peak_by_kind[static_cast<size_t>(MemoryKind::kActivations)], 100);
}

TEST(BackendMemory, FreedBlocksAreReusedWithoutNewDeviceMemory) {
  CpuBackend be;
  const void* first = nullptr;
  {
    auto a = be.Allocate(1000, DType::kF32, MemoryKind::kActivations);
    ASSERT_TRUE(a);
    first = a->ptr().ptr;
  }
  const int64_t reserved = be.memory().reserved_bytes;
  EXPECT_GE(reserved, 4000);
  for (int i = 0; i < 10; ++i) {
    auto again = be.Allocate(1000, DType::kF32, MemoryKind::kActivations);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->ptr().ptr, first);  // the cached block, not fresh memory
  }
  EXPECT_EQ(be.memory().reserved_bytes, reserved);
  be.EmptyCache();
  EXPECT_EQ(be.memory().reserved_bytes, 0);
}

TEST(BackendMemory, OutOfMemoryIsAnErrorNamingBytesAskedAndFree) {
  CpuBackend be;
  be.SetMemoryLimit(1 << 20);
  auto small = be.Allocate(1000, DType::kF32, MemoryKind::kWeights);
  ASSERT_TRUE(small);
  auto big = be.Allocate(1 << 20, DType::kF32, MemoryKind::kActivations);
  ASSERT_FALSE(big);
  const std::string& msg = big.error().message;
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("asked for 4194304 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bytes (") , std::string::npos) << msg;
  EXPECT_NE(msg.find("free of a 1.0 MiB limit"), std::string::npos) << msg;
  // The backend still works after the failure.
  auto after = be.Allocate(1000, DType::kF32, MemoryKind::kActivations);
  EXPECT_TRUE(after);
  // Cached blocks are given back before giving up.
  small->Reset();
  after->Reset();
  auto fits = be.Allocate((1 << 18) - 64, DType::kF32, MemoryKind::kActivations);
  EXPECT_TRUE(fits) << (fits ? "" : fits.error().message);
}

TEST(BackendMemory, TrainingUnderATooSmallLimitFailsAsAValue) {
  CpuBackend be;
  be.SetMemoryLimit(int64_t{256} * 1024);
  auto world = LocalCommunicator();
  auto t = Trainer::Create(testing::TinyPlan("micro_batch=2", 4), be, *world, {});
  if (t) {
    auto step = (*t)->Step();
    ASSERT_FALSE(step);
    EXPECT_NE(step.error().message.find("out of memory"), std::string::npos) << step.error().message;
  } else {
    EXPECT_NE(t.error().message.find("out of memory"), std::string::npos) << t.error().message;
  }
  // An autotuner tries the next candidate on a fresh backend.
  CpuBackend roomy;
  auto t2 = Trainer::Create(testing::TinyPlan("micro_batch=2", 4), roomy, *world, {});
  ASSERT_TRUE(t2);
  EXPECT_TRUE((*t2)->Step());
}

}  // namespace
}  // namespace parallax::executor
