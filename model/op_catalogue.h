#pragma once
// The op catalogue (DESIGN.md "One op catalogue"): every op of a transformer layer, the
// embedding and the LM head for one micro-batch on one TP rank, with its identity (OpKind,
// Phase), GEMM shapes, FLOPs, HBM bytes and kernel launches, defined once. Users:
//   - model/counting (FLOPs per token: the catalogue at micro-batch 1, tp 1),
//   - the planner's cost model (planner/cost/layer_ops costs each entry),
//   - the executor's recorder (OpCatalogueEntry gives the flops/bytes it tags a measured op with).
// Shapes follow Megatron-LM's column/row-parallel layer (Shoeybi et al. 2019, fig. 3) and sequence
// parallelism (Korthikanti et al. 2022, fig. 5). FLOPs follow Megatron's convention (Narayanan et
// al. SC'21, appendix): a GEMM m x n x k is 2mnk and attention counts the full s x s square; a
// flash kernel that skips causally masked blocks executes fewer (`executed_flops`).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/implementation.h"
#include "model/model_spec.h"
#include "model/op_identity.h"
#include "model/plan.h"

namespace parallax {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  //! C += A B into an fp32 buffer: a backward linear's weight gradient when the implementation
  //! accumulates it in the GEMM (ImplementationProfile::grad_accumulation kInGemm: cuBLAS beta = 1
  //! over the fp32 gradient, so the epilogue reads and writes 4-byte C).
  bool accumulate = false;
  //! FP8 inputs (E4M3 / E5M2, per-tensor scaled) with a 16-bit output: a linear layer's GEMM under
  //! the fp8 precision (OpShapeKey::fp8_linear), priced at the device's FP8 rate.
  bool fp8 = false;
  double flops() const { return 2.0 * static_cast<double>(m) * n * k * batch; }
};

//! A fused attention kernel (flash): batch = micro-batch x heads on this rank.
struct FlashShape {
  int64_t batch = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = true;
  bool backward = false;  //!< backward: recomputes the scores, five products instead of two
};

//! The group an OpSpec's collective runs over: the TP group, an MoE layer's expert-parallel group
//! (token all-to-all), or its expert-tensor-parallel group (tokens gathered for the etp shards).
enum class CommGroup { kTp, kEp, kEtp };

struct OpSpec {
  OpKind op = OpKind::kQkv;
  Phase phase = Phase::kFwd;
  //! cuBLAS GEMMs of the op (none for memory-bound ops); a backward linear lists (input gradient,
  //! weight gradient) pairs, one per weight (planner/cost/layer_ops.cpp relies on the order)
  std::vector<GemmShape> gemms;
  std::optional<FlashShape> flash;    //!< the fused attention kernel, when the profile uses one
  double flops = 0;                   //!< Megatron's convention (full s x s attention square)
  double executed_flops = 0;          //!< what the kernels execute
  double bytes = 0;                   //!< HBM bytes of the memory-bound part; message bytes of a collective
  int64_t kernels = 0;                //!< kernel launches (host launch overhead applies per kernel)
  std::optional<CollectiveKind> tp_collective;  //!< a collective over `group` (the TP group unless said)
  CommGroup group = CommGroup::kTp;
};

struct UnitOpSpecs {
  std::vector<OpSpec> fwd;
  std::vector<OpSpec> bwd;  //!< starts with the recompute ops (phase kRecompute) when recompute is on
  //! Sequence parallelism (tp > 1): the gradient all-reduces over TP of the unit's parameters every
  //! rank holds whole (ImplementationProfile::sp_grad_reduction), one per parameter in the
  //! executor's order, each the parameter's gradient bytes; phase kBwd. Empty otherwise.
  std::vector<OpSpec> grad_sync;
};

//! What the shapes depend on.
struct OpShapeKey {
  int64_t micro_batch = 1;
  int64_t seq_len = 0;  //!< 0 = the model's
  int64_t tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  uint32_t selective_modules = kRecomputeCoreAttn;  //!< with recompute selective (Layout::selective_modules)
  int64_t element_bytes = 2;  //!< activation element size (2 for bf16/fp16/fp8, 4 for fp32)
  //! Transformer Engine's FP8 linear layers (Precision::kFp8): qkv, attention output, fc1 and fc2
  //! run FP8 GEMMs (GemmShape::fp8), and each casts what its GEMMs read to FP8 first: in the forward
  //! pass the input, in the backward pass the output gradient, each with its transpose (the weight
  //! gradient GEMM reads the transposed copies; TE's fused cast_transpose, which also records the
  //! tensor's amax): read 2 B, write 1 + 1 B per element, one kernel per GEMM input. The weights'
  //! FP8 copies are cast once per step (TE caches them over the micro-batches), priced with the
  //! optimizer step (planner/cost/rank_ops.cpp), not here. Under the profile's fp8_recipe
  //! tensorwise (current scaling) each cast reads its input once more for the amax (2 B an element)
  //! in two more kernels (amax, scale).
  bool fp8_linear = false;
  // MoE layers (Layout ep, expert_tp, routing; ignored for a dense model):
  int64_t ep = 1;
  int64_t etp = 1;
  double expert_load = 1.0;  //!< Routing::LoadFactor: tokens of the busiest expert over the mean
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
};

//! Transformer layers differ by two traits: routed experts (IsMoeLayer) and local attention
//! (IsLocalAttentionLayer). Kind index = moe + 2 x local.
inline constexpr int kLayerKinds = 4;
int LayerKindOf(const ModelSpec& m, int64_t layer);

struct OpCatalogue {
  UnitOpSpecs layer;  //!< layer 0's kind (every layer's in a dense model with global attention)
  //! Every kind's ops, by LayerKindOf (kinds the model lacks left empty); kinds[LayerKindOf(m, 0)] == layer.
  std::vector<UnitOpSpecs> kinds;
  UnitOpSpecs embedding;  //!< first stage
  UnitOpSpecs head;       //!< last stage: final norm, LM head, loss
  //! One multi-token-prediction module (ModelSpec::mtp_layers; empty without), on the stage
  //! StageMtpModules names: the shifted tokens' embedding lookup, its two norms and projection
  //! (mtp_norm, mtp_proj), a transformer layer of the last layer's kind, and its own final norm with
  //! the shared LM head and loss (Megatron-Core multi_token_prediction.py MultiTokenPredictionLayer
  //! and process_mtp_loss). Its ops carry layer index layers + k.
  UnitOpSpecs mtp;
};

//! Version of the catalogue's definitions that a CostDb's samples are keyed by: the bytes of each
//! memory-bound op (kernel samples are looked up by family and bytes) and the GEMM kinds
//! (GemmShape::accumulate). Bump it with any change to them; `calibrate` stamps it into the
//! database (CostDb::catalogue) and the CLI warns when a database carries another one.
//!   1: 2026-11-27, weight-gradient GEMMs accumulate; no dropout bytes where the profile applies
//!      none (since 239abb3); the first stamped version.
//!   2: 2026-11-27, our executor's loss as its kernels run it (2e bytes per logit each way, the
//!      shards' statistics all-gathered once: ImplementationProfile::loss_reduction).
//! (2026-11-29: the multi-token-prediction unit added ops of new kinds only; no byte count of an
//! existing op changed, so the version stays.)
inline constexpr int64_t kOpCatalogueVersion = 2;

//! Why `db`'s samples may be keyed by other byte counts than this build's catalogue counts, or
//! nullopt when its stamp is this build's (or it holds no sample a catalogue keys: collectives only).
std::optional<std::string> CatalogueMismatch(const CostDb& db);

//! The elements of each parameter of a layer whose gradient every TP rank holds partially, in the
//! executor's order (executor/runtime/transformer_layer.cpp LayerParamSpecs), one TP all-reduce each:
//! with sequence parallelism the norms and the row-parallel biases; always (tp > 1) an MoE layer's
//! router and multi-head latent attention's down-projections and latent norms.
std::vector<int64_t> LayerGradSyncElements(const ModelSpec& m, bool moe, bool sequence_parallel);

//! The catalogue of `model` for `key` as `impl` runs it (attention kernel, fusions).
OpCatalogue BuildOpCatalogue(const ModelSpec& model, const OpShapeKey& key, const ImplementationProfile& impl);

//! The entry the executor's recorder tags a measured op with: first match of (op, phase) in the
//! layer, embedding or head lists (nullopt for DP/PP/optimizer ops, which the catalogue does not hold).
std::optional<OpSpec> OpCatalogueEntry(const OpCatalogue& c, OpKind op, Phase phase, bool in_layer);

}  // namespace parallax
