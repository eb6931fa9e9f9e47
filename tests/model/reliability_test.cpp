// Stragglers and failures in the cluster description: read, written back, and bad values named
// by file and JSON path.
#include <gtest/gtest.h>

#include "model/presets.h"

namespace parallax {
namespace {

Json Cluster() { return ClusterToJson(*ClusterPreset("dgx-a100")); }

TEST(Reliability, ClusterReadsStragglersAndFailures) {
  Json j = Cluster();
  j["stragglers"] = Json::parse(R"({"ranks": [{"rank": 1, "slowdown": 3}], "nodes": [{"node": 0, "slowdown": 1.5}],
                                    "jitter": {"distribution": "lognormal", "sigma": 0.1}})");
  j["failures"] = Json::parse(R"({"mtbf_hours": 50000, "per": "gpu", "checkpoint_write_s": 30,
                                  "checkpoint_restore_s": 120})");
  auto c = ClusterFromJson(j, "cluster.json");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_DOUBLE_EQ(c->stragglers.FactorOf(1, 8), 4.5);
  EXPECT_DOUBLE_EQ(c->stragglers.FactorOf(2, 8), 1.5);
  EXPECT_DOUBLE_EQ(c->stragglers.FactorOf(9, 8), 1.0);
  EXPECT_DOUBLE_EQ(c->stragglers.jitter_sigma, 0.1);
  // 16K GPUs at 50,000 hours each: one failure every 50000*3600/16384 s.
  EXPECT_NEAR(c->failures.JobMtbfSeconds(16384, 8), 50000.0 * 3600 / 16384, 1e-9);
  EXPECT_EQ(ClusterToJson(*c), j);
}

TEST(Reliability, AClusterWithoutThemWritesNothingNew) {
  const Json j = Cluster();
  EXPECT_FALSE(j.contains("stragglers"));
  EXPECT_FALSE(j.contains("failures"));
  EXPECT_TRUE(ClusterFromJson(j, "c.json")->failures.empty());
}

TEST(Reliability, NodeFailuresCountNodes) {
  FailureSpec f;
  f.mtbf_hours = 1000;
  f.scope = FailureScope::kNode;
  EXPECT_DOUBLE_EQ(f.JobMtbfSeconds(16, 8), 1000.0 * 3600 / 2);
}

std::string Error(const char* key, const char* text) {
  Json j = Cluster();
  j[key] = Json::parse(text);
  auto c = ClusterFromJson(j, "cluster.json");
  return c ? "ok" : c.error().message;
}

TEST(Reliability, BadValuesNameFileAndPath) {
  EXPECT_EQ(Error("stragglers", R"({"ranks": [{"rank": 1, "slowdown": 0.5}]})"),
            "cluster.json: /stragglers/ranks/0/slowdown: must be >= 1 (a factor on the step's compute time)");
  EXPECT_EQ(Error("stragglers", R"({"ranks": [{"slowdown": 2}]})"), "cluster.json: /stragglers/ranks/0/rank: missing required field");
  EXPECT_EQ(Error("stragglers", R"({"jitter": {"distribution": "pareto", "sigma": 1}})").substr(0, 47),
            "cluster.json: /stragglers/jitter/distribution: ");
  EXPECT_EQ(Error("stragglers", R"({"ranks": 3})"),
            "cluster.json: /stragglers/ranks: expected an array of {rank, slowdown}");
  EXPECT_EQ(Error("failures", R"({"mtbf_hours": 100, "checkpoint_s": 3})"),
            "cluster.json: /failures/checkpoint_s: unknown key");
  EXPECT_EQ(Error("failures", R"({"mtbf_hours": 0})").substr(0, 34), "cluster.json: /failures/mtbf_hours");
}

}  // namespace
}  // namespace parallax
