// The command-line contract of `parallax plan` and `parallax simulate` (DESIGN.md).
#include <gtest/gtest.h>

#include <filesystem>

#include "model/json_io.h"
#include "model/plan.h"
#include "run_command.h"
#include "stdout_json.h"

namespace parallax {
namespace {

using test::RunParallax;
using test::StdoutJson;

void ExpectPrediction(const Json& p) {
  for (const char* k : {"step_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu", "peak_memory_bytes", "fits",
                        "breakdown", "layout"}) {
    EXPECT_TRUE(p.contains(k)) << k << " in " << p.dump();
  }
  for (const char* k : {"compute_s", "tp_comm_s", "dp_comm_s", "pp_comm_s", "bubble_s"}) {
    EXPECT_TRUE(p["breakdown"].contains(k)) << k;
  }
  EXPECT_GT(p["step_time_s"].get<double>(), 0);
  EXPECT_GT(p["mfu"].get<double>(), 0);
  EXPECT_LT(p["mfu"].get<double>(), 1);
}

TEST(CliPlan, JsonContractBestFirst) {
  auto r = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --nodes 2 --global-batch 128 --top 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = StdoutJson(r);
  ASSERT_TRUE(j["plans"].is_array());
  ASSERT_EQ(j["plans"].size(), 4u);
  EXPECT_GT(j["searched"].get<int64_t>(), 100);
  EXPECT_TRUE(j["rejected"].is_object());
  EXPECT_GE(j["search_time_s"].get<double>(), 0);
  double prev = 0;
  for (const Json& p : j["plans"]) {
    ExpectPrediction(p);
    EXPECT_TRUE(p["fits"].get<bool>());
    EXPECT_GE(p["step_time_s"].get<double>(), prev);
    prev = p["step_time_s"].get<double>();
    const Json& l = p["layout"];
    EXPECT_EQ(l["dp"].get<int64_t>() * l["tp"].get<int64_t>() * l.value("cp", int64_t{1}) * l["pp"].get<int64_t>(), 16);
  }
}

// One predicted step time (model/step_time.h): each ranked plan's is what `simulate` prints for
// its layout, and says so.
TEST(CliPlan, TheRankedStepTimesAreTheSimulators) {
  const std::string where = "--model gpt-1.3b --cluster dgx-a100 --nodes 2 --global-batch 128";
  auto r = RunParallax("plan " + where + " --top 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json plans = StdoutJson(r)["plans"];
  ASSERT_EQ(plans.size(), 3u);
  for (const Json& p : plans) {
    EXPECT_EQ(p["step_time_source"], "simulator");
    auto s = RunParallax("simulate " + where + " --plan " + p["layout_inline"].get<std::string>() + " --json");
    ASSERT_EQ(s.exit_code, 0) << s.err;
    EXPECT_DOUBLE_EQ(StdoutJson(s)["step_time_s"].get<double>(), p["step_time_s"].get<double>());
  }
}

TEST(CliPlan, SeqLenOverridesTheModelsSequenceLength) {
  auto r = RunParallax("simulate --model gpt-1.3b --cluster dgx-h100 --nodes 2 --plan dp=4,tp=2,cp=2,global_batch=64 "
                       "--seq-len 4096 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = StdoutJson(r);
  EXPECT_EQ(j["layout"]["cp"], 2);
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["step_time_s"].get<double>(), 64.0 * 4096, 1e-6 * 64 * 4096);
  // 2*cp = 4 does not divide 4098: the layout is rejected with the rule.
  auto bad = RunParallax("simulate --model gpt-1.3b --cluster dgx-h100 --nodes 2 --plan dp=4,tp=2,cp=2,global_batch=64 "
                         "--seq-len 4098 --json");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE((bad.out + bad.err).find("cp=2 needs seq_len=4098 to be divisible by 2*cp=4"), std::string::npos) << bad.out;
}

TEST(CliPlan, ExportsSayHowEachFrameworkRunsContextParallelism) {
  auto mc = RunParallax("plan --model llama3-405b --cluster dgx-h100 --nodes 64 --global-batch 256 "
                        "--implementation megatron-core --fix tp=8,pp=8,cp=2,vp=8,mb=1,zero=1 --export megatron");
  ASSERT_EQ(mc.exit_code, 0) << mc.err;
  for (const char* arg : {"--context-parallel-size 2", "--cp-comm-type p2p", "--account-for-embedding-in-pipeline-split",
                          "--account-for-loss-in-pipeline-split", "--num-virtual-stages-per-pipeline-rank 8"}) {
    EXPECT_NE(mc.out.find(arg), std::string::npos) << arg << " in " << mc.out;
  }
  EXPECT_EQ(mc.out.find("--num-layers-per-virtual-pipeline-stage"), std::string::npos);
  auto ds = RunParallax("plan --model llama3-8b --cluster dgx-h100 --nodes 1 --global-batch 128 --fix cp=2 "
                        "--export deepspeed");
  ASSERT_EQ(ds.exit_code, 0) << ds.err;
  EXPECT_EQ(StdoutJson(ds)["parallax"]["cp"], 2);
  EXPECT_NE(ds.err.find("DeepSpeed has no ring-attention context parallelism"), std::string::npos) << ds.err;
}

TEST(CliPlan, FixedContextParallelWidthIsSearchedAtALongSequence) {
  auto r = RunParallax("plan --model llama3-8b --cluster dgx-h100 --nodes 2 --global-batch 16 --seq-len 32768 "
                       "--fix cp=4 --top 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json plans = StdoutJson(r)["plans"];
  ASSERT_EQ(plans.size(), 3u);
  for (const Json& p : plans) EXPECT_EQ(p["layout"]["cp"], 4) << p.dump();
}

TEST(CliPlan, FixConstrainsTheSearch) {
  auto r = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --fix tp=2,pp=2,recompute=full "
                       "--top 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json plans = StdoutJson(r)["plans"];
  ASSERT_TRUE(plans.is_array());
  ASSERT_EQ(plans.size(), 3u) << "--top 3 with a satisfiable --fix must list three plans";
  for (const Json& p : plans) {
    EXPECT_EQ(p["layout"]["tp"], 2);
    EXPECT_EQ(p["layout"]["pp"], 2);
    EXPECT_EQ(p["layout"]["recompute"], "full");
  }
}

TEST(CliPlan, WritesAPlanThatSimulateAndLoadAccept) {
  const auto dir = std::filesystem::temp_directory_path() / "parallax_cli_plan";
  std::filesystem::create_directories(dir);
  const std::string plan = (dir / "plan.json").string();
  const std::string trace = (dir / "predicted.json.gz").string();
  auto r = RunParallax("plan --model llama3-8b --cluster dgx-h100 --nodes 2 --global-batch 256 -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto loaded = LoadPlanFile(plan);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->model.name, "llama3-8b");
  EXPECT_EQ(loaded->layout.world_size(), 16);
  ASSERT_TRUE(loaded->prediction.has_value());
  auto s = RunParallax("simulate --plan " + plan + " --json --trace " + trace);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const Json sim = StdoutJson(s);
  ExpectPrediction(sim);
  // The self-contained plan reproduces the prediction it carries.
  EXPECT_NEAR(sim["step_time_s"].get<double>(), (*loaded->prediction)["step_time_s"].get<double>(),
              0.05 * sim["step_time_s"].get<double>());
  EXPECT_GT(std::filesystem::file_size(trace), 100u);
  auto stats = RunParallax("trace stats " + trace + " --json");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_GT(StdoutJson(stats)["slices"].get<int64_t>(), 100);
  std::filesystem::remove_all(dir);
}

TEST(CliPlan, Exports) {
  auto m = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --fix zero=1 --export megatron");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  for (const char* flag : {"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--micro-batch-size",
                           "--global-batch-size 64", "--num-layers 24", "--hidden-size 2048"}) {
    EXPECT_NE(m.out.find(flag), std::string::npos) << flag << "\n" << m.out;
  }
  auto d = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --export deepspeed");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const Json ds = StdoutJson(d);
  EXPECT_EQ(ds["train_batch_size"], 64);
  EXPECT_TRUE(ds.contains("zero_optimization"));
  // Under the deepspeed profile the buckets the prediction was priced with: reduction 954 MiB of
  // 16-bit gradients (5e8 elements, DeepSpeed's default), ZeRO-3 prefetch 5e7 parameters.
  auto z = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --implementation deepspeed "
                       "--fix zero=3 --export deepspeed");
  ASSERT_EQ(z.exit_code, 0) << z.err;
  const Json zs = StdoutJson(z);
  EXPECT_EQ(zs["zero_optimization"]["stage"], 3);
  EXPECT_EQ(zs["zero_optimization"]["reduce_bucket_size"], int64_t{954} * 1024 * 1024 / 2);
  EXPECT_EQ(zs["zero_optimization"]["stage3_prefetch_bucket_size"], 50000000);
  EXPECT_EQ(zs["parallax_implementation"], "deepspeed");
}

// What runs the plan, as a user meets it: the export names the profile its prediction used; a
// layout beyond the profile (Megatron-Core r0.8 runs no ZeRO-3) or a TP group across nodes is
// predicted with a note saying so; an unknown profile exits 2 listing the known ones.
TEST(CliPlan, ImplementationProfileAsTheUserMeetsIt) {
  auto m = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --implementation megatron-core "
                       "--export megatron");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("# predicted with implementation profile megatron-core"), std::string::npos) << m.out;
  auto s = RunParallax("simulate --model gpt-1.3b --cluster dgx-a100 --nodes 2 --implementation megatron-core "
                       "--plan dp=1,tp=16,global_batch=8 --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  ASSERT_TRUE(StdoutJson(s).contains("notes")) << s.out;
  EXPECT_NE(StdoutJson(s)["notes"].dump().find("tp=16 spans 2 nodes"), std::string::npos) << s.out;
  auto z = RunParallax("simulate --model gpt-1.3b --cluster dgx-a100 --implementation megatron-core "
                       "--plan dp=8,zero=3,global_batch=64");
  ASSERT_EQ(z.exit_code, 0) << z.err;
  EXPECT_NE(z.out.find("zero=3 is beyond what megatron-core runs"), std::string::npos) << z.out;
  auto j = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --implementation megatron-2021 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_GT(StdoutJson(j)["rejected"].value("zero_stage_beyond_implementation", 0), 0) << j.out;
  for (const char* cmd : {"plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --implementation nosuch",
                          "simulate --model gpt-1.3b --cluster dgx-a100 --plan dp=8,global_batch=64 "
                          "--implementation nosuch"}) {
    auto u = RunParallax(cmd);
    EXPECT_EQ(u.exit_code, 2) << cmd;
    EXPECT_NE(u.err.find("known: deepspeed, megatron-2021, megatron-2022, megatron-core, nemo, parallax"), std::string::npos)
        << u.err;
  }
}

TEST(CliPlan, NothingFitsNamesTheShortfall) {
  auto r = RunParallax("plan --model llama3-405b --cluster dgx-a100 --global-batch 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no layout of llama3-405b fits on 8 x a100-sxm-80g"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GiB more per GPU"), std::string::npos) << r.err;
}

TEST(CliSimulate, InlinePlanRulesExitTwo) {
  struct Bad {
    const char* plan;
    const char* rule;
  };
  for (const Bad& b : {Bad{"dp=2,tp=4,pp=3,global_batch=8", "dp*tp*pp = 2*4*3 = 24 does not equal the cluster's GPU count 16"},
                       Bad{"dp=2,tp=8,pp=1,global_batch=8,schedule=gpipe,virtual_stages=2", "virtual_stages=2 needs schedule=interleaved"},
                       Bad{"dp=1,tp=2,pp=8,global_batch=64,schedule=interleaved,virtual_stages=5",
                           "virtual_stages=5 does not divide the layers per stage (96 layers over pp=8)"}}) {
    auto r = RunParallax(std::string("simulate --model gpt3-175b --cluster dgx-a100 --nodes 2 --plan ") + b.plan);
    EXPECT_EQ(r.exit_code, 2) << b.plan;
    EXPECT_NE(r.err.find(b.rule), std::string::npos) << b.plan << ": " << r.err;
  }
  auto heads = RunParallax("simulate --model gpt-tiny --cluster dgx-a100 --plan dp=1,tp=8,global_batch=8");
  EXPECT_EQ(heads.exit_code, 2);
  EXPECT_NE(heads.err.find("tp=8 does not divide heads=4"), std::string::npos) << heads.err;
}

TEST(CliPlan, CostDbOfAnotherDeviceIsRejected) {
  auto r = RunParallax(std::string("simulate --model gpt-1.3b --cluster dgx-h100 --plan dp=8,global_batch=64 --costdb ") +
                       PARALLAX_SOURCE_DIR "/examples/costdb-a100-sample.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("costdb-a100-sample.json: /device: measured on \"a100-sxm-80g\" but the cluster's device is "
                       "\"h100-sxm-80g\""),
            std::string::npos)
      << r.err;
  auto ok = RunParallax(std::string("simulate --model gpt-1.3b --cluster dgx-a100 --plan dp=8,global_batch=64 --json "
                                    "--costdb ") + PARALLAX_SOURCE_DIR "/examples/costdb-a100-sample.json");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(CliPlan, NonPositiveNumbersAreBadInput) {
  EXPECT_EQ(RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch -5").exit_code, 2);
  EXPECT_EQ(RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --nodes 0").exit_code, 2);
  EXPECT_EQ(RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --top 0").exit_code, 2);
  auto fix = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --fix tp=0");
  EXPECT_EQ(fix.exit_code, 2);
  EXPECT_NE(fix.err.find("--fix: tp must be > 0 (got 0)"), std::string::npos) << fix.err;
}

TEST(CliSimulate, InlinePlanNeedsModelAndCluster) {
  auto r = RunParallax("simulate --plan dp=8,global_batch=8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(r.err.empty());
  auto missing = RunParallax("simulate --plan /nonexistent/plan.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/plan.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace parallax
