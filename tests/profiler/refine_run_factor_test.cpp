// `parallax refine` learns per-family run factors: a trace in which every compute op ran 1.25x
// the calibrated prediction gives factors of 1.25, and a layout whose shapes the trace never ran
// is then predicted 1.25x slower too (its shapes come from calibrated samples, scaled): 1.25001.
// Without run factors only the traced shapes moved, and interpolation between them and the
// calibrated shapes mixed the two: 1.2399 (2026-11-25), outside the 0.1% this test allows.
// The database's calibrated samples are twice the roofline everywhere, so the expected figures
// follow from the definitions alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/presets.h"
#include "planner/cost/compute.h"
#include "run_command.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr double kSlowdown = 1.25;

double ComputeSeconds(const std::string& args) {
  auto r = test::RunParallax("simulate --model gpt-tiny " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? Json::parse(r.out)["breakdown"]["compute_s"].get<double>() : 0.0;
}

TEST(RefineRunFactors, ATraceSlowerThanCalibratedSlowsShapesItNeverRan) {
  const fs::path dir = fs::temp_directory_path() / ("parallax_run_factor_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cluster = test::WriteTempFile(
      "run_factor_cluster.json",
      R"({"kind":"cluster","version":1,"name":"local","nodes":1,"gpus_per_node":2,"device":"cpu",)"
      R"("intra_node":{"bandwidth_GBps":5,"latency_us":1},"inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");

  // Calibrated samples at twice the roofline (the runs' precision, bf16): one GEMM grid, one
  // streaming family. Every interpolated cost is then twice the roofline as well.
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
  const std::string db_file = (dir / "db.json").string();
  std::ofstream(db_file) << db.dump();

  // The traced layout: its predicted trace with every compute slice 1.25x longer, as measured.
  const std::string traced = "tp=2,micro_batch=2,global_batch=8";
  const std::string predicted = (dir / "predicted.json").string();
  auto sim = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --plan " + traced +
                               " --costdb " + db_file + " --trace " + predicted);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  Json trace = Json::parse(std::ifstream(predicted));
  trace["otherData"]["trace_kind"] = "measured";
  int slowed = 0;
  for (auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "compute") {
      e["dur"] = e["dur"].get<double>() * kSlowdown;
      ++slowed;
    }
  }
  ASSERT_GT(slowed, 100);
  const std::string measured = (dir / "measured.json").string();
  std::ofstream(measured) << trace.dump();

  const std::string refined = (dir / "refined.json").string();
  auto r = test::RunParallax("refine --model gpt-tiny --cluster " + cluster + " --plan " + traced + " --trace " +
                             measured + " --costdb " + db_file + " -o " + refined + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  ASSERT_TRUE(out.contains("run_factors")) << r.out;
  for (const char* family : {"gemm/bf16", "act", "attn_norm", "loss"}) {  // GEMM factors are per dtype
    ASSERT_TRUE(out["run_factors"].contains(family)) << family;
    EXPECT_NEAR(out["run_factors"][family].get<double>(), kSlowdown, 2e-3) << family;
  }
  const Json written = Json::parse(std::ifstream(refined));
  ASSERT_TRUE(written.contains("run_factors"));

  // A layout with other GEMM shapes (full width, four sequences per micro-batch) and byte counts.
  const std::string held_out = "--cluster " + cluster + " --plan dp=2,micro_batch=4,global_batch=8 --costdb ";
  const double calibrated = ComputeSeconds(held_out + db_file);
  const double after = ComputeSeconds(held_out + refined);
  ASSERT_GT(calibrated, 0);
  std::printf("held-out compute, refined / calibrated: %.5f (run factors %.3f)\n", after / calibrated, kSlowdown);
  EXPECT_NEAR(after / calibrated, kSlowdown, 1e-3) << "calibrated " << calibrated << " s, after refine " << after;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parallax
