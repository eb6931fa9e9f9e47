#include "executor/runtime/op_recorder.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "executor/runtime/device_timeline.h"

namespace parallax::executor {

traces::Stream StreamOf(OpKind op) {
  switch (op) {
    case OpKind::kTpAllReduce:
    case OpKind::kTpAllGather:
    case OpKind::kTpReduceScatter: return traces::Stream::kTpComm;
    case OpKind::kPpSend:
    case OpKind::kPpRecv: return traces::Stream::kPpComm;
    case OpKind::kCpSendRecv: return traces::Stream::kCpComm;
    case OpKind::kMoeDispatch:
    case OpKind::kMoeCombine: return traces::Stream::kEpComm;
    case OpKind::kDpAllReduce:
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllGather: return traces::Stream::kDpComm;
    default: return traces::Stream::kCompute;
  }
}

StreamKind StreamKindOf(OpKind op) {
  switch (StreamOf(op)) {
    case traces::Stream::kTpComm: return StreamKind::kTpComm;
    case traces::Stream::kPpComm: return StreamKind::kPpComm;
    case traces::Stream::kDpComm: return StreamKind::kDpComm;
    case traces::Stream::kCpComm: return StreamKind::kCpComm;
    case traces::Stream::kEpComm: return StreamKind::kEpComm;
    default: return StreamKind::kCompute;
  }
}

OpRecorder::OpRecorder(Backend* backend, int64_t rank)
    : backend_(backend), rank_(rank), device_summary_(std::make_unique<TimelineSummary>()) {}

OpRecorder::~OpRecorder() = default;

void OpRecorder::set_catalogue(const OpCatalogue& catalogue, std::vector<int> layer_kinds) {
  layer_kinds_ = std::move(layer_kinds);
  for (auto& in_layer : tags_) {
    for (auto& by_op : in_layer) {
      for (Tag& t : by_op) t = Tag{};
    }
  }
  // The first entry of each (op, phase) wins, as OpCatalogueEntry finds it.
  auto fill = [&](const UnitOpSpecs& u, size_t in_layer) {
    for (const auto* list : {&u.fwd, &u.bwd}) {
      for (const OpSpec& o : *list) {
        Tag& t = tags_[in_layer][static_cast<size_t>(o.op)][static_cast<size_t>(o.phase)];
        if (t.flops < 0) t = Tag{o.flops, o.bytes};
      }
    }
  };
  fill(catalogue.layer, 1);
  for (size_t k = 0; k < catalogue.kinds.size() && k < static_cast<size_t>(kLayerKinds); ++k) {
    fill(catalogue.kinds[k].fwd.empty() ? catalogue.layer : catalogue.kinds[k], 2 + k);
  }
  fill(catalogue.embedding, 0);
  fill(catalogue.head, 0);
  has_catalogue_ = true;
}

OpRecorder::Scope::Scope(OpRecorder* r, OpIdentity id, double flops, int64_t bytes, int32_t group_size)
    : r_(r->enabled_ ? r : nullptr) {
  if (!r_) return;
  MeasuredOp op;
  op.id = id;
  op.stream = StreamOf(id.op);
  op.flops = flops;
  op.bytes = bytes;
  if (r_->has_catalogue_ && op.stream == traces::Stream::kCompute) {
    const Tag& t = r_->tags_[r_->UnitOf(id.layer)][static_cast<size_t>(id.op)][static_cast<size_t>(id.phase)];
    if (t.flops >= 0) {
      op.flops = t.flops > 0 ? t.flops : -1;
      if (op.bytes < 0 && t.bytes > 0) op.bytes = static_cast<int64_t>(t.bytes);
    }
  }
  op.group_size = group_size;
  index_ = r_->pending_.size();
  r_->pending_.push_back({r_->ops_.size(), r_->backend_->RecordEvent(StreamKindOf(id.op)), Event{}});
  r_->ops_.push_back(op);
  if (r_->activity_ != nullptr) r_->activity_->EnterOp(r_->first_key_ + (r_->ops_.size() - 1));
}

OpRecorder::Scope::~Scope() {
  if (!r_) return;
  if (r_->activity_ != nullptr) r_->activity_->ExitOp();
  Pending& p = r_->pending_[index_];
  p.end = r_->backend_->RecordEvent(StreamKindOf(r_->ops_[p.op].id.op));
}

Status OpRecorder::Resolve() {
  if (pending_.empty()) return {};
  std::vector<Event> events;
  events.reserve(2 * pending_.size());
  for (const Pending& p : pending_) {
    events.push_back(p.begin);
    events.push_back(p.end);
  }
  auto times = backend_->EventTimesNs(epoch_, events);
  backend_->ReleaseEvents(events);
  if (!times) return times.error();
  for (size_t i = 0; i < pending_.size(); ++i) {
    MeasuredOp& op = ops_[pending_[i].op];
    op.start_ns = (*times)[2 * i];
    op.dur_ns = std::max<int64_t>(0, (*times)[2 * i + 1] - (*times)[2 * i]);
  }
  pending_.clear();
  return ResolveDevice();
}

Status OpRecorder::ResolveDevice() {
  if (activity_ == nullptr || device_from_ >= ops_.size()) return {};
  // The events above were waited for, so the device has finished the ops' work.
  std::vector<ActivityRecord> records;
  std::vector<ExternalLink> links;
  PX_TRY(activity_->Drain(records, links));
  const size_t from = device_from_;
  const size_t first_slice = device_slices_.size();
  const TimelineSummary s = BuildDeviceTimeline(
      records, links, first_key_ + from, std::span<MeasuredOp>(ops_).subspan(from),
      device_slices_, device_summary_->clock_offset_ns);
  for (size_t i = first_slice; i < device_slices_.size(); ++i) {
    if (device_slices_[i].op >= 0) device_slices_[i].op += static_cast<int64_t>(from);
  }
  TimelineSummary& t = *device_summary_;
  if (s.aligned) {
    t.clock_offset_ns = s.clock_offset_ns;
    t.aligned = true;
  }
  t.device_records += s.device_records;
  t.attributed += s.attributed;
  t.ops_retimed += s.ops_retimed;
  t.nccl_kernels += s.nccl_kernels;
  t.nccl_in_collectives += s.nccl_in_collectives;
  device_from_ = ops_.size();
  return {};
}

double OpRecorder::ComputeSeconds(int64_t step) const {
  int64_t ns = 0;
  for (const auto& o : ops_) {
    if (o.id.step == step && o.stream == traces::Stream::kCompute) ns += o.dur_ns;
  }
  return static_cast<double>(ns) * 1e-9;
}

namespace {
constexpr int kWords = 13;  // int64 words per packed op

void Pack(const MeasuredOp& o, int64_t* w) {
  w[0] = o.id.step;
  w[1] = o.id.rank;
  w[2] = o.id.microbatch;
  w[3] = o.id.stage;
  w[4] = o.id.layer;
  w[5] = static_cast<int64_t>(o.id.op);
  w[6] = static_cast<int64_t>(o.id.phase);
  w[7] = static_cast<int64_t>(o.stream);
  w[8] = o.start_ns;
  w[9] = o.dur_ns;
  std::memcpy(&w[10], &o.flops, 8);
  w[11] = o.bytes;
  w[12] = o.group_size;
}

MeasuredOp Unpack(const int64_t* w) {
  MeasuredOp o;
  o.id = OpIdentity{w[0], w[1], w[2], w[3], w[4], static_cast<OpKind>(w[5]), static_cast<Phase>(w[6])};
  o.stream = static_cast<traces::Stream>(w[7]);
  o.start_ns = w[8];
  o.dur_ns = w[9];
  std::memcpy(&o.flops, &w[10], 8);
  o.bytes = w[11];
  o.group_size = static_cast<int32_t>(w[12]);
  return o;
}
}  // namespace

Status OpRecorder::GatherInto(Communicator& world, traces::Tracer* tracer) const {
  // Fixed-size blocks: every rank pads to the largest op count.
  double count = static_cast<double>(ops_.size());
  PX_TRY(world.HostAllReduce(&count, 1, ReduceOp::kMax));
  const int64_t max_ops = static_cast<int64_t>(count);
  const int64_t block_words = 1 + max_ops * kWords;
  std::vector<int64_t> mine(static_cast<size_t>(block_words), 0);
  mine[0] = static_cast<int64_t>(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) Pack(ops_[i], &mine[1 + i * kWords]);
  std::vector<int64_t> all(static_cast<size_t>(block_words * world.size()));
  PX_TRY(world.HostAllGather(mine.data(), all.data(), block_words * 8));
  // Device records: every rank takes part when any has a tracer (the flag is world-reduced).
  double any_device = activity_ != nullptr ? 1 : 0;
  PX_TRY(world.HostAllReduce(&any_device, 1, ReduceOp::kMax));
  if (any_device > 0) {
    PX_TRY(GatherDeviceSlices(world, tracer));
  }
  if (world.rank() != 0 || tracer == nullptr) return {};
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* block = &all[static_cast<size_t>(r * block_words)];
    for (int64_t i = 0; i < block[0]; ++i) {
      const MeasuredOp o = Unpack(&block[1 + i * kWords]);
      traces::SliceSpec s;
      s.track = tracer->Track(o.id.rank, o.stream);
      s.name = tracer->OpName(o.id.op);
      s.start_ns = o.start_ns;
      s.dur_ns = o.dur_ns;
      s.identity = o.id;
      s.flops = o.flops;
      s.bytes = o.bytes;
      s.group_size = o.group_size;
      tracer->Record(s);
    }
  }
  return {};
}

void OpRecorder::Clear() {
  first_key_ += ops_.size();  // keys stay unique across the job
  ops_.clear();
  device_slices_.clear();
  device_from_ = 0;
}

namespace {

// Device slices travel as bytes: fixed fields, then the name.
void PutWord(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
int64_t GetWord(const char*& p) {
  int64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

std::string PackSlices(const std::vector<DeviceSlice>& slices, const std::vector<MeasuredOp>& ops) {
  std::string out;
  PutWord(out, static_cast<int64_t>(slices.size()));
  for (const DeviceSlice& d : slices) {
    PutWord(out, static_cast<int64_t>(d.kind));
    PutWord(out, d.start_ns);
    PutWord(out, d.dur_ns);
    PutWord(out, d.stream);
    PutWord(out, d.op >= 0 ? static_cast<int64_t>(ops[static_cast<size_t>(d.op)].id.op) : -1);
    PutWord(out, d.launch_ns);
    PutWord(out, d.launch_thread);
    PutWord(out, d.bytes);
    PutWord(out, d.nccl ? 1 : 0);
    PutWord(out, static_cast<int64_t>(d.name.size()));
    out.append(d.name);
  }
  return out;
}

// Track ids of device detail: GPU streams and host threads get their own rows after the four
// op streams of each rank.
constexpr int64_t kGpuStreamTid = 100;
constexpr int64_t kHostThreadTid = 1000000;

void AppendSlices(const char* p, int64_t rank, traces::Tracer& tracer) {
  const int64_t n = GetWord(p);
  const traces::StringId launch = tracer.Intern("launch");
  for (int64_t i = 0; i < n; ++i) {
    const auto kind = static_cast<ActivityKind>(GetWord(p));
    const int64_t start = GetWord(p);
    const int64_t dur = GetWord(p);
    const int64_t stream = GetWord(p);
    const int64_t op = GetWord(p);
    const int64_t launch_ns = GetWord(p);
    const int64_t launch_thread = GetWord(p);
    const int64_t bytes = GetWord(p);
    const bool nccl = GetWord(p) != 0;
    const auto len = static_cast<size_t>(GetWord(p));
    const std::string_view name(p, len);
    p += len;
    const bool host = kind == ActivityKind::kRuntime || kind == ActivityKind::kSync;
    const traces::TrackId track =
        host ? tracer.CustomTrack(rank, kHostThreadTid + stream, "host thread " + std::to_string(stream), rank,
                                  traces::Stream::kHost)
             : tracer.CustomTrack(rank, kGpuStreamTid + stream, "GPU stream " + std::to_string(stream), rank,
                                  nccl ? traces::Stream::kComm : traces::Stream::kCompute);
    traces::SliceSpec s;
    s.track = track;
    s.name = tracer.Intern(name);
    s.start_ns = start;
    s.dur_ns = dur;
    s.category = tracer.Intern(ToString(kind));
    s.bytes = bytes;
    if (nccl && op >= 0) s.collective = tracer.OpName(static_cast<OpKind>(op));
    tracer.Record(s);
    if (launch_ns >= 0) {
      const traces::TrackId from = tracer.CustomTrack(rank, kHostThreadTid + launch_thread,
                                                      "host thread " + std::to_string(launch_thread), rank,
                                                      traces::Stream::kHost);
      tracer.Flow(from, launch_ns, track, start, launch);
    }
  }
}

}  // namespace

Status OpRecorder::GatherDeviceSlices(Communicator& world, traces::Tracer* tracer) const {
  // Variable-size byte blocks padded to the largest rank's.
  const std::string mine = PackSlices(device_slices_, ops_);
  double size = static_cast<double>(mine.size());
  PX_TRY(world.HostAllReduce(&size, 1, ReduceOp::kMax));
  const auto block = static_cast<size_t>(size);
  std::string padded = mine;
  padded.resize(block, '\0');
  std::string all(block * static_cast<size_t>(world.size()), '\0');
  PX_TRY(world.HostAllGather(padded.data(), all.data(), static_cast<int64_t>(block)));
  if (world.rank() != 0 || tracer == nullptr) return {};
  for (int r = 0; r < world.size(); ++r) AppendSlices(all.data() + static_cast<size_t>(r) * block, world.WorldRank(r), *tracer);
  return {};
}

}  // namespace parallax::executor
