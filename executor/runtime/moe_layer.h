#pragma once
// The routed experts of a mixture-of-experts layer (Megatron-Core's MoELayer with the all-to-all
// token dispatcher, dropless): the router scores this rank's tokens and picks each token's top-k
// experts (runtime/moe_router.h); the tokens are permuted into expert order, sent over the ep group
// to the ranks holding their experts (an all-to-all on the ep stream), run through the experts'
// SwiGLU MLPs (one GEMM per expert and source rank), sent back, and summed per token weighted by
// the router's probabilities. Each rank holds experts / ep experts whole (etp = 1).
//
// The layer's MLP block calls it on its share of the tokens: with tp > 1 each TP rank routes
// tokens / tp of the block's rows (as Megatron-Core routes the sequence-parallel shard), so the
// router's gradient is a partial sum over TP and the expert gradients sum over the expert
// data-parallel group.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/moe_router.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! What the routed experts keep for backward, for one micro-batch.
struct MoeCache {
  Routing routing;
  std::vector<double> group_counts;  //!< tokens per expert over the tp x cp group
  Tensor x;                          //!< [rows, H] the routed tokens
  Tensor probs;                      //!< [rows * k] router probabilities (compute dtype)
  //! Permuted row i (expert order) holds token perm[i]; (token t, slot s) sits at row
  //! unperm[t * k + s]; unperm_inv inverts unperm.
  Tensor perm, unperm, unperm_inv;
  std::vector<int64_t> send_rows, recv_rows;  //!< per ep rank
  std::vector<int64_t> chunk_rows;            //!< [ep * local experts] rows of local expert j from rank s
  Tensor xe, gate, up, act;                   //!< expert side: [R, H] inputs, [R, F] activations
  Tensor ytok;                                //!< [rows * k, H] expert outputs, token-major
};

//! The parameters the routed part reads: the router [experts, H] (in the layer's group) and the
//! experts' group (fc1_gate, fc1_up [F, H] and fc2 [H, F] per local expert, in that order).
struct MoeParams {
  int64_t layer = -1;
  ParamGroup* group = nullptr;  //!< the layer's group
  int router = -1;              //!< the router's index in it
  ParamGroup* experts = nullptr;
};

//! Why the executor cannot run `plan`'s mixture-of-experts layers with sequences of `seq` tokens
//! (empty when it can, or the model is dense).
std::string MoeExecutionProblem(const Plan& plan, int64_t seq);

//! The routed experts' parameter specs of layer `layer` on expert-parallel rank `ep_idx` of `ep`.
std::vector<ParamSpec> ExpertParamSpecs(const ModelSpec& m, int64_t layer, int64_t ep, int64_t ep_idx);

//! y[rows, H] += the routed experts' output for x[rows, H]; fills `c`.
Status MoeForward(RuntimeContext& ctx, const MoeParams& p, DevPtr x, int64_t rows, DevPtr y, MoeCache& c);
//! dx[rows, H] += the input gradient for dy[rows, H]; router and expert gradients +=.
Status MoeBackward(RuntimeContext& ctx, const MoeParams& p, DevPtr dy, DevPtr dx, MoeCache& c);

}  // namespace parallax::executor
