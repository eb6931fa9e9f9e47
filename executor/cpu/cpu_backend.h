#pragma once
// CpuBackend: host memory, OpenBLAS (cblas) GEMMs and our own loops for everything else.
// One instance per rank; its memory accounting is that rank's.
//
// Mixed precision: bf16/fp16 tensors are stored as their 16 bits with round-to-nearest-even casts,
// and every kernel computes in fp32: the typed (DevPtr) entry points convert their half inputs to
// fp32 scratch, call the fp32 kernel of the same name, and round their outputs back. fp32 tensors
// go straight to the fp32 kernels with no copy.

#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cpu/cpu_streams.h"

namespace parallax::executor {

//! The fp32 operands of CpuBackend's attention backward (AttentionBackwardArgs as host floats).
struct AttentionGradOperands {
  [[no_unique_address]] ByName by_name{};
  const float *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *lse = nullptr, *dout = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

class CpuBackend : public Backend {
 public:
  //! Makes OpenBLAS single-threaded: GEMMs are split across the kernel threads instead (gemm.cpp).
  CpuBackend();
  ~CpuBackend() override { ReleaseCache(); }
  std::string name() const override { return "cpu"; }
  //! FP8 (Transformer Engine's scaled GEMMs) is not emulated on the CPU yet.
  bool SupportsPrecision(Precision) const override { return true; }
  int64_t DeviceMemoryBytes() const override;
  Result<std::unique_ptr<Communicator>> ConnectWorld(LaunchContext& launch, double timeout_s) override;
  void UseHostThreads(const HostThreads& threads) override;
  bool CollectivesProgressOnHostThread() const override { return true; }
  int64_t IntraOpThreads() const override;

  void CopyToDevice(DevPtr dst, const void* host, DType host_type, int64_t count) override;
  void CopyToHost(void* host, DType host_type, DevPtr src, int64_t count) override;
  void CopyBytesToHost(void* host, DevPtr src, int64_t count) override;
  void CopyBytesToDevice(DevPtr dst, const void* host, int64_t count) override;

  Stream& stream(StreamKind s) override { return streams_.stream(s); }
  Event RecordEvent(StreamKind s) override { return streams_.Record(s); }
  Status WaitEvent(StreamKind waiter, Event e) override { return streams_.Wait(waiter, e); }
  Status SynchronizeEvent(Event e) override { return streams_.Synchronize(e); }
  Status Synchronize() override { return streams_.SynchronizeAll(); }
  Result<std::vector<int64_t>> EventTimesNs(Event origin, std::span<const Event> events) override {
    return streams_.TimesNs(origin, events);
  }
  void ReleaseEvents(std::span<const Event> events) override { streams_.Release(events); }

  // ---- typed kernels (the seam) -------------------------------------------------------------
  //! Kept in the stream engine, whose waits return it (CPU kernels themselves do not fail).
  void Fail(Error e) override { streams_.Fail(std::move(e)); }
  void Gemm(const GemmArgs& g) override;
  void Fill(DevPtr x, int64_t n, float value) override;
  void Copy(const CopyArgs& a) override;
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
  //! FP8 emulated exactly (fp8_kernels.cpp).
  void Fp8Cast(const Fp8CastArgs& a) override;
  void Fp8Gemm(const Fp8GemmArgs& g) override;
  void Fp8ScaleUpdate(const Fp8ScaleUpdateArgs& a) override;
  // Fused chains (fused_kernels.h) when every operand is fp32; bf16/fp16 take the base class's
  // composition of the typed kernels above.
  void BiasGeluForward(const BiasGeluArgs& a) override;
  void BiasGeluBackward(const BiasGeluBackwardArgs& a) override;
  void ResidualAdd(const ResidualAddArgs& a) override;
  void ResidualLayerNormForward(const ResidualNormArgs& a) override;
  void ResidualRmsNormForward(const ResidualNormArgs& a) override;
  void LayerNormBackwardAdd(const NormBackwardArgs& a) override;
  void RmsNormBackwardAdd(const NormBackwardArgs& a) override;

  // ---- fp32 kernels on host pointers (the reference the typed entry points call) --------------
  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
  void Fill(float* x, int64_t n, float value);
  void Copy(float* dst, const float* src, int64_t n);
  void Axpy(float* y, const float* x, int64_t n, float alpha);
  double SumSquares(const float* x, int64_t n);
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols);
  void BiasBackward(const float* dy, float* dbias, int64_t rows, int64_t cols);

  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        int64_t rows, int64_t cols, float eps);
  void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                         float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols);
  void RmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows, int64_t cols,
                      float eps);
  void RmsNormBackward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                       float* dgamma, int64_t rows, int64_t cols);

  void GeluForward(const float* x, float* y, int64_t n);
  void GeluBackward(const float* x, const float* dy, float* dx, int64_t n);
  void SwigluForward(const float* gate, const float* up, float* y, int64_t n);
  void SwigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n);
  void Rotary(float* x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, int64_t first_position,
              bool inverse);

  //! fp32 attention (Backend::AttentionForward's contract; lse: AttentionShape::stats_floats()).
  void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                        float* lse);
  void AttentionBackward(const AttentionShape& s, const AttentionGradOperands& g);

  void EmbeddingForward(const int32_t* tokens, int64_t n, const float* table, int64_t vocab_begin, int64_t table_rows,
                        int64_t hidden, float* out);
  void EmbeddingBackward(const int32_t* tokens, int64_t n, const float* dout, int64_t vocab_begin, int64_t table_rows,
                         int64_t hidden, float* dtable);
  void RowMax(const float* logits, int64_t rows, int64_t cols, float* row_max);
  void CrossEntropyStats(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                         const int32_t* targets, int64_t vocab_begin, float* sum_exp, float* target_logit);
  void CrossEntropyBackward(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                            const float* sum_exp, const int32_t* targets, int64_t vocab_begin, float scale,
                            float* dlogits);

  void AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p);
  //! Round-to-nearest-even fp32 -> bf16 and back (bf16 as its raw 16 bits).
  void CastToBf16(const float* x, uint16_t* y, int64_t n);
  void CastFromBf16(const uint16_t* x, float* y, int64_t n);

  //! The stream engine (the CPU communicators enqueue on it).
  CpuStreams& streams() { return streams_; }

 protected:
  void* RawAllocate(int64_t bytes) override;
  void RawFree(void* p) override;

 private:
  //! fp32 scratch for half-precision operands, reused across kernel calls.
  class HalfScratch {
   public:
    float* Get(int64_t n);
    size_t mark() const { return used_; }
    void Rewind(size_t mark) { used_ = mark; }

   private:
    std::vector<std::vector<float>> bufs_;
    size_t used_ = 0;
  };
  friend class F32Operands;
  CpuStreams streams_;
  HalfScratch scratch_;
};

}  // namespace parallax::executor
