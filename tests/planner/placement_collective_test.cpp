// Group placement in Megatron order and the collective cost model's nccl-tests definitions.
#include <gtest/gtest.h>

#include "model/load.h"
#include "planner/cost/collective.h"
#include "planner/cost/placement.h"
#include "tests/planner/layout_util.h"

namespace parallax::planner {
namespace {

using testing::L;

TEST(Placement, MegatronOrderGroupsAndNodeSpans) {
  const ClusterSpec c = *ResolveCluster("dgx-a100", 2);  // 16 GPUs, 8 per node
  // tp=8 fills a node; dp groups then stride 8 and span both nodes.
  PlacedGroup tp = PlaceGroup(L(2, 8, 1), c, GroupKind::kTp);
  EXPECT_EQ(tp.size, 8);
  EXPECT_FALSE(tp.spans_nodes());
  PlacedGroup dp = PlaceGroup(L(2, 8, 1), c, GroupKind::kDp);
  EXPECT_EQ(dp.size, 2);
  EXPECT_TRUE(dp.spans_nodes());
  // tp=2, dp=4: a dp group is ranks {0,2,4,6}, inside one node.
  PlacedGroup dp4 = PlaceGroup(L(4, 2, 2), c, GroupKind::kDp);
  EXPECT_EQ(dp4.ranks_per_node, 4);
  EXPECT_FALSE(dp4.spans_nodes());
  EXPECT_EQ(GlobalRank(L(4, 2, 2), 1, 3, 1), 1 + 2 * (3 + 4 * 1));
}

TEST(Collective, NcclTestsBusFactors) {
  EXPECT_DOUBLE_EQ(CollectiveModel::BusFactor(CollectiveKind::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(CollectiveModel::BusFactor(CollectiveKind::kReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(CollectiveModel::BusFactor(CollectiveKind::kAllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(CollectiveModel::BusFactor(CollectiveKind::kAllToAll, 2), 1.0 / 2);
  EXPECT_DOUBLE_EQ(CollectiveModel::BusFactor(CollectiveKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(CollectiveModel::BusFactor(CollectiveKind::kSendRecv, 2), 1.0);
}

TEST(Collective, LargeMessagesApproachBusBandwidthAndCrossingNodesCostsMore) {
  const ClusterSpec c = *ResolveCluster("dgx-a100", 2);
  const CollectiveModel model(c);
  const double bytes = 4e9;
  const PlacedGroup intra = PlaceGroup(L(2, 8, 1), c, GroupKind::kTp);
  const double t = model.Time(CollectiveKind::kAllReduce, bytes, intra);
  const double busbw_GBps = bytes * CollectiveModel::BusFactor(CollectiveKind::kAllReduce, 8) / t / 1e9;
  // Below the 300 GB/s NVLink datasheet, above half of it.
  EXPECT_LT(busbw_GBps, 300);
  EXPECT_GT(busbw_GBps, 150);
  const PlacedGroup inter = PlaceGroup(L(2, 8, 1), c, GroupKind::kDp);
  PlacedGroup same_size_intra = intra;
  same_size_intra.size = 2;
  same_size_intra.ranks_per_node = 2;
  EXPECT_GT(model.Time(CollectiveKind::kAllReduce, 1e9, inter), model.Time(CollectiveKind::kAllReduce, 1e9, same_size_intra));
}

TEST(Collective, TinyAllReduceTimeGrowsWithGroupSize) {
  // Latency dominates a 1 KiB all-reduce: a ring takes 2(n-1) latency-bound steps, so the time
  // must grow strictly with the group size, inside a node and across nodes alike.
  const ClusterSpec c = *ResolveCluster("dgx-a100", 4);
  const CollectiveModel model(c);
  double prev = 0;
  for (const int64_t tp : {2, 4, 8}) {
    const PlacedGroup g = PlaceGroup(L(1, tp, 1), c, GroupKind::kTp);
    ASSERT_EQ(g.size, tp);
    ASSERT_FALSE(g.spans_nodes());
    const double t = model.Time(CollectiveKind::kAllReduce, 1024, g);
    EXPECT_GT(t, prev) << "tp group of " << tp;
    prev = t;
  }
  prev = 0;
  for (const int64_t dp : {2, 4}) {  // tp=8 fills a node: dp groups over 2 and 4 nodes
    const PlacedGroup g = PlaceGroup(L(dp, 8, 1), c, GroupKind::kDp);
    ASSERT_EQ(g.size, dp);
    ASSERT_TRUE(g.spans_nodes());
    const double t = model.Time(CollectiveKind::kAllReduce, 1024, g);
    EXPECT_GT(t, prev) << "dp group over " << dp << " nodes";
    prev = t;
  }
}

}  // namespace
}  // namespace parallax::planner
