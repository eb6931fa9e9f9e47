// `parallax calibrate --import-nccl-tests`: writes a cost database that `plan --costdb` accepts,
// and a malformed output exits 2 naming the file and line without writing anything.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "model/op_catalogue.h"
#include "run_command.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& name) { return std::string(PARALLAX_TEST_DATA_DIR) + "/nccl-tests/" + name; }

TEST(CliCalibrate, ImportFeedsThePlanner) {
  const std::string out = (fs::temp_directory_path() / "parallax_import_db.json").string();
  fs::remove(out);
  auto r = test::RunParallax("calibrate --import-nccl-tests " + Shared("a100_1node8_all_reduce_perf_superbench.txt") +
                             " " + Shared("a100_1node8_all_gather_perf_superbench.txt") + " " +
                             Shared("a100_1node8_reduce_scatter_perf_superbench.txt") + " --device a100-sxm-80g -o " +
                             out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["imported"].size(), 6u);
  EXPECT_EQ(j["device"], "a100-sxm-80g");
  auto plan = test::RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --top 1 --costdb " + out +
                                " --json");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.err.find("warning"), std::string::npos) << plan.err;  // collectives only: no catalogue keys
}

TEST(CliCalibrate, MalformedOutputExitsTwoAndWritesNothing) {
  const std::string bad = test::WriteTempFile(
      "all_reduce_perf_bad.txt",
      "# Using devices\n#  Rank  0 Group  0 Pid 1 on a device  0 [0x0f] NVIDIA H100 80GB HBM3\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n           8             2     float     sum      -1    oops\n");
  const std::string out = (fs::temp_directory_path() / "parallax_import_bad_db.json").string();
  fs::remove(out);
  auto r = test::RunParallax("calibrate --import-nccl-tests " + bad + " -o " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad + ":4: expected 13 fields"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliCalibrate, QuickMeasurementFeedsPlanAndSimulate) {
  // One process (no mpirun): GEMMs and kernel families through the CPU backend, no collectives.
  const std::string db = (fs::temp_directory_path() / "parallax_calibrate_quick_db.json").string();
  const std::string cluster = (fs::temp_directory_path() / "parallax_calibrate_quick_cluster.json").string();
  fs::remove(db);
  fs::remove(cluster);
  auto r = test::RunParallax("calibrate --quick --model gpt-tiny --no-progress -o " + db + " --cluster-out " + cluster +
                             " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["gemm_samples"].get<int>(), 10);
  EXPECT_GT(j["kernel_samples"].get<int>(), 10);
  EXPECT_GT(j["peak_tflops"]["fp32"].get<double>(), 0.0);
  EXPECT_GT(j["launch_overhead_us"].get<double>(), 0.0);
  // System noise from fixed work quanta: quantiles per window, windows ascending, summarized.
  EXPECT_GE(j["noise"]["mean_excess_1ms"].get<double>(), 0.0);
  const auto written = nlohmann::json::parse(std::ifstream(db));
  ASSERT_TRUE(written.contains("noise"));
  EXPECT_GE(written["noise"]["windows"].size(), 3u);
  EXPECT_GT(written["noise"]["quantum_s"].get<double>(), 0.0);
  // The families are keyed as the planner looks them up (planner/cost/layer_ops.h MemoryFamily).
  // Our executor joins the attention's residual inside the MLP norm (forward), so attn_out has
  // memory-bound work only in backward.
  std::set<std::string> families;
  for (const auto& k : written["kernels"]) families.insert(k["op"].get<std::string>());
  EXPECT_FALSE(families.count("attn_out"));
  for (const char* f : {"attn_norm", "attn_norm_bwd", "mlp_norm", "act", "act_bwd", "attention", "attention_bwd",
                        "attn_out_bwd", "fc2_bwd", "embedding", "loss", "loss_bwd", "final_norm", "optimizer", "grad_clip",
                        "elementwise", "cast"}) {
    EXPECT_TRUE(families.count(f)) << f;
  }
  auto sim = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --costdb " + db +
                               " --plan dp=1,micro_batch=2 --global-batch 4 --precision fp32 --json");
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  // Stamped with the catalogue version its samples are keyed by: read without a warning. The same
  // samples without the stamp (a database written before it, or by another catalogue) warn, naming
  // the file, and are still used.
  EXPECT_EQ(written["catalogue"].get<int64_t>(), kOpCatalogueVersion);
  EXPECT_EQ(sim.err.find("warning"), std::string::npos) << sim.err;
  auto unstamped = written;
  unstamped.erase("catalogue");
  const std::string old_db = (fs::temp_directory_path() / "parallax_calibrate_quick_db_unstamped.json").string();
  std::ofstream(old_db) << unstamped.dump();
  auto old = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --costdb " + old_db +
                               " --plan dp=1,micro_batch=2 --global-batch 4 --precision fp32 --json");
  EXPECT_EQ(old.exit_code, 0) << old.err;
  EXPECT_NE(old.err.find("parallax: warning: " + old_db + ": measured under an unstamped op catalogue"),
            std::string::npos)
      << old.err;
  EXPECT_EQ(nlohmann::json::parse(old.out)["step_time_s"], nlohmann::json::parse(sim.out)["step_time_s"]);
}

TEST(CliCalibrate, BadModelExitsTwoAndWritesNothing) {
  const std::string db = (fs::temp_directory_path() / "parallax_calibrate_bad_db.json").string();
  fs::remove(db);
  auto r = test::RunParallax("calibrate --quick --model no-such-model -o " + db);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(fs::exists(db));
}

TEST(CliCalibrate, RoundsOutOfRangeOrOnAnImportExitTwo) {
  const std::string db = (fs::temp_directory_path() / "parallax_calibrate_rounds_db.json").string();
  fs::remove(db);
  auto zero = test::RunParallax("calibrate --quick --rounds 0 -o " + db);
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--rounds"), std::string::npos) << zero.err;
  auto import = test::RunParallax("calibrate --import-nccl-tests " + Shared("a100_1node8_all_reduce_perf_superbench.txt") +
                                  " --rounds 2 -o " + db);
  EXPECT_EQ(import.exit_code, 2);
  EXPECT_NE(import.err.find("--rounds belong to a measuring run"), std::string::npos) << import.err;
  EXPECT_FALSE(fs::exists(db));
}

TEST(CliCalibrate, InterruptedRunLeavesNoFile) {
  // The full generic grid runs for minutes; SIGINT after 3 s must leave nothing at -o.
  const std::string db = (fs::temp_directory_path() / "parallax_calibrate_interrupted_db.json").string();
  fs::remove(db);
  const std::string cmd = "timeout -s INT 3 " + std::string(PARALLAX_CLI) + " calibrate --no-progress -o " + db +
                          " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  EXPECT_NE(status, 0);
  EXPECT_FALSE(fs::exists(db));
}

}  // namespace
}  // namespace parallax
