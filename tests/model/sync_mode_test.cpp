// Classic training modes as plan settings: parsed, written back, and combined with the layout's
// other dimensions only where that makes sense.
#include <gtest/gtest.h>

#include "model/load.h"
#include "model/presets.h"

namespace parallax {
namespace {

std::string Check(const std::string& inline_layout, int64_t world = 0) {
  auto l = ParseInlineLayout(inline_layout);
  if (!l) return l.error().message;
  auto c = ResolveCluster("dgx-a100", 1);
  Status s = ValidateLayout(*l, *ModelPreset("gpt-tiny"), *c, world);
  return s ? "ok" : s.error().message;
}

TEST(SyncMode, InlineFormRoundTripsThroughTheParser) {
  for (const char* text : {"dp=4,global_batch=8,sync=ps,servers=2", "dp=4,global_batch=8,sync=ssp:3,servers=colocated:2",
                           "dp=4,global_batch=8,sync=backup:1", "dp=4,global_batch=8,compression=topk:0.25",
                           "dp=4,global_batch=8,compression=powersgd:4", "dp=4,global_batch=8,sync=local:4,data=federated:label_skew",
                           "dp=4,global_batch=8,sync=async,servers=1,compression=none"}) {
    auto l = ParseInlineLayout(text);
    ASSERT_TRUE(l) << text << ": " << l.error().message;
    auto again = ParseInlineLayout(LayoutToString(*l));
    ASSERT_TRUE(again) << LayoutToString(*l);
    EXPECT_EQ(LayoutToString(*again), LayoutToString(*l));
    EXPECT_EQ(LayoutToJson(*again), LayoutToJson(*l)) << text;
  }
  auto l = *ParseInlineLayout("dp=4,sync=ssp:3,servers=colocated:2,compression=topk:0.25");
  EXPECT_EQ(l.sync.kind, SyncKind::kSsp);
  EXPECT_EQ(l.sync.staleness, 3);
  EXPECT_TRUE(l.sync.colocated);
  EXPECT_EQ(l.sync.servers, 2);
  EXPECT_DOUBLE_EQ(l.sync.topk_fraction, 0.25);
}

TEST(SyncMode, TheDefaultWritesNothingNew) {
  const Layout l = *ParseInlineLayout("dp=2,global_batch=8");
  EXPECT_EQ(LayoutToString(l).find("sync"), std::string::npos);
  EXPECT_FALSE(LayoutToJson(l).contains("sync"));
  EXPECT_TRUE(l.sync.is_default());
}

TEST(SyncMode, PlanJsonReadsAndWritesTheMode) {
  Layout l = *ParseInlineLayout("dp=3,global_batch=6,sync=ps,servers=1");
  Json j = LayoutToJson(l);
  EXPECT_EQ(j["sync"], "ps");
  EXPECT_EQ(j["servers"], "1");
  auto back = LayoutFromJson(j, "plan.json", "/layout");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->sync.kind, SyncKind::kPs);
  EXPECT_EQ(back->job_ranks(), 4);
  j["compression"] = "topk:2";
  auto bad = LayoutFromJson(j, "plan.json", "/layout");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "plan.json: /layout/compression: topk:F (the fraction kept) must be a number in (0, 1], got \"2\"");
}

TEST(SyncMode, BadValuesNameTheKey) {
  EXPECT_EQ(Check("dp=2,sync=gossip"),
            "plan: /sync: unknown sync \"gossip\" (expected allreduce, ps, async, ssp:S, backup:B or local:H)");
  EXPECT_EQ(Check("dp=2,sync=ssp:0"), "plan: /sync: ssp:S (the staleness bound) must be an integer >= 1, got \"0\"");
  EXPECT_EQ(Check("dp=2,compression=zip"),
            "plan: /compression: unknown compression \"zip\" (expected none, bf16, int8, topk:F or powersgd:R)");
  EXPECT_EQ(Check("dp=2,data=federated:random"),
            "plan: /data: unknown data \"federated:random\" (expected iid, federated:label_skew or federated:contiguous)");
}

TEST(SyncMode, DedicatedServersAddRanksAfterTheWorkers) {
  EXPECT_EQ(Check("dp=3,global_batch=6,sync=ps,servers=1", 4), "ok");
  EXPECT_EQ(Check("dp=3,global_batch=6,sync=ps,servers=1", 3),
            "plan: dp*tp*pp + servers = 3*1*1 + 1 = 4 does not equal the world size 3");
  EXPECT_EQ(Check("dp=4,global_batch=8,sync=async,servers=colocated:2", 4), "ok");
}

TEST(SyncMode, RejectsCombinationsThatMakeNoSenseWithAReason) {
  EXPECT_EQ(Check("dp=4,global_batch=8,sync=async", 4),
            "plan: sync=async needs parameter servers (servers=N for N dedicated ranks, or servers=colocated:N)");
  EXPECT_EQ(Check("dp=4,global_batch=8,servers=2", 6), "plan: servers=2 needs sync=ps, async or ssp:S");
  EXPECT_EQ(Check("dp=2,global_batch=8,sync=backup:2", 2),
            "plan: sync=backup:2 drops 2 of dp=2 gradients: it needs B < dp");
  EXPECT_EQ(Check("dp=2,tp=2,global_batch=8,sync=local:2", 4),
            "plan: sync=local:2 keeps one whole model per worker: with tp=2, pp=1 a replica's ranks would each talk to "
            "the servers or average on their own schedule (use sync=allreduce with tp/pp)");
  EXPECT_EQ(Check("dp=4,zero=1,global_batch=8,sync=backup:1", 4),
            "plan: sync=backup:1 replaces the data-parallel reduction that ZeRO shards over (use zero=0)");
  EXPECT_EQ(Check("dp=4,global_batch=8,sync=backup:1,compression=int8", 4),
            "plan: compression=int8 compresses the gradient all-reduce: it needs sync=allreduce (got sync=backup:1)");
  EXPECT_EQ(Check("dp=4,zero=2,global_batch=8,compression=bf16", 4),
            "plan: compression=bf16 compresses the all-reduce; ZeRO-2 reduce-scatters (use zero=0)");
  EXPECT_EQ(Check("dp=4,global_batch=8,data=federated:label_skew", 4),
            "plan: data=federated:label_skew keeps each worker's data on it: it needs sync=local:H (got sync=allreduce)");
  EXPECT_EQ(Check("dp=2,global_batch=8,sync=ps,servers=colocated:3", 2),
            "plan: servers=colocated:3 needs a worker per server (dp=2)");
  // Compression inside the all-reduce composes with tp and pp.
  EXPECT_EQ(Check("dp=2,tp=2,pp=2,global_batch=8,compression=powersgd:2", 8), "ok");
}

}  // namespace
}  // namespace parallax
