// Attribution of PyTorch profiler traces to op families (profiler/foreign/), on the real Kineto
// traces of tests/data/traces/kineto (HolisticTraceAnalysis' test data: a ResNet-style DDP job on
// two A100s and one rank of an 8-rank job) and on the array-form trace Debian's PyTorch 1.13 wrote
// for the peer GPT (tests/data/traces/pytorch-cpu). Expected counts come from the files themselves
// (python3: json.load, then counting kernels by name and args), not from our reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "profiler/foreign/attribution.h"
#include "profiler/foreign/attribution_rules.h"
#include "profiler/foreign/kineto_events.h"

namespace parallax::profiler {
namespace {

const std::string kKineto = PARALLAX_TEST_DATA_DIR "/traces/kineto/";

Attribution AttributeFile(const std::string& file, const std::string& impl, KinetoEvents* out = nullptr) {
  auto ev = ReadKinetoEvents(file);
  EXPECT_TRUE(static_cast<bool>(ev)) << (ev ? "" : ev.error().message);
  auto table = AttributionTableFor(impl);
  EXPECT_TRUE(static_cast<bool>(table));
  Attribution a = Attribute(*ev, **table);
  if (out != nullptr) *out = std::move(*ev);
  return a;
}

TEST(ForeignAttribution, PatternsAreGlobsOverTheWholeName) {
  EXPECT_TRUE(PatternMatches("aten::mm", "aten::mm"));
  EXPECT_FALSE(PatternMatches("aten::mm", "aten::mm_out"));
  EXPECT_TRUE(PatternMatches("*MmBackward0", "autograd::engine::evaluate_function: MmBackward0"));
  EXPECT_FALSE(PatternMatches("*MmBackward0", "MmBackward0x"));
  EXPECT_TRUE(PatternMatches("nccl*AllReduce*", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)"));
  EXPECT_FALSE(PatternMatches("nccl*AllReduce*", "ncclKernel_Broadcast_RING_LL_Sum_float"));
}

TEST(ForeignAttribution, EveryImplementationHasOneTableAndAnUnknownOneIsBadInput) {
  for (const char* impl : {"pytorch", "megatron-core", "deepspeed", "parallax", "megatron-2021"}) {
    auto t = AttributionTableFor(impl);
    ASSERT_TRUE(static_cast<bool>(t)) << impl;
    EXPECT_FALSE((*t)->rules.empty());
  }
  auto bad = AttributionTableFor("jax");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(bad.error().message.find("pytorch"), std::string::npos) << bad.error().message;
}

TEST(ForeignAttribution, NcclKernelsOfTheRealTraceAreCollectivesWithTheirRecordedBytes) {
  const Attribution a = AttributeFile(kKineto + "nccl_parser_config__nccl_data.json.gz", "pytorch");
  ASSERT_TRUE(a.device_trace);
  EXPECT_EQ(a.units.size(), 2700u + 960u + 114u);  // kernels, memcpys, memsets
  int64_t collectives = 0, all_reduce = 0, bytes = 0;
  for (const auto& u : a.units) {
    if (!u.comm) continue;
    ++collectives;
    EXPECT_EQ(u.group_size, 2);
    if (u.rule != nullptr && !u.rule->ops.empty() && u.rule->ops.front() == OpKind::kDpAllReduce) ++all_reduce;
    bytes += u.bytes;
  }
  EXPECT_EQ(collectives, 21);
  EXPECT_EQ(all_reduce, 15);
  // 15 all-reduces and 3 broadcasts of Float, 3 of Long (8 B): python3 sums nelems x dtype size.
  EXPECT_GT(bytes, 0);
}

TEST(ForeignAttribution, KernelsReachTheHostOpThatLaunchedThemAndItsAutogradPhase) {
  KinetoEvents ev;
  const Attribution a = AttributeFile(kKineto + "nccl_parser_config__nccl_data.json.gz", "pytorch", &ev);
  int64_t fwd = 0, bwd = 0, wrong = 0;
  for (const auto& u : a.units) {
    const std::string& n = ev.events[u.event].name;
    const bool bn_bw = n.find("bn_bw") != std::string::npos, bn_fw = n.find("bn_fw") != std::string::npos;
    if (!bn_bw && !bn_fw) continue;
    EXPECT_EQ(FamilyOf(u), "norm") << n;
    (bn_bw ? bwd : fwd) += 1;
    wrong += (bn_bw && u.phase != Phase::kBwd) || (bn_fw && u.phase != Phase::kFwd) ? 1 : 0;
  }
  EXPECT_EQ(fwd, 159);
  EXPECT_EQ(bwd, 159);
  EXPECT_EQ(wrong, 0);
}

TEST(ForeignAttribution, MostGpuTimeOfTheRealTracesFallsInANamedFamily) {
  for (const char* f : {"nccl_parser_config__nccl_data.json.gz", "trace_diff__control__control.json.gz"}) {
    const Attribution a = AttributeFile(kKineto + f, "pytorch");
    int64_t total = 0, named = 0;
    for (const auto& u : a.units) {
      total += u.dur_ns;
      named += u.rule != nullptr ? u.dur_ns : 0;
    }
    ASSERT_GT(total, 0);
    const double share = static_cast<double>(named) / static_cast<double>(total);
    std::printf("%s: %.1f%% of %.3f ms of device time in a named family\n", f, 100 * share, total * 1e-6);
    EXPECT_GT(share, 0.5) << f;
  }
}

TEST(ForeignAttribution, ACpuOnlyTracesGlooAllReducesAreCollectivesOfTheirBucketsBytes) {
  const Attribution a = AttributeFile(kKineto + "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "pytorch");
  EXPECT_FALSE(a.device_trace);
  // Ten gloo:all_reduce ranges on two threads: five of a 321271-float bucket, five of 2082411 floats.
  int64_t small = 0, large = 0;
  for (const auto& u : a.units) {
    if (!u.comm) continue;
    small += u.bytes == int64_t{321271} * 4 ? 1 : 0;
    large += u.bytes == int64_t{2082411} * 4 ? 1 : 0;
  }
  EXPECT_EQ(small, 5);
  EXPECT_EQ(large, 5);
}

TEST(ForeignAttribution, TheArrayFormOfDebiansPytorchIsReadAsHostOps) {
  KinetoEvents ev;
  const Attribution a = AttributeFile(PARALLAX_TEST_DATA_DIR "/traces/pytorch-cpu/peer_gpt_mb8.json.gz", "pytorch", &ev);
  EXPECT_TRUE(ev.array_form);
  EXPECT_FALSE(a.device_trace);
  int64_t linears = 0, norms = 0, optimizer = 0;
  for (const auto& u : a.units) {
    const std::string& n = ev.events[u.event].name;
    linears += n == "aten::linear" ? 1 : 0;
    norms += n == "aten::layer_norm" ? 1 : 0;
    optimizer += FamilyOf(u) == "optimizer" && u.phase == Phase::kOptim ? 1 : 0;
  }
  EXPECT_EQ(linears, 4 * 6);  // wq, wk, wv, wo, fc1, fc2 per layer
  EXPECT_EQ(norms, 4 * 2 + 1);
  EXPECT_GE(optimizer, 1);
  // The profiler's cost per recorded event: microseconds, not zero and not milliseconds.
  EXPECT_GT(a.overhead_per_event_s, 0.1e-6);
  EXPECT_LT(a.overhead_per_event_s, 50e-6);
}

}  // namespace
}  // namespace parallax::profiler
