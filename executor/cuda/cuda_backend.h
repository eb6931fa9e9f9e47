#pragma once
// CudaBackend: one GPU per rank (the launcher's local rank), cudaMalloc underneath the base
// class's caching allocator (never managed memory), four CUDA streams (compute and the three
// comm streams, the trace's tracks), timing events from a pool, cuBLASLt GEMMs, our own kernels
// for everything else (executor/cuda/*.cu) and NCCL communicators bootstrapped over MPI.
//
// Errors: the seam's kernel entry points return nothing, so a failed CUDA/cuBLAS call is kept as
// the backend's first error (sticky, as a CUDA context's is) and returned by the next
// WaitEvent/SynchronizeEvent/Synchronize/EventTimesNs; the training loop synchronises once per
// step, so a failure ends the step it happened in. Host waits poll instead of blocking, so the
// NCCL watchdog (comm_watchdog.h) runs while the host waits and a lost peer never hangs the job.

#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/comm_watchdog.h"
#include "executor/cuda/cudnn_attention.h"
#include "executor/cuda/cuda_handles.h"
#include "executor/cuda/lt_gemm.h"

namespace parallax::executor {

//! The CUDA backend, or an error saying what is missing (no driver, no GPU: exit status 1).
Result<std::unique_ptr<Backend>> CreateCudaBackend();
//! The GPU this process uses: the launcher's local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID,
//! MPI_LOCALRANKID, LOCAL_RANK) modulo the visible devices; 0 when launched alone.
int LocalRankDevice(int device_count);

class CudaStream final : public Stream {
 public:
  CudaStream(StreamKind kind, gpu::StreamPtr s) : kind_(kind), s_(std::move(s)) {}
  StreamKind kind() const override { return kind_; }
  cudaStream_t get() const { return s_.get(); }

 private:
  StreamKind kind_;
  gpu::StreamPtr s_;
};

class CudaBackend final : public Backend {
 public:
  //! Uses device `device` (cudaSetDevice on this thread).
  static Result<std::unique_ptr<CudaBackend>> Create(int device);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  //! Every precision; fp8's GEMMs run on cuBLASLt FP8 (compute capability 8.9 or newer: an older GPU
  //! fails at the first FP8 GEMM with an error naming its sm).
  bool SupportsPrecision(Precision) const override { return true; }
  int64_t DeviceMemoryBytes() const override;
  Result<std::unique_ptr<Communicator>> ConnectWorld(LaunchContext& launch, double timeout_s) override;

  void CopyToDevice(DevPtr dst, const void* host, DType host_type, int64_t count) override;
  void CopyToHost(void* host, DType host_type, DevPtr src, int64_t count) override;
  void CopyBytesToHost(void* host, DevPtr src, int64_t count) override;
  void CopyBytesToDevice(DevPtr dst, const void* host, int64_t count) override;

  Stream& stream(StreamKind s) override { return *streams_[static_cast<size_t>(s)]; }
  Event RecordEvent(StreamKind s) override;
  Status WaitEvent(StreamKind waiter, Event e) override;
  Status SynchronizeEvent(Event e) override;
  Status Synchronize() override;
  Result<std::vector<int64_t>> EventTimesNs(Event origin, std::span<const Event> events) override;
  void ReleaseEvents(std::span<const Event> events) override;

  void Fail(Error e) override;
  void Gemm(const GemmArgs& g) override;
  void Fill(DevPtr x, int64_t n, float value) override;
  void Copy(const CopyArgs& a) override;
  void Copy2D(const Copy2DArgs& a) override;
  void Axpy(const AxpyArgs& a) override;
  void AddBias(const BiasArgs& a) override;
  void BiasBackward(const BiasBackwardArgs& a) override;
  void LayerNormForward(const NormArgs& a) override;
  void LayerNormBackward(const NormBackwardArgs& a) override;
  void RmsNormForward(const NormArgs& a) override;
  void RmsNormBackward(const NormBackwardArgs& a) override;
  void GeluForward(const GeluArgs& a) override;
  void GeluBackward(const GeluBackwardArgs& a) override;
  void SwigluForward(const SwigluArgs& a) override;
  void SwigluBackward(const SwigluBackwardArgs& a) override;
  void Rotary(const RotaryArgs& a) override;
  void AttentionForward(const AttentionArgs& a) override;
  void AttentionBackward(const AttentionBackwardArgs& a) override;
  void EmbeddingForward(const EmbeddingArgs& a) override;
  void EmbeddingBackward(const EmbeddingBackwardArgs& a) override;
  void RowMax(const RowMaxArgs& a) override;
  void CrossEntropyStats(const CrossEntropyStatsArgs& a) override;
  void CrossEntropyCombine(const CrossEntropyCombineArgs& a) override;
  void CrossEntropyBackward(const CrossEntropyBackwardArgs& a) override;
  void AttentionMerge(const AttentionMergeArgs& a) override;
  void MultiTensorAdamW(std::span<const AdamWTensor> tensors, const AdamWParams& p) override;
  void MultiTensorSumSquares(std::span<const DevSpan> spans, DevPtr out) override;
  //! FP8 (fp8_ops.cpp): casts and the scale update on any GPU; GEMMs through cuBLASLt on
  //! compute capability 8.9 or newer.
  void Fp8Cast(const Fp8CastArgs& a) override;
  void Fp8Gemm(const Fp8GemmArgs& g) override;
  void Fp8ScaleUpdate(const Fp8ScaleUpdateArgs& a) override;

  // ---- CUDA-specific ---------------------------------------------------------------------------
  int device() const { return device_; }
  cudaStream_t raw_stream(StreamKind s) const { return streams_[static_cast<size_t>(s)]->get(); }
  //! fp32 GEMMs may use TF32 tensor cores (off by default; PARALLAX_CUDA_TF32=1 turns it on).
  void set_allow_tf32(bool on) { allow_tf32_ = on; }
  bool allow_tf32() const { return allow_tf32_; }
  //! Attention's forward through cuDNN's fused SDPA (cudnn_attention.h) where it takes the call
  //! (bf16/fp16), else the GEMM path; PARALLAX_ATTENTION=cudnn turns it on. Backward stays the
  //! GEMM path (it reads the statistics either forward wrote).
  void set_cudnn_attention(bool on) { want_cudnn_ = on; }
  //! Why cuDNN attention stopped being used (cuDNN missing, no engine for a shape); "" otherwise.
  const std::string& cudnn_attention_off_reason() const { return cudnn_off_reason_; }
  //! Whether the last AttentionForward ran on cuDNN.
  bool last_attention_on_cudnn() const { return last_attention_cudnn_; }
  //! The first error since creation (ok while none).
  const Status& status() const { return failed_; }
  //! The watchdog shared with this backend's NCCL communicators.
  const std::shared_ptr<gpu::CommWatchdog>& watchdog() const { return watchdog_; }
  //! cuBLASLt's scratch per GEMM (allocated once through Allocate, counted as workspace).
  static constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;
  const gpu::LtGemm& lt() const { return *gemm_; }

 protected:
  void* RawAllocate(int64_t bytes) override;
  void RawFree(void* p) override;

 private:
  CudaBackend(int device, std::vector<std::unique_ptr<CudaStream>> streams, std::unique_ptr<gpu::LtGemm> gemm);
  cudaStream_t Compute() const { return raw_stream(StreamKind::kCompute); }
  //! Polls `query` (a cudaStreamQuery/cudaEventQuery) until it stops reporting "not ready",
  //! running the NCCL watchdog meanwhile.
  template <class Query>
  Status WaitFor(Query query, const char* what);
  Status WaitStream(StreamKind s);
  //! A persistent scratch buffer (slot) of at least `numel` elements of `dtype`, grown on demand;
  //! kept across calls so no other stream can be handed its memory while a kernel still uses it.
  //! Slots: 0 cuBLASLt workspace, 1 column-sum partials, 2 reduction partials, 3 host staging,
  //! 4 attention fp32 scores / dP, 5 attention P / dS (at most 256 MiB of fp32 scores per chunk),
  //! 6 attention backward's delta, or the forward's statistics when the caller keeps none (fp32, one
  //! per query row and head), 7 cuDNN's [b, h, s] statistics, 8 cuDNN's workspace, 9 and 10 FP8
  //! GEMM operands transposed to K-major, 11 the FP8 fallback GEMM's fp32 product.
  Result<DevPtr> Scratch(int slot, int64_t numel, DType dtype);
  cudaEvent_t EventOf(Event e) const { return events_[static_cast<size_t>(e.id)].get(); }
  //! AttentionForward on cuDNN when asked for and possible; false: the caller runs the GEMM path
  //! (nothing was enqueued), the reason kept once in cudnn_off_reason_.
  bool TryCudnnAttentionForward(const AttentionArgs& a);

  int device_;
  int compute_capability_ = 0;  //!< 10 * major + minor, e.g. 90 for sm_90
  std::vector<std::unique_ptr<CudaStream>> streams_;
  std::unique_ptr<gpu::LtGemm> gemm_;
  std::vector<gpu::EventPtr> events_;
  std::vector<int64_t> free_events_;
  std::vector<Tensor> scratch_;
  bool allow_tf32_ = false;
  bool want_cudnn_ = false;
  bool last_attention_cudnn_ = false;
  std::unique_ptr<gpu::CudnnAttention> cudnn_;
  std::string cudnn_off_reason_;
  Status failed_;
  std::shared_ptr<gpu::CommWatchdog> watchdog_;
};

}  // namespace parallax::executor
