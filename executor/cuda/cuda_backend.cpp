#include "executor/cuda/cuda_backend.h"

#include "executor/cuda/device_probe.h"

namespace parallax::executor {

Result<std::unique_ptr<Backend>> CreateCudaBackend() {
  auto devices = ProbeCudaDevices();
  if (!devices) {
    return Error{"--backend cuda: no usable GPU on this machine (" + devices.error().message +
                     "); the CUDA backend needs an NVIDIA driver and GPU; use --backend cpu",
                 ErrorKind::kBadInput};
  }
  const CudaDeviceInfo& d = devices->front();
  return Error{"--backend cuda: found " + std::to_string(devices->size()) + " GPU(s) (" + d.name + ", sm_" +
                   std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ", " + std::to_string(d.sm_count) +
                   " SMs), but the CUDA backend (cuBLAS + NCCL) is not implemented yet (it lands with its own "
                   "issue); use --backend cpu",
               ErrorKind::kBadInput};
}

}  // namespace parallax::executor
