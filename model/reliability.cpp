#include "model/reliability.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace parallax {
namespace {

std::vector<Slowdown> ReadSlowdowns(ObjectReader& r, const char* key, const char* index_key) {
  std::vector<Slowdown> out;
  if (!r.Has(key)) return out;
  const Json& a = r.Raw(key);
  if (!a.is_array()) r.Fail(key, "expected an array of {" + std::string(index_key) + ", slowdown}");
  for (size_t i = 0; i < a.size(); ++i) {
    ObjectReader e(a[i], r.file(), r.PathOf(key) + "/" + std::to_string(i));
    Slowdown s;
    if (!e.Has(index_key)) e.Fail(index_key, "missing required field");
    s.index = e.NonNegativeInt(index_key, 0);
    s.factor = e.PositiveNumber("slowdown");
    if (s.factor < 1) e.Fail("slowdown", "must be >= 1 (a factor on the step's compute time)");
    e.Finish();
    out.push_back(s);
  }
  return out;
}

Json WriteSlowdowns(const std::vector<Slowdown>& v, const char* index_key) {
  Json a = Json::array();
  for (const Slowdown& s : v) a.push_back(Json{{index_key, s.index}, {"slowdown", s.factor}});
  return a;
}

}  // namespace

double StragglerSpec::FactorOf(int64_t rank, int64_t gpus_per_node) const {
  double f = 1;
  for (const Slowdown& s : ranks) {
    if (s.index == rank) f *= s.factor;
  }
  for (const Slowdown& s : nodes) {
    if (gpus_per_node > 0 && s.index == rank / gpus_per_node) f *= s.factor;
  }
  return f;
}

double FailureSpec::JobMtbfSeconds(int64_t gpus, int64_t gpus_per_node) const {
  if (mtbf_hours <= 0) return INFINITY;
  const int64_t units = scope == FailureScope::kGpu ? gpus : (gpus + gpus_per_node - 1) / gpus_per_node;
  return mtbf_hours * 3600.0 / static_cast<double>(std::max<int64_t>(units, 1));
}

StragglerSpec StragglersFromJson(ObjectReader r) {
  StragglerSpec s;
  s.ranks = ReadSlowdowns(r, "ranks", "rank");
  s.nodes = ReadSlowdowns(r, "nodes", "node");
  if (r.Has("jitter")) {
    ObjectReader j = r.Object("jitter");
    j.Choice("distribution", {"lognormal"}, "lognormal");
    s.jitter_sigma = j.NonNegativeNumber("sigma");
    j.Finish();
  }
  r.Finish();
  return s;
}

Json StragglersToJson(const StragglerSpec& s) {
  Json j = Json::object();
  if (!s.ranks.empty()) j["ranks"] = WriteSlowdowns(s.ranks, "rank");
  if (!s.nodes.empty()) j["nodes"] = WriteSlowdowns(s.nodes, "node");
  if (s.jitter_sigma > 0) j["jitter"] = Json{{"distribution", "lognormal"}, {"sigma", s.jitter_sigma}};
  return j;
}

FailureSpec FailuresFromJson(ObjectReader r) {
  FailureSpec f;
  f.mtbf_hours = r.PositiveNumber("mtbf_hours");
  f.scope = r.Choice("per", {"gpu", "node"}, "gpu") == "gpu" ? FailureScope::kGpu : FailureScope::kNode;
  f.checkpoint_write_s = r.NonNegativeNumber("checkpoint_write_s", 0);
  f.checkpoint_restore_s = r.NonNegativeNumber("checkpoint_restore_s", 0);
  r.Finish();
  return f;
}

Json FailuresToJson(const FailureSpec& f) {
  return Json{{"mtbf_hours", f.mtbf_hours},
              {"per", f.scope == FailureScope::kGpu ? "gpu" : "node"},
              {"checkpoint_write_s", f.checkpoint_write_s},
              {"checkpoint_restore_s", f.checkpoint_restore_s}};
}

}  // namespace parallax
