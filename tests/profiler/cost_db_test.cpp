// CostDb extensions (spread, repetitions, sources, placement, skipped list, contention fit) round-
// trip through JSON, and a file written before they existed still reads the same.
#include <gtest/gtest.h>

#include "model/cost_db.h"
#include "model/op_catalogue.h"

namespace parallax {
namespace {

TEST(CostDbExtensions, RoundTrip) {
  CostDb db;
  db.device = "cpu";
  GemmSample g;
  g.m = 64;
  g.n = 128;
  g.k = 32;
  g.dtype = DType::kFp32;
  g.time_s = 2e-5;
  g.stats = {11, 1e-6};
  g.source = "refine";
  db.gemms.push_back(g);
  g.accumulate = true;  // the same shape as a weight gradient added into fp32: a second sample
  g.time_s = 2.6e-5;
  db.gemms.push_back(g);
  db.kernels.push_back({"attn_norm", 4096, 1e-6, {5, 2e-8}, "calibrate"});
  CollectiveCurve c;
  c.op = CollectiveKind::kAllGather;
  c.group_size = 2;
  c.source = "nccl-tests";
  c.origin = "all_gather_perf.txt";
  c.placement = "out-of-place";
  c.points.push_back({1024, 1e-5, 0.1, 0.05, {20, 1e-7}});
  db.collectives.push_back(c);
  db.contention_factor = 1.2;
  db.contention = {"refine", 40, 0.05};
  db.skipped.push_back({"gemm m=1 n=1 k=1 fp32", "out of memory"});
  db.run_factors.push_back({"gemm", DType::kFp32, 1.07, 9, "refine"});
  db.run_factors.push_back({"act", DType::kFp32, 1.3, 4, "refine"});
  db.noise = {"calibrate", 5e-5, 2, 0.3, {{5e-5, {0, 1e-6, 4e-6}}, {2e-4, {1e-6, 3e-6, 9e-6}}}};
  db.run_op_times = {0.93, 4997, "refine"};
  db.catalogue = 7;
  const Json j = CostDbToJson(db);
  auto back = CostDbFromJson(j, "db.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(CostDbToJson(*back), j);
  EXPECT_EQ(back->gemms[0].stats.repetitions, 11);
  ASSERT_EQ(back->gemms.size(), 2u);
  EXPECT_FALSE(back->gemms[0].accumulate);
  EXPECT_TRUE(back->gemms[1].accumulate);
  EXPECT_FALSE(j["gemm"][0].contains("accumulate"));  // written only when set: older readers see the plain sample
  EXPECT_EQ(j["gemm"][1]["accumulate"], true);
  EXPECT_EQ(back->kernels[0].source, "calibrate");
  EXPECT_EQ(back->collectives[0].placement, "out-of-place");
  EXPECT_EQ(back->skipped[0].reason, "out of memory");
  EXPECT_EQ(back->contention.samples, 40);
  EXPECT_DOUBLE_EQ(back->RunFactorOf("gemm", DType::kFp32), 1.07);
  EXPECT_DOUBLE_EQ(back->RunFactorOf("gemm", DType::kBf16), 1.0);  // measured for fp32 GEMMs only
  EXPECT_DOUBLE_EQ(back->RunFactorOf("act"), 1.3);
  EXPECT_DOUBLE_EQ(back->RunFactorOf("attn_norm"), 1.0);
  // With the memory-bound families' pooled factor, a family no trace timed takes it; GEMMs do not.
  CostDb pooled = *back;
  pooled.run_factors.push_back({kMemoryBoundRunFactor, DType::kFp32, 1.2, 6, "refine"});
  EXPECT_DOUBLE_EQ(pooled.RunFactorOf("act"), 1.3);
  EXPECT_DOUBLE_EQ(pooled.RunFactorOf("grad_clip"), 1.2);
  EXPECT_DOUBLE_EQ(pooled.RunFactorOf("gemm", DType::kBf16), 1.0);
  ASSERT_EQ(back->noise.windows.size(), 2u);
  EXPECT_DOUBLE_EQ(back->noise.windows[1].detour_s[2], 9e-6);
  EXPECT_EQ(back->noise.ranks, 2);
  EXPECT_DOUBLE_EQ(back->run_op_times.mean_over_median, 0.93);
  EXPECT_EQ(back->run_op_times.instances, 4997);
  EXPECT_EQ(back->run_op_times.source, "refine");
  EXPECT_EQ(back->catalogue, 7);
  auto bad = CostDbFromJson(
      Json::parse(R"({"kind":"costdb","version":1,"device":"x","run_op_times":{"mean_over_median":0}})"), "bad.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "bad.json: /run_op_times/mean_over_median: must be > 0 (got 0)");
}

TEST(CostDbExtensions, BadNoiseNamesThePath) {
  auto read = [](const char* noise) {
    const Json j = Json::parse(std::string(R"({"kind":"costdb","version":1,"device":"x","noise":)") + noise + "}");
    auto db = CostDbFromJson(j, "bad.json");
    return db ? std::string("accepted") : db.error().message;
  };
  const char* ok = R"({"source":"calibrate","quantum_s":5e-5,"windows":[{"window_s":5e-5,"detour_s":[0,1e-6]}]})";
  EXPECT_EQ(read(ok), "accepted");
  EXPECT_EQ(read(R"({"source":"calibrate","quantum_s":5e-5,"windows":[{"window_s":5e-5,"detour_s":[2e-6,1e-6]}]})"),
            "bad.json: /noise/windows/0/detour_s/1: quantiles must be ascending");
  EXPECT_EQ(read(R"({"source":"calibrate","quantum_s":5e-5,"windows":[{"window_s":5e-5,"detour_s":[-1e-6,"x"]}]})"),
            "bad.json: /noise/windows/0/detour_s/1: expected a number");
  EXPECT_EQ(read(R"({"source":"calibrate","quantum_s":5e-5,"windows":[{"window_s":2e-4,"detour_s":[0]},)"
                 R"({"window_s":5e-5,"detour_s":[0]}]})"),
            "bad.json: /noise/windows/1/window_s: windows must be in ascending window_s");
  EXPECT_EQ(read(R"({"source":"calibrate","quantum_s":5e-5,"windows":[]})"),
            "bad.json: /noise/windows: must hold at least one window");
  EXPECT_EQ(read(R"({"source":"calibrate","quantum_s":5e-5,"windows":[{"window_s":5e-5,"detour_s":[]}]})"),
            "bad.json: /noise/windows/0/detour_s: must hold at least one quantile");
  EXPECT_NE(read(R"({"source":"calibrate","quantum_s":0,"windows":[{"window_s":5e-5,"detour_s":[0]}]})")
                .find("/noise/quantum_s"),
            std::string::npos);
}

TEST(CostDbExtensions, BadRunFactorsNameThePath) {
  auto read = [](const char* factors) {
    const Json j = Json::parse(std::string(R"({"kind":"costdb","version":1,"device":"x","run_factors":)") + factors + "}");
    auto db = CostDbFromJson(j, "bad.json");
    return db ? std::string("accepted") : db.error().message;
  };
  EXPECT_EQ(read(R"([{"family":"act","factor":0}])"), "bad.json: /run_factors/0/factor: must be > 0 (got 0)");
  EXPECT_NE(read(R"([{"family":"gemm","factor":1.1}])").find("/run_factors/0/dtype"), std::string::npos);
  EXPECT_EQ(read(R"([{"family":"act","factor":1.1},{"family":"act","factor":1.2}])"),
            "bad.json: /run_factors/1/family: \"act\" appears twice");
  EXPECT_EQ(read(R"([{"family":"gemm","dtype":"fp32","factor":1.1},{"family":"gemm","dtype":"bf16","factor":1.2}])"),
            "accepted");
}

TEST(CostDbExtensions, BadAccumulateNamesThePath) {
  auto bad = CostDbFromJson(Json::parse(R"({"kind":"costdb","version":1,"device":"x",
    "gemm":[{"m":8,"n":8,"k":8,"dtype":"bf16","time_s":1e-5,"accumulate":1}]})"),
                            "bad.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bad.json: /gemm/0/accumulate"), std::string::npos) << bad.error().message;
}

// A database says which op catalogue keyed its samples; one keyed by another (or unstamped) is
// named, one with collectives only is not (they are keyed by message size, not by the catalogue).
TEST(CostDbExtensions, CatalogueStampSaysWhenSamplesMayBeKeyedOtherwise) {
  CostDb db;
  db.device = "cpu";
  db.kernels.push_back({"act", 4096, 1e-6, {}, "calibrate"});
  ASSERT_TRUE(CatalogueMismatch(db));
  EXPECT_NE(CatalogueMismatch(db)->find("unstamped"), std::string::npos);
  db.catalogue = kOpCatalogueVersion + 1;
  ASSERT_TRUE(CatalogueMismatch(db));
  EXPECT_NE(CatalogueMismatch(db)->find("version " + std::to_string(kOpCatalogueVersion + 1)), std::string::npos);
  db.catalogue = kOpCatalogueVersion;
  EXPECT_FALSE(CatalogueMismatch(db));
  CostDb collectives_only;
  collectives_only.device = "cpu";
  collectives_only.collectives.push_back({});
  EXPECT_FALSE(CatalogueMismatch(collectives_only));
  auto bad = CostDbFromJson(Json::parse(R"({"kind":"costdb","version":1,"device":"x","catalogue":-1})"), "bad.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bad.json: /catalogue"), std::string::npos) << bad.error().message;
}

TEST(CostDbExtensions, OlderFilesReadUnchanged) {
  const Json old = Json::parse(R"({"kind":"costdb","version":1,"device":"a100-sxm-80g","contention_factor":1.0,
    "gemm":[{"m":8,"n":8,"k":8,"dtype":"bf16","time_s":1e-5}],"kernels":[{"op":"act","bytes":64,"time_s":1e-6}],
    "collectives":[{"op":"all_reduce","group_size":8,"spans_nodes":false,"source":"calibrate",
      "points":[{"bytes":1024,"time_s":1e-5,"algbw_GBps":0.1,"busbw_GBps":0.175}]}]})");
  auto db = CostDbFromJson(old, "old.json");
  ASSERT_TRUE(db) << db.error().message;
  EXPECT_EQ(db->gemms[0].stats.repetitions, 0);
  EXPECT_TRUE(db->collectives[0].placement.empty());
  EXPECT_TRUE(db->skipped.empty());
  EXPECT_EQ(CostDbToJson(*db), old);  // nothing new is written for what was not there
}

TEST(CostDbExtensions, BadPlacementNamesThePath) {
  const Json bad = Json::parse(R"({"kind":"costdb","version":1,"device":"x","collectives":[{"op":"all_reduce",
    "group_size":2,"placement":"sideways","points":[{"bytes":8,"time_s":1e-5}]}]})");
  auto db = CostDbFromJson(bad, "bad.json");
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().message,
            "bad.json: /collectives/0/placement: unknown value \"sideways\" (expected one of \"in-place\", "
            "\"out-of-place\", \"host\")");
}

}  // namespace
}  // namespace parallax
