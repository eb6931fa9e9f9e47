#pragma once
// Finds the CUDA devices of this machine and checks that a kernel runs on one. Used by the backend
// registry to say clearly why `--backend cuda` cannot run (no driver, no GPU) instead of crashing.

#include <cstdint>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int64_t memory_bytes = 0;
};

//! Every visible CUDA device; the error names the failing CUDA call and its message
//! ("cudaGetDeviceCount: no CUDA-capable device is detected").
Result<std::vector<CudaDeviceInfo>> ProbeCudaDevices();
//! Launches a small kernel on `device` (fills a buffer with its thread indices) and checks every value.
Status RunProbeKernel(int device);

}  // namespace parallax::executor
