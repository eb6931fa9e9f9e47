#pragma once
// One kernel (or the short chain of kernels the executor runs for one op) on random inputs of one
// shape, enqueued through the backend seam: what `parallax calibrate` times for a GEMM sample or a
// memory-bound family point. Inputs are allocated once (an allocation that fails, out of memory
// at a large shape, is the error that skips the point) and filled with random values, never zeros.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "model/result.h"

namespace parallax::profiler {

enum class ProbeKind {
  kGemm,          //!< m x n x k (x batch), transposes as the op runs it
  kNormFwd,       //!< LayerNorm / RMSNorm forward over rows x cols
  kResidualNormFwd,  //!< the same with the residual join fused in: h = x + residual (+ bias), y = norm(h)
  kNormBwd,       //!< its backward, plus the residual-gradient Axpy the layer adds
  kActFwd,        //!< GELU or SwiGLU over n elements
  kActBwd,
  kResidualFwd,   //!< residual copy + add (+ bias) after a row-parallel GEMM, rows x cols
  kResidualBwd,   //!< residual-gradient copy (+ bias gradient)
  //! The non-GEMM part of an unfused QKV projection over attention's rows and heads: the bias adds of
  //! q, k, v (when `bias`) and the rotary embedding of q and k (when `rotary`)
  kQkvEpilogueFwd,
  kQkvEpilogueBwd,  //!< its backward: inverse rotation of dq, dk; the three bias gradients
  kAttentionFwd,  //!< causal attention of `attention` (probabilities kept)
  kAttentionBwd,
  kEmbeddingFwd,  //!< token lookup of rows tokens from a vocab_rows x cols table (+ learned positions)
  kEmbeddingBwd,
  kLossFwd,       //!< vocab-parallel cross-entropy forward over rows x vocab_rows logits
  kLossBwd,
  kAdamW,         //!< multi-tensor AdamW over n fp32 parameters
  kSumSquares,    //!< multi-tensor sum of squares over n fp32 gradients
  kCast,          //!< fp32 -> dtype copy of n elements
  kCopy,          //!< dtype -> dtype copy of n elements (streaming bandwidth)
  kFill,          //!< zero-fill of n fp32 elements (a gradient accumulator: the grad_zero pass)
  kAxpy,          //!< y += x over n fp32 elements (a reduced gradient shard folded in: grad_fold)
};

struct ProbeShape {
  ProbeKind kind = ProbeKind::kGemm;
  executor::DType dtype = executor::DType::kF32;
  int64_t m = 0, n = 0, k = 0, batch = 1;  //!< GEMM; n is also the element count of vector probes
  executor::Trans ta = executor::Trans::kNo, tb = executor::Trans::kNo;
  float beta = 0;
  int64_t rows = 0, cols = 0, vocab_rows = 0;
  bool rms = false, swiglu = false, bias = false, positions = false, rotary = false;
  executor::AttentionShape attention{};
  //! Cold inputs: each run uses the next of several copies of its buffers, together larger than
  //! any cache (kColdBytes), so it reads and writes memory no recent run touched, as the ZeRO passes
  //! do (a gradient shard last touched a backward pass ago). Otherwise every run reuses one set,
  //! as an op consuming what the op before it wrote.
  bool cold = false;
  //! Bytes of backend memory one set of the probe's buffers takes (for the skip message and the ETA).
  int64_t FootprintBytes() const;
  //! "gemm m=64 n=64 k=64 fp32", "norm_fwd rows=64 cols=64 fp32", ...
  std::string Describe() const;
};

class KernelProbe {
 public:
  explicit KernelProbe(ProbeShape shape) : shape_(shape) {}
  //! Allocates and fills the inputs (once); an allocation failure is the error.
  Status Prepare(executor::Backend& backend);
  //! Enqueues one run on the compute stream.
  Status Run(executor::Backend& backend);
  //! Frees the inputs.
  void Release() {
    tensors_.clear();
    sets_ = 1;
    set_ = 0;
  }
  //! What the cold probes' buffer sets add up to at least (well above the 50 MB L2 of an H100 and
  //! the last-level caches of the CPUs we calibrate; 32 MB an L3 slice on AMD EPYC).
  static constexpr int64_t kColdBytes = int64_t{256} << 20;
  const ProbeShape& shape() const { return shape_; }

 private:
  executor::DevPtr T(size_t i) const { return tensors_[set_ * per_set_ + i].ptr(); }
  Result<size_t> Add(executor::Backend& backend, int64_t numel, executor::DType dtype, bool random = true);
  //! Add, dropping every input when it fails.
  Status AddInput(executor::Backend& backend, int64_t numel, executor::DType dtype, bool random = true);
  //! `count` int32 indices in [0, range), dropping every input when it fails.
  Status AddIndices(executor::Backend& backend, int64_t count, int64_t range);
  //! One set of the inputs the probe's kind reads and writes (the longer families below).
  Status AddInputs(executor::Backend& backend);
  Status AddNormInputs(executor::Backend& backend);
  Status AddNormBwdInputs(executor::Backend& backend);
  Status AddActInputs(executor::Backend& backend);
  Status AddQkvInputs(executor::Backend& backend);
  Status AddQkvEpilogueInputs(executor::Backend& backend);
  Status AddAttentionInputs(executor::Backend& backend);
  Status AddEmbeddingInputs(executor::Backend& backend);
  Status AddLossInputs(executor::Backend& backend);
  //! Copies of the first set (same contents) until they add up to kColdBytes, at most 1024 sets.
  Status AddColdSets(executor::Backend& backend);
  //! One run of the longer families on the current set.
  void RunGemm(executor::Backend& be);
  void RunNorm(executor::Backend& be);
  void RunQkvEpilogue(executor::Backend& be);
  void RunAdamW(executor::Backend& be);
  ProbeShape shape_;
  std::vector<executor::Tensor> tensors_;
  size_t per_set_ = 0;  //!< tensors in one set
  size_t sets_ = 1;
  size_t set_ = 0;      //!< the set the next run uses
};

}  // namespace parallax::profiler
