#pragma once
// Timing through the backend seam, so every backend calibrates with the same code: each run is
// bracketed by two events on the stream it is enqueued on, and the events are resolved once after
// all runs (as the executor's recorder does), never with a synchronization per run. Under MPI every
// rank measures at once and the ranks agree on the result, so the calibrator's decisions (skip,
// re-measure) are identical everywhere and no rank waits in a collective the others skipped.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "model/result.h"
#include "profiler/calibrate/calibrator.h"

namespace parallax::profiler {

//! Runs `run` `n` times on stream `s`, each bracketed by events; returns each run's seconds.
//! `before_each` (optional) runs outside the timed bracket (a barrier that aligns the ranks).
Result<std::vector<double>> TimeRuns(executor::Backend& backend, executor::StreamKind s, int64_t n,
                                     const std::function<Status()>& run,
                                     const std::function<Status()>& before_each = {});

//! How the ranks' timings of one run combine: kMax for collectives (a collective ends with its
//! slowest member), kMean for compute measured on every rank at once.
enum class RankReduce { kMax, kMean };

//! Wraps a measurement so that every rank of `world` returns the same thing: an error when any rank
//! failed (the lowest failing rank's message) or was interrupted (`interrupt` set on any rank, which
//! then sets `stop` everywhere), else the runs' times reduced over the ranks.
MeasureFn Agreed(executor::Communicator& world, MeasureFn fn, RankReduce reduce, const std::atomic<bool>* interrupt,
                 std::atomic<bool>* stop);

//! Which ranks time compute together. Ranks that outnumber their node's CPUs (mpirun
//! --oversubscribe) would time the operating system's turns between them, which the planner prices
//! itself (ClusterSpec::SlowestCoreShare): they measure in turns of at most one rank per CPU.
struct Turns {
  int64_t mine = 0;   //!< this rank's turn
  int64_t count = 1;  //!< turns in all (the same on every rank)
};

//! Calls `fn` in this rank's turn; every rank passes `t.count` barriers of `world`, whatever `fn`
//! returns, so a failure is agreed afterwards (Agreed), never in the middle of a barrier.
MeasureFn InTurns(executor::Communicator& world, MeasureFn fn, Turns t);

//! `local` (this rank's buffer preparation) agreed over `world` before a measurement that
//! synchronizes the ranks: an error on every rank when any rank failed, so no rank waits in a
//! barrier the failed one never reaches (Agreed then names the failing rank's reason).
Status AllPrepared(executor::Communicator& world, Status local);

}  // namespace parallax::profiler
