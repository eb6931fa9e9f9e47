#include "profiler/tune/tune.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "executor/backend_registry.h"
#include "executor/runtime/collective_status.h"
#include "executor/runtime/training_loop.h"
#include "model/load.h"
#include "planner/search/search.h"
#include "planner/sim/simulator.h"
#include "profiler/calibrate/measurement.h"
#include "profiler/refine/refine.h"
#include "traces/chrome_reader.h"

namespace parallax::profiler {
namespace {

//! Rank 0's string on every rank (host plane).
Result<std::string> ShareString(executor::Communicator& world, const std::string& s) {
  double len = world.rank() == 0 ? static_cast<double>(s.size()) : 0.0;
  PX_TRY(world.HostAllReduce(&len, 1, executor::ReduceOp::kMax));
  const auto n = static_cast<size_t>(len) + 1;
  std::vector<char> mine(n, '\0');
  if (world.rank() == 0) std::memcpy(mine.data(), s.data(), s.size());
  std::vector<char> all(n * static_cast<size_t>(world.size()));
  PX_TRY(world.HostAllGather(mine.data(), all.data(), static_cast<int64_t>(n)));
  return std::string(all.data(), static_cast<size_t>(len));
}

Plan MakePlan(const TuneOptions& o, const Layout& l) {
  Plan p;
  p.model = o.model;
  p.cluster = o.cluster;
  p.training = o.training;
  p.training.global_batch = l.global_batch;
  p.layout = l;
  return p;
}

double MedianAfterFirst(const std::vector<double>& steps) {
  std::vector<double> s(steps.begin() + (steps.size() > 1 ? 1 : 0), steps.end());
  std::sort(s.begin(), s.end());
  return s.empty() ? 0 : Quantile(s, 0.5);
}

using Log = std::function<void(const std::string&)>;

//! Rank 0's search with `db`: [{layout, predicted_step_s}] (the simulator's prediction where it
//! runs), or {error} for bad input, or {infeasible} when no layout fits.
Json SearchPicks(const TuneOptions& o, const CostDb& db) {
  planner::SearchOptions so;
  so.top_k = o.top_k;
  so.db = &db;
  so.threads = 1;
  so.fix = o.fix;
  auto r = planner::Search(o.model, o.cluster, o.training, so);
  if (!r) return Json{{"error", r.error().message}};  // bad input: every rank reports it
  if (r->plans.empty()) {
    // Every layout rejected by a rule (a pinned tp no node holds, ...) rather than by memory: say
    // which, and that --fix is where to look.
    std::string why = "the planner found no layout that fits";
    if (r->searched == 0 || !r->rejected.contains("out_of_memory")) {
      why += " the model, the cluster and the --fix constraints (rejected:";
      for (const auto& [reason, count] : r->rejected) why += " " + reason + " " + std::to_string(count);
      why += r->rejected.empty() ? " none)" : ")";
    }
    return Json{{"infeasible", why}};
  }
  Json picks = Json::array();
  for (const auto& rp : r->plans) {
    const Plan p = MakePlan(o, rp.layout);
    auto sim = planner::Simulate(p, &db);
    picks.push_back({{"layout", LayoutToString(rp.layout)},
                     {"predicted_step_s", sim ? sim->prediction.step_time_s : rp.prediction.step_time_s}});
  }
  return picks;
}

//! Rank 0 plans with `db`; every rank gets its picks, or its error.
Result<Json> PlanRound(executor::Communicator& world, const TuneOptions& o, const CostDb& db) {
  Json picks = world.rank() == 0 ? SearchPicks(o, db) : Json::array();
  PX_ASSIGN(const std::string shared, ShareString(world, picks.dump()));
  picks = Json::parse(shared);
  if (picks.contains("error")) return BadInput(picks["error"].get<std::string>());
  if (picks.contains("infeasible")) return Error{picks["infeasible"].get<std::string>(), ErrorKind::kInfeasible};
  return picks;
}

//! Runs `plan` for o.steps steps on every rank, its measured trace written to `trace_path` (rank 0).
//! Every rank agrees whether it ran everywhere: `c.measured_step_s` when it did, else `c.failure`
//! (rank 0's reason). After a failure inside a step the backend and world are rebuilt, since a
//! peer may have been left inside a collective. The error is one the tune cannot go on after
//! (a backend or world that could not be rebuilt).
Status RunCandidate(executor::LaunchContext& launch, std::unique_ptr<executor::Backend>& backend,
                    std::unique_ptr<executor::Communicator>& world, const TuneOptions& o, const Plan& plan,
                    const std::string& trace_path, TuneCandidate& c) {
  executor::TrainingRunOptions ro;
  ro.steps = o.steps;
  ro.trace_path = trace_path;
  ro.trainer.data.seed = plan.training.seed;
  backend->SetMemoryLimit(o.memory_limit_bytes);
  bool step_failed = false;
  auto report = executor::RunTraining(plan, *backend, *world, ro, {}, {}, &step_failed);
  // Every rank learns whether the candidate ran everywhere (a rank whose peer failed inside a
  // step returns after the watchdog gives up on it).
  double failed[2] = {report ? 0.0 : 1.0, step_failed ? 1.0 : 0.0};
  Status agreed = world->HostAllReduce(failed, 2, executor::ReduceOp::kMax);
  if (agreed && failed[0] == 0) {
    c.measured_step_s = MedianAfterFirst(report->step_times_s);
    return {};
  }
  c.failure = report ? std::string("a peer failed (") + (agreed ? "see its rank's report" : agreed.error().message) + ")"
                     : report.error().message;
  // Share rank 0's view of the reason (the lowest rank that saw an error says the most).
  auto reason = ShareString(*world, c.failure);
  if (reason) c.failure = *reason;
  if (failed[1] == 0 && agreed) return {};
  // A peer may have been left inside a collective: start from a fresh backend and world.
  backend->EmptyCache();
  PX_ASSIGN(auto fresh, executor::CreateBackend(o.backend));
  PX_ASSIGN(world, fresh->ConnectWorld(launch, o.timeout_s));
  backend = std::move(fresh);
  return {};
}

//! Rank 0: refines `db` from the candidate's measured trace (its errors before and after, or
//! `c.refine_failure`) and logs the candidate's line.
void RefineFromCandidate(const Plan& plan, const std::string& trace_path, const std::string& inline_layout,
                         const Log& log, CostDb& db, TuneCandidate& c) {
  auto trace = traces::ReadChromeTrace(trace_path);
  if (trace) {
    auto refined = Refine(plan, *trace, trace_path, db);
    if (refined) {
      db = refined->db;
      c.error_before = refined->before.step_time_error;
      c.error_after = refined->after.step_time_error;
    } else {
      c.refine_failure = refined.error().message;
    }
  } else {
    c.refine_failure = trace.error().message;
  }
  if (!c.refine_failure.empty()) log("candidate " + inline_layout + ": not refined: " + c.refine_failure);
  char line[256];
  std::snprintf(line, sizeof line, "round %lld  %-60s predicted %8.3f ms  measured %8.3f ms",
                static_cast<long long>(c.round), inline_layout.c_str(), c.predicted_step_s * 1e3,
                c.measured_step_s * 1e3);
  log(line);
}

//! The candidate that ran fastest (-1: none ran).
int MeasuredBest(const std::vector<TuneCandidate>& candidates) {
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    if (!c.failure.empty()) continue;
    if (best < 0 || c.measured_step_s < candidates[static_cast<size_t>(best)].measured_step_s) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace

Result<TuneResult> RunTune(executor::LaunchContext& launch, std::unique_ptr<executor::Backend>& backend,
                           std::unique_ptr<executor::Communicator>& world, const CostDb& db_in, const TuneOptions& o) {
  TuneResult out;
  out.db = db_in;
  const bool root = world->rank() == 0;
  const Log log = [&](const std::string& line) {
    if (root && o.log) o.log(line);
  };
  std::map<std::string, size_t> measured;  // inline layout -> candidate index
  std::string previous_best;
  for (int64_t round = 1; round <= o.max_rounds; ++round) {
    out.rounds = round;
    // 1. Plan (rank 0) with the database as refined so far; share the layouts and predictions.
    PX_ASSIGN(const Json picks, PlanRound(*world, o, out.db));
    // 2./3. Run what was not measured yet; refine from each trace.
    for (const auto& pick : picks) {
      const std::string inline_layout = pick["layout"].get<std::string>();
      if (measured.count(inline_layout)) continue;
      PX_ASSIGN(Plan plan, ResolvePlan(inline_layout, &o.model, &o.cluster, o.training));
      plan.training.global_batch = plan.layout.global_batch;
      TuneCandidate c;
      c.layout = plan.layout;
      c.round = round;
      c.predicted_step_s = pick["predicted_step_s"].get<double>();
      const std::string trace_path =
          (std::filesystem::path(o.work_dir) / ("tune_candidate_" + std::to_string(out.candidates.size()) + ".json"))
              .string();
      const Status ran = RunCandidate(launch, backend, world, o, plan, trace_path, c);
      if (!c.failure.empty()) log("candidate " + inline_layout + ": failed: " + c.failure);
      if (!ran) return ran.error();
      if (c.failure.empty() && root) RefineFromCandidate(plan, trace_path, inline_layout, log, out.db, c);
      measured[inline_layout] = out.candidates.size();
      out.candidates.push_back(c);
    }
    // 4. The measured best so far; stop when it did not change.
    out.best = MeasuredBest(out.candidates);
    const std::string best_layout =
        out.best >= 0 ? LayoutToString(out.candidates[static_cast<size_t>(out.best)].layout) : "";
    if (round > 1 && best_layout == previous_best) break;
    previous_best = best_layout;
  }
  if (out.best < 0) return Error{"every candidate failed (see the candidates' reasons)", ErrorKind::kInternal};
  out.best_plan = MakePlan(o, out.candidates[static_cast<size_t>(out.best)].layout);
  if (auto sim = planner::Simulate(out.best_plan, &out.db)) out.best_plan.prediction = planner::PredictionToJson(sim->prediction);
  return out;
}

Json TuneToJson(const TuneResult& r, const std::string& costdb_path) {
  auto one = [](const TuneCandidate& c) {
    Json j{{"layout", LayoutToJson(c.layout)},
           {"round", c.round},
           {"predicted_step_s", c.predicted_step_s},
           {"measured_step_s", c.failure.empty() ? Json(c.measured_step_s) : Json(nullptr)}};
    if (!c.failure.empty()) j["failure"] = c.failure;
    if (c.failure.empty() && c.refine_failure.empty()) {
      j["refine_error_before"] = c.error_before;
      j["refine_error_after"] = c.error_after;
    }
    if (!c.refine_failure.empty()) j["refine_failure"] = c.refine_failure;
    return j;
  };
  Json cands = Json::array();
  for (const auto& c : r.candidates) cands.push_back(one(c));
  Json best = r.best >= 0 ? one(r.candidates[static_cast<size_t>(r.best)]) : Json(nullptr);
  return Json{{"candidates", cands}, {"best", best}, {"rounds", r.rounds}, {"costdb", costdb_path}};
}

}  // namespace parallax::profiler
