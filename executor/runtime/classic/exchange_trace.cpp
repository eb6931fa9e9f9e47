#include "executor/runtime/classic/exchange_trace.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>

namespace parallax::executor {
namespace {

// One record: [type, lane, index, name or flow kind, a, b, c, d]. type 0: a slice (a start, b
// duration, c bytes); 1 / 2: a flow's start / end (a from, b to, c iteration, d time).
constexpr size_t kRecordWords = 8;
constexpr int64_t kSliceRecord = 0, kFlowOut = 1, kFlowIn = 2;

// Both lanes are comm tracks of their rank: the exchange, which `trace stats` counts as the rank's
// communication, and which a reader gives back to the rank (its pid) and the GUI shows in its lane.
traces::TrackId LaneTrack(traces::Tracer& tracer, int64_t rank, ExchangeLane lane, int64_t index) {
  if (lane == ExchangeLane::kWorker) {
    return tracer.CustomTrack(rank, kWorkerExchangeTid, "worker " + std::to_string(index) + " exchange", rank,
                              traces::Stream::kComm);
  }
  return tracer.CustomTrack(rank, kServerLaneTid + index, "server " + std::to_string(index), rank,
                            traces::Stream::kComm);
}

}  // namespace

const char* ToString(ExchangeName n) {
  switch (n) {
    case ExchangeName::kPush: return "push";
    case ExchangeName::kPull: return "pull";
    case ExchangeName::kReadGrads: return "read_grads";
    case ExchangeName::kWriteWeights: return "write_weights";
    case ExchangeName::kReceive: return "receive";
    case ExchangeName::kApply: return "apply";
    case ExchangeName::kReply: return "reply";
    case ExchangeName::kGather: return "gather";
    case ExchangeName::kBroadcast: return "broadcast";
    case ExchangeName::kAverage: return "average";
    case ExchangeName::kBf16: return "bf16_all_gather";
    case ExchangeName::kInt8: return "int8_all_gather";
    case ExchangeName::kTopK: return "topk_all_gather";
    case ExchangeName::kPowerSgd: return "powersgd_all_reduce";
    case ExchangeName::kAllReduce: return "all_reduce";
  }
  return "?";
}

void ExchangeTrace::Start(Clock::time_point t0) {
  on_ = true;
  t0_ = t0;
}

int64_t ExchangeTrace::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count();
}

void ExchangeTrace::Slice(ExchangeLane lane, int64_t index, ExchangeName name, int64_t start_ns, int64_t end_ns,
                          int64_t bytes) {
  if (!on_) return;
  words_.insert(words_.end(), {kSliceRecord, static_cast<int64_t>(lane), index, static_cast<int64_t>(name), start_ns,
                               end_ns - start_ns, bytes, 0});
}

void ExchangeTrace::FlowEnd(ExchangeLane lane, int64_t index, const FlowKey& key, bool out) {
  if (!on_) return;
  words_.insert(words_.end(), {out ? kFlowOut : kFlowIn, static_cast<int64_t>(lane), index,
                               static_cast<int64_t>(key.kind), key.from, key.to, key.iteration, NowNs()});
}

Status ExchangeTrace::GatherInto(Communicator& world, traces::Tracer* tracer) const {
  double longest = static_cast<double>(words_.size());
  PX_TRY(world.HostAllReduce(&longest, 1, ReduceOp::kMax));
  const auto block = static_cast<size_t>(longest) + 1;  // [0]: this rank's word count
  std::vector<int64_t> mine(block, 0);
  mine[0] = static_cast<int64_t>(words_.size());
  std::copy(words_.begin(), words_.end(), mine.begin() + 1);
  std::vector<int64_t> all(block * static_cast<size_t>(world.size()));
  PX_TRY(world.HostAllGather(mine.data(), all.data(), static_cast<int64_t>(block * sizeof(int64_t))));
  if (world.rank() != 0 || tracer == nullptr) return {};
  using Key = std::array<int64_t, 4>;
  struct End {
    traces::TrackId track = 0;
    int64_t ns = 0;
  };
  std::map<Key, End> outs, ins;
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* w = &all[static_cast<size_t>(r) * block];
    const auto words = static_cast<size_t>(w[0]);
    for (size_t k = 1; k + kRecordWords <= words + 1; k += kRecordWords) {
      const int64_t* rec = w + k;
      const traces::TrackId track = LaneTrack(*tracer, r, static_cast<ExchangeLane>(rec[1]), rec[2]);
      if (rec[0] == kSliceRecord) {
        traces::SliceSpec s;
        s.track = track;
        s.name = tracer->Intern(ToString(static_cast<ExchangeName>(rec[3])));
        s.start_ns = rec[4];
        s.dur_ns = rec[5];
        s.bytes = rec[6];
        tracer->Record(s);
      } else {
        (rec[0] == kFlowOut ? outs : ins)[Key{rec[3], rec[4], rec[5], rec[6]}] = End{track, rec[7]};
      }
    }
  }
  const traces::StringId names[] = {tracer->Intern("push"), tracer->Intern("pull")};
  for (const auto& [key, from] : outs) {
    const auto to = ins.find(key);
    if (to == ins.end()) continue;  // its receiver had stopped (a late worker's unread weights)
    tracer->Flow(from.track, from.ns, to->second.track, to->second.ns, names[key[0] == 0 ? 0 : 1]);
  }
  return {};
}

ExchangeSpan::ExchangeSpan(ExchangeTrace* trace, ExchangeLane lane, int64_t index, ExchangeName name, int64_t bytes)
    : trace_(trace != nullptr && trace->on() ? trace : nullptr), lane_(lane), index_(index), name_(name),
      bytes_(bytes) {
  if (trace_ != nullptr) start_ns_ = trace_->NowNs();
}

ExchangeSpan::~ExchangeSpan() {
  if (trace_ != nullptr) trace_->Slice(lane_, index_, name_, start_ns_, trace_->NowNs(), bytes_);
}

}  // namespace parallax::executor
