#include "profiler/calibrate/collective_probe.h"

#include <algorithm>

#include "executor/all_to_all.h"
#include "profiler/calibrate/backend_timer.h"

namespace parallax::profiler {

namespace {
constexpr executor::DType kElem = executor::DType::kF32;
}

Status CollectiveProbe::Prepare(executor::Backend& backend) {
  if (!send_.empty()) return {};
  const int64_t n = group_.size();
  const int64_t count = std::max<int64_t>(bytes_ / executor::SizeOf(kElem), n);
  PX_ASSIGN(auto a, backend.AllocateZeroed(count, kElem, executor::MemoryKind::kWorkspace));
  PX_ASSIGN(auto b, backend.AllocateZeroed(count, kElem, executor::MemoryKind::kWorkspace));
  send_ = std::move(a);
  recv_ = std::move(b);
  return backend.Synchronize();
}

Status CollectiveProbe::Enqueue(executor::Backend& backend) {
  executor::Stream& s = backend.stream(executor::StreamKind::kDpComm);
  const int64_t n = group_.size();
  const int64_t count = std::max<int64_t>(bytes_ / executor::SizeOf(kElem), n);
  const int64_t block = count / n;
  switch (kind_) {
    case CollectiveKind::kAllReduce: return group_.AllReduce(send_.ptr(), count, executor::ReduceOp::kSum, s);
    case CollectiveKind::kReduceScatter: return group_.ReduceScatter(send_.ptr(), recv_.ptr(), block, s);
    case CollectiveKind::kAllGather: return group_.AllGather(send_.ptr(), recv_.ptr(), block, s);
    case CollectiveKind::kBroadcast: return group_.Broadcast(send_.ptr(), count, 0, s);
    case CollectiveKind::kSendRecv: {
      const int next = static_cast<int>((group_.rank() + 1) % n);
      const int prev = static_cast<int>((group_.rank() + n - 1) % n);
      group_.GroupStart();
      if (Status st = group_.Send(send_.ptr(), count, next, 7, s); !st) {
        (void)group_.GroupEnd();
        return st;
      }
      if (Status st = group_.Recv(recv_.ptr(), count, prev, 7, s); !st) {
        (void)group_.GroupEnd();
        return st;
      }
      return group_.GroupEnd();
    }
    case CollectiveKind::kAllToAll: {
      // A block of count / n elements to every rank (the MoE token dispatch's pattern), as grouped
      // sends and receives.
      const std::vector<int64_t> blocks(static_cast<size_t>(n), block);
      return executor::GroupedAllToAll(group_, send_.ptr(), blocks, recv_.ptr(), blocks, 7, s);
    }
  }
  return {};
}

Result<std::vector<double>> CollectiveProbe::Measure(executor::Backend& backend, int64_t n) {
  // Agreed before the barriers below: a rank that cannot allocate must not leave the others waiting.
  PX_TRY(AllPrepared(world_, Prepare(backend)));
  return TimeRuns(backend, executor::StreamKind::kDpComm, n, [&] { return Enqueue(backend); },
                  [&]() -> Status {
                    // Each run starts from idle streams on every rank.
                    PX_TRY(backend.Synchronize());
                    return world_.Barrier();
                  });
}

}  // namespace parallax::profiler
