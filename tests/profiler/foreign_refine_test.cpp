// `parallax refine --implementation pytorch` on the trace Debian's PyTorch 1.13 wrote for the peer
// GPT at micro-batch 8 (tests/data/traces/pytorch-cpu): the array form's bare aten names land on
// the plan's ops in its order, refine fits them, and a trace of another model is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"
#include "scratch_dir.h"
#include "traces/chrome_reader.h"

namespace parallax {
namespace {

using Json = nlohmann::json;

const std::string kTrace = PARALLAX_TEST_DATA_DIR "/traces/pytorch-cpu/peer_gpt_mb8.json.gz";
const std::string kModel = PARALLAX_SOURCE_DIR "/bench/peer/model-peer.json";

//! One process of the CPU: a cluster of one device.
std::string OneDeviceCluster() {
  return test::WriteTempFile(
      "foreign_cluster1.json",
      R"({"kind":"cluster","version":1,"name":"cpu-1","nodes":1,"gpus_per_node":1,"device":"cpu",)"
      R"("intra_node":{"bandwidth_GBps":5,"latency_us":1},"inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
}

test::CommandResult RefinePeer(const test::Scratch& s, const std::string& model_file, const std::string& extra = "",
                               const std::string& trace = kTrace) {
  const std::string cluster = OneDeviceCluster();
  return test::RunParallax("refine --model " + model_file + " --cluster " + cluster +
                            " --plan dp=1,micro_batch=8,global_batch=8 --implementation pytorch --trace " + trace +
                            " --costdb " + s.db_file + " -o " + (s.dir / "refined.json").string() + " --json " + extra);
}

TEST(ForeignRefine, DebiansPytorchTraceLandsOnEveryPlanOpAndRefineFitsIt) {
  test::Scratch s("foreign_refine");
  const test::CommandResult run = RefinePeer(s, kModel);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json out = Json::parse(run.out);
  const Json& a = out["attribution"];
  EXPECT_EQ(a["form"], "array");
  EXPECT_EQ(a["attention"], "unfused");
  // 4 layers x 8 compute ops x (fwd + bwd), embedding, final norm, head and loss both ways,
  // grad_clip and the optimizer: every one of them got time.
  EXPECT_EQ(a["ops_matched"].get<int64_t>(), 4 * 8 * 2 + 4 * 2 + 2);
  EXPECT_LE(a["ops_out_of_line"].get<int64_t>() * 10, a["ops_matched"].get<int64_t>());
  EXPECT_GT(a["share_explained"].get<double>(), 0.95);
  double unattributed = 0;
  for (const auto& u : a["unattributed"]) unattributed += u["share_of_step"].get<double>();
  EXPECT_LT(unattributed, 0.01);
  EXPECT_GT(a["profiler_overhead"]["removed_s"].get<double>(), 0);
  EXPECT_FALSE(a["profiler_overhead"]["method"].get<std::string>().empty());
  // The roofline database knows nothing of PyTorch; the refined one predicts the traced step.
  const Json& st = out["step_time"];
  EXPECT_LT(std::abs(st["error_after"].get<double>()), 0.1) << st.dump();
  EXPECT_LT(std::abs(st["error_after"].get<double>()), std::abs(st["error_before"].get<double>())) << st.dump();
}

TEST(ForeignRefine, TheAttributedTraceDiffsAgainstThePredictionOpByOpAndNamesEachUnitsOp) {
  test::Scratch s("foreign_refine_attributed");
  const std::string attributed = (s.dir / "attributed.json").string();
  const test::CommandResult run = RefinePeer(s, kModel, "--attributed-trace " + attributed);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto t = traces::ReadChromeTrace(attributed);
  ASSERT_TRUE(static_cast<bool>(t)) << t.error().message;
  int64_t ops = 0, qkv_units = 0, glue_units = 0;
  for (size_t i = 0; i < t->slices().size(); ++i) {
    const traces::Slice& sl = t->slice(i);
    if (sl.has(traces::slice_flags::kHasIdentity)) {
      ++ops;
      continue;
    }
    const std::string_view cat = t->Str(sl.category), name = t->Str(sl.name);
    qkv_units += cat == "qkv fwd" && name == "aten::linear" ? 1 : 0;
    glue_units += cat.substr(0, 8) == "glue of " ? 1 : 0;
  }
  EXPECT_EQ(ops, 74);
  EXPECT_EQ(qkv_units, 4 * 3);  // wq, wk, wv of every layer
  EXPECT_GT(glue_units, 0);
  // `trace diff` pairs the prediction's ops with the attributed ones by identity.
  const std::string pred = (s.dir / "pred.json").string();
  auto sim = test::RunParallax("simulate --model " + kModel + " --cluster " + OneDeviceCluster() +
                               " --plan dp=1,micro_batch=8,global_batch=8 --implementation pytorch --costdb " +
                               (s.dir / "refined.json").string() + " --trace " + pred);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  auto diff = test::RunParallax("trace diff " + pred + " " + attributed + " --json");
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  const Json d = Json::parse(diff.out);
  EXPECT_EQ(d["alignment"], "identity");
  EXPECT_EQ(d["matched"].get<int64_t>(), 74);
}

// Three steps under a profiler schedule: each is a "ProfilerStep#N" range, and each range starts the
// plan's op list again. Whole, every op of every step is matched. With the second step cut short
// (its backward and optimizer gone, as a step that ended early), the third is still matched whole:
// without the ranges the assigner could only restart the list once the previous step reached its
// last ops (2026-11-28: a run lost a step's forward so, and refine predicted it 14-24% slow).
TEST(ForeignRefine, ProfilerStepRangesStartEachStepsOpsAfresh) {
  for (const char* file : {PARALLAX_TEST_DATA_DIR "/traces/pytorch-cpu/peer_gpt_mb8_3steps.json.gz",
                           PARALLAX_TEST_DATA_DIR "/traces/pytorch-cpu/peer_gpt_mb8_3steps_cut.json.gz"}) {
    test::Scratch s("foreign_refine_steps");
    const test::CommandResult run = RefinePeer(s, kModel, "", file);
    ASSERT_EQ(run.exit_code, 0) << file << ": " << run.err;
    const Json a = Json::parse(run.out)["attribution"];
    EXPECT_EQ(a["steps"].get<int64_t>(), 3) << file;
    const bool cut = std::string(file).find("cut") != std::string::npos;
    // 74 plan ops a step; the cut step keeps its forward (the embedding, 4 layers x 8, the final
    // norm, the head and the loss: 36).
    EXPECT_EQ(a["ops_matched"].get<int64_t>(), cut ? 74 + 36 + 74 : 3 * 74) << file;
    for (const auto& u : a["unattributed"]) {
      EXPECT_NE(u["name"], "aten::linear") << file << ": a forward linear of a step was lost";
    }
  }
}

TEST(ForeignRefine, ATraceOfAnotherModelIsRefused) {
  test::Scratch s("foreign_refine_other");
  const std::string one_layer = test::WriteTempFile(
      "foreign_model_1layer.json",
      R"({"kind":"model","version":1,"name":"gpt-peer-1x256","layers":1,"hidden":256,"heads":4,"vocab":256,)"
      R"("seq_len":128,"mlp":"gelu","norm":"layernorm","position":"learned","tie_embeddings":true,"bias":true})");
  const test::CommandResult run = RefinePeer(s, one_layer);
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.err.find("peer_gpt_mb8.json.gz"), std::string::npos) << run.err;
}

// HTA's rank_non_gpu trace: 2424 host ops of another model's training step (FusedAdam, gloo). Its
// GEMMs and norms land on a few of the peer GPT's ops, and with glue that was 86% of its host ops'
// time "on plan ops": refine fitted it (2026-11-29). So did 6 GEMM kernels of HTA's CUDA event
// sync trace, on one op. Under half of the plan's ops got time.
TEST(ForeignRefine, ATraceThatGivesTimeToFewOfThePlansOpsIsRefused) {
  for (const std::string units : {"host ops", "device kernels"}) {
    test::Scratch s("foreign_refine_few_ops");
    const std::string file =
        PARALLAX_TEST_DATA_DIR "/traces/kineto/" +
        std::string(units == "host ops"
                        ? "rank_non_gpu__rank_non_gpu.json.gz"
                        : "critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz");
    const test::CommandResult run = RefinePeer(s, kModel, "", file);
    EXPECT_EQ(run.exit_code, 2) << run.out;
    std::string said = file;
    said += ": its ";
    said += units;
    said += " give time to only";
    EXPECT_NE(run.err.find(said), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("gemm"), std::string::npos) << run.err;  // what the trace's time is
    // The event sync trace runs three matmuls forward only; rank_non_gpu trains.
    EXPECT_EQ(run.err.find("no backward op") != std::string::npos, units == "device kernels")
        << run.err;
  }
}

// HTA's cpu_only trace is rank 34 of 300 (distributedInfo); the plan is one device.
TEST(ForeignRefine, ATraceOfARankThePlanDoesNotHaveSaysWhichRanksEachHas) {
  test::Scratch s("foreign_refine_rank");
  const std::string file = PARALLAX_TEST_DATA_DIR
      "/traces/kineto/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  const test::CommandResult run = RefinePeer(s, kModel, "", file);
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.err.find(file + ": it is a trace of rank 34 (its distributedInfo, of 300)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("it has 1 ranks"), std::string::npos) << run.err;
}

// torch.profiler with activities=[CUDA] only: kernels without the host ops that say which are
// backward. The refusal says to record the CPU too, not that the run was inference.
TEST(ForeignRefine, AKernelsOnlyTraceIsRefusedSayingToRecordTheCpuToo) {
  test::Scratch s("foreign_refine_device_only");
  std::string events;
  for (int i = 0; i < 6; ++i) {
    events += std::string(i == 0 ? "" : ",") + R"({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", )" +
              R"("pid": 0, "tid": 7, "ts": )" + std::to_string(1000 + 100 * i) +
              R"(, "dur": 50, "args": {"correlation": )" + std::to_string(i + 1) + "}}";
  }
  const std::string file = test::WriteTempFile("foreign_device_only.json", R"({"traceEvents": [)" + events + "]}");
  const test::CommandResult run = RefinePeer(s, kModel, "", file);
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.err.find("foreign_device_only.json"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("record the CPU too"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("inference"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace parallax
