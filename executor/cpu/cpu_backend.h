#pragma once
// CpuBackend: host memory, OpenBLAS (cblas) GEMMs and our own loops for everything else.
// One instance per rank; its memory accounting is that rank's.

#include <string>

#include "executor/backend.h"

namespace parallax::executor {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  std::string name() const override { return "cpu"; }

  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override;
  void Fill(float* x, int64_t n, float value) override;
  void Copy(float* dst, const float* src, int64_t n) override;
  void Axpy(float* y, const float* x, int64_t n, float alpha) override;
  double SumSquares(const float* x, int64_t n) override;
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override;
  void BiasBackward(const float* dy, float* dbias, int64_t rows, int64_t cols) override;

  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        int64_t rows, int64_t cols, float eps) override;
  void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                         float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols) override;
  void RmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows, int64_t cols,
                      float eps) override;
  void RmsNormBackward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                       float* dgamma, int64_t rows, int64_t cols) override;

  void GeluForward(const float* x, float* y, int64_t n) override;
  void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override;
  void SwigluForward(const float* gate, const float* up, float* y, int64_t n) override;
  void SwigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                      int64_t n) override;
  void Rotary(float* x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse) override;

  void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                        float* probs) override;
  void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* probs,
                         const float* dout, float* dq, float* dk, float* dv) override;

  void EmbeddingForward(const int32_t* tokens, int64_t n, const float* table, int64_t vocab_begin, int64_t table_rows,
                        int64_t hidden, float* out) override;
  void EmbeddingBackward(const int32_t* tokens, int64_t n, const float* dout, int64_t vocab_begin, int64_t table_rows,
                         int64_t hidden, float* dtable) override;
  void RowMax(const float* logits, int64_t rows, int64_t cols, float* row_max) override;
  void CrossEntropyStats(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                         const int32_t* targets, int64_t vocab_begin, float* sum_exp, float* target_logit) override;
  void CrossEntropyBackward(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                            const float* sum_exp, const int32_t* targets, int64_t vocab_begin, float scale,
                            float* dlogits) override;

  void AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) override;
  void CastToBf16(const float* x, uint16_t* y, int64_t n) override;
  void CastFromBf16(const uint16_t* x, float* y, int64_t n) override;

  Event RecordEvent() override;
  double ElapsedSeconds(const Event& begin, const Event& end) override;
  void Synchronize() override {}

 protected:
  void* RawAllocate(int64_t bytes) override;
  void RawFree(void* p) override;
};

}  // namespace parallax::executor
