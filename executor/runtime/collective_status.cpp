#include "executor/runtime/collective_status.h"

namespace parallax::executor {

Status AgreeOnStatus(Communicator& world, const Status& local) {
  // Smallest failing rank (size() when none failed).
  double first_failed = local.ok() ? static_cast<double>(world.size()) : static_cast<double>(world.rank());
  double neg = -first_failed;
  PX_TRY(world.HostAllReduce(&neg, 1, ReduceOp::kMax));
  const int failed = static_cast<int>(-neg);
  if (failed == world.size()) return {};
  if (!local.ok()) return local;
  return Error{"rank " + std::to_string(world.WorldRank(failed)) + " failed (see its message)", ErrorKind::kIo};
}

}  // namespace parallax::executor
