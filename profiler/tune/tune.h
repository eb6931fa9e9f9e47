#pragma once
// `parallax tune`: close the loop on a real job. Under mpirun, every rank runs this together:
//   1. plan with the current cost database (rank 0 searches; the layouts are shared),
//   2. run each of the top K candidates not measured yet for a few steps through
//      executor::RunTraining (measured trace on rank 0),
//   3. refine the database from each measured trace (profiler/refine/refine.h),
//   4. re-plan, until the measured best layout is the same two rounds in a row (or max_rounds).
// A candidate that fails (out of memory, a peer lost to the watchdog) is recorded with its reason;
// the tune goes on with the next one (after a failure inside a step, the backend and the world
// communicator are rebuilt, since a peer may have been left inside a collective).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/launch.h"
#include "model/cost_db.h"
#include "model/plan.h"
#include "planner/search/constraints.h"

namespace parallax::profiler {

struct TuneOptions {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;  //!< global batch (0: searched), precision
  int64_t top_k = 3;
  int64_t steps = 6;      //!< steps per candidate run (the first is warm-up, not counted)
  int64_t max_rounds = 4;
  planner::Constraints fix;  //!< dimensions every candidate keeps (plan's --fix)
  std::string backend = "cpu";
  double timeout_s = 30;
  int64_t memory_limit_bytes = 0;  //!< caps every rank's backend memory (Backend::SetMemoryLimit); 0: none
  std::string work_dir;            //!< measured traces go here
  //! Rank 0: one line of progress per candidate (may be empty).
  std::function<void(const std::string&)> log;
};

struct TuneCandidate {
  Layout layout;
  int64_t round = 0;
  double predicted_step_s = 0;  //!< simulated with the database of its round
  double measured_step_s = 0;   //!< median step time after the first step; 0 when it failed
  std::string failure;          //!< why it did not run (empty: it ran)
  std::string refine_failure;   //!< why its trace did not refine the database (empty: it did)
  double error_before = 0, error_after = 0;  //!< refine's step-time error on this plan (rank 0)
};

struct TuneResult {
  std::vector<TuneCandidate> candidates;
  int64_t rounds = 0;
  int best = -1;  //!< index into candidates (-1: nothing ran)
  CostDb db;      //!< refined (rank 0)
  Plan best_plan;
};

//! Collective over the job's ranks; `backend` may be replaced after a failed candidate.
Result<TuneResult> RunTune(executor::LaunchContext& launch, std::unique_ptr<executor::Backend>& backend,
                           std::unique_ptr<executor::Communicator>& world, const CostDb& db, const TuneOptions& o);

Json TuneToJson(const TuneResult& r, const std::string& costdb_path);

}  // namespace parallax::profiler
