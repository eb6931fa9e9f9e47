// The mixture-of-experts part of the exports (issue 37 item 6): Megatron-LM's MoE and MLA arguments,
// DeepSpeed's MoE settings or what they cannot express.
#include "planner/export/moe_export.h"

#include <sstream>

namespace parallax::planner {

void AddMegatronMoeArgs(const Plan& plan, MegatronArgs& out) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  auto add = [&](const std::string& k, const std::string& v) {
    out.args.push_back(k);
    out.args.push_back(v);
  };
  auto num = [&](const std::string& k, int64_t v) { add(k, std::to_string(v)); };
  if (m.head_size > 0) num("--kv-channels", m.head_size);
  if (m.mla()) {
    out.args.push_back("--multi-latent-attention");
    if (m.q_lora_rank > 0) num("--q-lora-rank", m.q_lora_rank);
    num("--kv-lora-rank", m.kv_lora_rank);
    num("--qk-head-dim", m.qk_nope_head_dim);
    num("--qk-pos-emb-head-dim", m.qk_rope_head_dim);
    num("--v-head-dim", m.v_head_dim);
  }
  if (m.attention_window > 0) {
    out.warnings.push_back("local attention (" + std::string(ToString(m.window_kind)) + " window of " +
                           std::to_string(m.attention_window) +
                           " tokens) has no Megatron-LM argument here: set the layer pattern in the model spec");
  }
  if (!m.moe()) return;
  num("--num-experts", m.experts);
  num("--moe-router-topk", m.experts_per_token);
  num("--expert-model-parallel-size", l.ep);
  num("--expert-tensor-parallel-size", l.expert_tp());
  num("--moe-ffn-hidden-size", m.moe_ffn_hidden);
  if (m.shared_experts > 0) num("--moe-shared-expert-intermediate-size", m.shared_experts * m.moe_ffn_hidden);
  // Megatron-Core's --moe-layer-freq: an integer, or a Python list expression per layer (the dense
  // first layers as zeros, as the DeepSeek-V3 recipes write it).
  if (m.dense_layers == 0) {
    num("--moe-layer-freq", m.moe_layer_freq);
  } else {
    std::ostringstream pattern;
    pattern << "([0]*" << m.dense_layers << "+[1]*" << (m.layers - m.dense_layers) << ")";
    if (m.moe_layer_freq != 1) {
      pattern.str("");
      pattern << "[";
      for (int64_t i = 0; i < m.layers; ++i) pattern << (i > 0 ? "," : "") << (IsMoeLayer(m, i) ? 1 : 0);
      pattern << "]";
    }
    add("--moe-layer-freq", pattern.str());
  }
  const MoeDispatcher d = plan.implementation.moe_dispatcher.value;
  add("--moe-token-dispatcher-type", d == MoeDispatcher::kAllGather ? "allgather" : d == MoeDispatcher::kDeepEp ? "flex" : "alltoall");
  if (d == MoeDispatcher::kDeepEp) out.args.push_back("--moe-enable-deepep");
  if (plan.implementation.moe_shared_expert_overlap.value && m.shared_experts > 0) {
    out.args.push_back("--moe-shared-expert-overlap");
  }
  if (m.router == RouterKind::kSigmoid) {
    add("--moe-router-score-function", "sigmoid");
    num("--moe-router-num-groups", m.router_groups);
    num("--moe-router-group-topk", m.router_group_topk);
  }
  if (m.mtp_layers > 0) num("--mtp-num-layers", m.mtp_layers);
  out.args.push_back("--moe-grouped-gemm");
  if (l.routing.kind == RoutingKind::kCapacity) {
    std::ostringstream f;
    f << l.routing.factor;
    add("--moe-expert-capacity-factor", f.str());
    add("--moe-token-drop-policy", "probs");
  } else if (l.routing.kind == RoutingKind::kBalanced) {
    out.warnings.push_back("routing=balanced was priced: NVIDIA's benchmarks force it with "
                           "--moe-router-force-load-balancing (a benchmark setting, not for training)");
  }
}

void AddDeepSpeedMoe(const Plan& plan, Json& ds) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  if (!m.moe()) return;
  // DeepSpeed's MoE layer (deepspeed.moe.layer.MoE) is built in the model code; the config carries
  // what the engine needs to know and the rest is said.
  Json moe{{"enabled", true},
           {"num_experts", m.experts},
           {"ep_size", l.ep},
           {"top_k", m.experts_per_token},
           {"min_capacity", 0},
           {"drop_tokens", l.routing.kind == RoutingKind::kCapacity}};
  if (l.routing.kind == RoutingKind::kCapacity) moe["capacity_factor"] = l.routing.factor;
  Json cannot = Json::array();
  if (l.expert_tp() > 1) cannot.push_back("expert tensor parallelism (etp > 1): DeepSpeed-MoE splits experts over ep only");
  if (m.shared_experts > 0) cannot.push_back("shared experts: DeepSpeed's use_residual (PR-MoE) is one residual expert");
  if (m.router == RouterKind::kSigmoid) cannot.push_back("the sigmoid group-limited router (DeepSeek-V3)");
  if (m.mla()) cannot.push_back("multi-head latent attention");
  if (!cannot.empty()) moe["not_expressible"] = cannot;
  ds["parallax"]["moe"] = moe;
}

}  // namespace parallax::planner
