#include "cli/search_report.h"

#include <algorithm>
#include <cstdio>

#include "cli/format.h"
#include "planner/cost/plan_costs.h"
#include "profiler/calibrate/calibrate.h"

namespace parallax::cli {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

//! "a node", or "an NVLink domain" where the cluster's domain is not a node.
std::string DomainNoun(const ClusterSpec& c) { return c.domain_size() == c.gpus_per_node ? "a node" : "an NVLink domain"; }

}  // namespace

std::string RejectionInWords(const std::string& reason, const SearchInputs& in) {
  const ModelSpec& m = in.model;
  if (reason == "tp_does_not_divide_heads") {
    return "tp must divide the attention heads (" + Str(m.heads) + "), the kv heads (" + Str(m.kv_heads) +
           ") and the ffn hidden size (" + Str(m.ffn_hidden) + ")";
  }
  if (reason == "tp_does_not_tile_the_nodes") {
    return "tp must divide the devices of " + DomainNoun(in.cluster) + " (" + Str(in.cluster.domain_size()) +
           ") or be a multiple of it, and divide all " +
           Str(in.cluster.total_gpus());
  }
  if (reason == "tp_spans_nodes") {
    return "a tensor-parallel group larger than " + DomainNoun(in.cluster) + " (" + Str(in.cluster.domain_size()) +
           " devices) is not searched (simulate predicts one)";
  }
  if (reason == "pp_exceeds_layers") return "pp must not exceed the layers (" + Str(m.layers) + ")";
  if (reason == "pp_does_not_split_layers") {
    return "pp must divide the layers (" + Str(m.layers) + ") or the layers with the embedding and the loss counted (" +
           Str(m.layers + 2) + "), as Megatron-Core splits them";
  }
  if (reason == "global_batch_not_divisible") return "the global batch must be a multiple of dp x micro_batch";
  if (reason == "interleaved_microbatches_not_multiple_of_pp") {
    return "the interleaved schedule needs a multiple of pp micro-batches per step";
  }
  if (reason == "zero_stage_beyond_implementation") {
    return "the implementation " + in.implementation.name + " does not run that ZeRO stage";
  }
  if (reason == "sequence_parallel_needs_tp_dividing_seq_len") {
    return "sequence parallelism needs tp (x cp) to divide the sequence length (" + Str(m.seq_len) + ")";
  }
  if (reason == "cp_needs_seq_len_divisible_by_2cp") {
    return "context parallelism needs 2 x cp to divide the sequence length (" + Str(m.seq_len) +
           "): each cp rank holds two of the 2 x cp chunks (causal load balance)";
  }
  if (reason == "cp_beyond_implementation") {
    return "the implementation " + in.implementation.name + " does not run context parallelism (cp_comm_type " +
           ToString(in.implementation.cp_comm_type.value) + ")";
  }
  if (reason == "cp_a2a_needs_tp_cp_dividing_heads") {
    return "all-to-all context parallelism needs tp x cp to divide the attention heads (" + Str(m.heads) + ")";
  }
  if (reason == "out_of_memory") {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f", in.cluster.device.memory_GiB);
    return std::string("the layout does not fit in device memory (") + gib + " GiB per " + in.cluster.device.name + ")";
  }
  if (reason == "moe_tp_needs_sequence_parallel") {
    return "an MoE model with tp > 1 needs sequence parallelism (Megatron-Core's rule: each rank routes its "
           "sequence shard)";
  }
  if (reason == "expert_groups_do_not_tile_the_stage") {
    return "ep x etp must divide a pipeline stage's tp x cp x dp ranks (expert groups are carved from them) and etp the "
           "experts' ffn size (" + Str(m.moe_ffn_hidden) + ")";
  }
  return reason;
}

namespace {

//! What rules out the pinned dp / tp / pp before any layout is searched (tp=3 on 32 heads), by the
//! layout rules of model/plan.h: the model's first (heads, layers), then the cluster's (GPU count,
//! node tiling). nullopt when they admit some layout.
std::optional<std::string> PinnedRuleOut(const SearchInputs& in, const planner::Constraints& fix) {
  const int64_t world = in.cluster.total_gpus();
  Layout l;
  l.tp = fix.tp.value_or(1);
  l.pp = fix.pp.value_or(1);
  l.cp = fix.cp.value_or(1);
  l.dp = fix.dp.value_or(std::max<int64_t>(world / (l.tp * l.cp * l.pp), 1));
  l.global_batch = l.dp * l.pp;  // enough micro-batches for any schedule's pipeline
  Status st = ValidateLayout(l, in.model, in.cluster, l.world_size());
  if (st) st = ValidateLayout(l, in.model, in.cluster);
  if (st) return std::nullopt;
  std::string why = st.error().message;
  const std::string prefix = "plan: ";
  if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
  return why;
}

}  // namespace

std::optional<double> ShownMfu(const planner::Prediction& p, const ClusterSpec& cluster, Precision precision,
                               const CostDb* db) {
  if (p.mfu > 0) return p.mfu;
  const DType dtype = planner::MfuDType(precision);
  if (cluster.device.peak_tflops.For(dtype) > 0) return p.mfu;
  if (db == nullptr) return std::nullopt;
  const double peak = profiler::MeasuredDevice(cluster.device, *db).peak_tflops.For(dtype);
  if (peak <= 0) return std::nullopt;
  return p.model_tflops_per_gpu / peak;
}

std::string MfuText(const std::optional<double>& mfu) {
  if (!mfu) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", *mfu * 100);
  return buf;
}

Error NoLayoutError(const SearchInputs& in, const planner::Constraints& fix, const planner::SearchResult& r) {
  const std::string on = " on " + Str(in.cluster.total_gpus()) + " x " + in.cluster.device.name + ": ";
  std::string why;
  if (r.smallest_shortfall_bytes > 0) {
    why = "no layout of " + in.model.name + " fits" + on + "the closest (" +
          LayoutToString(r.smallest_shortfall_layout) + ") needs " + HumanBytes(r.smallest_shortfall_bytes) +
          " more per GPU";
  } else if (const auto pinned = PinnedRuleOut(in, fix)) {
    // The pinned dimension's own rule says more than the count it was rejected under.
    why = "no layout of " + in.model.name + " is valid" + on + "--fix rules out every layout: " + *pinned;
  } else if (r.rejected.empty()) {
    why = "no layout of " + in.model.name + " is valid" + on + "--fix leaves no layout to search";
  } else {
    const auto most = std::max_element(r.rejected.begin(), r.rejected.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    why = "no layout of " + in.model.name + " is valid" + on + RejectionInWords(most->first, in);
  }
  why += " (" + Str(r.searched) + " layouts searched; rejected:" + RejectedText(r) + ")";
  return Error{why, ErrorKind::kInfeasible};
}

Json RejectedJson(const planner::SearchResult& r) {
  Json rejected = Json::object();
  for (const auto& [k, v] : r.rejected) rejected[k] = v;
  return Json{{"rejected", rejected}, {"searched", r.searched}};
}

std::string RejectedText(const planner::SearchResult& r) {
  if (r.rejected.empty()) return " none";
  std::string out;
  for (const auto& [k, v] : r.rejected) out += (out.empty() ? " " : "; ") + k + " " + Str(v);
  return out;
}

}  // namespace parallax::cli
