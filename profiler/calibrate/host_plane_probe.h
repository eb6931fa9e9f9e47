#pragma once
// The host plane the classic training modes exchange over, timed as they use it: mailbox messages
// (executor/mailbox.h: a copy into an owned buffer and a send that never waits; the receiver polls,
// then copies the message out; executor/runtime/classic/shard_server.h ReceiveMessage) and the
// communicator's host all-gather (Communicator::HostAllGather, what gradient compression gathers
// with). Their cost is not the device plane's collectives: on the CPU backend a gpt-tiny gradient
// of 874 KB took 0.5 ms a reply and 1.1 ms a bf16 all-gather where the calibrated send/recv and
// all-gather curves said a few hundred microseconds (2026-11-28, docs/classic_modes.md). Curves
// carry placement "host"; the planner prices only the classic modes' exchange with them
// (CollectiveModel::HostTime) and never the device collectives.
//   send/recv: rank 0 posts `bytes` to rank 1, rank 1 answers with as many; one message is half the
//              round trip as rank 0 timed it (the others wait at the barrier).
//   all-gather: every rank gathers bytes / ranks from each (nccl-tests' size: the gathered buffer).
//   all-reduce: every rank sums bytes / 8 doubles (Communicator::HostAllReduce, what PowerSGD's
//               factors and the vectors beside them are averaged with).

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/mailbox.h"
#include "model/cost_db.h"
#include "model/result.h"

namespace parallax::profiler {

class HostPlaneProbe {
 public:
  //! `mailbox` may be null for the all-gather.
  HostPlaneProbe(CollectiveKind kind, int64_t bytes, executor::Communicator& world, executor::Mailbox* mailbox)
      : kind_(kind), bytes_(bytes), world_(world), mailbox_(mailbox) {}
  //! `n` timed runs, each after a world barrier.
  Result<std::vector<double>> Measure(int64_t n);

 private:
  Result<double> OneMessage();
  Result<double> OneAllGather();
  Result<double> OneAllReduce();
  CollectiveKind kind_;
  int64_t bytes_;
  executor::Communicator& world_;
  executor::Mailbox* mailbox_;
  std::vector<char> send_, recv_;
  std::vector<double> values_;  //!< the all-reduce's
};

}  // namespace parallax::profiler
