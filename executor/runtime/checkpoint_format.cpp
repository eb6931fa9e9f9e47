#include "executor/runtime/checkpoint_format.h"

#include <charconv>
#include <limits>

#include "model/json_io.h"

namespace parallax::executor {
namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

int64_t RequiredNonNegative(ObjectReader& r, std::string_view key) {
  if (!r.Has(key)) r.Fail(key, "missing required field");
  return r.NonNegativeInt(key, 0);
}

int64_t AnyInt(ObjectReader& r, std::string_view key) {
  const Json& v = r.Raw(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxBytes))) {
    r.Fail(key, "expected a 64-bit integer, got " + v.dump());
  }
  return v.get<int64_t>();
}

// a * b + c without overflow; kMaxBytes when it would overflow.
int64_t MulAdd(int64_t a, int64_t b, int64_t c) {
  if (a != 0 && b > (kMaxBytes - c) / a) return kMaxBytes;
  return a * b + c;
}

CheckpointHeader ReadHeader(const Json& j, const std::string& origin) {
  ObjectReader r(j, origin, "");
  CheckpointHeader h;
  h.version = RequiredNonNegative(r, "version");
  if (h.version != kCheckpointVersion) {
    r.Fail("version", "unsupported checkpoint version " + std::to_string(h.version) + " (this build reads " +
                          std::to_string(kCheckpointVersion) + ")");
  }
  h.step = RequiredNonNegative(r, "step");
  h.samples_consumed = RequiredNonNegative(r, "samples_consumed");
  h.rank = RequiredNonNegative(r, "rank");
  h.world_size = r.PositiveInt("world_size");
  if (h.rank >= h.world_size) {
    r.Fail("rank", "rank " + std::to_string(h.rank) + " outside a world of " + std::to_string(h.world_size));
  }
  h.layout = r.String("layout");
  h.model = r.String("model");
  h.seed = AnyInt(r, "seed");
  if (!r.Has("precision")) r.Fail("precision", "missing required field");
  const auto precision = PrecisionFromString(r.String("precision"));
  if (!precision) r.Fail("precision", precision.error().message);
  h.precision = *precision;
  h.loss_scale = r.PositiveNumber("loss_scale");
  h.loss_scale_clean_steps = RequiredNonNegative(r, "loss_scale_clean_steps");
  const Json& groups = r.Raw("groups");
  if (!groups.is_array()) r.Fail("groups", "expected an array");
  for (size_t i = 0; i < groups.size(); ++i) {
    ObjectReader g(groups[i], origin, "/groups/" + std::to_string(i));
    CheckpointGroupHeader gh;
    gh.name = g.String("name");
    gh.params = RequiredNonNegative(g, "params");
    gh.main = RequiredNonNegative(g, "main");
    gh.opt = RequiredNonNegative(g, "opt");
    const int64_t want_main = h.precision == Precision::kFp32 ? 0 : gh.opt;
    if (gh.main != want_main) {
      g.Fail("main", "a " + std::string(ToString(h.precision)) + " checkpoint keeps " + std::to_string(want_main) +
                         " main-copy elements here (got " + std::to_string(gh.main) + ")");
    }
    g.Finish();
    h.groups.push_back(std::move(gh));
  }
  r.Finish();
  return h;
}

}  // namespace

std::string EncodeCheckpointHeader(const CheckpointHeader& h) {
  Json header{{"version", h.version},
              {"step", h.step},
              {"samples_consumed", h.samples_consumed},
              {"rank", h.rank},
              {"world_size", h.world_size},
              {"layout", h.layout},
              {"model", h.model},
              {"seed", h.seed},
              {"precision", ToString(h.precision)},
              {"loss_scale", h.loss_scale},
              {"loss_scale_clean_steps", h.loss_scale_clean_steps}};
  Json gs = Json::array();
  for (const CheckpointGroupHeader& g : h.groups) {
    gs.push_back({{"name", g.name}, {"params", g.params}, {"main", g.main}, {"opt", g.opt}});
  }
  header["groups"] = std::move(gs);
  std::string out(kCheckpointMagic);
  out += header.dump();
  out += '\n';
  return out;
}

int64_t CheckpointPayloadBytes(const CheckpointHeader& h) {
  int64_t total = 0;
  for (const CheckpointGroupHeader& g : h.groups) {
    total = MulAdd(g.params, BytesPerElement(h.precision), total);
    total = MulAdd(g.main, 4, total);
    total = MulAdd(g.opt, 8, total);  // adam_m and adam_v, fp32 each
  }
  return total;
}

Result<CheckpointFile> ParseCheckpoint(std::string_view bytes, const std::string& origin) {
  if (bytes.substr(0, kCheckpointMagic.size()) != kCheckpointMagic) {
    return BadInput(origin + ": not a parallax checkpoint (no PLXCKPT1 line)");
  }
  const size_t eol = bytes.find('\n', kCheckpointMagic.size());
  if (eol == std::string_view::npos) return BadInput(origin + ": truncated in the header line");
  PX_ASSIGN(const Json json,
            ParseJsonText(std::string(bytes.substr(kCheckpointMagic.size(), eol - kCheckpointMagic.size())), origin));
  return CatchJsonErrors([&]() -> Result<CheckpointFile> {
    CheckpointFile f;
    f.header = ReadHeader(json, origin);
    f.payload_offset = eol + 1;
    const uint64_t have = bytes.size() - f.payload_offset;
    const auto want = static_cast<uint64_t>(CheckpointPayloadBytes(f.header));
    if (have != want) {
      return BadInput(origin + ": payload: " + std::to_string(have) + " bytes where the header promises " +
                      std::to_string(want) + (have < want ? " (truncated)" : " (trailing bytes)"));
    }
    return f;
  });
}

Result<int64_t> ParseLatestPointer(std::string_view text, const std::string& origin) {
  std::string_view t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.remove_suffix(1);
  constexpr std::string_view kPrefix = "step_";
  if (t.substr(0, kPrefix.size()) != kPrefix || t.size() == kPrefix.size()) {
    return BadInput(origin + ": expected \"step_<k>\", got \"" + std::string(t.substr(0, 64)) + "\"");
  }
  int64_t step = -1;
  const char* first = t.data() + kPrefix.size();
  const char* last = t.data() + t.size();
  auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last || step < 0) {
    return BadInput(origin + ": expected \"step_<k>\" with k a non-negative integer, got \"" +
                    std::string(t.substr(0, 64)) + "\"");
  }
  return step;
}

}  // namespace parallax::executor
