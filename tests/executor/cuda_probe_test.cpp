// The CUDA device probe: never crashes without a GPU, and on a GPU runs a kernel correctly.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cudnn_library.h"
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

// cuDNN is looked for in the order the issue asks: an explicit file, the toolkit, the system's
// search path, then the Python wheels; no GPU needed.
TEST(CudnnLibrary, LooksInTheToolkitBeforeThePythonWheels) {
  setenv("PARALLAX_CUDNN", "/nowhere/libcudnn.so.9", 1);
  const std::vector<std::string> c = gpu::CudnnCandidates();
  unsetenv("PARALLAX_CUDNN");
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.front(), "/nowhere/libcudnn.so.9");
  auto at = [&](const std::string& what) {
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] == what) return static_cast<int64_t>(i);
    }
    return int64_t{-1};
  };
  const int64_t toolkit = at("/usr/local/cuda/lib64/libcudnn.so.9"), bare = at("libcudnn.so.9");
  ASSERT_GE(toolkit, 0);
  ASSERT_GE(bare, 0);
  EXPECT_LT(toolkit, bare);
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].find("/nvidia/cudnn/lib/") != std::string::npos) {
      EXPECT_GT(static_cast<int64_t>(i), bare) << c[i];
    }
  }
}

// Loading needs no GPU: either cuDNN 9's backend API is bound, or the error lists where it looked
// and how to provide it.
TEST(CudnnLibrary, LoadsCudnn9OrSaysWhereItLooked) {
  auto api = gpu::LoadCudnn();
  if (api) {
    std::printf("cuDNN %zu from %s\n", (*api)->version, (*api)->path.c_str());
    EXPECT_GE((*api)->version, 90000u) << (*api)->path;
    EXPECT_NE((*api)->CreateDescriptor, nullptr);
    EXPECT_NE((*api)->Execute, nullptr);
  } else {
    EXPECT_NE(api.error().message.find("cuDNN 9 not found"), std::string::npos) << api.error().message;
    EXPECT_NE(api.error().message.find("nvidia-cudnn-cu13"), std::string::npos) << api.error().message;
  }
}

}  // namespace
}  // namespace parallax::executor
