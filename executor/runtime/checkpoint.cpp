#include "executor/runtime/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "executor/runtime/collective_status.h"
#include "model/json_io.h"

namespace parallax::executor {
namespace {

constexpr const char* kMagic = "PLXCKPT1\n";

std::string RankFile(const std::string& dir, int64_t step, int64_t rank) {
  return dir + "/step_" + std::to_string(step) + "/rank_" + std::to_string(rank) + ".bin";
}

void Append(Backend& be, std::string& out, const Tensor& t) {
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(t.bytes()));
  be.CopyBytesToHost(out.data() + at, t.ptr(), t.numel());
}

Status WriteRankFile(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir,
                     int64_t step) {
  std::error_code ec;
  std::filesystem::create_directories(dir + "/step_" + std::to_string(step), ec);
  if (ec) return IoError(dir + ": cannot create step_" + std::to_string(step) + ": " + ec.message());
  Json header{{"version", 1},
              {"step", step},
              {"samples_consumed", step * ctx.layout.global_batch},
              {"rank", ctx.groups->rank},
              {"world_size", ctx.layout.world_size()},
              {"layout", LayoutToString(ctx.layout)},
              {"model", ctx.model.name},
              {"seed", ctx.training.seed},
              {"precision", ToString(ctx.training.precision)},
              {"loss_scale", ctx.scaler.scale},
              {"loss_scale_clean_steps", ctx.scaler.clean_steps}};
  Json gs = Json::array();
  for (const ParamGroup* g : groups) {
    gs.push_back({{"name", g->name()},
                  {"params", g->params_storage_size()},
                  {"main", g->main_copy().numel()},
                  {"opt", g->opt_size()}});
  }
  header["groups"] = gs;
  std::string out = kMagic;
  out += header.dump() + "\n";
  for (ParamGroup* g : groups) {
    Append(*ctx.backend, out, g->values());
    Append(*ctx.backend, out, g->main_copy());
    Append(*ctx.backend, out, g->adam_m());
    Append(*ctx.backend, out, g->adam_v());
  }
  return WriteFileAtomic(RankFile(dir, step, ctx.groups->rank), out);
}

Result<int64_t> ReadRankFile(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir) {
  std::ifstream latest(dir + "/latest");
  std::string name;
  if (!latest || !(latest >> name) || name.rfind("step_", 0) != 0) {
    return IoError(dir + "/latest: missing or unreadable (no checkpoint to resume from)");
  }
  const int64_t step = std::stoll(name.substr(5));
  const std::string path = RankFile(dir, step, ctx.groups->rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t magic = std::strlen(kMagic);
  const size_t eol = bytes.find('\n', magic);
  if (bytes.compare(0, magic, kMagic) != 0 || eol == std::string::npos) return BadInput(path + ": not a parallax checkpoint");
  auto header = ParseJsonText(bytes.substr(magic, eol - magic), path);
  if (!header) return header.error();
  const Json& h = *header;
  if (h.value("precision", "fp32") != std::string(ToString(ctx.training.precision))) {
    return BadInput(path + ": /precision: written in " + h.value("precision", "fp32") + ", cannot resume in " +
                    ToString(ctx.training.precision));
  }
  if (h.value("layout", "") != LayoutToString(ctx.layout) || h.value("world_size", 0) != ctx.layout.world_size()) {
    return BadInput(path + ": written by layout \"" + h.value("layout", "?") + "\", cannot resume under \"" +
                    LayoutToString(ctx.layout) + "\"");
  }
  if (h.value("step", -1) != step || !h.contains("groups") || h["groups"].size() != groups.size()) {
    return BadInput(path + ": header does not match this model");
  }
  size_t pos = eol + 1;
  auto take = [&](Tensor& dst) {
    const size_t b = static_cast<size_t>(dst.bytes());
    if (pos + b > bytes.size()) return false;
    ctx.backend->CopyBytesToDevice(dst.ptr(), bytes.data() + pos, dst.numel());
    pos += b;
    return true;
  };
  for (size_t i = 0; i < groups.size(); ++i) {
    ParamGroup* g = groups[i];
    const Json& gh = h["groups"][i];
    if (gh.value("name", "") != g->name() || gh.value("params", -1) != g->params_storage_size() ||
        gh.value("main", int64_t{0}) != g->main_copy().numel() || gh.value("opt", -1) != g->opt_size()) {
      return BadInput(path + ": /groups/" + std::to_string(i) + ": does not match group " + g->name());
    }
    if (!take(g->values()) || !take(g->main_copy()) || !take(g->adam_m()) || !take(g->adam_v())) {
      return BadInput(path + ": truncated");
    }
  }
  if (pos != bytes.size()) return BadInput(path + ": trailing bytes");
  ctx.scaler.scale = h.value("loss_scale", ctx.scaler.scale);
  ctx.scaler.clean_steps = h.value("loss_scale_clean_steps", int64_t{0});
  return step;
}

}  // namespace

Status PrepareCheckpointDir(Communicator& world, const std::string& dir) {
  Status local;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    local = IoError("--checkpoint-dir " + dir + ": cannot create: " + ec.message());
  } else {
    const std::string probe = dir + "/.probe_rank_" + std::to_string(world.rank());
    if (Status s = WriteFileAtomic(probe, "ok"); !s) {
      local = IoError("--checkpoint-dir " + dir + ": not writable: " + s.error().message);
    } else {
      std::filesystem::remove(probe, ec);
    }
  }
  return AgreeOnStatus(world, local);
}

Status SaveCheckpoint(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir,
                      int64_t step) {
  Communicator& world = *ctx.groups->world;
  if (Status s = AgreeOnStatus(world, WriteRankFile(ctx, groups, dir, step)); !s) return s;
  Status latest;
  if (world.rank() == 0) latest = WriteFileAtomic(dir + "/latest", "step_" + std::to_string(step) + "\n");
  return AgreeOnStatus(world, latest);
}

Result<int64_t> LoadCheckpoint(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir) {
  auto step = ReadRankFile(ctx, groups, dir);
  Status local = step ? Status() : Status(step.error());
  if (Status s = AgreeOnStatus(*ctx.groups->world, local); !s) return s.error();
  return step;
}

}  // namespace parallax::executor
