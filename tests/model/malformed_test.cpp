// A table of malformed inputs: each yields its own message naming the file and JSON path.
#include <gtest/gtest.h>

#include <set>

#include "model/cost_db.h"
#include "model/hf_import.h"
#include "model/plan.h"

namespace parallax {
namespace {

enum class Kind { kModel, kCluster, kPlan, kCostDb, kHf };

struct Case {
  const char* name;
  Kind kind;
  const char* json;
  const char* expect;  // substring of the message: "<file>: <path>: <what>"
};

constexpr const char* kCluster =
    R"("kind":"cluster","version":1,"name":"c","nodes":1,"gpus_per_node":8,"device":"a100-sxm-80g",)";
constexpr const char* kLinks =
    R"("intra_node":{"bandwidth_GBps":300,"latency_us":3},"inter_node":{"bandwidth_GBps":200,"latency_us":5})";
constexpr const char* kModelHead = R"("kind":"model","version":1,"name":"m",)";

// Built by append: GCC 12 at -O3 warns falsely (-Wrestrict, GCC PR 105329) on "{" + std::string.
std::string Cluster(const std::string& extra, const std::string& links = kLinks) {
  std::string out("{");
  out.append(kCluster).append(extra).append(links).append("}");
  return out;
}

std::string ModelJson(const std::string& body) {
  std::string out("{");
  out.append(kModelHead).append(body).append("}");
  return out;
}

std::string PlanJson(const std::string& layout, const std::string& model_body = R"("layers":4,"hidden":64,"heads":4,"vocab":256,"seq_len":32)") {
  return R"({"kind":"plan","version":1,"model":)" + ModelJson(model_body) +
         R"(,"cluster":)" + Cluster("") + R"(,"layout":)" + layout + "}";
}

const std::string kBase = R"("layers":4,"hidden":64,"heads":4,"vocab":256,"seq_len":32)";

std::vector<std::pair<Case, std::string>> Cases() {
  std::vector<std::pair<Case, std::string>> v;
  auto add = [&](const char* name, Kind k, std::string json, const char* expect) {
    v.push_back({Case{name, k, nullptr, expect}, std::move(json)});
  };
  add("model_unknown_key", Kind::kModel, ModelJson(kBase + R"(,"hiden":64)"), "m.json: /hiden: unknown key");
  add("model_wrong_type", Kind::kModel, ModelJson(R"("layers":"four","hidden":64,"heads":4,"vocab":256,"seq_len":32)"),
      "m.json: /layers: expected an integer, got a string");
  add("model_zero_layers", Kind::kModel, ModelJson(R"("layers":0,"hidden":64,"heads":4,"vocab":256,"seq_len":32)"),
      "m.json: /layers: must be > 0 (got 0)");
  add("model_negative_hidden", Kind::kModel, ModelJson(R"("layers":4,"hidden":-64,"heads":4,"vocab":256,"seq_len":32)"),
      "m.json: /hidden: must be > 0 (got -64)");
  add("model_fractional_heads", Kind::kModel, ModelJson(R"("layers":4,"hidden":64,"heads":4.5,"vocab":256,"seq_len":32)"),
      "m.json: /heads: expected an integer, got a fraction");
  add("model_heads_not_dividing_hidden", Kind::kModel, ModelJson(R"("layers":4,"hidden":64,"heads":5,"vocab":256,"seq_len":32)"),
      "m.json: /heads: heads=5 does not divide hidden=64");
  add("model_kv_heads_not_dividing", Kind::kModel, ModelJson(kBase + R"(,"kv_heads":3)"),
      "m.json: /kv_heads: kv_heads=3 does not divide heads=4");
  add("model_kv_heads_above_heads", Kind::kModel, ModelJson(kBase + R"(,"kv_heads":8)"),
      "m.json: /kv_heads: kv_heads=8 does not divide heads=4");
  add("model_missing_vocab", Kind::kModel, ModelJson(R"("layers":4,"hidden":64,"heads":4,"seq_len":32)"),
      "m.json: /vocab: missing required field");
  add("model_bad_mlp", Kind::kModel, ModelJson(kBase + R"(,"mlp":"relu")"),
      "m.json: /mlp: unknown value \"relu\" (expected one of \"gelu\", \"swiglu\")");
  add("model_bool_as_string", Kind::kModel, ModelJson(kBase + R"(,"tie_embeddings":"yes")"),
      "m.json: /tie_embeddings: expected true or false, got a string");
  add("model_wrong_kind", Kind::kModel, R"({"kind":"cluster","version":1})", "m.json: /kind: expected \"model\", got \"cluster\"");
  add("model_future_version", Kind::kModel, R"({"kind":"model","version":99})",
      "m.json: /version: version 99 is newer than this parallax understands (1)");
  add("model_not_object", Kind::kModel, R"([1,2,3])", "m.json: /: expected an object, got an array");
  add("model_odd_rotary_head_dim", Kind::kModel, ModelJson(R"("layers":2,"hidden":12,"heads":4,"vocab":10,"seq_len":8,"position":"rotary")"),
      "m.json: /heads: rotary embeddings need an even head dimension (hidden/heads = 3)");
  add("cluster_unknown_key", Kind::kCluster, Cluster(R"("gpu_per_node":8,)"), "m.json: /gpu_per_node: unknown key");
  add("cluster_negative_bandwidth", Kind::kCluster,
      Cluster("", R"("intra_node":{"bandwidth_GBps":300,"latency_us":3},"inter_node":{"bandwidth_GBps":-200,"latency_us":5})"),
      "m.json: /inter_node/bandwidth_GBps: must be > 0 (got -200)");
  add("cluster_negative_latency", Kind::kCluster,
      Cluster("", R"("intra_node":{"bandwidth_GBps":300,"latency_us":-1},"inter_node":{"bandwidth_GBps":200,"latency_us":5})"),
      "m.json: /intra_node/latency_us: must be >= 0 (got -1)");
  add("cluster_unknown_link_key", Kind::kCluster,
      Cluster("", R"("intra_node":{"bandwidth_GBps":300,"latency_us":3,"bw":1},"inter_node":{"bandwidth_GBps":200,"latency_us":5})"),
      "m.json: /intra_node/bw: unknown key");
  add("cluster_unknown_device_preset", Kind::kCluster,
      R"({"kind":"cluster","version":1,"name":"c","nodes":1,"gpus_per_node":8,"device":"x900",)" + std::string(kLinks) + "}",
      "m.json: /device: unknown device preset \"x900\"");
  add("cluster_device_zero_memory", Kind::kCluster,
      R"({"kind":"cluster","version":1,"name":"c","nodes":1,"gpus_per_node":8,"device":{"name":"x","peak_tflops":{"bf16":100},"memory_GiB":0,"hbm_GBps":1000},)" +
          std::string(kLinks) + "}",
      "m.json: /device/memory_GiB: must be > 0 (got 0)");
  add("cluster_device_no_peak", Kind::kCluster,
      R"({"kind":"cluster","version":1,"name":"c","nodes":1,"gpus_per_node":8,"device":{"name":"x","peak_tflops":{"fp8":100},"memory_GiB":80,"hbm_GBps":1000},)" +
          std::string(kLinks) + "}",
      "m.json: /device/peak_tflops/fp32: at least one of fp32, bf16, fp16 must be > 0");
  add("cluster_zero_nodes", Kind::kCluster,
      R"({"kind":"cluster","version":1,"name":"c","nodes":0,"gpus_per_node":8,"device":"a100-sxm-80g",)" + std::string(kLinks) + "}",
      "m.json: /nodes: must be > 0 (got 0)");
  add("plan_bad_zero_stage", Kind::kPlan, PlanJson(R"({"dp":8,"zero_stage":4,"global_batch":8})"),
      "m.json: /layout/zero_stage: must be 0, 1, 2 or 3");
  add("plan_tp_not_dividing_heads", Kind::kPlan, PlanJson(R"({"dp":1,"tp":8,"global_batch":8})"),
      "m.json: /layout: tp=8 does not divide heads=4");
  add("plan_world_size_mismatch", Kind::kPlan, PlanJson(R"({"dp":2,"tp":2,"global_batch":8})"),
      "m.json: /layout: dp*tp*pp = 2*2*1 = 4 does not equal the cluster's GPU count 8");
  add("plan_nested_model_error", Kind::kPlan, PlanJson(R"({"dp":8})", R"("layers":4,"hidden":64,"heads":4,"vocab":256,"seq_len":-1)"),
      "m.json: /model/seq_len: must be > 0 (got -1)");
  add("plan_batch_not_divisible", Kind::kPlan, PlanJson(R"({"dp":8,"micro_batch":3,"global_batch":36})"),
      "m.json: /layout: global_batch=36 is not divisible by dp*micro_batch=24");
  add("plan_virtual_stages_not_dividing", Kind::kPlan,
      PlanJson(R"({"dp":2,"pp":4,"schedule":"interleaved","virtual_stages":3,"global_batch":8})"),
      "m.json: /layout: virtual_stages=3 does not divide the layers per stage (4 layers over pp=4)");
  add("plan_virtual_stages_without_interleaving", Kind::kPlan,
      PlanJson(R"({"dp":4,"pp":2,"virtual_stages":2,"global_batch":8})"), "m.json: /layout: virtual_stages=2 needs schedule=interleaved");
  add("plan_bad_schedule", Kind::kPlan, PlanJson(R"({"dp":8,"schedule":"zb-h1"})"),
      "m.json: /layout/schedule: unknown value \"zb-h1\"");
  add("costdb_negative_time", Kind::kCostDb,
      R"({"kind":"costdb","version":1,"device":"a100-sxm-80g","gemm":[{"m":1,"n":1,"k":1,"time_s":-1}]})",
      "m.json: /gemm/0/time_s: must be > 0 (got -1)");
  add("costdb_unknown_collective", Kind::kCostDb,
      R"({"kind":"costdb","version":1,"device":"x","collectives":[{"op":"allreduce","group_size":8,"points":[]}]})",
      "m.json: /collectives/0/op: unknown collective \"allreduce\"");
  add("costdb_empty_curve", Kind::kCostDb,
      R"({"kind":"costdb","version":1,"device":"x","collectives":[{"op":"all_reduce","group_size":8,"points":[]}]})",
      "m.json: /collectives/0/points: must hold at least one point");
  add("hf_missing_layers", Kind::kHf, R"({"model_type":"llama","hidden_size":4096,"num_attention_heads":32,"vocab_size":32000,"max_position_embeddings":2048})",
      "m.json: /num_hidden_layers: missing required field");
  add("hf_bad_activation", Kind::kHf,
      R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10,"max_position_embeddings":8,"hidden_act":"relu"})",
      "m.json: /hidden_act: unsupported activation \"relu\"");
  return v;
}

Error Parse(Kind kind, const Json& j) {
  switch (kind) {
    case Kind::kModel: { auto r = ModelFromJson(j, "m.json"); return r ? Error{"(accepted)"} : r.error(); }
    case Kind::kCluster: { auto r = ClusterFromJson(j, "m.json"); return r ? Error{"(accepted)"} : r.error(); }
    case Kind::kPlan: { auto r = PlanFromJson(j, "m.json"); return r ? Error{"(accepted)"} : r.error(); }
    case Kind::kCostDb: { auto r = CostDbFromJson(j, "m.json"); return r ? Error{"(accepted)"} : r.error(); }
    case Kind::kHf: { auto r = ModelFromHfConfig(j, "m.json"); return r ? Error{"(accepted)"} : r.error(); }
  }
  return Error{"?"};
}

TEST(Malformed, EachInputHasItsOwnClearMessage) {
  const auto cases = Cases();
  ASSERT_GE(cases.size(), 20u);
  std::set<std::string> messages;
  for (const auto& [c, text] : cases) {
    SCOPED_TRACE(c.name);
    auto j = ParseJsonText(text, "m.json");
    ASSERT_TRUE(j) << j.error().message;
    const Error e = Parse(c.kind, *j);
    EXPECT_NE(e.message.find(c.expect), std::string::npos) << "got: " << e.message;
    EXPECT_EQ(ExitCodeFor(e), 2) << e.message;
    messages.insert(e.message);
  }
  EXPECT_EQ(messages.size(), cases.size()) << "two malformed inputs share a message";
}

TEST(Malformed, InvalidJsonNamesFileLineColumnAndOffset) {
  auto j = ParseJsonText(R"({"kind": "model", "layers": 4,, })", "bad.json");
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("bad.json: invalid JSON at line 1, column 31 (byte 31)"), std::string::npos)
      << j.error().message;
  auto later = ParseJsonText("{\n  \"kind\": \"model\",\n  \"layers\" 4\n}", "bad.json");
  ASSERT_FALSE(later);
  EXPECT_NE(later.error().message.find("bad.json: invalid JSON at line 3, column 12"), std::string::npos)
      << later.error().message;
}

TEST(Malformed, DuplicateKeysNameTheirPath) {
  auto top = ParseJsonText(R"({"kind":"model","kind":"plan"})", "dup.json");
  ASSERT_FALSE(top);
  EXPECT_EQ(top.error().message, "dup.json: /kind: duplicate key");
  auto nested = ParseJsonText(R"({"a":[1,{"b":{}},{"c":2,"d":[],"c":3}]})", "dup.json");
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().message, "dup.json: /a/2/c: duplicate key");
  // The same key in sibling objects is not a duplicate.
  EXPECT_TRUE(ParseJsonText(R"({"x":[{"k":1},{"k":2}],"y":{"k":3}})", "ok.json"));
}

TEST(Malformed, NumberOverflowIsBadInputWithItsPosition) {
  auto j = ParseJsonText("{\"layers\":\n 1e400}", "big.json");
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("big.json: invalid JSON at line 2, column 2"), std::string::npos) << j.error().message;
  EXPECT_NE(j.error().message.find("number overflow"), std::string::npos) << j.error().message;
  EXPECT_EQ(ExitCodeFor(j.error()), 2);
}

TEST(Malformed, MissingFileIsBadInput) {
  auto j = LoadJsonFile("/nonexistent/parallax.json");
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("/nonexistent/parallax.json: cannot open"), std::string::npos);
  EXPECT_EQ(ExitCodeFor(j.error()), 2);
  auto dir = LoadJsonFile(PARALLAX_SOURCE_DIR "/examples");
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message.find("/examples: is a directory"), std::string::npos) << dir.error().message;
}

TEST(Malformed, InlineLayoutErrors) {
  struct Bad { const char* text; const char* expect; };
  for (const Bad& b : {Bad{"dp=2,tq=2", "plan: /tq: unknown key"}, Bad{"dp=two", "plan: /dp: expected an integer, got \"two\""},
                       Bad{"dp", "plan: \"dp\": expected key=value"}, Bad{"recompute=some", "plan: /recompute: unknown recompute \"some\""},
                       Bad{"sp=maybe", "plan: /sp: expected true/false"}}) {
    auto l = ParseInlineLayout(b.text);
    ASSERT_FALSE(l) << b.text;
    EXPECT_NE(l.error().message.find(b.expect), std::string::npos) << l.error().message;
  }
}

}  // namespace
}  // namespace parallax
