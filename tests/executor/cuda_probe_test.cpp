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
  // Either way the backend refuses clearly today: no GPU, or no CUDA backend yet.
  auto backend = CreateCudaBackend();
  ASSERT_FALSE(backend);
  EXPECT_NE(backend.error().message.find("--backend cuda"), std::string::npos);
  EXPECT_EQ(ExitCodeFor(backend.error()), 2);
}

TEST(CudaProbeGpu, KernelRunsOnDeviceZero) {
  auto devices = ProbeCudaDevices();
  ASSERT_TRUE(devices) << devices.error().message;
  Status s = RunProbeKernel(0);
  EXPECT_TRUE(s) << s.error().message;
}

}  // namespace
}  // namespace parallax::executor
