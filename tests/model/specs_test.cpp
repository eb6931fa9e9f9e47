// JSON round trips of every description and the atomic writer.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <fstream>
#include <utility>
#include <vector>

#include "model/cost_db.h"
#include "model/implementation.h"
#include "model/load.h"
#include "model/plan.h"
#include "model/presets.h"

namespace parallax {
namespace {

TEST(Specs, ModelRoundTripsForEveryPreset) {
  for (const auto& name : ModelPresetNames()) {
    const ModelSpec m = *ModelPreset(name);
    ASSERT_TRUE(ValidateModel(m, name)) << name;
    auto back = ModelFromJson(ModelToJson(m), name);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(ModelToJson(*back), ModelToJson(m)) << name;
  }
}

TEST(Specs, ModelDefaultsFollowTheMlpKind) {
  auto gelu = ModelFromJson(Json::parse(R"({"kind":"model","version":1,"name":"g","layers":2,"hidden":64,
      "heads":4,"vocab":100,"seq_len":16})"), "g.json");
  ASSERT_TRUE(gelu) << gelu.error().message;
  EXPECT_EQ(gelu->ffn_hidden, 256);
  EXPECT_EQ(gelu->kv_heads, 4);
  EXPECT_TRUE(gelu->tie_embeddings);
  EXPECT_EQ(gelu->norm, NormKind::kLayerNorm);
  auto swiglu = ModelFromJson(Json::parse(R"({"kind":"model","version":1,"name":"s","layers":2,"hidden":4096,
      "heads":32,"vocab":100,"seq_len":16,"mlp":"swiglu"})"), "s.json");
  ASSERT_TRUE(swiglu) << swiglu.error().message;
  EXPECT_EQ(swiglu->ffn_hidden, 11008);  // LLaMA's 2/3 * 4h rounded to 256
  EXPECT_EQ(swiglu->norm, NormKind::kRmsNorm);
  EXPECT_EQ(swiglu->position, PositionKind::kRotary);
  EXPECT_FALSE(swiglu->tie_embeddings);
}

TEST(Specs, ClusterRoundTripsAndScales) {
  for (const auto& name : ClusterPresetNames()) {
    const ClusterSpec c = *ClusterPreset(name);
    auto back = ClusterFromJson(ClusterToJson(c), name);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(ClusterToJson(*back), ClusterToJson(c));
  }
  auto c = ResolveCluster("dgx-a100", 128);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->total_gpus(), 1024);
  EXPECT_EQ(c->device.name, "a100-sxm-80g");
  EXPECT_DOUBLE_EQ(c->intra_node.bandwidth_GBps, 300);
  EXPECT_DOUBLE_EQ(c->inter_node.bandwidth_GBps, 200);  // 8 x 200 Gb/s
}

TEST(Specs, ClusterDeviceByPresetName) {
  auto c = ClusterFromJson(Json::parse(R"({"kind":"cluster","version":1,"name":"x","nodes":2,"gpus_per_node":8,
      "device":"h100-sxm-80g","intra_node":{"bandwidth_GBps":450,"latency_us":3},
      "inter_node":{"bandwidth_GBps":400,"latency_us":5}})"), "x.json");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_DOUBLE_EQ(c->device.peak_tflops.bf16, 989.4);
  EXPECT_DOUBLE_EQ(c->device.peak_tflops.For(DType::kFp8), 1978.9);
}

//! The cluster `head` (a JSON object without its closing brace) with `tail` appended, read as x.json.
Result<ClusterSpec> ClusterWith(const char* head, const std::string& tail = "}") {
  return ClusterFromJson(Json::parse(std::string(head) + tail), "x.json");
}

//! `c` was refused, naming the file and the JSON path `path`.
void ExpectRefusedAt(const Result<ClusterSpec>& c, const std::string& path) {
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("x.json"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find(path), std::string::npos) << c.error().message;
}

TEST(Specs, ClusterNvlinkDomainDefaultsToTheNodeAndRoundTrips) {
  const char* base = R"({"kind":"cluster","version":1,"name":"x","nodes":36,"gpus_per_node":4,
      "device":"gb200","intra_node":{"bandwidth_GBps":900,"latency_us":3},
      "inter_node":{"bandwidth_GBps":200,"latency_us":5})";
  auto plain = ClusterWith(base);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->domain_size(), 4);
  EXPECT_FALSE(ClusterToJson(*plain).contains("nvlink_domain"));  // files of node-sized domains unchanged
  auto segment = ClusterWith(base, R"(,"nvlink_domain":64})");
  ASSERT_TRUE(segment) << segment.error().message;
  EXPECT_EQ(segment->domain_size(), 64);
  EXPECT_EQ(segment->DomainOf(63), 0);
  EXPECT_EQ(segment->DomainOf(64), 1);
  EXPECT_EQ(segment->DomainOf(143), 2);  // 144 GPUs: domains of 64, 64 and a partial 16
  EXPECT_EQ(ClusterToJson(*segment)["nvlink_domain"], 64);
  auto back = ClusterFromJson(ClusterToJson(*segment), "x.json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->domain_size(), 64);
  ExpectRefusedAt(ClusterWith(base, R"(,"nvlink_domain":0})"), "/nvlink_domain");
}

// A CPU node's ranks time-share its CPUs when they outnumber them: a synchronous step goes at the
// most crowded CPU's pace (ceil).
TEST(Specs, ClusterCpusPerNodeSharesTheCpusAndRoundTrips) {
  const char* base = R"({"kind":"cluster","version":1,"name":"x","nodes":1,"gpus_per_node":4,
      "device":"cpu","intra_node":{"bandwidth_GBps":8,"latency_us":8},
      "inter_node":{"bandwidth_GBps":1,"latency_us":20})";
  auto gpus = ClusterWith(base);
  ASSERT_TRUE(gpus) << gpus.error().message;
  EXPECT_EQ(gpus->cpus_per_node, 0);
  EXPECT_FALSE(ClusterToJson(*gpus).contains("cpus_per_node"));
  EXPECT_EQ(gpus->SlowestCoreShare(4), 1.0);  // 0: every rank has its device
  auto two = ClusterWith(base, R"(,"cpus_per_node":2})");
  ASSERT_TRUE(two) << two.error().message;
  const std::vector<std::pair<int64_t, double>> slowest{{1, 1}, {2, 1}, {3, 2}, {4, 2}, {5, 3}};
  for (const auto& [busy, share] : slowest) EXPECT_EQ(two->SlowestCoreShare(busy), share) << busy;
  auto back = ClusterFromJson(ClusterToJson(*two), "x.json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->cpus_per_node, 2);
  ExpectRefusedAt(ClusterWith(base, R"(,"cpus_per_node":-1})"), "/cpus_per_node");
  // Dedicated parameter servers wait while the workers compute: only the workers are busy.
  Layout ps = *ParseInlineLayout("dp=2,sync=ps,servers=1,global_batch=4");
  EXPECT_EQ(ps.job_ranks(), 3);
  EXPECT_EQ(ps.BusyRanksPerNode(3), 2);
  EXPECT_EQ(ps.BusyRanksPerNode(1), 1);
}

TEST(Specs, PlanRoundTripsThroughAFile) {
  Plan p;
  p.model = *ModelPreset("gpt-tiny");
  p.cluster = *ClusterPreset("local-cpu");
  p.cluster.gpus_per_node = 4;  // local-cpu has this machine's core count; the plan needs 4 ranks
  p.training.global_batch = 8;
  p.training.precision = Precision::kFp32;
  p.layout = *ParseInlineLayout("dp=2,tp=2,pp=1,zero=1,micro_batch=2,global_batch=8,recompute=full,sp=1");
  p.prediction = Json{{"step_time_s", 0.5}};
  const auto dir = std::filesystem::temp_directory_path() / "parallax_test_specs";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "plan.json").string();
  ASSERT_TRUE(SavePlanFile(path, p));
  auto back = LoadPlanFile(path);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(PlanToJson(*back), PlanToJson(p));
  EXPECT_EQ(back->layout.num_microbatches(), 2);
  // No temporary files left behind by the atomic writer.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  // A plan made with a profile read from a file carries the profile whole, header included, and
  // reads back (the CLI's `plan --implementation file.json -o p.json`, then `simulate --plan p.json`).
  auto custom = ImplementationFromJson(
      Json::parse(R"({"kind":"implementation","version":1,"name":"mine","base":"megatron-core",)"
                  R"("facts":{"grad_reduce_dtype":{"value":"param","source":"s"}}})"),
      "mine.json");
  ASSERT_TRUE(custom) << custom.error().message;
  p.implementation = *custom;
  ASSERT_TRUE(SavePlanFile(path, p));
  back = LoadPlanFile(path);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->implementation.name, "mine");
  EXPECT_EQ(back->implementation.grad_reduce_dtype.value, GradDType::kParam);
  EXPECT_EQ(PlanToJson(*back), PlanToJson(p));
  std::filesystem::remove_all(dir);
}

TEST(Specs, AtomicWriteFailsCleanlyOnMissingFolder) {
  Status s = WriteFileAtomic("/nonexistent-parallax-dir/x.json", "{}");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("/nonexistent-parallax-dir/x.json"), std::string::npos);
  EXPECT_EQ(ExitCodeFor(s.error()), 1);
}

TEST(Specs, CostDbRoundTrip) {
  CostDb db;
  db.device = "a100-sxm-80g";
  db.cluster = "dgx-a100";
  db.contention_factor = 1.1;
  db.gemms.push_back({4096, 4096, 4096, 1, DType::kBf16, 5.1e-4});
  db.kernels.push_back({"attn_norm", 1 << 20, 1e-5});
  CollectiveCurve c;
  c.op = CollectiveKind::kAllReduce;
  c.group_size = 8;
  c.source = "nccl-tests";
  c.points = {{1024, 2e-5, 0.05, 0.0875}, {1 << 30, 5e-3, 214.7, 375.8}};
  db.collectives.push_back(c);
  auto back = CostDbFromJson(CostDbToJson(db), "db.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(CostDbToJson(*back), CostDbToJson(db));
  EXPECT_NEAR(db.gemms[0].tflops(), 269.5, 0.1);
}

TEST(Specs, InlineLayoutRoundTrips) {
  auto l = ParseInlineLayout("dp=4,tp=8,pp=2,zero=2,micro_batch=1,global_batch=512,recompute=selective,"
                             "schedule=interleaved,virtual_stages=3,sequence_parallel=true");
  ASSERT_TRUE(l) << l.error().message;
  auto again = ParseInlineLayout(LayoutToString(*l));
  ASSERT_TRUE(again);
  EXPECT_EQ(LayoutToJson(*again), LayoutToJson(*l));
  EXPECT_EQ(l->schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(l->virtual_stages, 3);
  EXPECT_TRUE(l->sequence_parallel);
}

}  // namespace
}  // namespace parallax
