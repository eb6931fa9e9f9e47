#include "model/op_identity.h"

#include <array>
#include <utility>

namespace parallax {
namespace {

constexpr std::array<std::pair<OpKind, const char*>, 37> kOpNames{{
    {OpKind::kEmbedding, "embedding"},
    {OpKind::kAttnNorm, "attn_norm"},
    {OpKind::kQkv, "qkv"},
    {OpKind::kAttnCore, "attn_core"},
    {OpKind::kAttnOut, "attn_out"},
    {OpKind::kMlpNorm, "mlp_norm"},
    {OpKind::kFc1, "fc1"},
    {OpKind::kAct, "act"},
    {OpKind::kFc2, "fc2"},
    {OpKind::kFinalNorm, "final_norm"},
    {OpKind::kLmHead, "lm_head"},
    {OpKind::kLoss, "loss"},
    {OpKind::kTpAllReduce, "tp_allreduce"},
    {OpKind::kTpAllGather, "tp_allgather"},
    {OpKind::kTpReduceScatter, "tp_reducescatter"},
    {OpKind::kPpSend, "pp_send"},
    {OpKind::kPpRecv, "pp_recv"},
    {OpKind::kDpAllReduce, "dp_allreduce"},
    {OpKind::kDpReduceScatter, "dp_reducescatter"},
    {OpKind::kDpAllGather, "dp_allgather"},
    {OpKind::kOptimizer, "optimizer"},
    {OpKind::kGradClip, "grad_clip"},
    {OpKind::kGradZero, "grad_zero"},
    {OpKind::kShardCopy, "shard_copy"},
    {OpKind::kGradFold, "grad_fold"},
    {OpKind::kGradAccum, "grad_accum"},
    {OpKind::kCpSendRecv, "cp_sendrecv"},
    {OpKind::kRouter, "router"},
    {OpKind::kPermute, "permute"},
    {OpKind::kMoeDispatch, "moe_dispatch"},
    {OpKind::kExpertFc1, "expert_fc1"},
    {OpKind::kExpertAct, "expert_act"},
    {OpKind::kExpertFc2, "expert_fc2"},
    {OpKind::kMoeCombine, "moe_combine"},
    {OpKind::kUnpermute, "unpermute"},
    {OpKind::kMtpNorm, "mtp_norm"},
    {OpKind::kMtpProj, "mtp_proj"},
}};

constexpr std::array<std::pair<Phase, const char*>, 5> kPhaseNames{{
    {Phase::kFwd, "fwd"},
    {Phase::kBwd, "bwd"},
    {Phase::kRecompute, "recompute"},
    {Phase::kOptim, "optim"},
    {Phase::kComm, "comm"},
}};

}  // namespace

const char* ToString(Phase p) {
  for (const auto& [k, n] : kPhaseNames) {
    if (k == p) return n;
  }
  return "?";
}

const char* ToString(OpKind o) {
  for (const auto& [k, n] : kOpNames) {
    if (k == o) return n;
  }
  return "?";
}

std::optional<Phase> PhaseFromString(std::string_view s) {
  for (const auto& [k, n] : kPhaseNames) {
    if (s == n) return k;
  }
  return std::nullopt;
}

std::optional<OpKind> OpKindFromString(std::string_view s) {
  for (const auto& [k, n] : kOpNames) {
    if (s == n) return k;
  }
  return std::nullopt;
}

bool IsCommunication(OpKind k) {
  switch (k) {
    case OpKind::kTpAllReduce:
    case OpKind::kTpAllGather:
    case OpKind::kTpReduceScatter:
    case OpKind::kPpSend:
    case OpKind::kPpRecv:
    case OpKind::kDpAllReduce:
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllGather:
    case OpKind::kMoeDispatch:
    case OpKind::kMoeCombine:
    case OpKind::kCpSendRecv:
      return true;
    default:
      return false;
  }
}

}  // namespace parallax
