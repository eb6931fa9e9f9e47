// The command line of the fp8 precision and of the Blackwell NVLink domains: what plan, simulate,
// run and cluster show say about them.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "model/json_io.h"
#include "run_command.h"
#include "stdout_json.h"

namespace parallax {
namespace {

using test::RunParallax;
using test::StdoutJson;

TEST(CliFp8, PlanAndSimulatePriceFp8AndSayWhichPrecisionTheyUsed) {
  auto plan = RunParallax("plan --model llama3-8b --cluster dgx-h100 --nodes 2 --global-batch 64 --precision fp8 "
                          "--fix tp=4,pp=1 --top 1 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(StdoutJson(plan)["precision"], "fp8");
  auto sim8 = RunParallax("simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --precision fp8 "
                          "--plan dp=4,tp=4,pp=1,micro_batch=1,global_batch=64 --json");
  auto sim16 = RunParallax("simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --precision bf16 "
                           "--plan dp=4,tp=4,pp=1,micro_batch=1,global_batch=64 --json");
  ASSERT_EQ(sim8.exit_code, 0) << sim8.err;
  ASSERT_EQ(sim16.exit_code, 0) << sim16.err;
  const double t8 = StdoutJson(sim8)["step_time_s"].get<double>();
  const double t16 = StdoutJson(sim16)["step_time_s"].get<double>();
  EXPECT_LT(t8, t16);
}

// MXFP8 (a profile whose fp8_recipe is mxfp8) needs Blackwell's block-scaled MMA: refused on H100
// with the reason, planned on B200.
TEST(CliFp8, Mxfp8IsRefusedOnHopperAndPlannedOnBlackwell) {
  const std::string dir = ::testing::TempDir();
  const std::string profile = dir + "/mxfp8_profile.json";
  {
    std::ofstream f(profile);
    f << R"({"kind": "implementation", "version": 1, "name": "mcore-mxfp8", "base": "megatron-core",
             "facts": {"fp8_recipe": {"value": "mxfp8", "source": "Megatron-Bridge bf16_with_mxfp8_mixed"}}})";
  }
  const std::string plan = " --precision fp8 --implementation " + profile + " --plan dp=8,micro_batch=1,global_batch=64";
  auto h100 = RunParallax("simulate --model llama3-8b --cluster dgx-h100 --nodes 1" + plan);
  EXPECT_EQ(h100.exit_code, 2);
  EXPECT_NE(h100.err.find("mxfp8"), std::string::npos) << h100.err;
  EXPECT_NE(h100.err.find("h100-sxm-80g"), std::string::npos) << h100.err;
  auto b200 = RunParallax("simulate --model llama3-8b --cluster dgx-b200 --nodes 1" + plan);
  EXPECT_EQ(b200.exit_code, 0) << b200.err;
  auto bad = RunParallax("simulate --model llama3-8b --cluster dgx-b200 --nodes 1 --precision fp8 --implementation " +
                         profile + ".missing --plan dp=8,global_batch=64");
  EXPECT_EQ(bad.exit_code, 2);
}

TEST(CliFp8, AnAmpereClusterRefusesFp8NamingTheDevice) {
  auto r = RunParallax("plan --model llama3-8b --cluster dgx-a100 --precision fp8 --global-batch 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no FP8 tensor cores"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a100-sxm-80g"), std::string::npos) << r.err;
}

TEST(CliFp8, RunTrainsFp8OnTheCpuBackendByEmulatingIt) {
  auto r = RunParallax("run --model gpt-tiny --precision fp8 --steps 2 "
                       "--plan dp=1,tp=1,pp=1,micro_batch=1,global_batch=1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = StdoutJson(r);
  EXPECT_EQ(j["precision"], "fp8");
  EXPECT_EQ(j["grad_norms"].size(), 2u);
}

TEST(CliCluster, ShowExplainsTheNvlinkDomainOfAGb200Rack) {
  auto r = RunParallax("cluster show gb200-nvl72 --nodes 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = StdoutJson(r);
  EXPECT_EQ(j["total_gpus"], 32);
  EXPECT_EQ(j["nvlink_domain_size"], 72);
  EXPECT_EQ(j["nvlink_domains"], 1);  // eight trays: one partial domain
  EXPECT_EQ(j["last_domain_gpus"], 32);
  ASSERT_TRUE(j["groups"].is_array());
  EXPECT_EQ(j["groups"][0]["size"], 8);
  EXPECT_EQ(j["groups"][0]["all_nvlink"], true);
  EXPECT_DOUBLE_EQ(j["groups"][0]["per_gpu_GBps"].get<double>(), 900);
  EXPECT_EQ(j["groups"][1]["size"], 64);
  EXPECT_EQ(j["groups"][1]["fits"], false);  // 32 GPUs
  auto racks = RunParallax("cluster show gb200-nvl72 --nodes 72 --json");  // four racks
  ASSERT_EQ(racks.exit_code, 0) << racks.err;
  const Json k = StdoutJson(racks);
  EXPECT_EQ(k["nvlink_domains"], 4);
  EXPECT_EQ(k["groups"][1]["all_nvlink"], true);  // ep=64 inside one rack
  auto text = RunParallax("cluster show gb200-nvl72 --nodes 8");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("domains of 72 devices"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace parallax
