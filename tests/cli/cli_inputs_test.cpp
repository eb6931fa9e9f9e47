// How every command reads its inputs (cli/inputs.h): the training precision by default follows
// the device and says so, --precision overrides it, numeric options say their bound, a search that
// leaves no layout says why in words with its counts, MFU without a known peak is n/a; and the
// help and version texts.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "model/json_io.h"
#include "model/training_spec.h"
#include "run_command.h"
#include "stdout_json.h"

namespace parallax {
namespace {

using test::RunParallax;
using test::StdoutJson;

//! One cpu device (local-cpu has one per core of the machine the test runs on).
const std::string& OneCpu() {
  static const std::string path = test::WriteTempFile(
      "inputs_one_cpu.json",
      R"({"kind":"cluster","version":1,"name":"one-cpu","nodes":1,"gpus_per_node":1,"device":"cpu",)"
      R"("intra_node":{"bandwidth_GBps":5,"latency_us":1},"inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
  return path;
}

const char* kCpuDefault = "precision: fp32 (default for a CPU device; --precision to change)";
const char* kGpuDefault = "precision: bf16 (default for a GPU device; --precision to change)";

TEST(CliInputs, PrecisionParsesItsOwnNamesAndListsThemOtherwise) {
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32}) {
    auto back = PrecisionFromString(ToString(p));
    ASSERT_TRUE(back) << ToString(p);
    EXPECT_EQ(*back, p);
  }
  auto bad = PrecisionFromString("fp12");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"fp12\""), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("bf16, fp16, fp32"), std::string::npos) << bad.error().message;
}

TEST(CliInputs, ACpuClusterTrainsInFp32ByDefaultAndSaysWhy) {
  auto text = RunParallax("plan --model gpt-tiny --cluster local-cpu --global-batch 8 --top 1 --threads 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find(kCpuDefault), std::string::npos) << text.err;
  EXPECT_EQ(text.out.find("precision:"), std::string::npos) << "the note goes to stderr, not into the table";

  auto json = RunParallax("plan --model gpt-tiny --cluster local-cpu --global-batch 8 --top 1 --threads 1 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json j = StdoutJson(json);
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["precision_source"], "default for a CPU device");
  EXPECT_EQ(json.err.find("precision:"), std::string::npos) << "--json says it in the object only";

  auto sim = RunParallax("simulate --model gpt-tiny --cluster " + OneCpu() + " --plan dp=1,global_batch=8 --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(StdoutJson(sim)["precision"], "fp32");
}

TEST(CliInputs, AGpuClusterTrainsInBf16ByDefaultAndSaysWhy) {
  auto text = RunParallax("plan --model gpt-1.3b --cluster dgx-h100 --global-batch 64 --top 1 --threads 1 "
                          "--export megatron");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find(kGpuDefault), std::string::npos) << text.err;
  EXPECT_NE(text.out.find("--bf16"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("precision:"), std::string::npos) << "the exported command line stays clean to pipe";

  auto sim = RunParallax("simulate --model gpt-1.3b --cluster dgx-h100 --plan dp=8,global_batch=64 --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const Json j = StdoutJson(sim);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_EQ(j["precision_source"], "default for a GPU device");
}

TEST(CliInputs, PrecisionFlagOverridesTheDeviceDefaultAndThePlansOwn) {
  auto cpu = RunParallax("plan --model gpt-tiny --cluster local-cpu --global-batch 8 --top 1 --threads 1 "
                         "--precision bf16 --json");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(StdoutJson(cpu)["precision"], "bf16");
  EXPECT_EQ(StdoutJson(cpu)["precision_source"], "--precision");

  auto gpu = RunParallax("plan --model gpt-1.3b --cluster dgx-h100 --global-batch 64 --top 1 --threads 1 "
                         "--precision fp32");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_EQ(gpu.err.find("precision:"), std::string::npos) << "a precision the user named needs no note: " << gpu.err;

  // A plan file keeps its precision unless --precision names another.
  const std::string plan = test::WriteTempFile("inputs_plan.json", "");
  ASSERT_EQ(RunParallax("plan --model gpt-tiny --cluster local-cpu --global-batch 8 --top 1 --threads 1 "
                        "--precision fp16 -o " + plan).exit_code, 0);
  auto kept = RunParallax("simulate --plan " + plan + " --json");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(StdoutJson(kept)["precision"], "fp16");
  EXPECT_EQ(StdoutJson(kept)["precision_source"], "the plan's");
  auto over = RunParallax("simulate --plan " + plan + " --precision fp32 --json");
  ASSERT_EQ(over.exit_code, 0) << over.err;
  EXPECT_EQ(StdoutJson(over)["precision"], "fp32");
  EXPECT_NE(StdoutJson(over)["step_time_s"], StdoutJson(kept)["step_time_s"]) << "the override is what is simulated";

  auto bad = RunParallax("plan --model gpt-tiny --cluster local-cpu --precision fp12");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bf16, fp16, fp32"), std::string::npos) << bad.err;
}

TEST(CliInputs, NumericOptionsSayTheirBound) {
  for (const std::string& args : {std::string("plan --model gpt-tiny --cluster local-cpu --global-batch 0"),
                                  "simulate --model gpt-tiny --cluster " + OneCpu() + " --plan dp=1 --nodes 0",
                                  std::string("plan --model gpt-tiny --cluster local-cpu --top 0")}) {
    auto r = RunParallax(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("must be ≥ 1 (got 0)"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("not in range"), std::string::npos) << args << ": " << r.err;
  }
  auto rounds = RunParallax("calibrate -o db.json --rounds 0");
  EXPECT_EQ(rounds.exit_code, 2);
  EXPECT_NE(rounds.err.find("must be from 1 to 1000 (got 0)"), std::string::npos) << rounds.err;
}

// tp=3 and tp=16 on llama3-8b (32 heads, 8 kv heads): the search counts the pinned tp as rejected,
// and the message gives the pinned dimension's rule in words beside the counts.
TEST(CliInputs, AFixThatRulesOutEveryLayoutSaysWhichRuleInWordsWithTheCounts) {
  for (const auto& [fix, rule] : std::vector<std::pair<std::string, std::string>>{
           {"tp=3", "tp=3 does not divide heads=32"}, {"tp=16", "tp=16 does not divide kv_heads=8"}}) {
    auto text = RunParallax("plan --model llama3-8b --cluster dgx-h100 --global-batch 64 --fix " + fix);
    EXPECT_EQ(text.exit_code, 2) << fix;
    EXPECT_NE(text.err.find(rule), std::string::npos) << fix << ": " << text.err;
    EXPECT_NE(text.err.find("layouts searched; rejected:"), std::string::npos) << fix << ": " << text.err;

    auto json = RunParallax("plan --model llama3-8b --cluster dgx-h100 --global-batch 64 --json --fix " + fix);
    EXPECT_EQ(json.exit_code, 2) << fix;
    const Json j = StdoutJson(json);
    EXPECT_TRUE(j["rejected"].is_object() && !j["rejected"].empty()) << j.dump();
    EXPECT_TRUE(j["searched"].is_number_integer()) << j.dump();
    EXPECT_NE(j["error"].get<std::string>().find(rule), std::string::npos) << j.dump();
  }
  // Counted rejections: the most frequent one in words, and every count.
  auto counted = RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --fix micro_batch=128 --json");
  EXPECT_EQ(counted.exit_code, 2);
  const Json j = StdoutJson(counted);
  EXPECT_GT(j["rejected"].value("global_batch_not_divisible", 0), 0) << j.dump();
  EXPECT_NE(j["error"].get<std::string>().find("the global batch must be a multiple of dp x micro_batch"),
            std::string::npos)
      << j.dump();
}

TEST(CliInputs, MfuIsNotApplicableWithoutAPeakAndCalibratedWithADatabase) {
  // The cpu device has no nominal bf16 peak.
  auto text = RunParallax("simulate --model gpt-tiny --cluster " + OneCpu() + " --plan dp=1,global_batch=8 --precision bf16");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(MFU n/a)"), std::string::npos) << text.out;
  auto json = RunParallax("simulate --model gpt-tiny --cluster " + OneCpu() +
                          " --plan dp=1,global_batch=8 --precision bf16 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(StdoutJson(json)["mfu"].is_null()) << json.out;

  // Measured bf16 GEMMs give the peak: 2 * 64^3 flop in 10 us is 52.4 GFLOP/s.
  const std::string db = test::WriteTempFile(
      "inputs_cpu_db.json",
      R"({"kind":"costdb","version":1,"device":"cpu","gemm":[{"m":64,"n":64,"k":64,"dtype":"bf16","time_s":1e-5}]})");
  auto measured = RunParallax("simulate --model gpt-tiny --cluster " + OneCpu() +
                              " --plan dp=1,global_batch=8 --precision bf16 --json --costdb " + db);
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  const Json m = StdoutJson(measured);
  ASSERT_TRUE(m["mfu"].is_number()) << measured.out;
  EXPECT_NEAR(m["mfu"].get<double>(), m["model_tflops_per_gpu"].get<double>() / (2.0 * 64 * 64 * 64 / 1e-5 / 1e12),
              1e-9);
}

TEST(CliInputs, AModelFileOfNeitherFormatSaysWhatWouldMakeItOne) {
  const std::string file = test::WriteTempFile(
      "inputs_config.json",
      R"({"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10,"max_position_embeddings":8})");
  auto r = RunParallax("model show " + file);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("neither a parallax model file nor a recognised Hugging Face config.json"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("/kind: missing required field"), std::string::npos) << r.err;
}

TEST(CliInputs, EveryCommandsHelpEndsWithOneExample) {
  for (const char* cmd : {"", "plan", "simulate", "run", "calibrate", "refine", "tune", "trace", "trace stats",
                          "trace diff", "trace convert", "model", "model show", "model list", "cluster",
                          "cluster show", "report"}) {
    auto r = RunParallax(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    int examples = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("Example: ", 0) == 0) ++examples;
    }
    EXPECT_EQ(examples, 1) << "parallax " << cmd << " --help:\n" << r.out;
  }
}

TEST(CliInputs, VersionNamesTheCommitAndTheBackendsBuilt) {
  auto r = RunParallax("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("parallax 0.", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\ncommit "), std::string::npos) << r.out;
  for (const char* b : {"CUDA o", "MPI o", "GUI o"}) EXPECT_NE(r.out.find(b), std::string::npos) << b << ": " << r.out;
}

}  // namespace
}  // namespace parallax
