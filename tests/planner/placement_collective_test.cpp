// Group placement in Megatron order and the collective cost model's nccl-tests definitions.
#include <gtest/gtest.h>

#include "model/device_spec.h"
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
  EXPECT_EQ(GlobalRank(L(4, 2, 2), 1, 0, 3, 1), 1 + 2 * (3 + 4 * 1));
}

TEST(Placement, ContextParallelSitsBetweenTensorAndDataParallelInTheRankOrder) {
  const ClusterSpec c = *ResolveCluster("dgx-h100", 4);  // 32 GPUs, 8 per node
  const Layout l = L(2, 4, 2, 2);                         // tp 4, cp 2, dp 2, pp 2
  EXPECT_EQ(GlobalRank(l, 3, 1, 1, 1), 3 + 4 * (1 + 2 * (1 + 2 * 1)));
  // A cp group is tp ranks apart: {0, 4} inside one node.
  const PlacedGroup cp = PlaceGroup(l, c, GroupKind::kCp);
  EXPECT_EQ(cp.size, 2);
  EXPECT_FALSE(cp.spans_nodes());
  // dp alone strides tp*cp = 8 ranks: one per node; dp x cp is 4 ranks, 4 apart, over two nodes.
  const PlacedGroup dp = PlaceGroup(l, c, GroupKind::kDp);
  EXPECT_EQ(dp.ranks_per_node, 1);
  EXPECT_EQ(dp.nodes, 2);
  const PlacedGroup dense = PlaceReduction(l, c, ReductionGroup::kDpCp);
  EXPECT_EQ(dense.size, 4);
  EXPECT_EQ(dense.ranks_per_node, 2);
  EXPECT_EQ(dense.nodes, 2);
  // A pipeline hop joins ranks tp*cp*dp = 16 apart: across nodes.
  EXPECT_TRUE(PlacePipelineHop(l, c, 0, 1).spans_nodes());
}

TEST(Placement, WithoutContextParallelTheDenseReductionGroupIsTheDataParallelGroup) {
  const ClusterSpec c = *ResolveCluster("dgx-a100", 4);
  for (const Layout& l : {L(4, 2, 4), L(2, 8, 2), L(32, 1, 1)}) {
    const PlacedGroup dp = PlaceGroup(l, c, GroupKind::kDp);
    const PlacedGroup dense = PlaceReduction(l, c, ReductionGroup::kDpCp);
    EXPECT_EQ(dense.size, dp.size);
    EXPECT_EQ(dense.ranks_per_node, dp.ranks_per_node);
    EXPECT_EQ(dense.nodes, dp.nodes);
  }
}

TEST(Placement, NvlinkDomainNotTheNodeDecidesWhetherAGroupCrossesNics) {
  const ClusterSpec rack = *ResolveCluster("gb200-nvl72", 72);  // 288 GPUs: 4 racks of 18 four-GPU trays
  // tp=8 spans two trays but one NVLink domain: all NVLink.
  EXPECT_FALSE(PlaceGroup(L(36, 8, 1), rack, GroupKind::kTp).spans_nodes());
  // dp=9 groups of stride 8 fill one 72-GPU domain; dp=36 spans all four racks, 9 ranks in each.
  EXPECT_FALSE(PlaceGroup(L(9, 8, 4), rack, GroupKind::kDp).spans_nodes());
  const PlacedGroup dp = PlaceGroup(L(36, 8, 1), rack, GroupKind::kDp);
  EXPECT_EQ(dp.nodes, 4);
  EXPECT_EQ(dp.ranks_per_node, 9);
  EXPECT_EQ(dp.gpus_per_node, 4);  // the NIC share is still per tray
  // A pipeline hop between stages of 72 ranks leaves the rack; one between stages of 36 may not.
  EXPECT_TRUE(PlacePipelineHop(L(9, 8, 4), rack, 0, 1).spans_nodes());
  EXPECT_FALSE(PlacePipelineHop(L(9, 4, 8), rack, 0, 1).spans_nodes());
  // The same layout on node-sized domains (the tray as its own fabric) crosses NICs.
  ClusterSpec trays = rack;
  trays.nvlink_domain = 0;
  EXPECT_TRUE(PlaceGroup(L(36, 8, 1), trays, GroupKind::kTp).spans_nodes());
}

TEST(Placement, APartialLastDomainPlacesItsGroupsByTheirRanks) {
  ClusterSpec c = *ResolveCluster("gb200-nvl72", 24);  // 96 GPUs: domains of 72 and a partial 24
  EXPECT_EQ(c.DomainOf(95), 1);
  // dp=12 groups of stride 8: ranks 0..88 put 9 in the first domain and 3 in the partial one.
  const PlacedGroup dp = PlaceGroup(L(12, 8, 1), c, GroupKind::kDp);
  EXPECT_EQ(dp.nodes, 2);
  EXPECT_EQ(dp.ranks_per_node, 3);
  // Eight ranks from 72 on: inside the partial domain.
  EXPECT_FALSE(PlaceRanks(c, 72, 8, 1).spans_nodes());
  EXPECT_TRUE(PlaceRanks(c, 68, 8, 1).spans_nodes());
}

TEST(Placement, NodeSizedDomainsPlaceAsBefore) {
  // With nvlink_domain unset the domain is the node: every H100 / A100 placement is unchanged.
  const ClusterSpec c = *ResolveCluster("dgx-h100", 4);
  ClusterSpec explicit_domain = c;
  explicit_domain.nvlink_domain = 8;
  for (const Layout& l : {L(4, 8, 1), L(8, 4, 1), L(2, 2, 8), L(16, 2, 1)}) {
    for (GroupKind k : {GroupKind::kTp, GroupKind::kDp, GroupKind::kPp}) {
      const PlacedGroup a = PlaceGroup(l, c, k), b = PlaceGroup(l, explicit_domain, k);
      EXPECT_EQ(a.nodes, b.nodes);
      EXPECT_EQ(a.ranks_per_node, b.ranks_per_node);
    }
  }
  EXPECT_EQ(PlaceGroup(L(4, 8, 1), c, GroupKind::kDp).nodes, 4);
}

TEST(Collective, AGroupInsideAnNvl72RackRunsAtNvlinkSpeed) {
  const ClusterSpec rack = *ResolveCluster("gb200-nvl72", 36);  // two racks
  const CollectiveModel model(rack);
  ClusterSpec trays = rack;
  trays.nvlink_domain = 0;
  const CollectiveModel tray_model(trays);
  // A 64-rank all-to-all (an expert-parallel group) inside one rack vs the same over the trays' NICs.
  const PlacedGroup in_rack = PlaceRanks(rack, 0, 64, 1);
  const PlacedGroup over_nics = PlaceRanks(trays, 0, 64, 1);
  EXPECT_FALSE(in_rack.spans_nodes());
  EXPECT_TRUE(over_nics.spans_nodes());
  const double bytes = 256e6;
  EXPECT_LT(model.Time(CollectiveKind::kAllToAll, bytes, in_rack) * 3,
            tray_model.Time(CollectiveKind::kAllToAll, bytes, over_nics));
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

TEST(Collective, NvlsAllReduceInsideHopperNodesOnly) {
  // NCCL's NVLS model on 8 GPUs at 360 GB/s of NVLink: 1.7 x 7 x 360 / 9 = 476 GB/s busbw, what
  // nccl-tests measured on 8x H100 (issue 290); the ring stops below 360.
  const ClusterSpec h = *ResolveCluster("dgx-h100", 2);
  ASSERT_TRUE(h.device.arch.nvlink_sharp);
  const CollectiveModel nvls(h);
  ClusterSpec ring_only = h;
  ring_only.device.arch.nvlink_sharp = false;
  const CollectiveModel ring(ring_only);
  const PlacedGroup tp8 = PlaceGroup(L(2, 8, 1), h, GroupKind::kTp);
  ASSERT_FALSE(tp8.spans_nodes());
  auto busbw = [](const CollectiveModel& m, CollectiveKind op, double bytes, const PlacedGroup& g) {
    return bytes * CollectiveModel::BusFactor(op, g.size) / m.Time(op, bytes, g) / 1e9;
  };
  const double big = 1 << 30;
  EXPECT_NEAR(busbw(nvls, CollectiveKind::kAllReduce, big, tp8), 476, 476 * 0.02);
  EXPECT_LT(busbw(ring, CollectiveKind::kAllReduce, big, tp8), 360);
  // Small messages stay on the ring's low-latency protocols (NVLS costs 25 us).
  EXPECT_DOUBLE_EQ(nvls.Time(CollectiveKind::kAllReduce, 64 << 10, tp8), ring.Time(CollectiveKind::kAllReduce, 64 << 10, tp8));
  // Reduce-scatter and all-gather inside a node stay rings; a group over nodes is not NVLS-priced.
  for (CollectiveKind op : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    EXPECT_DOUBLE_EQ(nvls.Time(op, big, tp8), ring.Time(op, big, tp8));
  }
  const PlacedGroup dp2 = PlaceGroup(L(2, 8, 1), h, GroupKind::kDp);
  ASSERT_TRUE(dp2.spans_nodes());
  EXPECT_DOUBLE_EQ(nvls.Time(CollectiveKind::kAllReduce, big, dp2), ring.Time(CollectiveKind::kAllReduce, big, dp2));
  // Two GPUs: a channel gets a third of the link, the ring all of it.
  const PlacedGroup tp2 = PlaceGroup(L(8, 2, 1), h, GroupKind::kTp);
  EXPECT_DOUBLE_EQ(nvls.Time(CollectiveKind::kAllReduce, big, tp2), ring.Time(CollectiveKind::kAllReduce, big, tp2));
  // Ampere has no NVLS; the fact round-trips through the device JSON.
  EXPECT_FALSE(ResolveCluster("dgx-a100", 1)->device.arch.nvlink_sharp);
  Json j = DeviceToJson(h.device);
  EXPECT_TRUE(j["microarch"]["nvlink_sharp"].get<bool>());
  j["microarch"]["nvlink_sharp"] = false;
  auto back = DeviceFromJson(j, "device.json", "/device");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_FALSE(back->arch.nvlink_sharp);
  j["microarch"]["nvlink_sharp"] = "yes";
  auto bad = DeviceFromJson(j, "device.json", "/device");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/device/microarch/nvlink_sharp"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace parallax::planner
