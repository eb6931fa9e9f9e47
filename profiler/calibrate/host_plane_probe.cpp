#include "profiler/calibrate/host_plane_probe.h"

#include <algorithm>
#include <chrono>

#include "executor/runtime/classic/shard_server.h"

namespace parallax::profiler {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTagOut = 9101, kTagBack = 9102;  // apart from the classic modes' tags

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Result<double> HostPlaneProbe::OneMessage() {
  const int me = world_.rank();
  if (me > 1) return 0.0;
  const auto t0 = Clock::now();
  if (me == 0) {
    PX_TRY(mailbox_->Post(1, kTagOut, send_.data(), bytes_));
    PX_TRY(executor::ReceiveMessage(*mailbox_, 1, kTagBack, &recv_));
    PX_TRY(mailbox_->Flush());
    return Since(t0) / 2;
  }
  PX_TRY(executor::ReceiveMessage(*mailbox_, 0, kTagOut, &recv_));
  PX_TRY(mailbox_->Post(0, kTagBack, send_.data(), bytes_));
  PX_TRY(mailbox_->Flush());
  return 0.0;  // rank 0's half round trip is the figure
}

Result<double> HostPlaneProbe::OneAllGather() {
  const auto t0 = Clock::now();
  PX_TRY(world_.HostAllGather(send_.data(), recv_.data(), bytes_ / world_.size()));
  return Since(t0);
}

Result<double> HostPlaneProbe::OneAllReduce() {
  const auto t0 = Clock::now();
  PX_TRY(world_.HostAllReduce(values_.data(), static_cast<int64_t>(values_.size()), executor::ReduceOp::kSum));
  return Since(t0);
}

Result<std::vector<double>> HostPlaneProbe::Measure(int64_t n) {
  const bool message = kind_ == CollectiveKind::kSendRecv;
  if (message && mailbox_ == nullptr) return Error{"host send/recv probe without a mailbox", ErrorKind::kInternal};
  const int64_t per_rank = message ? bytes_ : bytes_ / world_.size();
  send_.assign(static_cast<size_t>(per_rank), 1);
  recv_.assign(static_cast<size_t>(message ? per_rank : per_rank * world_.size()), 0);
  if (kind_ == CollectiveKind::kAllReduce) values_.assign(static_cast<size_t>(std::max<int64_t>(1, bytes_ / 8)), 1e-3);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    PX_TRY(world_.Barrier());
    PX_ASSIGN(const double t, message                                     ? OneMessage()
                              : kind_ == CollectiveKind::kAllReduce ? OneAllReduce()
                                                                    : OneAllGather());
    out.push_back(t);
  }
  return out;
}

}  // namespace parallax::profiler
