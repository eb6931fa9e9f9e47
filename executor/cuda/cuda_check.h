#pragma once
// Check macros for every CUDA runtime, cuBLASLt and NCCL call of the CUDA backend (CONVENTIONS.md
// "Errors"; after ggml's CUDA_CHECK and nccl-tests' NCCLCHECK): a failure becomes an Error that
// names the call, the source file and line, the rank and the host, so a caller (an autotuner, the
// training loop) can handle it instead of the process dying.
//
// PX_*_TRY(call) returns the Error from a function returning Status or Result<T>.
// PX_*_RECORD(call) is for the seam's void kernel entry points: the backend keeps the first
// failure (sticky, as a CUDA context is) and returns it from its next Synchronize/event wait.

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "model/result.h"

namespace parallax::executor::gpu {

//! "rank 3 on node7: cudaMalloc(&p, bytes) failed (out of memory) at executor/cuda/cuda_backend.cpp:42".
Error CallError(const char* call, const std::string& what, const char* file, int line);
Error CudaError(cudaError_t e, const char* call, const char* file, int line);
Error CublasError(cublasStatus_t s, const char* call, const char* file, int line);
Error NcclError(ncclResult_t r, const char* call, const char* file, int line);
//! This process's rank in the job as the launcher reports it (-1 when not launched by mpirun/srun).
int LaunchRank();
std::string HostName();

}  // namespace parallax::executor::gpu

#define PX_CUDA_TRY(call)                                                                         \
  do {                                                                                            \
    const cudaError_t px_e_ = (call);                                                             \
    if (px_e_ != cudaSuccess) return ::parallax::executor::gpu::CudaError(px_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define PX_CUBLAS_TRY(call)                                                                       \
  do {                                                                                            \
    const cublasStatus_t px_s_ = (call);                                                          \
    if (px_s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      return ::parallax::executor::gpu::CublasError(px_s_, #call, __FILE__, __LINE__);            \
    }                                                                                             \
  } while (0)

#define PX_NCCL_TRY(call)                                                                         \
  do {                                                                                            \
    const ncclResult_t px_r_ = (call);                                                            \
    if (px_r_ != ncclSuccess && px_r_ != ncclInProgress) {                                        \
      return ::parallax::executor::gpu::NcclError(px_r_, #call, __FILE__, __LINE__);             \
    }                                                                                             \
  } while (0)

//! Inside a CudaBackend member: records the first failure (see CudaBackend::Fail).
#define PX_CUDA_RECORD(call)                                                                      \
  do {                                                                                            \
    const cudaError_t px_e_ = (call);                                                             \
    if (px_e_ != cudaSuccess) Fail(::parallax::executor::gpu::CudaError(px_e_, #call, __FILE__, __LINE__)); \
  } while (0)

#define PX_CUBLAS_RECORD(call)                                                                    \
  do {                                                                                            \
    const cublasStatus_t px_s_ = (call);                                                          \
    if (px_s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      Fail(::parallax::executor::gpu::CublasError(px_s_, #call, __FILE__, __LINE__));             \
    }                                                                                             \
  } while (0)
