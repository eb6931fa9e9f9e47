#include "model/plan.h"

#include <charconv>
#include <sstream>

#include "model/stage_split.h"

namespace parallax {
namespace {

constexpr int64_t kPlanVersion = 1;

Result<int64_t> ParseInt(const std::string& key, const std::string& v) {
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size()) {
    return BadInput("plan: /" + key + ": expected an integer, got \"" + v + "\"");
  }
  return out;
}

Result<bool> ParseBool(const std::string& key, const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  return BadInput("plan: /" + key + ": expected true/false (or 1/0), got \"" + v + "\"");
}

}  // namespace

std::string ContextParallelProblem(const Layout& l, int64_t seq_len) {
  if (l.cp == 1 || seq_len % (2 * l.cp) == 0) return "";
  return "cp=" + std::to_string(l.cp) + " needs seq_len=" + std::to_string(seq_len) + " to be divisible by 2*cp=" +
         std::to_string(2 * l.cp) + " (causal load balance: each cp rank holds sequence chunks i and 2*cp-1-i)";
}

std::string CpCommTypeProblem(const Layout& l, const ModelSpec& m, const ImplementationProfile& impl) {
  if (l.cp == 1) return "";
  const auto s = [](int64_t v) { return std::to_string(v); };
  switch (impl.cp_comm_type.value) {
    case CpCommType::kNone:
      return "cp=" + s(l.cp) + ": " + impl.name + " has no context parallelism (its cp_comm_type fact is none)";
    case CpCommType::kA2aP2p:
      return "cp=" + s(l.cp) + ": cp_comm_type a2a+p2p (hierarchical context parallelism) is not modelled";
    case CpCommType::kA2a:
      // Ulysses: an all-to-all trades the sequence split for a head split over tp*cp ranks.
      if (m.heads % (l.tp * l.cp) != 0) {
        return "cp=" + s(l.cp) + " with cp_comm_type a2a needs tp*cp = " + s(l.tp * l.cp) + " to divide heads=" +
               s(m.heads) + " (the all-to-all splits the heads over tp*cp ranks)";
      }
      return "";
    case CpCommType::kP2p:
    case CpCommType::kAllGather: return "";  // heads and kv heads split over tp only
  }
  return "";
}

const char* ToString(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

Result<Recompute> RecomputeFromString(const std::string& s) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (s == ToString(r)) return r;
  }
  return BadInput("unknown recompute \"" + s + "\" (expected none, selective or full)");
}

namespace {
constexpr std::pair<RecomputeModule, const char*> kRecomputeModuleNames[] = {
    {kRecomputeCoreAttn, "core_attn"}, {kRecomputeLayernorm, "layernorm"}, {kRecomputeMoeAct, "moe_act"},
    {kRecomputeMlaUpProj, "mla_up_proj"}, {kRecomputeMlp, "mlp"}};
}  // namespace

std::string RecomputeModulesToString(uint32_t modules) {
  std::string out;
  for (const auto& [bit, name] : kRecomputeModuleNames) {
    if ((modules & bit) == 0) continue;
    if (!out.empty()) out += '+';
    out += name;
  }
  return out;
}

Result<uint32_t> RecomputeModulesFromString(const std::string& s) {
  uint32_t modules = 0;
  std::string name;
  std::stringstream ss(s);
  while (ss >> name) {
    std::stringstream parts(name);
    std::string part;
    while (std::getline(parts, part, '+')) {
      if (part.empty()) continue;
      uint32_t bit = 0;
      for (const auto& [b, n] : kRecomputeModuleNames) bit = part == n ? b : bit;
      if (bit == 0) {
        return BadInput("unknown recompute module \"" + part + "\" (expected core_attn, layernorm, moe_act, mla_up_proj or mlp, joined by +)");
      }
      modules |= bit;
    }
  }
  if (modules == 0) return BadInput("recompute_modules is empty (expected core_attn, layernorm, moe_act, mla_up_proj or mlp, joined by +)");
  return modules;
}

std::string ToString(const Routing& r) {
  if (r.kind == RoutingKind::kBalanced) return "balanced";
  std::ostringstream o;
  o << (r.kind == RoutingKind::kDropless ? "dropless:" : "capacity:") << r.factor;
  return o.str();
}

Result<Routing> RoutingFromString(const std::string& s) {
  const std::string expect = "expected balanced, dropless:F (F >= 1, the busiest expert's load over the mean) or "
                             "capacity:F (F > 0, the capacity factor), got \"" + s + "\"";
  if (s == "balanced") return Routing{};
  const auto colon = s.find(':');
  if (colon == std::string::npos) return BadInput(expect);
  const std::string kind = s.substr(0, colon);
  if (kind != "dropless" && kind != "capacity") return BadInput(expect);
  double f = 0;
  const std::string num = s.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), f);
  if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || !(f > 0) ||
      (kind == "dropless" && f < 1)) {
    return BadInput(expect);
  }
  return Routing{kind == "dropless" ? RoutingKind::kDropless : RoutingKind::kCapacity, f};
}

namespace {

//! Whether the layout names modules beyond selective recompute's default (core_attn).
bool HasRecomputeModules(const Layout& l) {
  return l.recompute == Recompute::kSelective && l.recompute_modules != 0 && l.recompute_modules != kRecomputeCoreAttn;
}

//! recompute_modules implies selective recompute (Megatron-Core: --recompute-granularity selective);
//! beside recompute=full it is an error. A default set (core_attn) is stored as 0.
Status ApplyRecomputeModules(Layout& l, const std::string& where) {
  if (l.recompute_modules == 0) return Status::Ok();
  if (l.recompute == Recompute::kFull) {
    return BadInput((where.empty() ? "" : where + ": ") +
                    "recompute_modules names selective recompute's modules; recompute=full reruns every module");
  }
  l.recompute = Recompute::kSelective;
  if (l.recompute_modules == kRecomputeCoreAttn) l.recompute_modules = 0;
  return Status::Ok();
}

}  // namespace

Result<Layout> ParseInlineLayout(const std::string& text) {
  Layout l;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) return BadInput("plan: \"" + item + "\": expected key=value");
    const std::string key = item.substr(0, eq);
    const std::string v = item.substr(eq + 1);
    auto set_int = [&](int64_t& field) -> Status {
      PX_ASSIGN(field, ParseInt(key, v));
      return Status::Ok();
    };
    if (auto sync = ParseSyncKey(key, v, &l.sync)) {
      PX_TRY(*sync);
      continue;
    }
    Status st;
    if (key == "dp") st = set_int(l.dp);
    else if (key == "tp") st = set_int(l.tp);
    else if (key == "pp") st = set_int(l.pp);
    else if (key == "cp") st = set_int(l.cp);
    else if (key == "zero" || key == "zero_stage") st = set_int(l.zero_stage);
    else if (key == "micro_batch" || key == "mb") st = set_int(l.micro_batch);
    else if (key == "global_batch") st = set_int(l.global_batch);
    else if (key == "virtual_stages" || key == "vp") st = set_int(l.virtual_stages);
    else if (key == "ep") st = set_int(l.ep);
    else if (key == "etp") st = set_int(l.etp);
    else if (key == "first_stage_layers") st = set_int(l.first_stage_layers);
    else if (key == "last_stage_layers") st = set_int(l.last_stage_layers);
    else if (key == "pipeline_layout") l.pipeline_layout = v;
    else if (key == "routing") {
      auto r = RoutingFromString(v);
      if (!r) return BadInput("plan: /routing: " + r.error().message);
      l.routing = *r;
    } else if (key == "recompute") {
      auto r = RecomputeFromString(v);
      if (!r) return BadInput("plan: /recompute: " + r.error().message);
      l.recompute = *r;
    } else if (key == "recompute_modules") {
      auto r = RecomputeModulesFromString(v);
      if (!r) return BadInput("plan: /recompute_modules: " + r.error().message);
      l.recompute_modules = *r;
    } else if (key == "schedule") {
      auto s = ScheduleFromString(v);
      if (!s) return BadInput("plan: /schedule: " + s.error().message);
      l.schedule = *s;
    } else if (key == "sequence_parallel" || key == "sp") {
      PX_ASSIGN(l.sequence_parallel, ParseBool(key, v));
    } else {
      return BadInput("plan: /" + key +
                      ": unknown key (expected dp, tp, pp, cp, zero, micro_batch, global_batch, recompute, recompute_modules, "
                      "schedule, virtual_stages, first_stage_layers, last_stage_layers, pipeline_layout, sequence_parallel, ep, etp, "
                      "routing, sync, "
                      "servers, compression, data)");
    }
    PX_TRY(st);
  }
  PX_TRY(ApplyRecomputeModules(l, "plan: /recompute_modules"));
  return l;
}

Result<Layout> LayoutFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<Layout> {
    ObjectReader r(j, file, path);
    Layout l;
    l.dp = r.PositiveInt("dp", 1);
    l.tp = r.PositiveInt("tp", 1);
    l.pp = r.PositiveInt("pp", 1);
    l.cp = r.PositiveInt("cp", 1);
    l.zero_stage = r.NonNegativeInt("zero_stage", 0);
    if (l.zero_stage > 3) r.Fail("zero_stage", "must be 0, 1, 2 or 3");
    l.micro_batch = r.PositiveInt("micro_batch", 1);
    l.global_batch = r.NonNegativeInt("global_batch", 0);
    l.recompute = *RecomputeFromString(r.Choice("recompute", {"none", "selective", "full"}, "none"));
    if (r.Has("recompute_modules")) {
      auto modules = RecomputeModulesFromString(r.String("recompute_modules"));
      if (!modules) r.Fail("recompute_modules", modules.error().message);
      l.recompute_modules = *modules;
      if (Status st = ApplyRecomputeModules(l, ""); !st) r.Fail("recompute_modules", st.error().message);
    }
    l.schedule = *ScheduleFromString(r.Choice("schedule", {"gpipe", "1f1b", "interleaved"}, "1f1b"));
    l.virtual_stages = r.PositiveInt("virtual_stages", 1);
    l.sequence_parallel = r.Bool("sequence_parallel", false);
    l.first_stage_layers = r.NonNegativeInt("first_stage_layers", 0);
    l.last_stage_layers = r.NonNegativeInt("last_stage_layers", 0);
    if (r.Has("pipeline_layout")) l.pipeline_layout = r.String("pipeline_layout");
    l.ep = r.PositiveInt("ep", 1);
    l.etp = r.Has("etp") ? r.PositiveInt("etp") : 0;
    if (r.Has("routing")) {
      auto routing = RoutingFromString(r.String("routing"));
      if (!routing) r.Fail("routing", routing.error().message);
      l.routing = *routing;
    }
    l.sync = SyncModeFromJson(r);
    r.Finish();
    return l;
  });
}

Json LayoutToJson(const Layout& l) {
  Json j{{"dp", l.dp},
         {"tp", l.tp},
         {"pp", l.pp},
         {"zero_stage", l.zero_stage},
         {"micro_batch", l.micro_batch},
         {"global_batch", l.global_batch},
         {"recompute", ToString(l.recompute)},
         {"schedule", ToString(l.schedule)},
         {"virtual_stages", l.virtual_stages},
         {"sequence_parallel", l.sequence_parallel}};
  if (l.cp != 1) j["cp"] = l.cp;
  if (HasRecomputeModules(l)) j["recompute_modules"] = RecomputeModulesToString(l.recompute_modules);
  if (l.first_stage_layers != 0) j["first_stage_layers"] = l.first_stage_layers;
  if (l.last_stage_layers != 0) j["last_stage_layers"] = l.last_stage_layers;
  if (!l.pipeline_layout.empty()) j["pipeline_layout"] = l.pipeline_layout;
  // Expert keys only where set: a dense layout's file is unchanged.
  if (l.ep != 1) j["ep"] = l.ep;
  if (l.etp != 0) j["etp"] = l.etp;
  if (l.routing != Routing{}) j["routing"] = ToString(l.routing);
  SyncModeToJson(l.sync, &j);
  return j;
}

std::string LayoutToString(const Layout& l) {
  std::ostringstream o;
  o << "dp=" << l.dp << ",tp=" << l.tp << ",pp=" << l.pp;
  if (l.cp != 1) o << ",cp=" << l.cp;
  o << ",zero=" << l.zero_stage
    << ",micro_batch=" << l.micro_batch << ",global_batch=" << l.global_batch
    << ",recompute=" << ToString(l.recompute);
  if (HasRecomputeModules(l)) o << ",recompute_modules=" << RecomputeModulesToString(l.recompute_modules);
  o << ",schedule=" << ToString(l.schedule)
    << ",virtual_stages=" << l.virtual_stages << ",sequence_parallel=" << (l.sequence_parallel ? 1 : 0);
  if (l.first_stage_layers != 0) o << ",first_stage_layers=" << l.first_stage_layers;
  if (l.last_stage_layers != 0) o << ",last_stage_layers=" << l.last_stage_layers;
  if (!l.pipeline_layout.empty()) o << ",pipeline_layout=" << l.pipeline_layout;
  if (l.ep != 1) o << ",ep=" << l.ep;
  if (l.etp != 0) o << ",etp=" << l.etp;
  if (l.routing != Routing{}) o << ",routing=" << ToString(l.routing);
  o << SyncModeInlineSuffix(l.sync);
  return o.str();
}

Status CheckPrecisionOnDevice(Precision p, const DeviceSpec& d) {
  if (p != Precision::kFp8 || !d.is_gpu() || d.peak_tflops.fp8 > 0) return Status::Ok();
  return BadInput("precision fp8: device " + d.name +
                  " has no FP8 tensor cores (its peak_tflops.fp8 is 0; FP8 GEMMs need Hopper, Ada or Blackwell)");
}

Status CheckFp8RecipeOnDevice(Precision p, const ImplementationProfile& impl, const DeviceSpec& d) {
  if (p != Precision::kFp8 || impl.fp8_recipe.value != Fp8Recipe::kMxfp8 || !d.is_gpu() || d.peak_tflops.fp4 > 0) {
    return Status::Ok();
  }
  return BadInput("precision fp8 with the implementation " + impl.name + "'s fp8_recipe mxfp8: device " + d.name +
                  " has no block-scaled MMA (its peak_tflops.fp4 is 0; MXFP8 needs Blackwell)");
}

std::string DomainInWords(const ClusterSpec& c) {
  if (c.domain_size() == c.gpus_per_node) return "gpus_per_node=" + std::to_string(c.gpus_per_node);
  return "nvlink_domain=" + std::to_string(c.domain_size());
}

Status ValidateLayout(const Layout& l, const ModelSpec& m, const ClusterSpec& c, int64_t world_size) {
  auto fail = [](const std::string& what) { return Status(BadInput("plan: " + what)); };
  auto s = [](int64_t v) { return std::to_string(v); };
  if (l.dp <= 0 || l.tp <= 0 || l.pp <= 0 || l.cp <= 0) return fail("dp, tp, pp and cp must be > 0");
  if (l.zero_stage < 0 || l.zero_stage > 3) return fail("zero_stage must be 0, 1, 2 or 3 (got " + s(l.zero_stage) + ")");
  if (l.micro_batch <= 0) return fail("micro_batch must be > 0");
  if (l.virtual_stages <= 0) return fail("virtual_stages must be > 0");
  const bool placed = world_size == 0;
  const int64_t world = placed ? c.total_gpus() : world_size;
  if (l.job_ranks() != world) {
    const std::string servers = l.sync.dedicated_servers() > 0 ? " + " + s(l.sync.dedicated_servers()) : "";
    const std::string product = std::string(l.cp == 1 ? "dp*tp*pp" : "dp*tp*cp*pp") + (servers.empty() ? "" : " + servers") +
                                " = " + s(l.dp) + "*" + s(l.tp) + (l.cp == 1 ? "" : "*" + s(l.cp)) + "*" + s(l.pp) + servers;
    return fail(product + " = " + s(l.job_ranks()) + " does not equal the " +
                (placed ? "cluster's GPU count " : "world size ") + s(world));
  }
  PX_TRY(ValidateSyncMode(l.sync, l.dp, l.tp, l.pp, l.zero_stage));
  if (m.heads % l.tp != 0) return fail("tp=" + s(l.tp) + " does not divide heads=" + s(m.heads));
  if (m.kv_heads % l.tp != 0) return fail("tp=" + s(l.tp) + " does not divide kv_heads=" + s(m.kv_heads));
  if (m.ffn_hidden % l.tp != 0) return fail("tp=" + s(l.tp) + " does not divide ffn_hidden=" + s(m.ffn_hidden));
  // A TP group larger than an NVLink domain must span whole domains (tp=16 on 8-GPU nodes runs,
  // over the inter-node links); a smaller one must tile a domain.
  if (placed && !TpTilesDomains(l.tp, c) && l.tp > c.domain_size()) {
    return fail("tp=" + s(l.tp) + " exceeds " + DomainInWords(c) +
                " and is not a multiple of it (a tensor-parallel group spans whole " +
                (c.domain_size() == c.gpus_per_node ? "nodes)" : "NVLink domains)"));
  }
  if (placed && !TpTilesDomains(l.tp, c)) return fail("tp=" + s(l.tp) + " does not divide " + DomainInWords(c));
  if (l.pp > m.layers) return fail("pp=" + s(l.pp) + " exceeds layers=" + s(m.layers));
  if (const std::string split = StageSplitProblem(l, m.layers); !split.empty()) return fail(split);
  if (!l.pipeline_layout.empty()) {
    const std::string problem = PipelineLayoutProblem(l.pipeline_layout, m.layers, m.mtp_layers, l.pp, l.virtual_stages);
    if (!problem.empty()) return fail(problem);
  }
  if (l.global_batch <= 0) return fail("global_batch must be > 0 (give it in the plan or with --global-batch)");
  if (l.global_batch % (l.dp * l.micro_batch) != 0) {
    return fail("global_batch=" + s(l.global_batch) + " is not divisible by dp*micro_batch=" +
                s(l.dp * l.micro_batch));
  }
  if (const std::string cp = ContextParallelProblem(l, m.seq_len); !cp.empty()) return fail(cp);
  if (l.sequence_parallel && m.seq_len % (l.tp * l.cp) != 0) {
    const std::string who = l.cp == 1 ? "tp=" + s(l.tp) : "tp*cp = " + s(l.tp) + "*" + s(l.cp) + " = " + s(l.tp * l.cp);
    return fail("sequence_parallel needs " + who + " to divide seq_len=" + s(m.seq_len));
  }
  if (Status st = ValidateSchedule(l.schedule, l.pp, l.num_microbatches(), l.virtual_stages); !st) {
    return fail(st.error().message);
  }
  return ValidateExpertLayout(l, m);
}

Status ValidateExpertLayout(const Layout& l, const ModelSpec& m) {
  auto fail = [](const std::string& what) { return Status(BadInput("plan: " + what)); };
  auto s = [](int64_t v) { return std::to_string(v); };
  if (l.ep <= 0 || l.etp < 0) return fail("ep must be > 0 and etp >= 1 (or absent: tp)");
  if (!m.moe()) {
    if (l.ep != 1 || l.etp != 0) {
      return fail("ep=" + s(l.ep) + (l.etp != 0 ? ", etp=" + s(l.etp) : "") +
                  " needs a mixture-of-experts model (" + m.name + " has no experts)");
    }
    return Status::Ok();
  }
  const int64_t etp = l.expert_tp(), stage_ranks = l.tp * l.cp * l.dp;  // as Layout::expert_dp
  if (m.experts % l.ep != 0) return fail("ep=" + s(l.ep) + " does not divide experts=" + s(m.experts));
  if (m.moe_ffn_hidden % etp != 0) {
    return fail("etp=" + s(etp) + " does not divide moe_ffn_hidden=" + s(m.moe_ffn_hidden));
  }
  if (stage_ranks % (l.ep * etp) != 0) {
    return fail("ep*etp = " + s(l.ep) + "*" + s(etp) + " does not divide a pipeline stage's tp*cp*dp = " +
                s(stage_ranks) + " ranks (expert groups are carved from tp x cp x dp within a stage, as Megatron-Core's "
                "parallel folding)");
  }
  if (l.tp > 1 && !l.sequence_parallel) {
    return fail("an MoE model with tp=" + s(l.tp) + " needs sequence_parallel (Megatron-Core requires it: the "
                "dispatcher routes each rank's sequence shard)");
  }
  return Status::Ok();
}

Result<Plan> PlanFromJson(const Json& j, const std::string& file) {
  return CatchJsonErrors([&]() -> Result<Plan> {
    ObjectReader r(j, file, "");
    r.Header("plan", kPlanVersion);
    Plan p;
    PX_ASSIGN(p.model, ModelFromJson(r.Raw("model"), file, "/model"));
    if (r.Has("training")) {
      PX_ASSIGN(p.training, TrainingFromJson(r.Raw("training"), file, "/training"));
    }
    PX_ASSIGN(p.cluster, ClusterFromJson(r.Raw("cluster"), file, "/cluster"));
    PX_ASSIGN(p.layout, LayoutFromJson(r.Raw("layout"), file, "/layout"));
    if (p.layout.global_batch == 0) p.layout.global_batch = p.training.global_batch;
    if (r.Has("implementation")) {
      const Json& impl = r.Raw("implementation");
      if (impl.is_string()) {
        auto pr = ImplementationPreset(impl.get<std::string>());
        if (!pr) r.Fail("implementation", pr.error().message.substr(pr.error().message.find(": ") + 2));
        p.implementation = *pr;
      } else {
        PX_ASSIGN(p.implementation, ImplementationFromJson(impl, file, "/implementation"));
      }
    }
    if (r.Has("prediction")) {
      const Json& pred = r.Raw("prediction");
      if (!pred.is_object()) r.Fail("prediction", "expected an object");
      p.prediction = pred;
    }
    r.Finish();
    if (Status s = ValidateLayout(p.layout, p.model, p.cluster); !s) {
      return BadInput(file + ": /layout: " + s.error().message.substr(6));
    }
    if (const std::string cp = CpCommTypeProblem(p.layout, p.model, p.implementation); !cp.empty()) {
      return BadInput(file + ": /layout: " + cp);
    }
    return p;
  });
}

Json PlanToJson(const Plan& p) {
  Json j{{"kind", "plan"},
         {"version", kPlanVersion},
         {"model", ModelToJson(p.model)},
         {"training", TrainingToJson(p.training)},
         {"cluster", ClusterToJson(p.cluster)},
         {"layout", LayoutToJson(p.layout)}};
  // A preset by name; anything else (a profile read from a file) in full.
  auto preset = ImplementationPreset(p.implementation.name);
  if (preset && ImplementationToJson(*preset) == ImplementationToJson(p.implementation)) {
    j["implementation"] = p.implementation.name;
  } else {
    j["implementation"] = ImplementationToJson(p.implementation);
  }
  if (p.prediction) j["prediction"] = *p.prediction;
  return j;
}

Result<Plan> LoadPlanFile(const std::string& path) {
  PX_ASSIGN(const Json j, LoadJsonFile(path));
  return PlanFromJson(j, path);
}

Status SavePlanFile(const std::string& path, const Plan& p) { return WriteJsonAtomic(path, PlanToJson(p)); }

}  // namespace parallax
