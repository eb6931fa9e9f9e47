#include "executor/runtime/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "executor/runtime/checkpoint_format.h"
#include "executor/runtime/collective_status.h"
#include "model/json_io.h"

namespace parallax::executor {
namespace {

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
  CheckpointHeader h;
  h.step = step;
  h.samples_consumed = step * ctx.layout.global_batch;
  h.rank = ctx.groups->rank;
  h.world_size = ctx.layout.world_size();
  h.layout = LayoutToString(ctx.layout);
  h.model = ctx.model.name;
  h.seed = ctx.training.seed;
  h.precision = ctx.training.precision;
  h.loss_scale = ctx.scaler.scale;
  h.loss_scale_clean_steps = ctx.scaler.clean_steps;
  for (const ParamGroup* g : groups) {
    h.groups.push_back({g->name(), g->params_storage_size(), g->main_copy().numel(), g->opt_size()});
  }
  std::string out = EncodeCheckpointHeader(h);
  out.reserve(out.size() + static_cast<size_t>(CheckpointPayloadBytes(h)));
  for (ParamGroup* g : groups) {
    Append(*ctx.backend, out, g->values());
    Append(*ctx.backend, out, g->main_copy());
    Append(*ctx.backend, out, g->adam_m());
    Append(*ctx.backend, out, g->adam_v());
  }
  return WriteFileAtomic(RankFile(dir, step, ctx.groups->rank), out);
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return IoError(path + ": read error");
  return bytes;
}

Result<int64_t> ReadRankFile(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir) {
  const std::string latest_path = dir + "/latest";
  if (!std::filesystem::exists(latest_path)) {
    return IoError(latest_path + ": missing (no checkpoint to resume from)");
  }
  PX_ASSIGN(const std::string latest, ReadWholeFile(latest_path));
  PX_ASSIGN(const int64_t step, ParseLatestPointer(latest, latest_path));
  const std::string path = RankFile(dir, step, ctx.groups->rank);
  PX_ASSIGN(const std::string bytes, ReadWholeFile(path));
  PX_ASSIGN(const CheckpointFile file, ParseCheckpoint(bytes, path));
  const CheckpointHeader& h = file.header;
  if (h.precision != ctx.training.precision) {
    return BadInput(path + ": /precision: written in " + ToString(h.precision) + ", cannot resume in " +
                    ToString(ctx.training.precision));
  }
  if (h.layout != LayoutToString(ctx.layout) || h.world_size != ctx.layout.world_size()) {
    return BadInput(path + ": /layout: written by layout \"" + h.layout + "\", cannot resume under \"" +
                    LayoutToString(ctx.layout) + "\"");
  }
  if (h.rank != ctx.groups->rank) {
    return BadInput(path + ": /rank: written by rank " + std::to_string(h.rank) + ", read by rank " +
                    std::to_string(ctx.groups->rank));
  }
  if (h.step != step) {
    return BadInput(path + ": /step: " + std::to_string(h.step) + " where " + latest_path + " names step_" +
                    std::to_string(step));
  }
  if (h.groups.size() != groups.size()) {
    return BadInput(path + ": /groups: " + std::to_string(h.groups.size()) + " parameter groups, this model has " +
                    std::to_string(groups.size()));
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const ParamGroup* g = groups[i];
    const CheckpointGroupHeader& gh = h.groups[i];
    if (gh.name != g->name() || gh.params != g->params_storage_size() || gh.main != g->main_copy().numel() ||
        gh.opt != g->opt_size()) {
      return BadInput(path + ": /groups/" + std::to_string(i) + ": does not match group " + g->name());
    }
  }
  // ParseCheckpoint proved the payload is exactly the size the (now matched) groups need.
  size_t pos = file.payload_offset;
  auto take = [&](Tensor& dst) {
    ctx.backend->CopyBytesToDevice(dst.ptr(), bytes.data() + pos, dst.numel());
    pos += static_cast<size_t>(dst.bytes());
  };
  for (ParamGroup* g : groups) {
    take(g->values());
    take(g->main_copy());
    take(g->adam_m());
    take(g->adam_v());
  }
  ctx.scaler.scale = h.loss_scale;
  ctx.scaler.clean_steps = h.loss_scale_clean_steps;
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
  PX_TRY(AgreeOnStatus(world, WriteRankFile(ctx, groups, dir, step)));
  Status latest;
  if (world.rank() == 0) latest = WriteFileAtomic(dir + "/latest", "step_" + std::to_string(step) + "\n");
  return AgreeOnStatus(world, latest);
}

Result<int64_t> LoadCheckpoint(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir) {
  auto step = ReadRankFile(ctx, groups, dir);
  Status local = step ? Status() : Status(step.error());
  PX_TRY(AgreeOnStatus(*ctx.groups->world, local));
  return step;
}

}  // namespace parallax::executor
