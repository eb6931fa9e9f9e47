#pragma once
// The identity every executed and every predicted op carries (DESIGN.md "Units and identities"):
// (step, rank, microbatch, stage, layer, op, phase). Predicted and measured traces align on it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace parallax {

enum class Phase { kFwd, kBwd, kRecompute, kOptim, kComm };

//! The op vocabulary shared by the simulator and the executor.
enum class OpKind {
  kEmbedding,     //!< token (+ position) embedding lookup, first stage
  kAttnNorm,      //!< pre-attention layer/RMS norm
  kQkv,           //!< column-parallel QKV projection
  kAttnCore,      //!< QK^T, masked softmax, AV
  kAttnOut,       //!< row-parallel output projection
  kMlpNorm,       //!< pre-MLP norm
  kFc1,           //!< column-parallel fc1 (gate+up for SwiGLU)
  kAct,           //!< GELU or SwiGLU
  kFc2,           //!< row-parallel fc2
  kFinalNorm,     //!< last norm before the LM head
  kLmHead,        //!< vocab-parallel output projection
  kLoss,          //!< vocab-parallel cross-entropy
  kTpAllReduce,   //!< TP all-reduce (no sequence parallel)
  kTpAllGather,   //!< TP all-gather (sequence parallel)
  kTpReduceScatter,  //!< TP reduce-scatter (sequence parallel)
  kPpSend,        //!< pipeline send of activations (fwd) or gradients (bwd)
  kPpRecv,
  kDpAllReduce,   //!< DP gradient all-reduce of one bucket (ZeRO 0); planner: tied-embedding sum
  kDpReduceScatter,  //!< DP gradient reduce-scatter (ZeRO 1 once per step, ZeRO 2/3 per micro-batch)
  kDpAllGather,   //!< DP parameter all-gather (ZeRO 1/2 after the step, ZeRO 3 per layer)
  kOptimizer,     //!< AdamW step on this rank's shard
  kGradClip,      //!< global-norm computation (includes its all-reduce)
  // Memory passes on the compute stream between the ops above (IsMemoryPass), described by their
  // bytes alone: the ZeRO bookkeeping, then the gradient accumulation pass:
  kGradZero,      //!< zero-fill of gradient accumulators (step start; ZeRO-2/3: a group's transient full gradient)
  kShardCopy,     //!< ZeRO-3: this rank's parameter shard copied into the gathered buffer before its all-gather
  kGradFold,      //!< ZeRO-2/3: a reduce-scattered gradient shard added into the rank's accumulator
  //! A micro-batch's weight gradients added into the gradient buffer by a pass of its own (the
  //! implementation's grad_accumulation; Megatron-LM v2/v3's main_grad.add_ hook). Planner
  //! only: our executor accumulates inside the weight-gradient GEMM.
  kGradAccum,
  //! Context parallelism: one ring step's exchange of K/V (forward) or K/V and dK/dV (backward)
  //! blocks with the cp neighbours, a grouped send + receive on the cp stream.
  kCpSendRecv,
  // A mixture-of-experts layer's MLP half (DESIGN.md "Mixture of experts"); its shared experts are fc1/act/fc2.
  kRouter,       //!< router scores (h x experts GEMM), top-k and their probabilities
  kPermute,      //!< each token copied to its k experts' order (the dispatch's send buffer)
  kMoeDispatch,  //!< token all-to-all over the ep group (its backward returns the gradients); etp gathers after it
  kExpertFc1,    //!< grouped GEMM of the rank's experts' fc1 at their token counts
  kExpertAct,
  kExpertFc2,
  kMoeCombine,   //!< all-to-all back to the tokens' ranks
  kUnpermute,    //!< the k expert outputs weighted by the router's probabilities, summed, added to the residual
  // A multi-token-prediction module (DeepSeek-V3 `mtp_layers`) outside its transformer layer; its
  // embedding lookup, layer and output head are the ops above at layer index layers + k.
  kMtpNorm,  //!< its two input norms: the shifted tokens' embedding (enorm) and the hidden states (hnorm)
  kMtpProj,  //!< [embedding; hidden] concatenated and projected 2h -> h (eh_proj, column-parallel)
};
//! The last OpKind (tables indexed by kind size themselves with it).
inline constexpr OpKind kLastOpKind = OpKind::kMtpProj;
//! The memory passes (grad_zero, shard_copy, grad_fold, grad_accum): one kernel family each, an op
//! described by the bytes it carries.
constexpr bool IsMemoryPass(OpKind k) { return k >= OpKind::kGradZero && k <= OpKind::kGradAccum; }

struct OpIdentity {
  int64_t step = 0;
  int64_t rank = 0;
  int64_t microbatch = -1;  //!< -1: not tied to a micro-batch (optimizer, DP sync)
  int64_t stage = -1;       //!< model stage (virtual-stage aware: chunk*pp + pp_rank); -1: none
  int64_t layer = -1;       //!< global transformer layer index; -1: embedding/head/none
  OpKind op = OpKind::kQkv;
  Phase phase = Phase::kFwd;

  bool operator==(const OpIdentity&) const = default;
};

const char* ToString(Phase p);
const char* ToString(OpKind k);
std::optional<Phase> PhaseFromString(std::string_view s);
std::optional<OpKind> OpKindFromString(std::string_view s);
//! True for the communication ops (TP/PP/DP collectives and send/recv).
bool IsCommunication(OpKind k);

}  // namespace parallax
