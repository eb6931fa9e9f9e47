#include "model/sync_mode.h"

#include <charconv>
#include <sstream>

namespace parallax {
namespace {

Result<int64_t> ParseCount(const std::string& text, int64_t min, const std::string& what) {
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size() || out < min) {
    return BadInput(what + " must be an integer >= " + std::to_string(min) + ", got \"" + text + "\"");
  }
  return out;
}

Result<double> ParseFraction(const std::string& text, const std::string& what) {
  double out = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size() || !(out > 0 && out <= 1)) {
    return BadInput(what + " must be a number in (0, 1], got \"" + text + "\"");
  }
  return out;
}

// "name:arg" -> {name, arg}; arg empty when there is no colon.
std::pair<std::string, std::string> SplitArg(const std::string& v) {
  const auto colon = v.find(':');
  if (colon == std::string::npos) return {v, ""};
  return {v.substr(0, colon), v.substr(colon + 1)};
}

Status ParseSync(const std::string& v, SyncMode* m) {
  const auto [name, arg] = SplitArg(v);
  auto no_arg = [&, &name = name, &arg = arg](SyncKind k) -> Status {
    if (!arg.empty()) return BadInput("sync=" + name + " takes no argument");
    m->kind = k;
    return {};
  };
  if (name == "allreduce") return no_arg(SyncKind::kAllReduce);
  if (name == "ps") return no_arg(SyncKind::kPs);
  if (name == "async") return no_arg(SyncKind::kAsync);
  if (name == "ssp") {
    PX_ASSIGN(m->staleness, ParseCount(arg, 1, "ssp:S (the staleness bound)"));
    m->kind = SyncKind::kSsp;
    return {};
  }
  if (name == "backup") {
    PX_ASSIGN(m->backup_workers, ParseCount(arg, 1, "backup:B (the gradients dropped per step)"));
    m->kind = SyncKind::kBackup;
    return {};
  }
  if (name == "local") {
    PX_ASSIGN(m->local_steps, ParseCount(arg, 1, "local:H (steps between averages)"));
    m->kind = SyncKind::kLocal;
    return {};
  }
  return BadInput("unknown sync \"" + v + "\" (expected allreduce, ps, async, ssp:S, backup:B or local:H)");
}

Status ParseServers(const std::string& v, SyncMode* m) {
  const auto [name, arg] = SplitArg(v);
  if (arg.empty()) {
    PX_ASSIGN(m->servers, ParseCount(name, 0, "servers"));
    m->colocated = false;
    return {};
  }
  if (name != "colocated" && name != "dedicated") {
    return BadInput("expected N, dedicated:N or colocated:N, got \"" + v + "\"");
  }
  PX_ASSIGN(m->servers, ParseCount(arg, 1, "servers=" + name + ":N"));
  m->colocated = name == "colocated";
  return {};
}

Status ParseCompression(const std::string& v, SyncMode* m) {
  const auto [name, arg] = SplitArg(v);
  if ((name == "none" || name == "bf16" || name == "int8") && !arg.empty()) {
    return BadInput("compression=" + name + " takes no argument");
  }
  if (name == "none") m->compression = CompressionKind::kNone;
  else if (name == "bf16") m->compression = CompressionKind::kBf16;
  else if (name == "int8") m->compression = CompressionKind::kInt8;
  else if (name == "topk") {
    PX_ASSIGN(m->topk_fraction, ParseFraction(arg, "topk:F (the fraction kept)"));
    m->compression = CompressionKind::kTopK;
  } else if (name == "powersgd") {
    PX_ASSIGN(m->powersgd_rank, ParseCount(arg, 1, "powersgd:R (the rank)"));
    m->compression = CompressionKind::kPowerSgd;
  } else {
    return BadInput("unknown compression \"" + v + "\" (expected none, bf16, int8, topk:F or powersgd:R)");
  }
  return {};
}

Status ParseData(const std::string& v, SyncMode* m) {
  if (v == "iid") {
    m->data = FederatedRule::kIid;
    return {};
  }
  const auto [name, arg] = SplitArg(v);
  if (name == "federated") {
    for (FederatedRule r : {FederatedRule::kLabelSkew, FederatedRule::kContiguous}) {
      if (arg == ToString(r)) {
        m->data = r;
        return {};
      }
    }
  }
  return BadInput("unknown data \"" + v + "\" (expected iid, federated:label_skew or federated:contiguous)");
}

Status ApplyKey(const std::string& key, const std::string& v, SyncMode* m) {
  if (key == "sync") return ParseSync(v, m);
  if (key == "servers") return ParseServers(v, m);
  if (key == "compression") return ParseCompression(v, m);
  return ParseData(v, m);
}

bool IsSyncKey(const std::string& key) {
  return key == "sync" || key == "servers" || key == "compression" || key == "data";
}

std::string Number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

bool SyncMode::is_default() const {
  return kind == SyncKind::kAllReduce && compression == CompressionKind::kNone && data == FederatedRule::kIid &&
         servers == 0;
}

const char* ToString(SyncKind k) {
  switch (k) {
    case SyncKind::kAllReduce: return "allreduce";
    case SyncKind::kPs: return "ps";
    case SyncKind::kAsync: return "async";
    case SyncKind::kSsp: return "ssp";
    case SyncKind::kBackup: return "backup";
    case SyncKind::kLocal: return "local";
  }
  return "?";
}

const char* ToString(CompressionKind k) {
  switch (k) {
    case CompressionKind::kNone: return "none";
    case CompressionKind::kBf16: return "bf16";
    case CompressionKind::kInt8: return "int8";
    case CompressionKind::kTopK: return "topk";
    case CompressionKind::kPowerSgd: return "powersgd";
  }
  return "?";
}

const char* ToString(FederatedRule r) {
  switch (r) {
    case FederatedRule::kIid: return "iid";
    case FederatedRule::kLabelSkew: return "label_skew";
    case FederatedRule::kContiguous: return "contiguous";
  }
  return "?";
}

std::string SyncToString(const SyncMode& m) {
  switch (m.kind) {
    case SyncKind::kSsp: return "ssp:" + std::to_string(m.staleness);
    case SyncKind::kBackup: return "backup:" + std::to_string(m.backup_workers);
    case SyncKind::kLocal: return "local:" + std::to_string(m.local_steps);
    default: return ToString(m.kind);
  }
}

std::string ServersToString(const SyncMode& m) {
  return (m.colocated ? "colocated:" : "") + std::to_string(m.servers);
}

std::string CompressionToString(const SyncMode& m) {
  switch (m.compression) {
    case CompressionKind::kTopK: return "topk:" + Number(m.topk_fraction);
    case CompressionKind::kPowerSgd: return "powersgd:" + std::to_string(m.powersgd_rank);
    default: return ToString(m.compression);
  }
}

std::string DataToString(const SyncMode& m) {
  return m.data == FederatedRule::kIid ? "iid" : std::string("federated:") + ToString(m.data);
}

std::optional<Status> ParseSyncKey(const std::string& key, const std::string& value, SyncMode* m) {
  if (!IsSyncKey(key)) return std::nullopt;
  if (Status st = ApplyKey(key, value, m); !st) return Status(BadInput("plan: /" + key + ": " + st.error().message));
  return Status::Ok();
}

std::string SyncModeInlineSuffix(const SyncMode& m) {
  std::string out;
  if (m.kind != SyncKind::kAllReduce) out += ",sync=" + SyncToString(m);
  if (m.servers > 0) out += ",servers=" + ServersToString(m);
  if (m.compression != CompressionKind::kNone) out += ",compression=" + CompressionToString(m);
  if (m.data != FederatedRule::kIid) out += ",data=" + DataToString(m);
  return out;
}

SyncMode SyncModeFromJson(ObjectReader& r) {
  SyncMode m;
  for (const char* key : {"sync", "servers", "compression", "data"}) {
    if (!r.Has(key)) continue;
    const Json& v = r.Raw(key);
    std::string text;
    if (v.is_string()) text = v.get<std::string>();
    else if (v.is_number_integer() && std::string(key) == "servers") text = std::to_string(v.get<int64_t>());
    else r.Fail(key, "expected a string");
    if (Status st = ApplyKey(key, text, &m); !st) r.Fail(key, st.error().message);
  }
  return m;
}

void SyncModeToJson(const SyncMode& m, Json* layout) {
  if (m.kind != SyncKind::kAllReduce) (*layout)["sync"] = SyncToString(m);
  if (m.servers > 0) (*layout)["servers"] = ServersToString(m);
  if (m.compression != CompressionKind::kNone) (*layout)["compression"] = CompressionToString(m);
  if (m.data != FederatedRule::kIid) (*layout)["data"] = DataToString(m);
}

Status ValidateSyncMode(const SyncMode& m, int64_t dp, int64_t tp, int64_t pp, int64_t zero_stage) {
  auto fail = [](const std::string& what) { return Status(BadInput("plan: " + what)); };
  const std::string sync = "sync=" + SyncToString(m);
  auto s = [](int64_t v) { return std::to_string(v); };
  if (m.uses_servers() && m.servers < 1) {
    return fail(sync + " needs parameter servers (servers=N for N dedicated ranks, or servers=colocated:N)");
  }
  if (!m.uses_servers() && m.servers > 0) return fail("servers=" + ServersToString(m) + " needs sync=ps, async or ssp:S");
  if (m.colocated && m.servers > dp) {
    return fail("servers=colocated:" + s(m.servers) + " needs a worker per server (dp=" + s(dp) + ")");
  }
  if (m.kind == SyncKind::kBackup && m.backup_workers >= dp) {
    return fail(sync + " drops " + s(m.backup_workers) + " of dp=" + s(dp) + " gradients: it needs B < dp");
  }
  if (m.kind != SyncKind::kAllReduce) {
    if (tp > 1 || pp > 1) {
      return fail(sync + " keeps one whole model per worker: with tp=" + s(tp) + ", pp=" + s(pp) +
                  " a replica's ranks would each talk to the servers or average on their own schedule (use "
                  "sync=allreduce with tp/pp)");
    }
    if (zero_stage > 0) {
      return fail(sync + " replaces the data-parallel reduction that ZeRO shards over (use zero=0)");
    }
  }
  if (m.compression != CompressionKind::kNone) {
    const std::string c = "compression=" + CompressionToString(m);
    if (m.kind != SyncKind::kAllReduce) {
      return fail(c + " compresses the gradient all-reduce: it needs sync=allreduce (got " + sync + ")");
    }
    if (zero_stage > 0) return fail(c + " compresses the all-reduce; ZeRO-" + s(zero_stage) + " reduce-scatters (use zero=0)");
  }
  if (m.data != FederatedRule::kIid && m.kind != SyncKind::kLocal) {
    return fail("data=" + DataToString(m) + " keeps each worker's data on it: it needs sync=local:H (got " + sync + ")");
  }
  return Status::Ok();
}

}  // namespace parallax
