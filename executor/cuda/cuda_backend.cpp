#include "executor/cuda/cuda_backend.h"

namespace parallax::executor {

Result<std::unique_ptr<Backend>> CreateCudaBackend() {
  return Error{"--backend cuda: the CUDA toolkit was found, but the CUDA backend (cuBLAS + NCCL) is not "
               "implemented yet (it lands with its own issue); use --backend cpu",
               ErrorKind::kBadInput};
}

}  // namespace parallax::executor
