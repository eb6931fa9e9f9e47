#pragma once
// RAII owners of CUDA, cuBLASLt and NCCL handles (ggml's include/ggml-cpp.h pattern: unique_ptr
// with a deleter over the opaque handle). Destruction never throws; a failing destroy call during
// teardown is ignored because there is nobody left to report it to.

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <type_traits>

namespace parallax::executor::gpu {

struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct LtHandleDeleter {
  void operator()(cublasLtHandle_t h) const { cublasLtDestroy(h); }
};
struct LtMatmulDescDeleter {
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
};
struct LtLayoutDeleter {
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
};
struct LtPreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};

using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using EventPtr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using LtHandlePtr = std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, LtHandleDeleter>;
using LtMatmulDescPtr = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, LtMatmulDescDeleter>;
using LtLayoutPtr = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LtLayoutDeleter>;
using LtPreferencePtr = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, LtPreferenceDeleter>;

//! An NCCL communicator: destroyed normally, or only freed after ncclCommAbort (an aborted
//! communicator must not be destroyed again).
class NcclComm {
 public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t c) : comm_(c) {}
  ~NcclComm() { Reset(); }
  NcclComm(NcclComm&& o) noexcept : comm_(o.comm_), aborted_(o.aborted_) { o.comm_ = nullptr; }
  NcclComm& operator=(NcclComm&& o) noexcept {
    if (this != &o) {
      Reset();
      comm_ = o.comm_;
      aborted_ = o.aborted_;
      o.comm_ = nullptr;
    }
    return *this;
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  bool aborted() const { return aborted_; }
  //! ncclCommAbort: kernels of this communicator stop, its resources are freed.
  void Abort() {
    if (comm_ != nullptr && !aborted_) ncclCommAbort(comm_);
    aborted_ = true;
  }
  void Reset() {
    if (comm_ != nullptr && !aborted_) ncclCommDestroy(comm_);
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
};

}  // namespace parallax::executor::gpu
