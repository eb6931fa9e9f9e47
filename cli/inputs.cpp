#include "cli/inputs.h"

#include <charconv>
#include <cstdio>

#include "cli/command.h"
#include "model/load.h"

namespace parallax::cli {
namespace {

Result<std::optional<ClusterSpec>> OptionalCluster(const std::string& name_or_path, int64_t nodes) {
  if (name_or_path.empty()) return std::optional<ClusterSpec>{};
  auto c = ResolveCluster(name_or_path, nodes);
  if (!c) return c.error();
  return std::optional<ClusterSpec>{std::move(*c)};
}

Result<std::optional<PrecisionChoice>> GivenPrecision(const std::string& flag) {
  if (flag.empty()) return std::optional<PrecisionChoice>{};
  auto p = PrecisionFromString(flag);
  if (!p) return BadInput("--precision: " + p.error().message);
  return std::optional<PrecisionChoice>{PrecisionChoice{*p, "--precision"}};
}

//! The integer CLI11 is about to convert; nullopt when it is none (CLI11's conversion says so).
std::optional<int64_t> IntegerOf(const std::string& s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<std::optional<ModelSpec>> OptionalModel(const std::string& name_or_path) {
  if (name_or_path.empty()) return std::optional<ModelSpec>{};
  auto m = ResolveModel(name_or_path);
  if (!m) return m.error();
  return std::optional<ModelSpec>{std::move(*m)};
}

PrecisionChoice DevicePrecision(const ClusterSpec& cluster) {
  if (cluster.device.is_gpu()) return {Precision::kBf16, "default for a GPU device"};
  return {Precision::kFp32, "default for a CPU device"};
}

Result<std::optional<CostDb>> LoadCostDbFor(const std::string& path, const ClusterSpec& cluster, bool warn) {
  if (path.empty()) return std::optional<CostDb>{};
  auto db = LoadCostDbFile(path);
  if (!db) return db.error();
  if (db->device != cluster.device.name) {
    return BadInput(path + ": /device: measured on \"" + db->device + "\" but the cluster's device is \"" +
                    cluster.device.name + "\"");
  }
  if (warn) WarnIfOtherCatalogue(*db, path);
  return std::optional<CostDb>{std::move(*db)};
}

Result<SearchInputs> ResolveSearchInputs(const InputArgs& args) {
  SearchInputs in;
  auto model = ResolveModel(args.model);
  if (!model) return model.error();
  in.model = std::move(*model);
  if (args.seq_len > 0) in.model.seq_len = args.seq_len;
  auto cluster = ResolveCluster(args.cluster, args.nodes);
  if (!cluster) return cluster.error();
  in.cluster = std::move(*cluster);
  if (!args.backend.empty()) {
    if (Status st = CheckBackendDevice(args.backend, in.cluster); !st) return st.error();
  }
  auto db = LoadCostDbFor(args.costdb, in.cluster, args.warn);
  if (!db) return db.error();
  in.db = std::move(*db);
  auto given = GivenPrecision(args.precision);
  if (!given) return given.error();
  in.precision = given->value_or(DevicePrecision(in.cluster));
  in.training.precision = in.precision.precision;
  if (Status st = CheckPrecisionOnDevice(in.training.precision, in.cluster.device); !st) return st.error();
  in.training.global_batch = args.global_batch;
  auto impl = ResolveImplementation(args.implementation);
  if (!impl) return impl.error();
  in.implementation = std::move(*impl);
  if (Status st = CheckFp8RecipeOnDevice(in.training.precision, in.implementation, in.cluster.device); !st) {
    return st.error();
  }
  return in;
}

Result<PlanInputs> ResolvePlanInputs(const InputArgs& args) {
  auto model = OptionalModel(args.model);
  if (!model) return model.error();
  auto cluster = OptionalCluster(args.cluster, args.nodes);
  if (!cluster) return cluster.error();
  auto given = GivenPrecision(args.precision);
  if (!given) return given.error();
  const bool inline_plan = IsInlinePlan(args.plan);
  TrainingSpec training;
  training.global_batch = args.global_batch;
  PrecisionChoice precision;
  if (*given) {
    precision = **given;
  } else if (inline_plan && *cluster) {
    precision = DevicePrecision(**cluster);
  }
  training.precision = precision.precision;
  auto plan = ResolvePlan(args.plan, *model ? &**model : nullptr, *cluster ? &**cluster : nullptr, training);
  if (!plan) return plan.error();
  PlanInputs in;
  in.plan = std::move(*plan);
  if (args.seq_len > 0) {
    in.plan.model.seq_len = args.seq_len;
    in.plan.training.seq_len = 0;  // the model's, now N
  }
  if (*given) {
    in.plan.training.precision = precision.precision;
  } else if (!inline_plan) {
    precision = {in.plan.training.precision, "the plan's"};
  }
  in.precision = precision;
  if (Status st = CheckPrecisionOnDevice(in.plan.training.precision, in.plan.cluster.device); !st) return st.error();
  if (!args.implementation.empty()) {
    auto impl = ResolveImplementation(args.implementation);
    if (!impl) return impl.error();
    in.plan.implementation = std::move(*impl);
  }
  if (Status st = CheckFp8RecipeOnDevice(in.plan.training.precision, in.plan.implementation, in.plan.cluster.device);
      !st) {
    return st.error();
  }
  auto db = LoadCostDbFor(args.costdb, in.plan.cluster, args.warn);
  if (!db) return db.error();
  in.db = std::move(*db);
  return in;
}

void NotePrecision(const PrecisionChoice& choice, bool json) {
  if (json || choice.given()) return;
  std::fprintf(stderr, "precision: %s (%s; --precision to change)\n", ToString(choice.precision),
               choice.source.c_str());
}

void AddPrecisionJson(Json& j, const PrecisionChoice& choice) {
  j["precision"] = ToString(choice.precision);
  j["precision_source"] = choice.source;
}

void AddSeqLenOption(CLI::App* cmd, InputArgs& in) {
  cmd->add_option("--seq-len", in.seq_len, "Tokens per sequence (default: the model's seq_len, which this overrides)")
      ->check(AtLeast(1));
}

CLI::Validator PrecisionCheck() {
  return {[](std::string& s) {
            auto p = PrecisionFromString(s);
            return p ? std::string() : p.error().message;
          },
          "bf16|fp16|fp32|fp8", "PRECISION"};
}

CLI::Validator AtLeast(int64_t min) {
  return {[min](std::string& s) {
            const auto v = IntegerOf(s);
            if (!v || *v >= min) return std::string();
            return "must be ≥ " + std::to_string(min) + " (got " + s + ")";
          },
          "≥ " + std::to_string(min), "AT_LEAST"};
}

CLI::Validator Within(int64_t min, int64_t max) {
  return {[min, max](std::string& s) {
            const auto v = IntegerOf(s);
            if (!v || (*v >= min && *v <= max)) return std::string();
            return "must be from " + std::to_string(min) + " to " + std::to_string(max) + " (got " + s + ")";
          },
          std::to_string(min) + ".." + std::to_string(max), "WITHIN"};
}

}  // namespace parallax::cli
