// The CUDA device probe: never crashes without a GPU, and on a GPU runs a kernel correctly.
#include <gtest/gtest.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/device_probe.h"

namespace parallax::executor {
namespace {

TEST(CudaProbe, ReportsDevicesOrNamesTheFailingCall) {
  auto devices = ProbeCudaDevices();
  if (devices) {
    ASSERT_FALSE(devices->empty());
    EXPECT_GT(devices->front().sm_count, 0);
    EXPECT_GT(devices->front().memory_bytes, 0);
  } else {
    EXPECT_EQ(devices.error().message.rfind("cudaGetDeviceCount", 0), 0u) << devices.error().message;
  }
  // With a GPU the backend starts; without one it refuses, naming what is missing, with exit
  // status 1 (the machine lacks a GPU: not bad input).
  auto backend = CreateCudaBackend();
  if (devices) {
    ASSERT_TRUE(backend) << backend.error().message;
    EXPECT_EQ((*backend)->name(), "cuda");
    EXPECT_GT((*backend)->DeviceMemoryBytes(), 0);
  } else {
    ASSERT_FALSE(backend);
    EXPECT_NE(backend.error().message.find("--backend cuda: no usable GPU"), std::string::npos)
        << backend.error().message;
    EXPECT_NE(backend.error().message.find("cudaGetDeviceCount"), std::string::npos) << backend.error().message;
    EXPECT_EQ(ExitCodeFor(backend.error()), 1);
  }
}

TEST(CudaProbeGpu, KernelRunsOnDeviceZero) {
  auto devices = ProbeCudaDevices();
  ASSERT_TRUE(devices) << devices.error().message;
  Status s = RunProbeKernel(0);
  EXPECT_TRUE(s) << s.error().message;
}

}  // namespace
}  // namespace parallax::executor
