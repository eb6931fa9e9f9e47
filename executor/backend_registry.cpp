// The only place that knows which backends were compiled (CONVENTIONS.md: #ifdef here only).
#include "executor/backend_registry.h"

#include "executor/cpu/cpu_backend.h"
#ifdef PARALLAX_WITH_CUDA
#include "executor/cuda/cuda_backend.h"
#endif

namespace parallax::executor {

std::vector<std::string> CompiledBackends() {
  std::vector<std::string> names{"cpu"};
#ifdef PARALLAX_WITH_CUDA
  names.emplace_back("cuda");
#endif
  return names;
}

Result<std::unique_ptr<Backend>> CreateBackend(const std::string& name) {
  if (name == "cpu") return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
  if (name == "cuda") {
#ifdef PARALLAX_WITH_CUDA
    return CreateCudaBackend();
#else
    return BadInput(
        "--backend cuda: the CUDA backend is not built into this binary (configure with -DPARALLAX_CUDA=ON on a "
        "machine with the CUDA toolkit); use --backend cpu");
#endif
  }
  return BadInput("unknown backend \"" + name + "\" (expected cpu or cuda)");
}

}  // namespace parallax::executor
