// Pipeline send/recv placed per stage boundary in Megatron order: a boundary crosses nodes when
// any of its rank pairs does, both evaluators cost each send at its own boundary's figure, and a
// pipeline that crosses nodes predicts more pipeline communication than on larger nodes.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "model/load.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/sim/simulator.h"
#include "tests/planner/layout_util.h"
#include "traces/trace.h"

namespace parallax::planner {
namespace {

using testing::L;

ClusterSpec Nodes(int64_t nodes, int64_t gpus_per_node) {
  ClusterSpec c = *ResolveCluster("dgx-a100", nodes);
  c.gpus_per_node = gpus_per_node;
  return c;
}

//! "i" / "x" per hop r -> r+1 (r < pp-1), then the wrap pp-1 -> 0 after a '|' when `wrap`.
std::string HopPattern(const Layout& l, const ClusterSpec& c, bool wrap = false) {
  std::string s;
  for (int64_t r = 0; r + 1 < l.pp; ++r) s += PlacePipelineHop(l, c, r, r + 1).spans_nodes() ? 'x' : 'i';
  if (wrap) s += std::string("|") + (PlacePipelineHop(l, c, l.pp - 1, 0).spans_nodes() ? 'x' : 'i');
  return s;
}

struct HopCase {
  const char* name;
  int64_t dp, tp, pp, nodes, gpus_per_node;
  const char* hops;  // HopPattern with the wrap
};
void PrintTo(const HopCase& h, std::ostream* os) { *os << h.name; }

class PipelineHops : public ::testing::TestWithParam<HopCase> {};

TEST_P(PipelineHops, CrossNodesWhereMegatronOrderPutsTheStagesApart) {
  const HopCase& h = GetParam();
  const Layout l = L(h.dp, h.tp, h.pp);
  const ClusterSpec c = Nodes(h.nodes, h.gpus_per_node);
  ASSERT_EQ(l.world_size(), c.total_gpus());
  EXPECT_EQ(HopPattern(l, c, true), h.hops);
  for (int64_t r = 0; r + 1 < l.pp; ++r) {
    const PlacedGroup g = PlacePipelineHop(l, c, r, r + 1);
    EXPECT_EQ(g.size, 2);
    EXPECT_EQ(g.nodes * g.ranks_per_node, 2);
    EXPECT_EQ(g.gpus_per_node, h.gpus_per_node);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PipelineHops,
    ::testing::Values(
        // Stage j holds ranks [4j, 4j+4): stages 0,1 on node 0, stages 2,3 on node 1.
        HopCase{"tp2_dp2_pp4_on_8gpu_nodes", 2, 2, 4, 2, 8, "ixi|x"},
        // Stages of 6 ranks on 8-GPU nodes: stage 1 (ranks 6-11) and stage 2 (12-17) straddle two
        // nodes; dp replica 0's pair 0 -> 6 shares node 0 but replica 1's 2 -> 8 does not.
        HopCase{"tp2_dp3_pp4_straddling", 3, 2, 4, 3, 8, "xxx|x"},
        // Stages of 3 ranks: stage 2 (6-8) and stage 5 (15-17) straddle; the hops around them cross.
        HopCase{"tp1_dp3_pp8_straddling", 3, 1, 8, 3, 8, "ixxixxi|x"},
        // A stage fills a node or more: every hop crosses.
        HopCase{"tp8_pp4_stage_is_a_node", 1, 8, 4, 4, 8, "xxx|x"},
        HopCase{"tp4_dp4_pp2_stage_spans_two_nodes", 4, 4, 2, 4, 8, "x|x"},
        // One node: nothing crosses, the wrap included.
        HopCase{"single_node", 2, 1, 4, 1, 8, "iii|i"},
        // 4-GPU nodes: two stages of 2 ranks per node.
        HopCase{"tp1_dp2_pp4_on_4gpu_nodes", 2, 1, 4, 2, 4, "ixi|x"}),
    [](const ::testing::TestParamInfo<HopCase>& p) { return std::string(p.param.name); });

TEST(PipelineHops, PpGroupIsTheWholePipeline) {
  const PlacedGroup g = PlaceGroup(L(2, 2, 4), Nodes(2, 8), GroupKind::kPp);
  EXPECT_EQ(g.size, 4);
  EXPECT_EQ(g.ranks_per_node, 2);
  EXPECT_EQ(g.nodes, 2);
}

Plan MakePlan(const ClusterSpec& cluster, const char* layout) {
  Plan p;
  p.model = *ResolveModel("gpt-1.3b");
  p.cluster = cluster;
  p.layout = *ParseInlineLayout(layout);
  p.training.global_batch = p.layout.global_batch;
  return p;
}

PlanCosts Costs(const Plan& plan) {
  CostContext ctx(plan.cluster, plan.training.precision);
  return CostPlan(ctx, plan);
}

TEST(PipelineBoundaryCosts, EachModelStageBoundaryAtItsOwnHopIncludingTheInterleavedWrap) {
  // pp=4, v=2: boundaries 0..6 use hops 0,1,2,wrap,0,1,2; on 8-GPU nodes hops 1 and the wrap cross.
  const Plan plan = MakePlan(Nodes(2, 8), "dp=2,tp=2,pp=4,micro_batch=1,global_batch=16,schedule=interleaved,"
                                          "virtual_stages=2");
  ASSERT_TRUE(ValidateLayout(plan.layout, plan.model, plan.cluster));
  const PlanCosts pc = Costs(plan);
  ASSERT_EQ(pc.boundary_p2p_s.size(), 7u);
  const double intra = pc.boundary_p2p_s[0], inter = pc.boundary_p2p_s[1];
  EXPECT_GT(intra, 0);
  EXPECT_GT(inter, 2 * intra);
  const std::vector<double> expected = {intra, inter, intra, inter, intra, inter, intra};
  for (size_t s = 0; s < expected.size(); ++s) EXPECT_DOUBLE_EQ(pc.boundary_p2p_s[s], expected[s]) << "boundary " << s;
  EXPECT_DOUBLE_EQ(pc.p2p_s, inter);

  // The same layout inside one 16-GPU node: every boundary, the wrap too, is the intra figure.
  const PlanCosts one = Costs(MakePlan(Nodes(1, 16), "dp=2,tp=2,pp=4,micro_batch=1,global_batch=16,"
                                                     "schedule=interleaved,virtual_stages=2"));
  ASSERT_EQ(one.boundary_p2p_s.size(), 7u);
  for (double c : one.boundary_p2p_s) EXPECT_DOUBLE_EQ(c, intra);
}

TEST(PipelineBoundaryCosts, TiedEmbeddingAllReduceCrossesNodesWithTheFirstAndLastStage) {
  const char* layout = "dp=2,tp=2,pp=4,micro_batch=1,global_batch=16";
  const PlanCosts split = Costs(MakePlan(Nodes(2, 8), layout));
  const PlanCosts one = Costs(MakePlan(Nodes(1, 16), layout));
  ASSERT_GT(one.ranks.front().dp.tied_embedding_s, 0);
  EXPECT_GT(split.ranks.front().dp.tied_embedding_s, 2 * one.ranks.front().dp.tied_embedding_s);
  EXPECT_DOUBLE_EQ(split.ranks.back().dp.tied_embedding_s, split.ranks.front().dp.tied_embedding_s);
}

TEST(PipelineBoundaryCosts, SimulatedSendsLastTheirBoundarysTransfer) {
  const Plan plan = MakePlan(Nodes(2, 8), "dp=2,tp=2,pp=4,micro_batch=1,global_batch=16,schedule=interleaved,"
                                          "virtual_stages=2");
  const PlanCosts pc = Costs(plan);
  SimOptions so;
  so.record_trace = true;
  auto sim = Simulate(plan, nullptr, so);
  ASSERT_TRUE(sim) << sim.error().message;
  const traces::Trace& t = *sim->trace;
  int64_t sends = 0, inter_sends = 0;
  for (size_t i = 0; i < t.slices().size(); ++i) {
    const auto id = t.identity(t.slice(i));
    if (!id || id->op != OpKind::kPpSend) continue;
    ASSERT_TRUE(id->phase == Phase::kFwd || id->phase == Phase::kBwd);
    const int64_t boundary = id->phase == Phase::kFwd ? id->stage : id->stage - 1;
    ASSERT_GE(boundary, 0);
    ASSERT_LT(boundary, 7);
    const double c = pc.boundary_p2p_s[static_cast<size_t>(boundary)];
    EXPECT_NEAR(static_cast<double>(t.slice(i).dur_ns), c * 1e9, 2.0) << "stage " << id->stage;
    ++sends;
    if (c == pc.p2p_s) ++inter_sends;
  }
  // 8 micro-batches x 7 boundaries x 2 directions; boundaries 1, 3, 5 cross nodes.
  EXPECT_EQ(sends, 8 * 7 * 2);
  EXPECT_EQ(inter_sends, 8 * 3 * 2);
}

struct CrossingCase {
  const char* layout;
  int64_t nodes, gpus_per_node;  // the larger node holds them all
  bool first_hop_crosses;        // the simulator's breakdown is rank 0's: it sees its own hop
};
void PrintTo(const CrossingCase& k, std::ostream* os) { *os << k.layout << " on " << k.nodes << "x" << k.gpus_per_node; }

class CrossingPipeline : public ::testing::TestWithParam<CrossingCase> {};

TEST_P(CrossingPipeline, PredictsMorePipelineCommThanOnLargerNodes) {
  const CrossingCase& k = GetParam();
  const Plan split = MakePlan(Nodes(k.nodes, k.gpus_per_node), k.layout);
  const Plan one = MakePlan(Nodes(1, k.nodes * k.gpus_per_node), k.layout);
  auto est_split = Estimate(split), est_one = Estimate(one);
  ASSERT_TRUE(est_split && est_one) << (est_split ? est_one.error().message : est_split.error().message);
  EXPECT_GT(est_split->breakdown.pp_comm_s, est_one->breakdown.pp_comm_s);
  EXPECT_GT(est_split->step_time_s, est_one->step_time_s);
  auto sim_split = Simulate(split), sim_one = Simulate(one);
  ASSERT_TRUE(sim_split && sim_one);
  EXPECT_GT(sim_split->prediction.step_time_s, sim_one->prediction.step_time_s);
  if (k.first_hop_crosses) {
    EXPECT_GT(sim_split->prediction.breakdown.pp_comm_s, sim_one->prediction.breakdown.pp_comm_s);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, CrossingPipeline,
    ::testing::Values(
        // 2 x 8 GPUs: only boundary 1 -> 2 crosses.
        CrossingCase{"dp=2,tp=2,pp=4,micro_batch=2,global_batch=32", 2, 8, false},
        CrossingCase{"dp=2,tp=2,pp=4,micro_batch=2,global_batch=32,schedule=gpipe", 2, 8, false},
        CrossingCase{"dp=2,tp=2,pp=4,micro_batch=2,global_batch=32,schedule=interleaved,virtual_stages=2", 2, 8,
                     true},  // the wrap 3 -> 0 crosses
        // 3 x 8 GPUs, stages of 6 ranks straddle: every boundary crosses.
        CrossingCase{"dp=3,tp=2,pp=4,micro_batch=2,global_batch=48", 3, 8, true}));

}  // namespace
}  // namespace parallax::planner
