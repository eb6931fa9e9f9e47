// `parallax model show M`: parameters, FLOPs per token, per-layer breakdown, activation bytes.
// `parallax model list`: the presets.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "model/counting.h"
#include "model/implementation.h"
#include "model/load.h"
#include "model/presets.h"

namespace parallax::cli {
namespace {

struct ShowOptions {
  std::string model;
  int64_t tp = 1;
  int64_t micro_batch = 1;
  int64_t seq_len = 0;
  std::string precision = "bf16";
  std::string implementation;  //!< empty: Korthikanti et al.'s count (dropout as the model says, s x s probabilities)
  bool json = false;
};

Json ActivationTable(const ModelSpec& m, const ShowOptions& o, Precision precision,
                     const std::optional<ImplementationProfile>& impl) {
  Json out = Json::object();
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    for (bool sp : {false, true}) {
      ActivationOptions a;
      a.micro_batch = o.micro_batch;
      a.seq_len = o.seq_len;
      a.tp = o.tp;
      a.sequence_parallel = sp;
      a.recompute = r;
      a.bytes_per_element = BytesPerElement(precision);
      if (impl) a = ForImplementation(a, *impl, precision);
      out[std::string(ToString(r)) + (sp ? "_sp" : "")] = ActivationBytesPerLayer(m, a);
    }
  }
  return out;
}

int Show(const ShowOptions& o) {
  auto m = ResolveModel(o.model);
  if (!m) return ReportError(m.error(), o.json);
  if (o.tp <= 0 || m->heads % o.tp != 0 || m->kv_heads % o.tp != 0) {
    return ReportError(BadInput("--tp " + std::to_string(o.tp) + " must divide heads=" + std::to_string(m->heads) +
                                " and kv_heads=" + std::to_string(m->kv_heads)),
                       o.json);
  }
  if (o.micro_batch <= 0 || o.seq_len < 0) return ReportError(BadInput("--micro-batch and --seq-len must be > 0"), o.json);
  const int64_t seq = o.seq_len > 0 ? o.seq_len : m->seq_len;
  auto precision = PrecisionFromString(o.precision);
  if (!precision) return ReportError(BadInput("--precision: " + precision.error().message), o.json);
  const ModelCounts c = CountModel(*m, seq);
  Json training{{"none", TrainingFlopsPerToken(*m, seq, Recompute::kNone)},
                {"selective", TrainingFlopsPerToken(*m, seq, Recompute::kSelective)},
                {"full", TrainingFlopsPerToken(*m, seq, Recompute::kFull)}};
  Json ops = Json::array();
  for (const auto& op : c.layer_ops) ops.push_back({{"op", op.name}, {"params", op.params}, {"fwd_flops_per_token", op.fwd_flops_per_token}});
  Json layers = Json::array();
  for (int64_t i = 0; i < m->layers; ++i) {
    const LayerCount& lc = c.layers[static_cast<size_t>(i)];
    Json layer{{"index", i}, {"params", lc.params}, {"fwd_flops_per_token", lc.fwd_flops_per_token}};
    if (m->moe()) layer["moe"] = lc.moe;
    if (m->attention_window > 0) layer["local_attention"] = lc.local;
    layers.push_back(layer);
  }
  Json outer = Json::array();
  for (const auto& op : c.outer_ops) outer.push_back({{"op", op.name}, {"params", op.params}, {"fwd_flops_per_token", op.fwd_flops_per_token}});
  std::optional<ImplementationProfile> impl;
  if (!o.implementation.empty()) {
    auto r = ResolveImplementation(o.implementation);
    if (!r) return ReportError(r.error(), o.json);
    impl = *r;
  }
  const Json acts = ActivationTable(*m, o, *precision, impl);
  const std::string counted_as = impl ? "implementation " + impl->name : "Korthikanti et al. 2022";
  if (o.json) {
    PrintJson(Json{{"name", m->name},
                   {"model", ModelToJson(*m)},
                   {"params", c.params_total},
                   {"params_breakdown", {{"per_layer", c.params_per_layer}, {"embedding", c.params_embedding},
                                         {"lm_head", c.params_lm_head}, {"final_norm", c.params_final_norm}}},
                   {"params_active", c.params_active},
                   {"params_mtp", c.params_mtp},
                   {"moe_layers", c.moe_layers},
                   {"seq_len", seq},
                   {"flops_per_token", training["none"]},
                   {"fwd_flops_per_token", c.fwd_flops_per_token},
                   {"training_flops_per_token", training},
                   {"layer_ops", ops},
                   {"outer_ops", outer},
                   {"layers", layers},
                   {"activation_bytes_per_layer", {{"micro_batch", o.micro_batch}, {"tp", o.tp},
                                                   {"precision", o.precision},
                                                   {"implementation", impl ? Json(impl->name) : Json(nullptr)},
                                                   {"bytes", acts}}}});
    return 0;
  }
  std::printf("model %s: %lld layers, hidden %lld, %lld heads (%lld kv), ffn %lld %s, vocab %lld, seq %lld\n",
              m->name.c_str(), (long long)m->layers, (long long)m->hidden, (long long)m->heads,
              (long long)m->kv_heads, (long long)m->ffn_hidden, ToString(m->mlp), (long long)m->vocab,
              (long long)seq);
  std::printf("parameters            %s (%lld)\n", HumanCount(static_cast<double>(c.params_total)).c_str(),
              (long long)c.params_total);
  if (m->moe()) {
    std::printf("  active per token    %s (%lld experts, top-%lld, %lld shared; %lld MoE layers of %lld)\n",
                HumanCount(static_cast<double>(c.params_active)).c_str(), (long long)m->experts,
                (long long)m->experts_per_token, (long long)m->shared_experts, (long long)c.moe_layers,
                (long long)m->layers);
  } else {
    std::printf("  per layer           %s x %lld\n", HumanCount(static_cast<double>(c.params_per_layer)).c_str(),
                (long long)m->layers);
  }
  std::printf("  embedding           %s\n", HumanCount(static_cast<double>(c.params_embedding)).c_str());
  std::printf("  lm head             %s%s\n", HumanCount(static_cast<double>(c.params_lm_head)).c_str(),
              m->tie_embeddings ? " (tied)" : "");
  std::printf("FLOPs per token       forward %s, training %s (recompute full: %s)\n",
              HumanCount(c.fwd_flops_per_token).c_str(), HumanCount(training["none"].get<double>()).c_str(),
              HumanCount(training["full"].get<double>()).c_str());
  std::printf("\nper layer, forward    %12s %16s\n", "params", "FLOPs/token");
  for (const auto& op : c.layer_ops) {
    std::printf("  %-19s %12s %16s\n", op.name.c_str(), HumanCount(static_cast<double>(op.params)).c_str(),
                HumanCount(op.fwd_flops_per_token).c_str());
  }
  if (!c.moe_layer_ops.empty()) std::printf("MoE layer, forward\n");
  for (const auto& op : c.moe_layer_ops) {
    std::printf("  %-19s %12s %16s\n", op.name.c_str(), HumanCount(static_cast<double>(op.params)).c_str(),
                HumanCount(op.fwd_flops_per_token).c_str());
  }
  for (const auto& op : c.outer_ops) {
    std::printf("  %-19s %12s %16s\n", op.name.c_str(), HumanCount(static_cast<double>(op.params)).c_str(),
                HumanCount(op.fwd_flops_per_token).c_str());
  }
  std::printf("\nactivations per layer per micro-batch (micro_batch %lld, tp %lld, %s; %s)\n", (long long)o.micro_batch,
              (long long)o.tp, o.precision.c_str(), counted_as.c_str());
  for (const char* r : {"none", "selective", "full"}) {
    std::printf("  recompute %-10s %12s   with sequence parallel %12s\n", r,
                HumanBytes(acts[r].get<int64_t>()).c_str(), HumanBytes(acts[std::string(r) + "_sp"].get<int64_t>()).c_str());
  }
  return 0;
}

}  // namespace

void RegisterModelCommand(CLI::App& root, CliState& state) {
  auto* model = root.add_subcommand("model", "Describe a model: parameters, FLOPs, activation memory");
  model->require_subcommand(1);
  SetExample(model, "parallax model show llama3-8b --tp 8");
  auto opts = std::make_shared<ShowOptions>();
  auto* show = model->add_subcommand("show", "Parameters, FLOPs per token, per-layer breakdown, activations");
  SetExample(show, "parallax model show llama3-8b --tp 8 --micro-batch 2");
  show->add_option("model", opts->model, "Preset name, model JSON or Hugging Face config.json")->required();
  show->add_option("--tp", opts->tp, "Tensor-parallel degree for the activation table")->capture_default_str();
  show->add_option("--micro-batch", opts->micro_batch, "Sequences per micro-batch")->capture_default_str();
  show->add_option("--seq-len", opts->seq_len, "Sequence length (default: the model's)");
  show->add_option("--precision", opts->precision, "Activation precision")
      ->check(PrecisionCheck())
      ->capture_default_str();
  show->add_option("--implementation", opts->implementation,
                   "Count activations as this implementation keeps them (parallax, megatron-core, nemo, megatron-2021, "
                   "megatron-2022, deepspeed, or a profile JSON); default: Korthikanti et al. 2022");
  show->add_flag("--json", opts->json, "Print one JSON object");
  show->callback([opts, &state] { state.exit_code = Show(*opts); });

  auto json_list = std::make_shared<bool>(false);
  auto* list = model->add_subcommand("list", "List model, device and cluster presets");
  SetExample(list, "parallax model list --json");
  list->add_flag("--json", *json_list, "Print one JSON object");
  list->callback([json_list] {
    if (*json_list) {
      PrintJson(Json{{"models", ModelPresetNames()}, {"devices", DevicePresetNames()}, {"clusters", ClusterPresetNames()}});
      return;
    }
    auto print = [](const char* what, const std::vector<std::string>& names) {
      std::printf("%s:", what);
      for (const auto& n : names) std::printf(" %s", n.c_str());
      std::printf("\n");
    };
    print("models", ModelPresetNames());
    print("devices", DevicePresetNames());
    print("clusters", ClusterPresetNames());
  });
}

}  // namespace parallax::cli
