#include "executor/runtime/op_recorder.h"

#include <algorithm>
#include <cstring>

namespace parallax::executor {

traces::Stream StreamOf(OpKind op) {
  switch (op) {
    case OpKind::kTpAllReduce:
    case OpKind::kTpAllGather:
    case OpKind::kTpReduceScatter: return traces::Stream::kTpComm;
    case OpKind::kPpSend:
    case OpKind::kPpRecv: return traces::Stream::kPpComm;
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
    default: return StreamKind::kCompute;
  }
}

OpRecorder::Scope::Scope(OpRecorder* r, OpIdentity id, double flops, int64_t bytes, int32_t group_size)
    : r_(r->enabled_ ? r : nullptr) {
  if (!r_) return;
  MeasuredOp op;
  op.id = id;
  op.stream = StreamOf(id.op);
  op.flops = flops;
  op.bytes = bytes;
  op.group_size = group_size;
  index_ = r_->pending_.size();
  r_->pending_.push_back({r_->ops_.size(), r_->backend_->RecordEvent(StreamKindOf(id.op)), Event{}});
  r_->ops_.push_back(op);
}

OpRecorder::Scope::~Scope() {
  if (!r_) return;
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
  if (Status s = world.HostAllReduce(&count, 1, ReduceOp::kMax); !s) return s;
  const int64_t max_ops = static_cast<int64_t>(count);
  const int64_t block_words = 1 + max_ops * kWords;
  std::vector<int64_t> mine(static_cast<size_t>(block_words), 0);
  mine[0] = static_cast<int64_t>(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) Pack(ops_[i], &mine[1 + i * kWords]);
  std::vector<int64_t> all(static_cast<size_t>(block_words * world.size()));
  if (Status s = world.HostAllGather(mine.data(), all.data(), block_words * 8); !s) return s;
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

}  // namespace parallax::executor
