#pragma once
// The CUDA backend (cuBLAS + own kernels + NCCL) lands with its own issue; until then this
// entry point only reports why it cannot be created.

#include <memory>

#include "executor/backend.h"

namespace parallax::executor {

Result<std::unique_ptr<Backend>> CreateCudaBackend();

}  // namespace parallax::executor
