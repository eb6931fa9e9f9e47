#pragma once
// FP8 linear layers (Precision::kFp8, Transformer Engine's delayed-scaling recipe, executor/fp8.h):
// each GEMM of a transformer layer's linear layers takes FP8 inputs, E4M3 for its input x and
// weight w in the forward pass, E5M2 for the output gradient dy in backward (Format.HYBRID); the
// products come out in the compute dtype (bf16) or, for the weight gradient, into the fp32
// gradient. Each of those tensors has its own scale, amax history and scale_inv (one scaled tensor
// per GEMM input, TE's per-module fp8_meta), kept with the layer's parameter group. A step's
// scales come from the histories of the steps before it; at the end of the step (Fp8EndStep) the
// amaxes seen by every rank of the stage are combined (max over tp, then dp x cp: TE's
// reduce_amax across every rank the tensor is split over) so every layout scales as one process
// would, and the scales are updated. Attention, norms, the embedding and the LM head stay bf16.

#include <memory>
#include <vector>

#include "executor/backend.h"
#include "model/result.h"

namespace parallax::executor {

struct RuntimeContext;
class ParamGroup;
struct LinearArgs;
struct LinearBackwardArgs;

//! The scaled tensors of one linear GEMM (backend memory, one fp32 each): the scale that quantizes,
//! its inverse that dequantizes, and where this step's amax collects (the history's row 0).
struct Fp8Linear {
  DevPtr x_scale{}, x_scale_inv{}, x_amax{};
  DevPtr w_scale{}, w_scale_inv{}, w_amax{};
  DevPtr dy_scale{}, dy_scale_inv{}, dy_amax{};
  bool on() const { return static_cast<bool>(x_scale); }
};

//! The delayed-scaling state of one parameter group's linear GEMMs, one slot per parameter
//! (slot i: the GEMM whose weight is parameter i; other parameters' slots stay unused).
class Fp8Scales {
 public:
  //! Scales start at 1 and histories at 0 (TE's initial fp8_meta).
  static Result<std::unique_ptr<Fp8Scales>> Create(Backend& be, int64_t slots, const DelayedScaling& recipe);
  Fp8Linear Linear(int64_t slot) const;
  //! The amax all-reduce (max) over the stage's ranks and the scale update of both formats.
  Status EndStep(RuntimeContext& ctx);

 private:
  struct Set {
    Tensor history, scale, scale_inv;  //!< [len, count], [count], [count]
    int64_t count = 0;
    Fp8Format format = Fp8Format::kE4M3;
  };
  static Result<Set> MakeSet(Backend& be, int64_t count, Fp8Format f, const DelayedScaling& recipe);
  Status Reduce(RuntimeContext& ctx, Set& s);
  Set forward_;   //!< E4M3: slot i's input at 2i, its weight at 2i + 1
  Set backward_;  //!< E5M2: slot i's output gradient at i
  DelayedScaling recipe_;
};

//! LinearForward with a.fp8 on: x and w cast to E4M3 (their amaxes collected), y = x W^T from
//! the FP8 GEMM in y's dtype.
void Fp8LinearForward(Backend& be, const LinearArgs& a);
//! LinearBackward's GEMMs with a.fp8 on: dy cast to E5M2 (amax collected), x and w cast again to
//! E4M3 with this step's scales (the forward's codes); dW += dy^T x, dx = dy W (+= with
//! accumulate_dx). dbias is the caller's.
void Fp8LinearBackward(Backend& be, const LinearBackwardArgs& a);

//! Every FP8 group's EndStep (groups without FP8 state are skipped).
Status Fp8EndStep(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups);

}  // namespace parallax::executor
