// The loop the product closes: the planner's predicted trace and the executor's measured trace of
// the same plan align op by op on their shared identities (DESIGN.md "Units and identities").
// Runs `parallax simulate --trace` and `mpirun parallax run --trace` for real, then diffs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "run_command.h"
#include "traces/chrome_reader.h"
#include "traces/diff.h"

namespace parallax {
namespace {

struct Case {
  const char* name;
  int np;
  const char* layout;  // for a local-cpu cluster of np ranks
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.layout << " on " << c.np << " ranks"; }  // ctest's listing

class PredictedVsMeasured : public ::testing::TestWithParam<Case> {};

TEST_P(PredictedVsMeasured, AlignOnIdentities) {
  const Case c = GetParam();
  const auto dir = std::filesystem::temp_directory_path() / ("parallax_pvm_" + std::string(c.name));
  std::filesystem::create_directories(dir);
  const std::string pred = (dir / "predicted.json").string();
  const std::string meas = (dir / "measured.json").string();
  const std::string plan = std::string(c.layout) + ",global_batch=8";
  // A one-node local-cpu cluster with exactly np ranks, so dp*tp*pp matches the world size.
  const std::string cluster = test::WriteTempFile(
      std::string("cluster_") + c.name + ".json",
      R"({"kind":"cluster","version":1,"name":"local","nodes":1,"gpus_per_node":)" + std::to_string(c.np) +
          R"(,"device":"cpu","intra_node":{"bandwidth_GBps":5,"latency_us":1},)"
          R"("inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
  auto sim = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --plan " + plan +
                               " --all-ranks --trace " + pred);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  // Open MPI refuses root without these (CI containers run as root); other MPIs ignore them.
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const std::string run = std::string(PARALLAX_MPIEXEC) + " --oversubscribe -np " + std::to_string(c.np) + " " +
                          PARALLAX_CLI + " run --model gpt-tiny --plan " + plan + " --steps 1 --trace " + meas +
                          " > " + (dir / "run.log").string() + " 2>&1";
  ASSERT_EQ(std::system(run.c_str()), 0) << run;

  auto p = traces::ReadChromeTrace(pred);
  auto m = traces::ReadChromeTrace(meas);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_TRUE(m) << m.error().message;
  const traces::TraceDiff d = traces::DiffTraces(*p, *m);
  EXPECT_EQ(d.mode, traces::AlignMode::kIdentity);
  EXPECT_EQ(d.steps, 1);
  const double measured_total = static_cast<double>(d.matched + d.only_measured);
  const double predicted_total = static_cast<double>(d.matched + d.only_predicted);
  std::printf("%s: matched %lld, only predicted %lld, only measured %lld\n", c.name,
              static_cast<long long>(d.matched), static_cast<long long>(d.only_predicted),
              static_cast<long long>(d.only_measured));
  // Every compute op of every layer, micro-batch and rank aligns; the remainder is bookkeeping
  // granularity (how many DP buckets hold the embedding/head, position-embedding adds).
  EXPECT_GE(d.matched / measured_total, 0.9) << c.name;
  EXPECT_GE(d.matched / predicted_total, 0.9) << c.name;
  for (const char* op : {"qkv", "attn_core", "fc1", "fc2", "lm_head"}) {
    bool fwd = false, bwd = false;
    for (const auto& o : d.per_op) {
      if (o.op == op && o.phase == "fwd") fwd = o.matched > 0;
      if (o.op == op && o.phase == "bwd") bwd = o.matched > 0;
    }
    EXPECT_TRUE(fwd && bwd) << op;
  }
  // One op catalogue: every measured compute op carries the FLOPs the planner predicted for the
  // same identity (model/op_catalogue.h; attention once differed by 2x).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int, int>, double> predicted_flops;
  auto key = [](const OpIdentity& id) {
    return std::tuple{id.rank, id.microbatch, id.stage, id.layer, static_cast<int>(id.op), static_cast<int>(id.phase)};
  };
  for (size_t i = 0; i < p->slices().size(); ++i) {
    const traces::Slice& s = p->slices()[i];
    const traces::SliceArgs* a = p->args(s);
    if (s.has(traces::slice_flags::kHasIdentity) && a != nullptr && a->flops > 0) {
      predicted_flops[key(s.identity.Unpack())] = a->flops;
    }
  }
  int64_t compared = 0;
  for (size_t i = 0; i < m->slices().size(); ++i) {
    const traces::Slice& s = m->slices()[i];
    if (!s.has(traces::slice_flags::kHasIdentity)) continue;
    const OpIdentity id = s.identity.Unpack();
    const auto it = predicted_flops.find(key(id));
    if (it == predicted_flops.end()) continue;
    const traces::SliceArgs* a = m->args(s);
    ASSERT_NE(a, nullptr) << ToString(id.op) << " " << ToString(id.phase) << ": measured slice without FLOPs";
    EXPECT_DOUBLE_EQ(a->flops, it->second) << ToString(id.op) << " " << ToString(id.phase) << " layer " << id.layer;
    ++compared;
  }
  EXPECT_GT(compared, 10) << c.name;
  // The DP collectives are the same operations on both sides: one per parameter group (each
  // layer; word embedding, learned positions and head outside them), ZeRO-3 gathers with the
  // phase of the pass that needs them, ZeRO-1/2 gathers after the step per group.
  using DpKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int, int>;
  auto dp_ops = [&](const traces::Trace& t) {
    std::map<DpKey, int> n;
    for (size_t i = 0; i < t.slices().size(); ++i) {
      const traces::Slice& s = t.slices()[i];
      if (!s.has(traces::slice_flags::kHasIdentity)) continue;
      const OpIdentity id = s.identity.Unpack();
      if (id.op == OpKind::kDpAllReduce || id.op == OpKind::kDpReduceScatter || id.op == OpKind::kDpAllGather) {
        ++n[key(id)];
      }
    }
    return n;
  };
  const auto pd = dp_ops(*p), md = dp_ops(*m);
  EXPECT_EQ(pd, md) << c.name << ": predicted and measured DP collectives differ";
  // And the TP collectives, with their bytes: the layers' gathers and reductions, the embedding's,
  // the head's, and the loss statistics' all-gather (ImplementationProfile::loss_reduction), none
  // hidden inside a compute slice.
  auto tp_ops = [&](const traces::Trace& t) {
    std::map<DpKey, std::vector<int64_t>> n;
    for (size_t i = 0; i < t.slices().size(); ++i) {
      const traces::Slice& s = t.slices()[i];
      if (!s.has(traces::slice_flags::kHasIdentity)) continue;
      const OpIdentity id = s.identity.Unpack();
      if (id.op != OpKind::kTpAllReduce && id.op != OpKind::kTpAllGather && id.op != OpKind::kTpReduceScatter) continue;
      const traces::SliceArgs* a = t.args(s);
      n[key(id)].push_back(a != nullptr ? a->bytes : -1);
    }
    for (auto& [k, v] : n) std::sort(v.begin(), v.end());
    return n;
  };
  // (Under sequence parallelism these include the whole-held parameters' gradient all-reduces at
  // each group's last backward: sp_grad_reduction per_parameter.)
  const auto pt = tp_ops(*p), mt = tp_ops(*m);
  EXPECT_EQ(pt, mt) << c.name << ": predicted and measured TP collectives differ";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PredictedVsMeasured,
                         ::testing::Values(Case{"dp2_tp2", 4, "dp=2,tp=2,micro_batch=2"},
                                           Case{"tp2_sp_selective", 2, "tp=2,micro_batch=2,sequence_parallel=1,recompute=selective"},
                                           Case{"dp2_tp2_sp_zero2", 4, "dp=2,tp=2,micro_batch=2,sequence_parallel=1,zero=2"},
                                           Case{"tp2_pp2_sp", 4, "tp=2,pp=2,micro_batch=1,sequence_parallel=1,schedule=1f1b"},
                                           Case{"pp2_1f1b", 2, "pp=2,micro_batch=1,schedule=1f1b"},
                                           Case{"dp2_zero1", 2, "dp=2,micro_batch=2,zero=1"},
                                           Case{"dp2_zero2", 2, "dp=2,micro_batch=2,zero=2"},
                                           Case{"dp2_zero3", 2, "dp=2,micro_batch=2,zero=3"},
                                           Case{"pp2_interleaved", 2,
                                                "pp=2,micro_batch=1,schedule=interleaved,virtual_stages=2"}),
                         [](const ::testing::TestParamInfo<Case>& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace parallax
