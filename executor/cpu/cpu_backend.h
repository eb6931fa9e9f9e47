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

class CpuBackend : public Backend {
 public:
  //! Makes OpenBLAS single-threaded: GEMMs are split across the kernel threads instead (gemm.cpp).
  CpuBackend();
  ~CpuBackend() override { ReleaseCache(); }
  std::string name() const override { return "cpu"; }
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
  void Gemm(const GemmArgs& g) override;
  void Fill(DevPtr x, int64_t n, float value) override;
  void Copy(DevPtr dst, DevPtr src, int64_t n) override;
  void Axpy(DevPtr y, DevPtr x, int64_t n, float alpha) override;
  void AddBias(DevPtr y, DevPtr bias, int64_t rows, int64_t cols) override;
  void BiasBackward(DevPtr dy, DevPtr dbias, int64_t rows, int64_t cols) override;
  void LayerNormForward(DevPtr x, DevPtr gamma, DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd, int64_t rows,
                        int64_t cols, float eps) override;
  void LayerNormBackward(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dx, DevPtr dgamma,
                         DevPtr dbeta, int64_t rows, int64_t cols) override;
  void RmsNormForward(DevPtr x, DevPtr gamma, DevPtr y, DevPtr rstd, int64_t rows, int64_t cols, float eps) override;
  void RmsNormBackward(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr rstd, DevPtr dx, DevPtr dgamma, int64_t rows,
                       int64_t cols) override;
  void GeluForward(DevPtr x, DevPtr y, int64_t n) override;
  void GeluBackward(DevPtr x, DevPtr dy, DevPtr dx, int64_t n) override;
  void SwigluForward(DevPtr gate, DevPtr up, DevPtr y, int64_t n) override;
  void SwigluBackward(DevPtr gate, DevPtr up, DevPtr dy, DevPtr dgate, DevPtr dup, int64_t n) override;
  void Rotary(DevPtr x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse) override;
  void AttentionForward(const AttentionShape& s, DevPtr q, DevPtr k, DevPtr v, DevPtr out, DevPtr probs) override;
  void AttentionBackward(const AttentionShape& s, DevPtr q, DevPtr k, DevPtr v, DevPtr probs, DevPtr dout, DevPtr dq,
                         DevPtr dk, DevPtr dv) override;
  void EmbeddingForward(DevPtr index, int64_t n, DevPtr table, int64_t vocab_begin, int64_t table_rows,
                        int64_t hidden, DevPtr out, bool accumulate) override;
  void EmbeddingBackward(DevPtr index, int64_t n, DevPtr dout, int64_t vocab_begin, int64_t table_rows,
                         int64_t hidden, DevPtr dtable) override;
  void RowMax(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max) override;
  void CrossEntropyStats(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max, DevPtr targets,
                         int64_t vocab_begin, DevPtr sum_exp, DevPtr target_logit) override;
  void CrossEntropyCombine(DevPtr stats, int64_t rows, int64_t parts, DevPtr row_max, DevPtr sum_exp,
                           DevPtr loss_sum) override;
  void CrossEntropyBackward(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max, DevPtr sum_exp,
                            DevPtr targets, int64_t vocab_begin, float scale, DevPtr dlogits) override;
  void MultiTensorAdamW(std::span<const AdamWTensor> tensors, const AdamWParams& p) override;
  void MultiTensorSumSquares(std::span<const DevSpan> spans, DevPtr out) override;
  // Fused chains (fused_kernels.h) when every operand is fp32; bf16/fp16 take the base class's
  // composition of the typed kernels above.
  void BiasGeluForward(DevPtr x, DevPtr bias, DevPtr y, int64_t rows, int64_t cols) override;
  void BiasGeluBackward(DevPtr x, DevPtr dy, DevPtr dx, DevPtr dbias, int64_t rows, int64_t cols) override;
  void ResidualAdd(DevPtr x, DevPtr residual, DevPtr bias, DevPtr out, int64_t rows, int64_t cols) override;
  void ResidualLayerNormForward(DevPtr x, DevPtr residual, DevPtr bias, DevPtr h, DevPtr gamma, DevPtr beta, DevPtr y,
                                DevPtr mean, DevPtr rstd, int64_t rows, int64_t cols, float eps) override;
  void ResidualRmsNormForward(DevPtr x, DevPtr residual, DevPtr bias, DevPtr h, DevPtr gamma, DevPtr y, DevPtr rstd,
                              int64_t rows, int64_t cols, float eps) override;
  Status LayerNormBackwardAdd(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dresidual,
                              DevPtr dgamma, DevPtr dbeta, int64_t rows, int64_t cols) override;
  Status RmsNormBackwardAdd(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr rstd, DevPtr dresidual, DevPtr dgamma,
                            int64_t rows, int64_t cols) override;

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
  void Rotary(float* x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse);

  void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                        float* probs);
  void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* probs,
                         const float* dout, float* dq, float* dk, float* dv);

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
