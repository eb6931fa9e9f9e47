// `parallax compare-modes` (cli/cmd_compare_modes.cpp) for real: it starts each mode's job under
// mpirun and writes loss against step and wall clock with predicted and measured throughput.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model/compression_kernels.h"
#include "run_command.h"

namespace parallax {
namespace {

std::string Prefix(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "parallax_compare_modes";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string Mpirun() { return std::string(" --mpirun '") + PARALLAX_MPIEXEC + " --oversubscribe'"; }

nlohmann::json Read(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(CompareModes, WritesLossAndWallClockPerModeWithPredictedAndMeasuredThroughput) {
  const std::string out = Prefix("two");
  auto r = test::RunParallax("compare-modes --workers 2 --steps 4 --modes 'allreduce;sync=backup:1;sync=ps,servers=1'" +
                             Mpirun() + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("compare-modes: sync=backup:1"), std::string::npos);  // progress on stderr
  const nlohmann::json j = Read(out + ".json");
  ASSERT_EQ(j["modes"].size(), 3U);
  EXPECT_EQ(j["modes"][2]["ranks"], 3);  // two workers and the dedicated server
  for (const auto& m : j["modes"]) {
    ASSERT_EQ(m["losses"].size(), 4U) << m["mode"];
    ASSERT_EQ(m["wall_clock_s"].size(), 4U) << m["mode"];
    for (size_t i = 1; i < 4; ++i) EXPECT_GE(m["wall_clock_s"][i], m["wall_clock_s"][i - 1]) << m["mode"];
    EXPECT_GT(m["predicted_tokens_per_s"].get<double>(), 0) << m["mode"];
    EXPECT_GT(m["measured_tokens_per_s"].get<double>(), 0) << m["mode"];
    EXPECT_NEAR(m["measured_tokens_per_s"].get<double>() * m["measured_step_s"].get<double>(), 8.0 * 32, 1e-6);
  }
  // The same data: synchronous PS and all-reduce start from one loss.
  EXPECT_NEAR(j["modes"][0]["losses"][0].get<double>(), j["modes"][2]["losses"][0].get<double>(), 1e-4);
  std::ifstream csv(out + ".csv");
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 1 + 3 * 4);
}

// Under mpirun, calibrate also times the host plane the classic modes exchange over (mailbox
// messages between ranks 0 and 1, the host all-gather and all-reduce): curves with placement "host", which the
// device collectives never read (the plain all-reduce plan prices alike without them) and the
// parameter-server plan's exchange does.
//! `calibrate --backend cpu --quick` of gpt-tiny on two ranks under mpirun into `db` and `cluster`;
//! the exit status.
int CalibrateTwoRanks(const std::string& db, const std::string& cluster, const std::string& log) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const std::string run = std::string(PARALLAX_MPIEXEC) + " --oversubscribe -np 2 " + PARALLAX_CLI +
                          " calibrate --backend cpu --quick --model gpt-tiny --no-progress -o " + db + " --cluster-out " +
                          cluster + " > " + log + " 2>&1";
  return std::system(run.c_str());
}

//! `simulate` of gpt-tiny under `plan` with `costdb`: a classic mode's exchange seconds, else the step time.
double Exchange(const std::string& cluster, const std::string& costdb, const std::string& plan) {
  auto r = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --costdb " + costdb + " --plan " + plan +
                             " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  return out.contains("classic") ? out["classic"]["sync_mode"]["exchange_s"].get<double>()
                                 : out["step_time_s"].get<double>();
}

TEST(CompareModes, CalibrateTimesTheHostPlaneOnlyTheClassicModesRead) {
  const std::string db = Prefix("host_db.json"), cluster = Prefix("host_cluster.json");
  ASSERT_EQ(CalibrateTwoRanks(db, cluster, Prefix("host_calibrate.log")), 0);
  nlohmann::json j = Read(db);
  int host = 0;
  for (const auto& c : j["collectives"]) {
    if (c.value("placement", "") != "host") continue;
    ++host;
    EXPECT_TRUE(c["op"] == "send_recv" || c["op"] == "all_gather" || c["op"] == "all_reduce") << c.dump();
    EXPECT_EQ(c["group_size"], 2);
    // Points by size, each a measured time (not compared with each other: under load or a
    // sanitizer a small message can take longer than a large one, as CI saw on 2026-11-28).
    ASSERT_GE(c["points"].size(), 3U);
    for (size_t i = 0; i < c["points"].size(); ++i) {
      EXPECT_GT(c["points"][i]["time_s"].get<double>(), 0.0) << c.dump();
      if (i > 0) {
        EXPECT_GT(c["points"][i]["bytes"].get<int64_t>(), c["points"][i - 1]["bytes"].get<int64_t>());
      }
    }
  }
  EXPECT_EQ(host, 3);
  // Without the host curves: the same all-reduce step, another parameter-server exchange.
  nlohmann::json device_only = j;
  device_only["collectives"] = nlohmann::json::array();
  for (const auto& c : j["collectives"]) {
    if (c.value("placement", "") != "host") device_only["collectives"].push_back(c);
  }
  const std::string db2 = Prefix("host_db_device_only.json");
  std::ofstream(db2) << device_only.dump();
  auto step = [&](const std::string& costdb, const std::string& plan) { return Exchange(cluster, costdb, plan); };
  const std::string ar = "dp=2,global_batch=12", ps = "dp=2,global_batch=12,sync=ps,servers=colocated:1";
  EXPECT_EQ(step(db, ar), step(db2, ar));
  EXPECT_NE(step(db, ps), step(db2, ps));
}

// Calibrate times every host kernel of gradient compression by calling the executor's own code
// (model/compression_kernels.h), each at several sizes, into kernel families the classic modes'
// pricing reads: the calibrated compressed step differs from the one with those families removed
// (which falls back to the streaming bandwidth), and the dense all-reduce's does not.
TEST(CompareModes, CalibrateWritesEveryCompressionKernelFamilyAndTheCompressedModesReadThem) {
  const std::string db = Prefix("compress_db.json"), cluster = Prefix("compress_cluster.json");
  ASSERT_EQ(CalibrateTwoRanks(db, cluster, Prefix("compress_calibrate.log")), 0);
  nlohmann::json j = Read(db);
  std::map<std::string, int> points;
  nlohmann::json without = j;
  without["kernels"] = nlohmann::json::array();
  for (const auto& k : j["kernels"]) {
    const std::string op = k["op"];
    if (op.rfind("compress_", 0) != 0) {
      without["kernels"].push_back(k);
      continue;
    }
    ++points[op];
    EXPECT_GT(k["time_s"].get<double>(), 0.0) << k.dump();
  }
  for (int k = 0; k < kCompressionKernels; ++k) {
    EXPECT_GE(points[KernelFamily(static_cast<CompressionKernel>(k))], 3) << KernelFamily(static_cast<CompressionKernel>(k));
  }
  EXPECT_EQ(points.size(), static_cast<size_t>(kCompressionKernels));
  const std::string db2 = Prefix("compress_db_without.json");
  std::ofstream(db2) << without.dump();
  auto exchange = [&](const std::string& costdb, const std::string& plan) { return Exchange(cluster, costdb, plan); };
  for (const char* c : {"bf16", "int8", "topk:0.1", "powersgd:4"}) {
    const std::string plan = std::string("dp=2,global_batch=12,compression=") + c;
    EXPECT_NE(exchange(db, plan), exchange(db2, plan)) << c;
  }
  EXPECT_EQ(exchange(db, "dp=2,global_batch=12"), exchange(db2, "dp=2,global_batch=12"));
}

// Two ranks confined to one CPU (taskset; --bind-to none keeps mpirun from re-binding) calibrate in
// turns and write the node's CPUs into the cluster (cpus_per_node 1), and the planner prices their
// compute at the shared CPU's pace: the all-reduce plan's compute doubles against the same costs on
// a cluster whose ranks each have a CPU; a dedicated server beside one worker adds no sharing.
TEST(CompareModes, RanksSharingACpuCalibrateInTurnsAndArePricedAtTheirShare) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const std::string db = Prefix("shared_cpu_db.json"), cluster = Prefix("shared_cpu_cluster.json");
  const std::string run = std::string("taskset -c 0 ") + PARALLAX_MPIEXEC + " --oversubscribe --bind-to none -np 2 " +
                          PARALLAX_CLI + " calibrate --backend cpu --quick --model gpt-tiny --no-progress -o " + db +
                          " --cluster-out " + cluster + " > " + Prefix("shared_cpu_calibrate.log") + " 2>&1";
  ASSERT_EQ(std::system(run.c_str()), 0) << run;
  nlohmann::json c = Read(cluster);
  EXPECT_EQ(c["gpus_per_node"], 2);
  ASSERT_EQ(c["cpus_per_node"], 1) << c.dump();
  nlohmann::json own = c;
  own.erase("cpus_per_node");
  const std::string own_cluster = Prefix("own_cpu_cluster.json");
  std::ofstream(own_cluster) << own.dump();
  const auto compute = [&](const std::string& cl, const std::string& plan) {
    auto r = test::RunParallax("simulate --model gpt-tiny --cluster " + cl + " --costdb " + db + " --plan " + plan + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["classic"]["sync_mode"]["compute_s"].get<double>();
  };
  // Two workers on the one CPU (a colocated server keeps the job at two ranks).
  const std::string two = "dp=2,global_batch=8,sync=ps,servers=colocated:1";
  EXPECT_NEAR(compute(cluster, two) / compute(own_cluster, two), 2.0, 0.2);
  // One worker and its dedicated server on the node's two ranks: the server waits while it computes.
  const std::string one = "dp=1,global_batch=8,sync=ps,servers=1";
  EXPECT_DOUBLE_EQ(compute(cluster, one), compute(own_cluster, one));
}

TEST(CompareModes, RefusesAModeItCannotRunWithExitTwo) {
  auto r = test::RunParallax("compare-modes --modes 'allreduce;sync=bogus' -o " + Prefix("bad"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--modes: \"sync=bogus\""), std::string::npos) << r.err;
  r = test::RunParallax("compare-modes --modes 'sync=async' -o " + Prefix("bad"));  // async needs servers
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--modes: \"sync=async\""), std::string::npos) << r.err;
  r = test::RunParallax("compare-modes --inject-slow rank=1 -o " + Prefix("bad"));
  EXPECT_EQ(r.exit_code, 2);
}

// Issue 41 item 6, loosely: each mode's step predicted from a calibration taken just before is
// within a factor of 4 of the measured median step on this machine (the 15% goal and the table
// are in docs/classic_modes.md; a shared 2-core VM changes speed by 3-4x within seconds, so a
// tighter bound here would be flaky; one run measured 2.6x). Uncalibrated predictions were 3-15 times too fast.
TEST(CompareModes, CalibratedPredictionsAreWithinAFactorOfFourOfTheMeasuredStep) {
  const std::string out = Prefix("calibrated");
  auto r = test::RunParallax("compare-modes --calibrate --workers 2 --steps 20 --modes 'allreduce;sync=ps,servers=1'" +
                             Mpirun() + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& m : Read(out + ".json")["modes"]) {
    const double ratio = m["predicted_step_s"].get<double>() / m["measured_step_s"].get<double>();
    std::printf("%s: predicted / measured %.2f\n", m["mode"].get<std::string>().c_str(), ratio);
    EXPECT_GT(ratio, 1.0 / 4) << m["mode"];
    EXPECT_LT(ratio, 4.0) << m["mode"];
  }
}

}  // namespace
}  // namespace parallax
