#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "executor/cuda/device_probe.h"

namespace parallax::executor {
namespace {

std::string BaseName(const char* path) {
  const std::string p(path);
  return p.substr(p.find_last_of('/') + 1);
}

// Records the call, file and line of a failed CUDA runtime call (CONVENTIONS.md "Errors").
#define PARALLAX_CUDA_CHECK(call)                                                                     \
  do {                                                                                                \
    const cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                        \
      return Error{std::string(#call).substr(0, std::string(#call).find('(')) + ": " +                \
                       cudaGetErrorString(err_) + " (" + BaseName(__FILE__) + ":" + std::to_string(__LINE__) + ")", \
                   ErrorKind::kIo};                                                                   \
    }                                                                                                 \
  } while (0)

__global__ void FillIndices(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

}  // namespace

Result<std::vector<CudaDeviceInfo>> ProbeCudaDevices() {
  int count = 0;
  PARALLAX_CUDA_CHECK(cudaGetDeviceCount(&count));
  std::vector<CudaDeviceInfo> out;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    PARALLAX_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    CudaDeviceInfo info;
    info.index = d;
    info.name = p.name;
    info.sm_count = p.multiProcessorCount;
    info.cc_major = p.major;
    info.cc_minor = p.minor;
    info.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    out.push_back(info);
  }
  if (out.empty()) return Error{"cudaGetDeviceCount: no CUDA device is visible", ErrorKind::kIo};
  return out;
}

Status RunProbeKernel(int device) {
  constexpr int kN = 1 << 16;
  PARALLAX_CUDA_CHECK(cudaSetDevice(device));
  int* d_buf = nullptr;
  PARALLAX_CUDA_CHECK(cudaMalloc(&d_buf, kN * sizeof(int)));
  FillIndices<<<(kN + 255) / 256, 256>>>(d_buf, kN);
  std::vector<int> host(kN, -1);
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t copy = cudaMemcpy(host.data(), d_buf, kN * sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(d_buf);
  PARALLAX_CUDA_CHECK(launch);
  PARALLAX_CUDA_CHECK(copy);
  for (int i = 0; i < kN; ++i) {
    if (host[i] != i) {
      return Error{"probe kernel on device " + std::to_string(device) + " wrote " + std::to_string(host[i]) +
                       " at index " + std::to_string(i),
                   ErrorKind::kInternal};
    }
  }
  return Status::Ok();
}

}  // namespace parallax::executor
