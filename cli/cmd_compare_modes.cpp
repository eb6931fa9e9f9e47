// `parallax compare-modes`: runs classic training modes (docs/classic_modes.md) on the same model
// and data and compares them, as users ask which pays off on their machines:
//   parallax compare-modes --model gpt-tiny --workers 4 --global-batch 8 --steps 12
//       --modes "allreduce;sync=backup:1;sync=async,servers=colocated:1;compression=topk:0.1"
//       --inject-slow rank=1,factor=3 [--cluster C] [--costdb db.json] -o out
// For each mode: the predicted step time (the simulator for the all-reduce family, the classic
// modes' estimate otherwise, planner/estimate/sync_modes.h), then `mpirun -np R parallax run`
// (R = workers + dedicated servers) on a one-node cluster of R ranks with the straggler as a
// cluster slowdown. Writes out.json (per mode: losses and wall clock per step, predicted and
// measured step time and tokens/s) and out.csv (mode, step, loss, wall_clock_s); progress on
// stderr. The measured step is model/step_time.h's (for local:H, per period of H steps).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "cli/inputs.h"
#include "executor/runtime/classic/classic_modes.h"
#include "model/load.h"
#include "model/step_time.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/estimate/sync_modes.h"
#include "planner/sim/simulator.h"

namespace parallax::cli {
namespace {

struct CompareOptions {
  std::string model = "gpt-tiny";
  std::string cluster = "local-cpu";
  std::string costdb;
  std::string modes = "allreduce;sync=backup:1;sync=async,servers=colocated:1;compression=topk:0.1";
  std::string inject_slow;
  std::string mpirun = "mpirun --oversubscribe";
  std::string output = "compare_modes";
  int64_t workers = 4, global_batch = 8, steps = 12;
  //! Calibrate (CPU, quick) with each mode's rank count just before its run; the prediction reads it.
  bool calibrate = false;
};

//! One mode's plan on a one-node cluster of exactly its job's ranks (with the straggler).
struct ModeSetup {
  std::string mode;
  PlanInputs in;
  std::string cluster_file;
  int64_t ranks = 1;
};

std::vector<std::string> SplitModes(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string m; std::getline(in, m, ';');) {
    if (!m.empty()) out.push_back(m);
  }
  return out;
}

std::string Quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Result<ModeSetup> SetUp(const CompareOptions& o, const std::string& mode, const executor::InjectSlow& slow,
                        const std::filesystem::path& dir, size_t index) {
  const std::string layout = "dp=" + std::to_string(o.workers) + ",global_batch=" + std::to_string(o.global_batch) +
                             (mode == "allreduce" ? "" : "," + mode);
  auto parsed = ParseInlineLayout(layout);
  if (!parsed) return BadInput("--modes: \"" + mode + "\": " + parsed.error().message);
  PX_ASSIGN(ClusterSpec cluster, ResolveCluster(o.cluster));
  cluster.nodes = 1;
  cluster.gpus_per_node = parsed->job_ranks();
  if (slow.factor > 1) cluster.stragglers.ranks.push_back({.index = slow.rank, .factor = slow.factor});
  ModeSetup s;
  s.mode = mode;
  s.ranks = parsed->job_ranks();
  s.cluster_file = (dir / ("cluster_" + std::to_string(index) + ".json")).string();
  PX_TRY(WriteJsonAtomic(s.cluster_file, ClusterToJson(cluster)));
  InputArgs args;
  args.model = o.model;
  args.cluster = s.cluster_file;
  args.plan = layout;
  args.costdb = o.costdb;
  PX_ASSIGN(s.in, ResolvePlanInputs(args));
  const Plan& plan = s.in.plan;
  if (Status st = ValidateLayout(plan.layout, plan.model, plan.cluster); !st) return BadInput("--modes: \"" + mode + "\": " + st.error().message);
  if (!plan.layout.sync.is_default()) {
    if (Status st = executor::ValidateClassicExecution(plan, s.ranks); !st) return BadInput("--modes: \"" + mode + "\": " + st.error().message);
  }
  return s;
}

//! The simulator's step for the all-reduce family on an even cluster, the classic estimate otherwise.
Result<double> PredictedStep(const Plan& plan, const CostDb* db) {
  if (plan.layout.sync.is_default() && plan.cluster.stragglers.empty()) {
    PX_ASSIGN(const planner::SimResult sim, planner::Simulate(plan, db, {}));
    return sim.prediction.step_time_s;
  }
  planner::CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
  const planner::PlanCosts pc = planner::CostPlan(ctx, plan);
  return planner::EstimateSyncMode(plan, pc, planner::EstimateStepTime(plan, pc), db).step_time_s;
}

//! The costs calibrated at `db` and the device and links measured beside them (its .cluster.json).
Status UseCostDb(ModeSetup& s, const std::string& db) {
  PX_ASSIGN(s.in.db, LoadCostDbFor(db, s.in.plan.cluster, false));
  PX_ASSIGN(const ClusterSpec measured, ResolveCluster(db + ".cluster.json"));
  s.in.plan.cluster.device = measured.device;
  s.in.plan.cluster.intra_node = measured.intra_node;
  s.in.plan.cluster.inter_node = measured.inter_node;
  s.in.plan.cluster.cpus_per_node = measured.cpus_per_node;
  return {};
}

std::string SelfExe() {
  std::array<char, 4096> self{};
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  return n > 0 ? std::string(self.data(), static_cast<size_t>(n)) : "parallax";
}

//! `mpirun -np R parallax calibrate --backend cpu --quick` for `s`'s rank count, loaded for its plan:
//! the costs of this machine as loaded as it is now, with as many ranks sharing it as the run has.
Status Calibrate(const CompareOptions& o, ModeSetup& s, const std::filesystem::path& dir) {
  const std::string db = (dir / ("costdb_" + std::to_string(s.ranks) + ".json")).string();
  const std::string log = (dir / ("calibrate_" + std::to_string(s.ranks) + ".log")).string();
  std::fprintf(stderr, "compare-modes: calibrating with %lld ranks...\n", static_cast<long long>(s.ranks));
  const std::string cmd = o.mpirun + " -np " + std::to_string(s.ranks) + " " + Quoted(SelfExe()) +
                          " calibrate --backend cpu --quick --no-progress --model " + Quoted(o.model) + " -o " +
                          Quoted(db) + " --cluster-out " + Quoted(db + ".cluster.json") + " > " + Quoted(log) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    return Error{"compare-modes: calibrating failed (" + cmd + "); see " + log, ErrorKind::kInternal};
  }
  return UseCostDb(s, db);
}

//! The calibration of `s`'s rank count: measured now the first time, read again after.
Status UseCalibration(const CompareOptions& o, ModeSetup& s, const std::filesystem::path& dir,
                      std::vector<int64_t>* done) {
  if (std::find(done->begin(), done->end(), s.ranks) == done->end()) {
    done->push_back(s.ranks);
    return Calibrate(o, s, dir);
  }
  return UseCostDb(s, (dir / ("costdb_" + std::to_string(s.ranks) + ".json")).string());
}

//! `parallax run --json` of the mode under mpirun, its stdout parsed; stderr kept in the work dir.
Result<Json> RunMode(const CompareOptions& o, const ModeSetup& s, const std::filesystem::path& dir, size_t index) {
  const std::string exe = SelfExe();
  const std::string log = (dir / ("run_" + std::to_string(index) + ".log")).string();
  std::string cmd = o.mpirun + " -np " + std::to_string(s.ranks) + " " + Quoted(exe) + " run --model " +
                    Quoted(o.model) + " --cluster " + Quoted(s.cluster_file) + " --plan " +
                    Quoted(LayoutToString(s.in.plan.layout)) + " --steps " + std::to_string(o.steps) + " --json";
  if (!o.inject_slow.empty()) cmd += " --inject-slow " + Quoted(o.inject_slow);
  cmd += " 2> " + Quoted(log);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return Error{"compare-modes: could not start: " + cmd, ErrorKind::kInternal};
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;) out.append(buf.data(), got);
  const int rc = ::pclose(pipe);
  Json j = Json::parse(out, nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.contains("losses")) {
    return Error{"compare-modes: mode \"" + s.mode + "\" failed (" + cmd + "); its stderr is in " + log,
                 ErrorKind::kInternal};
  }
  return j;
}

//! Wall clock at the end of each step: the classic modes report it, the all-reduce path's steps
//! run back to back.
std::vector<double> WallClock(const Json& run) {
  std::vector<double> wall;
  if (run.contains("classic") && run["classic"].contains("wall_clock_s")) {
    wall = run["classic"]["wall_clock_s"].get<std::vector<double>>();
  }
  if (wall.empty()) {
    double t = 0;
    for (double s : run["step_times_s"].get<std::vector<double>>()) wall.push_back(t += s);
  }
  return wall;
}

//! model/step_time.h's measured step over periods of `h` steps (the step itself when h = 1), per step.
double MeasuredStep(const std::vector<double>& wall, int64_t h) {
  std::vector<double> periods;
  double last = 0;
  for (size_t i = static_cast<size_t>(h) - 1; i < wall.size(); i += static_cast<size_t>(h)) {
    periods.push_back((wall[i] - last) / static_cast<double>(h));
    last = wall[i];
  }
  return MeasuredStepTime(periods);
}

Result<Json> CompareOne(const CompareOptions& o, const ModeSetup& s, const std::filesystem::path& dir, size_t index) {
  const Plan& plan = s.in.plan;
  const CostDb* db = s.in.db ? &*s.in.db : nullptr;
  PX_ASSIGN(const double predicted, PredictedStep(plan, db));
  std::fprintf(stderr, "compare-modes: %s on %lld ranks: predicted %.2f ms, running %lld steps...\n", s.mode.c_str(),
               static_cast<long long>(s.ranks), predicted * 1e3, static_cast<long long>(o.steps));
  PX_ASSIGN(const Json run, RunMode(o, s, dir, index));
  const std::vector<double> wall = WallClock(run);
  const int64_t h = plan.layout.sync.kind == SyncKind::kLocal ? plan.layout.sync.local_steps : 1;
  const double measured = MeasuredStep(wall, h);
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
  const double tokens = static_cast<double>(plan.layout.global_batch * seq);
  std::fprintf(stderr, "compare-modes: %s: measured %.2f ms (%+.1f%%)\n", s.mode.c_str(), measured * 1e3,
               measured > 0 ? 100 * (predicted / measured - 1) : 0.0);
  Json m{{"mode", s.mode},
         {"layout", LayoutToString(plan.layout)},
         {"ranks", s.ranks},
         {"predicted_step_s", predicted},
         {"measured_step_s", measured},
         {"predicted_tokens_per_s", tokens / predicted},
         {"measured_tokens_per_s", measured > 0 ? tokens / measured : 0.0},
         {"losses", run["losses"]},
         {"wall_clock_s", wall}};
  if (run.contains("classic")) {
    for (const char* k : {"staleness_histogram", "dropped_gradients"}) {
      if (run["classic"].contains(k)) m[k] = run["classic"][k];
    }
  }
  return m;
}

Status WriteCsv(const std::string& path, const Json& modes) {
  std::ofstream f(path);
  f << "mode,step,loss,wall_clock_s\n";
  for (const Json& m : modes) {
    const auto& losses = m["losses"];
    const auto& wall = m["wall_clock_s"];
    for (size_t i = 0; i < losses.size() && i < wall.size(); ++i) {
      f << '"' << m["mode"].get<std::string>() << "\"," << i << ',' << losses[i].get<double>() << ','
        << wall[i].get<double>() << '\n';
    }
  }
  if (!f) return Error{path + ": could not be written", ErrorKind::kIo};
  return {};
}

int RunCompare(const CompareOptions& o) {
  auto slow = executor::ParseInjectSlow(o.inject_slow);
  if (!slow) return ReportError(slow.error(), false);
  const std::vector<std::string> modes = SplitModes(o.modes);
  if (modes.empty()) return ReportError(BadInput("--modes: no mode given"), false);
  // Open MPI refuses root without these (containers run as root); other MPIs ignore them.
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const auto dir = std::filesystem::path(o.output + ".work");
  std::filesystem::create_directories(dir);
  std::vector<ModeSetup> setups;
  for (size_t i = 0; i < modes.size(); ++i) {
    auto s = SetUp(o, modes[i], *slow, dir, i);
    if (!s) return ReportError(s.error(), false);
    setups.push_back(std::move(*s));
  }
  Json out{{"model", o.model},
           {"workers", o.workers},
           {"global_batch", o.global_batch},
           {"steps", o.steps},
           {"inject_slow", o.inject_slow},
           {"costdb", o.calibrate ? std::string("calibrated per rank count (--calibrate)") : o.costdb},
           {"measured_step_rule", kMeasuredStepRule},
           {"modes", Json::array()}};
  std::vector<int64_t> calibrated;
  for (size_t i = 0; i < setups.size(); ++i) {
    if (o.calibrate) {
      if (Status st = UseCalibration(o, setups[i], dir, &calibrated); !st) return ReportError(st.error(), false);
    }
    auto m = CompareOne(o, setups[i], dir, i);
    if (!m) return ReportError(m.error(), false);
    out["modes"].push_back(std::move(*m));
  }
  if (Status st = WriteJsonAtomic(o.output + ".json", out); !st) return ReportError(st.error(), false);
  if (Status st = WriteCsv(o.output + ".csv", out["modes"]); !st) return ReportError(st.error(), false);
  std::printf("%-44s %12s %12s %8s\n", "mode", "predicted", "measured", "error");
  for (const Json& m : out["modes"]) {
    const double p = m["predicted_step_s"].get<double>(), q = m["measured_step_s"].get<double>();
    std::printf("%-44s %9.2f ms %9.2f ms %+7.1f%%\n", m["mode"].get<std::string>().c_str(), p * 1e3, q * 1e3,
                q > 0 ? 100 * (p / q - 1) : 0.0);
  }
  std::printf("wrote %s.json and %s.csv\n", o.output.c_str(), o.output.c_str());
  return 0;
}

}  // namespace

void RegisterCompareModesCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = root.add_subcommand("compare-modes",
                                  "Run classic training modes on the same model and data; loss vs step and wall clock, "
                                  "predicted and measured throughput (JSON, CSV)");
  SetExample(cmd, "parallax compare-modes --workers 2 --modes \"allreduce;sync=backup:1\" --steps 12 -o out");
  cmd->add_option("--model", o->model, "Model preset or JSON (default gpt-tiny)");
  cmd->add_option("--cluster", o->cluster, "Cluster preset or JSON the job's node is taken from (default local-cpu)");
  cmd->add_option("--costdb", o->costdb, "Measured costs for the predictions (parallax calibrate)");
  cmd->add_flag("--calibrate", o->calibrate,
                "Calibrate the CPU backend (quick) with each mode's rank count before its runs and predict from that");
  cmd->add_option("--modes", o->modes, "Modes separated by ';': allreduce or inline settings (sync=..., servers=..., "
                                       "compression=..., data=...)");
  cmd->add_option("--workers", o->workers, "Data-parallel workers")->check(AtLeast(1));
  cmd->add_option("--global-batch", o->global_batch, "Sequences per step")->check(AtLeast(1));
  cmd->add_option("--steps", o->steps, "Steps per mode")->check(AtLeast(2));
  cmd->add_option("--inject-slow", o->inject_slow, "rank=R,factor=F: one slow worker in every mode");
  cmd->add_option("--mpirun", o->mpirun, "How to start a job (the rank count follows as -np R)");
  cmd->add_option("-o,--output", o->output, "Output prefix: PREFIX.json and PREFIX.csv");
  cmd->callback([o, &state] { state.exit_code = RunCompare(*o); });
}

}  // namespace parallax::cli
