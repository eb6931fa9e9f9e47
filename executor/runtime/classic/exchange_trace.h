#pragma once
// The classic modes' exchange in the measured trace (`run --trace`): named lanes beside the
// Trainer's op streams, and push/pull flows between them.
//   lane "worker <r> exchange" (pid r, stream comm): push, pull, read_grads, write_weights; the
//     backup coordinator's gather/receive/broadcast; compression's reduction (named by its method);
//     local SGD's average
//   lane "server <s>" (pid = the rank serving shard s, stream comm): receive, apply, reply
//   flows "push" (a gradient from its sender's push to its receipt) and "pull" (weights from the
//     reply, or the coordinator's broadcast, to the worker's pull)
// Times are host-clock ns since the job's common start, the Trainer recorder's epoch. Each end of a
// flow is recorded where it happens, keyed by (kind, sender, receiver, iteration) as both ends know
// them; rank 0 pairs the ends when it gathers the trace. Every end lies inside a slice of its lane,
// so Chrome and Perfetto bind it there.

#include <chrono>
#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "traces/tracer.h"

namespace parallax::executor {

enum class ExchangeLane : int64_t { kWorker = 0, kServer = 1 };

//! Slice names of the exchange lanes (ToString gives the trace's name).
enum class ExchangeName : int64_t {
  kPush, kPull, kReadGrads, kWriteWeights, kReceive, kApply, kReply, kGather, kBroadcast, kAverage,
  kBf16, kInt8, kTopK, kPowerSgd, kAllReduce
};
const char* ToString(ExchangeName n);

//! kPush: a gradient towards whoever applies it; kPull: weights back to a worker.
enum class FlowKind : int64_t { kPush = 0, kPull = 1 };

//! One end of a flow: both ends name the same (kind, from, to, iteration).
struct FlowKey {
  FlowKind kind = FlowKind::kPush;
  int64_t from = 0;       //!< push: the worker rank; pull: the shard (or the coordinator rank)
  int64_t to = 0;         //!< push: the shard (or the coordinator rank); pull: the worker rank
  int64_t iteration = 0;  //!< the worker iteration (ps, async, ssp, backup push) or model version (backup pull)
};

//! Tids of the lanes in a rank's process (after the op streams and device detail rows).
inline constexpr int64_t kWorkerExchangeTid = 200;
inline constexpr int64_t kServerLaneTid = 300;  //!< + shard

class ExchangeTrace {
 public:
  using Clock = std::chrono::steady_clock;
  //! Off: every call records nothing.
  ExchangeTrace() = default;
  //! Records from now on, times since `t0` (the job's common start).
  void Start(Clock::time_point t0);
  bool on() const { return on_; }
  int64_t NowNs() const;

  void Slice(ExchangeLane lane, int64_t index, ExchangeName name, int64_t start_ns, int64_t end_ns, int64_t bytes);
  //! One end of a flow, now, on `lane` `index` (`out`: its start).
  void FlowEnd(ExchangeLane lane, int64_t index, const FlowKey& key, bool out);

  //! Collective over `world` (every rank calls it, with a trace on or off): on world rank 0 adds
  //! every rank's lanes, slices and the flows whose two ends were both recorded to `tracer`.
  Status GatherInto(Communicator& world, traces::Tracer* tracer) const;

 private:
  bool on_ = false;
  Clock::time_point t0_;
  std::vector<int64_t> words_;  //!< packed records, kRecordWords each
};

//! A slice of an exchange lane from construction to destruction; null or off trace: nothing.
class ExchangeSpan {
 public:
  ExchangeSpan(ExchangeTrace* trace, ExchangeLane lane, int64_t index, ExchangeName name, int64_t bytes = -1);
  ~ExchangeSpan();
  ExchangeSpan(const ExchangeSpan&) = delete;
  ExchangeSpan& operator=(const ExchangeSpan&) = delete;
  //! A flow leaves from this slice, now.
  void FlowOut(const FlowKey& key) {
    if (trace_ != nullptr) trace_->FlowEnd(lane_, index_, key, true);
  }
  //! A flow arrives in this slice, now.
  void FlowIn(const FlowKey& key) {
    if (trace_ != nullptr) trace_->FlowEnd(lane_, index_, key, false);
  }
  //! The slice's bytes, when known only at its end.
  void set_bytes(int64_t bytes) { bytes_ = bytes; }

 private:
  ExchangeTrace* trace_;
  ExchangeLane lane_;
  int64_t index_;
  ExchangeName name_;
  int64_t bytes_;
  int64_t start_ns_ = 0;
};

}  // namespace parallax::executor
