#pragma once
// The softmax top-k router of a mixture-of-experts layer and its auxiliary load-balancing loss, as
// Megatron-Core computes them by default (megatron/core/transformer/moe/router.py TopKRouter with
// moe_router_pre_softmax off, moe_utils.py topk_softmax_with_capacity and
// switch_load_balancing_loss_func):
//   - each token takes the k experts of the largest logits, weighted by a softmax over those k
//     logits (top-k, then softmax);
//   - the auxiliary loss (Fedus et al. 2021, Switch Transformer eq. 4, over top-k) reads the softmax
//     over all experts: coeff * E / (T^2 k) * sum_e (sum_t score_te) * count_e, where count_e is the
//     tokens routed to expert e and T the tokens, both over the micro-batch's tp x cp group (the
//     sequence-partition group): each rank adds its own tokens' scores, so the ranks' shares sum to
//     the micro-batch's loss in every layout.
// Routing runs on the host: the dropless all-to-all needs the counts there anyway.

#include <cstdint>
#include <vector>

namespace parallax::executor {

//! Megatron-Core's moe_aux_loss_coeff of our runs.
inline constexpr double kMoeAuxLossCoeff = 1e-2;

struct Routing {
  int64_t tokens = 0, experts = 0, topk = 0;
  std::vector<int32_t> expert;  //!< [tokens * topk] chosen experts, largest logit first (ties: lower index)
  std::vector<float> prob;      //!< [tokens * topk] softmax over the chosen logits
  std::vector<float> scores;    //!< [tokens * experts] softmax over every logit
  std::vector<double> counts;   //!< [experts] this rank's tokens routed to each expert
};

//! Routes `tokens` rows of `experts` logits (row-major) to their top `topk` experts.
Routing RouteTopK(const std::vector<float>& logits, int64_t tokens, int64_t experts, int64_t topk);

//! This rank's share of the auxiliary loss: coeff * E / (T^2 k) * sum_e (sum over its tokens of
//! score_te) * group_counts_e, with T = group_tokens and group_counts the counts over the group.
double AuxLossShare(const Routing& r, const std::vector<double>& group_counts, int64_t group_tokens, double coeff);

//! d(loss)/d(logits) [tokens * experts]: the top-k softmax's backward from dprob [tokens * topk],
//! plus `aux_weight` (d loss / d aux loss) times the auxiliary loss share's gradient.
std::vector<float> RouterLogitGrad(const Routing& r, const std::vector<float>& dprob,
                                   const std::vector<double>& group_counts, int64_t group_tokens, double coeff,
                                   double aux_weight);

}  // namespace parallax::executor
