// `parallax refine` learns per-family run factors: a trace in which every compute op ran 1.25x
// the calibrated prediction gives factors of 1.25, and a layout whose shapes the trace never ran
// is then predicted 1.25x slower too (its shapes come from calibrated samples, scaled): 1.25001.
// Without run factors only the traced shapes moved, and interpolation between them and the
// calibrated shapes mixed the two: 1.2399 (2026-11-25), outside the 0.1% this test allows.
// The database's calibrated samples are twice the roofline everywhere, so the expected figures
// follow from the definitions alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/presets.h"
#include "planner/cost/compute.h"
#include "run_command.h"
#include "scratch_dir.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr double kSlowdown = 1.25;

double ComputeSeconds(const std::string& args) {
  auto r = test::RunParallax("simulate --model gpt-tiny --precision bf16 " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? Json::parse(r.out)["breakdown"]["compute_s"].get<double>() : 0.0;
}

// Calibrated samples at twice the roofline (the runs' precision, bf16, named on every command line:
// a CPU device's default is fp32): one GEMM grid, one streaming family. Every interpolated cost is
// then twice the roofline as well.
std::string TwiceTheRooflineDb(const fs::path& dir) {
  const planner::ComputeModel roof(*DevicePreset("cpu"), DType::kBf16);
  Json gemms = Json::array();
  for (int64_t m : {8, 4096}) {
    for (int64_t n : {8, 4096}) {
      for (int64_t k : {8, 4096}) {
        gemms.push_back({{"m", m}, {"n", n}, {"k", k}, {"dtype", "bf16"},
                         {"time_s", 2 * roof.RooflineGemm(m, n, k)}, {"source", "calibrate"}});
      }
    }
  }
  const double mib = 1 << 20;
  const Json db{{"kind", "costdb"}, {"version", 1}, {"device", "cpu"}, {"launch_overhead_us", 1e-3},
                {"gemm", gemms},
                {"kernels", Json::array({{{"op", "elementwise"}, {"bytes", 1 << 20},
                                          {"time_s", 2 * roof.RooflineMemory(mib)}, {"source", "calibrate"}}})}};
  std::string db_file = (dir / "db.json").string();
  std::ofstream(db_file) << db.dump();
  return db_file;
}

// The predicted trace of `plan` (gpt-tiny on `cluster`, priced with `db_file`), marked measured,
// with each compute slice's duration multiplied by factor(slice), written to dir/measured.json;
// returns that path (empty when simulate failed).
std::string MeasuredFromPrediction(const fs::path& dir, const std::string& cluster, const std::string& plan,
                                   const std::string& db_file, const std::function<double(const Json&)>& factor) {
  const std::string predicted = (dir / "predicted.json").string();
  auto sim = test::RunParallax("simulate --model gpt-tiny --precision bf16 --cluster " + cluster + " --plan " + plan +
                               " --costdb " + db_file + " --trace " + predicted);
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  if (sim.exit_code != 0) return "";
  Json trace = Json::parse(std::ifstream(predicted));
  trace["otherData"]["trace_kind"] = "measured";
  for (auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "compute") e["dur"] = e["dur"].get<double>() * factor(e);
  }
  std::string measured = (dir / "measured.json").string();
  std::ofstream(measured) << trace.dump();
  return measured;
}

TEST(RefineRunFactors, ATraceSlowerThanCalibratedSlowsShapesItNeverRan) {
  const test::Scratch scratch("run_factor");
  const fs::path& dir = scratch.dir;
  const std::string& cluster = scratch.cluster;

  const std::string db_file = TwiceTheRooflineDb(dir);

  // The traced layout: its predicted trace with every compute slice 1.25x longer, as measured.
  const std::string traced = "tp=2,micro_batch=2,global_batch=8";
  int slowed = 0;
  const std::string measured = MeasuredFromPrediction(dir, cluster, traced, db_file, [&](const Json&) {
    ++slowed;
    return kSlowdown;
  });
  ASSERT_FALSE(measured.empty());
  ASSERT_GT(slowed, 100);

  const std::string refined = (dir / "refined.json").string();
  auto r = test::RunParallax("refine --model gpt-tiny --precision bf16 --cluster " + cluster +
                             " --plan " + traced + " --trace " + measured + " --costdb " + db_file +
                             " -o " + refined + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  ASSERT_TRUE(out.contains("run_factors")) << r.out;
  for (const char* family : {"gemm/bf16", "act", "attn_norm", "loss", "loss_bwd"}) {  // GEMM factors are per dtype
    ASSERT_TRUE(out["run_factors"].contains(family)) << family;
    EXPECT_NEAR(out["run_factors"][family].get<double>(), kSlowdown, 2e-3) << family;
  }
  const Json written = Json::parse(std::ifstream(refined));
  ASSERT_TRUE(written.contains("run_factors"));
  // The traced weight gradients (dW += dY^T X into fp32, GemmShape::accumulate) are samples of
  // their own kind, beside the plain GEMMs the trace timed.
  int accumulating = 0, plain = 0;
  for (const auto& g : written["gemm"]) {
    if (g.value("source", "") != "refine") continue;
    (g.value("accumulate", false) ? accumulating : plain) += 1;
  }
  EXPECT_GT(accumulating, 0);
  EXPECT_GT(plain, 0);

  // A layout with other GEMM shapes (full width, four sequences per micro-batch) and byte counts.
  const std::string held_out = "--cluster " + cluster + " --plan dp=2,micro_batch=4,global_batch=8 --costdb ";
  const double calibrated = ComputeSeconds(held_out + db_file);
  const double after = ComputeSeconds(held_out + refined);
  ASSERT_GT(calibrated, 0);
  std::printf("held-out compute, refined / calibrated: %.5f (run factors %.3f)\n", after / calibrated, kSlowdown);
  EXPECT_NEAR(after / calibrated, kSlowdown, 1e-3) << "calibrated " << calibrated << " s, after refine " << after;
}

// On a tensor-parallel trace the loss forward slice holds the cross-entropy's kernels only (its
// statistics are all-gathered in a TP collective of their own, ImplementationProfile::
// loss_reduction), so refine takes it as a loss sample: here it is 7x the prediction, every other
// compute op 1.25x, and the loss family learns 7 (the backward 1.25).
// (Before the all-gather the slice held two all-reduces and their waits, and was left out.)
TEST(RefineRunFactors, ATensorParallelLossForwardIsALossSample) {
  const test::Scratch scratch("loss_tp");
  const fs::path& dir = scratch.dir;
  const std::string& cluster = scratch.cluster;
  const std::string traced = "tp=2,micro_batch=2,global_batch=8";
  const std::string db_file = TwiceTheRooflineDb(dir);
  int losses = 0, gathers = 0;
  const std::string measured = MeasuredFromPrediction(dir, cluster, traced, db_file, [&](const Json& e) {
    const bool loss_fwd = e.value("name", "") == "loss" && e.contains("args") && e["args"].value("phase", "") == "fwd";
    losses += loss_fwd ? 1 : 0;
    return loss_fwd ? 7.0 : kSlowdown;
  });
  ASSERT_FALSE(measured.empty());
  ASSERT_GT(losses, 0);
  // The predicted head holds the statistics' all-gather (layer -1, forward) beside the loss.
  const Json trace = Json::parse(std::ifstream(measured));
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") == "tp_allgather" && e.contains("args") && e["args"].value("layer", 0) == -1 &&
        e["args"].value("phase", "") == "fwd") {
      ++gathers;
    }
  }
  EXPECT_EQ(gathers, losses);
  auto r = test::RunParallax("refine --model gpt-tiny --precision bf16 --cluster " + cluster +
                             " --plan " + traced + " --trace " + measured + " --costdb " + db_file +
                             " -o " + (dir / "refined.json").string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  ASSERT_TRUE(out["run_factors"].contains("loss")) << out["run_factors"].dump();
  EXPECT_NEAR(out["run_factors"]["loss"].get<double>(), 7.0, 1e-2);
  EXPECT_NEAR(out["run_factors"]["loss_bwd"].get<double>(), kSlowdown, 2e-3);
  for (const auto& [why, n] : out["not_sampled"].items()) {
    EXPECT_EQ(why.find("loss"), std::string::npos) << why;
  }
}

// A run whose ops mostly ran at one speed and now and then faster (a machine that switches between
// two speeds): a quarter of the instances of every compute op of the traced layout is half as
// long. The samples are the groups' medians (the slower speed); refine records the measured times
// over those medians, and the planner charges each compute op (ratio - 1) x its time instead of the
// calibrated noise's mean excess, so the refined prediction of the traced layout's compute is the
// run's mean.
TEST(RefineRunFactors, OpTimesBelowTheirMediansAreChargedTheirMean) {
  const test::Scratch scratch("run_mean");
  const fs::path& dir = scratch.dir;
  const std::string& cluster = scratch.cluster;
  const std::string traced = "tp=2,micro_batch=2,global_batch=8";
  const std::string predicted = (dir / "predicted.json").string();
  auto sim = test::RunParallax("simulate --model gpt-tiny --precision bf16 --cluster " + cluster +
                               " --plan " + traced + " --trace " + predicted + " --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const double predicted_compute = Json::parse(sim.out)["breakdown"]["compute_s"].get<double>();
  Json trace = Json::parse(std::ifstream(predicted));
  trace["otherData"]["trace_kind"] = "measured";
  double total = 0, kept = 0;
  int n = 0;
  for (auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "compute") continue;
    const double d = e["dur"].get<double>();
    kept += d;
    ++n;
    // A quarter of every op group's instances (over layers, micro-batches and ranks).
    const Json& a = e["args"];
    const int64_t slot = a["layer"].get<int64_t>() + 2 * a["mb"].get<int64_t>() + a["rank"].get<int64_t>();
    if ((slot % 4 + 4) % 4 == 3) e["dur"] = d / 2;
    total += e["dur"].get<double>();
  }
  ASSERT_GT(n, 100);
  const std::string measured = (dir / "measured.json").string();
  std::ofstream(measured) << trace.dump();
  // The calibrated noise says work runs 10% above its median on average (detours 0, 10, 20 us per
  // 100 us window); refine's own figure for the run must replace it, not add to it.
  const std::string db = test::WriteTempFile(
      "run_mean_db.json",
      R"({"kind":"costdb","version":1,"device":"cpu","noise":{"source":"calibrate","quantum_s":1e-4,)"
      R"("windows":[{"window_s":1e-4,"detour_s":[0,1e-5,2e-5]}]}})");
  const std::string traced_args = "--cluster " + cluster + " --plan " + traced + " --costdb ";
  EXPECT_NEAR(ComputeSeconds(traced_args + db) / predicted_compute, 1.10, 0.01) << "the calibrated mean excess";
  const std::string refined = (dir / "refined.json").string();
  auto r = test::RunParallax("refine --model gpt-tiny --precision bf16 --cluster " + cluster +
                             " --plan " + traced + " --trace " + measured + " --costdb " + db +
                             " -o " + refined + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  // Each op group's instances are equal before the halving, so its median is the unhalved time
  // and the ratio is the measured total over the unhalved one (a quarter of most groups halved;
  // the optimizer's slot never is; the grad-norm slices are not sampled).
  const double ratio = out["run_op_times"]["mean_over_median"].get<double>();
  EXPECT_NEAR(ratio, total / kept, 3e-3);
  EXPECT_LT(ratio, 0.9);
  EXPECT_FALSE(out["run_op_times"]["disturbed"].get<bool>());
  Json written = Json::parse(std::ifstream(refined));
  EXPECT_EQ(written["run_op_times"]["source"], "refine");
  ASSERT_TRUE(written.contains("noise")) << "the calibrated windows stay for the synchronization waits";
  // The halved ops end early and their successors start where they were: the device idles between
  // them, which refine measures as host gap (RefineOpGap); the op times' charge is without it.
  EXPECT_GT(written.value("op_gap_us", 0.0), 0.0);
  written.erase("op_gap_us");
  const std::string no_gap = (dir / "no_gap.json").string();
  std::ofstream(no_gap) << written.dump();
  const double charged = ComputeSeconds(traced_args + no_gap);
  EXPECT_NEAR(charged / predicted_compute, ratio, 5e-3) << "compute after refine, without the gap " << charged << " s";
  const double after = ComputeSeconds(traced_args + refined);
  // Refined again on the same trace: the figure is the run's own, so it stays.
  const std::string twice = (dir / "twice.json").string();
  auto r2 = test::RunParallax("refine --model gpt-tiny --precision bf16 --cluster " + cluster +
                              " --plan " + traced + " --trace " + measured + " --costdb " +
                              refined + " -o " + twice + " --json");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NEAR(Json::parse(r2.out)["run_op_times"]["mean_over_median"].get<double>(), ratio, 1e-9);
  EXPECT_NEAR(ComputeSeconds(traced_args + twice) / after, 1.0, 2e-3);
}

// A run in which a quarter of every op group's instances took 5x their time (another process on
// the machine) averages about 2x its medians: refine says the run was disturbed, in JSON and in
// its text, and refuses what the disturbance inflated (the op-time charge, the contention sample):
// the database it writes predicts what the same run refined undisturbed predicts, since the per-op
// medians are the same. Charged, the disturbance would have doubled every compute op.
TEST(RefineRunFactors, ADisturbedRunIsSaidToBeAndMovesNeitherTheOpChargeNorTheContention) {
  const test::Scratch scratch("disturbed");
  const fs::path& dir = scratch.dir;
  const std::string plan = "tp=2,micro_batch=2,global_batch=8";
  const std::string db = TwiceTheRooflineDb(dir);
  auto refine_args = [&](const std::string& measured, const std::string& out) {
    return "refine --model gpt-tiny --precision bf16 --cluster " + scratch.cluster + " --plan " + plan +
           " --trace " + measured + " --costdb " + db + " -o " + (dir / out).string();
  };
  const std::string quiet = MeasuredFromPrediction(dir, scratch.cluster, plan, db, [](const Json&) { return 1.0; });
  ASSERT_FALSE(quiet.empty());
  auto q = test::RunParallax(refine_args(quiet, "refined_quiet.json"));
  ASSERT_EQ(q.exit_code, 0) << q.err;

  const std::string measured = MeasuredFromPrediction(dir, scratch.cluster, plan, db, [](const Json& e) {
    const Json& a = e["args"];
    const int64_t slot = a["layer"].get<int64_t>() + 2 * a["mb"].get<int64_t>() + a["rank"].get<int64_t>();
    return (slot % 4 + 4) % 4 == 3 ? 5.0 : 1.0;
  });
  ASSERT_FALSE(measured.empty());
  const std::string args = refine_args(measured, "refined.json");
  auto j = test::RunParallax(args + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const Json out = Json::parse(j.out);
  EXPECT_GT(out["run_op_times"]["mean_over_median"].get<double>(), 1.5);
  EXPECT_TRUE(out["run_op_times"]["disturbed"].get<bool>());
  EXPECT_FALSE(out["run_op_times"]["applied"].get<bool>());
  EXPECT_EQ(out["disturbed"]["refused"], Json({"contention", "run_op_times"}));
  auto text = test::RunParallax(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("warning: the run was disturbed"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Refused: its contention sample"), std::string::npos) << text.out;

  const Json input_db = Json::parse(std::ifstream(db));
  const Json refined_db = Json::parse(std::ifstream(dir / "refined.json"));
  EXPECT_EQ(refined_db.contains("run_op_times"), input_db.contains("run_op_times"));
  EXPECT_EQ(refined_db.value("contention_factor", 1.0), input_db.value("contention_factor", 1.0));
  const std::string sim = "--cluster " + scratch.cluster + " --plan " + plan + " --costdb ";
  const double quiet_s = ComputeSeconds(sim + (dir / "refined_quiet.json").string());
  const double disturbed_s = ComputeSeconds(sim + (dir / "refined.json").string());
  ASSERT_GT(quiet_s, 0);
  EXPECT_NEAR(disturbed_s / quiet_s, 1.0, 0.02);
}

// The executor's host time between two ops (the device idles meanwhile) is measured from the
// trace and charged to every compute op: a one-rank trace whose ops run as predicted but each
// starts 20 us after the previous one ends is re-predicted to its measured step time; its op
// samples are the ops' own times, so the gap is not counted twice. A tensor-parallel trace whose
// compute waits for its TP collectives has no host gap: the waits are the collectives'.
TEST(RefineOpGap, TheHostTimeBetweenOpsIsMeasuredAndChargedPerOp) {
  const test::Scratch scratch("op_gap");
  const fs::path& dir = scratch.dir;
  const std::string& cluster = scratch.cluster;
  const std::string one_rank = (dir / "one_rank.json").string();
  std::ofstream(one_rank) << R"({"kind":"cluster","version":1,"name":"one","nodes":1,"gpus_per_node":1,"device":"cpu",)"
                             R"("intra_node":{"bandwidth_GBps":5,"latency_us":1},"inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})";
  constexpr double kGapUs = 20;
  const std::string plan = "micro_batch=2,global_batch=8";
  const std::string predicted = (dir / "predicted.json").string();
  auto sim = test::RunParallax("simulate --model gpt-tiny --precision bf16 --cluster " + one_rank +
                               " --plan " + plan + " --trace " + predicted + " --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const double before = Json::parse(sim.out)["step_time_s"].get<double>();
  Json trace = Json::parse(std::ifstream(predicted));
  trace["otherData"]["trace_kind"] = "measured";
  std::vector<Json*> ops;
  for (auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "compute") ops.push_back(&e);
  }
  ASSERT_GT(ops.size(), 100u);
  std::stable_sort(ops.begin(), ops.end(), [](const Json* a, const Json* b) { return (*a)["ts"] < (*b)["ts"]; });
  for (size_t i = 0; i < ops.size(); ++i) (*ops[i])["ts"] = (*ops[i])["ts"].get<double>() + kGapUs * static_cast<double>(i);
  const std::string measured = (dir / "measured.json").string();
  std::ofstream(measured) << trace.dump();
  const std::string refined = (dir / "refined.json").string();
  auto r = test::RunParallax("refine --model gpt-tiny --precision bf16 --cluster " + one_rank +
                             " --plan " + plan + " --trace " + measured + " --costdb " +
                             TwiceTheRooflineDb(dir) + " -o " + refined + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  EXPECT_NEAR(out["op_gap"]["mean_us"].get<double>(), kGapUs, 0.01);
  EXPECT_TRUE(out["op_gap"]["applied"].get<bool>());
  EXPECT_NEAR(Json::parse(std::ifstream(refined))["op_gap_us"].get<double>(), kGapUs, 0.01);
  const double meas = out["step_time"]["measured_s"].get<double>();
  const double after = out["step_time"]["predicted_after_s"].get<double>();
  EXPECT_LT(before / meas, 0.9) << "the gaps are a tenth of the step or more";
  EXPECT_NEAR(after / meas, 1.0, 0.01) << "measured " << meas << " s, after refine " << after << " s";

  const std::string tp_plan = "tp=2,micro_batch=2,global_batch=8";
  const std::string tp_pred = (dir / "tp_predicted.json").string();
  auto tp_sim =
      test::RunParallax("simulate --model gpt-tiny --precision bf16 --cluster " + cluster +
                        " --plan " + tp_plan + " --trace " + tp_pred + " --json");
  ASSERT_EQ(tp_sim.exit_code, 0) << tp_sim.err;
  Json tp_trace = Json::parse(std::ifstream(tp_pred));
  tp_trace["otherData"]["trace_kind"] = "measured";
  const std::string tp_meas = (dir / "tp_measured.json").string();
  std::ofstream(tp_meas) << tp_trace.dump();
  auto tr = test::RunParallax("refine --model gpt-tiny --precision bf16 --cluster " + cluster +
                              " --plan " + tp_plan + " --trace " + tp_meas + " --costdb " +
                              TwiceTheRooflineDb(dir) + " -o " +
                              (dir / "tp_refined.json").string() + " --json");
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  const Json tp_out = Json::parse(tr.out);
  EXPECT_GT(tp_out["op_gap"]["pairs"].get<int64_t>(), 20);
  EXPECT_NEAR(tp_out["op_gap"]["mean_us"].get<double>(), 0.0, 1e-3);
}

// Refining a trace equal to the prediction changes nothing, whichever implementation profile the
// plan names: refine describes the trace's ops by the plan's own profile (before 2026-11-27 it used
// our executor's, so a megatron-2021 plan on A100s came back 11.2% slower). On an A100 the unfused
// attention core's score GEMMs and passes are priced by the device's attention figures, in both
// directions at the same GEMM shapes, so their samples re-predict exactly too.
// Predicted step, then the step predicted with the database refined from that prediction's trace
// (marked measured), for gpt-1.3b on 8 A100s under `impl`.
std::pair<double, double> PredictedThenRefined(const fs::path& dir, const std::string& empty, const std::string& impl) {
  const std::string plan = (dir / (impl + "_plan.json")).string();
  auto p = test::RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --nodes 1 --precision fp16 --implementation " +
                             impl + " --global-batch 64 --fix dp=8,tp=1,pp=1,micro_batch=2,recompute=none,zero=0 -o " +
                             plan);
  EXPECT_EQ(p.exit_code, 0) << impl << ": " << p.err;
  const std::string predicted = (dir / (impl + "_pred.json")).string();
  auto sim = test::RunParallax("simulate --plan " + plan + " --trace " + predicted + " --json");
  EXPECT_EQ(sim.exit_code, 0) << impl << ": " << sim.err;
  if (p.exit_code != 0 || sim.exit_code != 0) return {0, 0};
  Json trace = Json::parse(std::ifstream(predicted));
  trace["otherData"]["trace_kind"] = "measured";
  const std::string measured = (dir / (impl + "_meas.json")).string();
  std::ofstream(measured) << trace.dump();
  const std::string refined = (dir / (impl + "_refined.json")).string();
  auto r = test::RunParallax("refine --plan " + plan + " --trace " + measured + " --costdb " + empty + " -o " + refined);
  EXPECT_EQ(r.exit_code, 0) << impl << ": " << r.err;
  auto again = test::RunParallax("simulate --plan " + plan + " --costdb " + refined + " --json");
  EXPECT_EQ(again.exit_code, 0) << impl << ": " << again.err;
  if (r.exit_code != 0 || again.exit_code != 0) return {0, 0};
  return {Json::parse(sim.out)["step_time_s"].get<double>(), Json::parse(again.out)["step_time_s"].get<double>()};
}

TEST(RefineIdempotence, ATraceEqualToThePredictionChangesNothingUnderEveryProfile) {
  const test::Scratch scratch("refine_idempotent");
  const std::string empty = (scratch.dir / "empty.json").string();
  std::ofstream(empty) << R"({"kind":"costdb","version":1,"device":"a100-sxm-80g"})";
  for (const std::string impl : {"megatron-2021", "megatron-2022", "parallax", "deepspeed", "megatron-core"}) {
    const auto [before, after] = PredictedThenRefined(scratch.dir, empty, impl);
    ASSERT_GT(before, 0) << impl;
    // megatron-core and deepspeed overlap the DP gradient reduction with the backward: the compute
    // slices beside it carry the contention that refine fits back as a factor, not exactly (0.23%
    // and 0.06% on 2026-11-27); the others re-predict to rounding.
    const double tolerance = impl == "megatron-core" || impl == "deepspeed" ? 0.01 : 1e-4;
    EXPECT_NEAR(after / before, 1.0, tolerance) << impl << ": " << before << " s predicted, " << after << " s after refine";
  }
}

}  // namespace
}  // namespace parallax
