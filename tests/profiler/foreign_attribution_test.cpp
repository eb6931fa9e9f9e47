// Attribution of PyTorch profiler traces to op families (profiler/foreign/), on the real Kineto
// traces of tests/data/traces/kineto (HolisticTraceAnalysis' test data: a ResNet-style DDP job on
// two A100s and one rank of an 8-rank job) and on the array-form trace Debian's PyTorch 1.13 wrote
// for the peer GPT (tests/data/traces/pytorch-cpu). Expected counts come from the files themselves
// (python3: json.load, then counting kernels by name and args), not from our reader.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "profiler/foreign/attribution.h"
#include "profiler/foreign/attribution_rules.h"
#include "profiler/foreign/kineto_events.h"
#include "traces/byte_stream.h"

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

//! The whole (inflated) text of a trace file.
std::string ReadText(const std::string& file) {
  auto src = traces::OpenTraceSource(file);
  std::string text;
  if (!src) {
    ADD_FAILURE() << src.error().message;
    return text;
  }
  char buf[1 << 16];
  for (;;) {
    auto n = (*src)->Read(buf, sizeof buf);
    if (!n || *n == 0) break;
    text.append(buf, *n);
  }
  return text;
}

// HTA's ns_resolution_trace writes absolute microseconds with three decimals
// (1712195495519689.047): a double keeps only quarter microseconds of those. Expected figures:
// python3 json with parse_float=Decimal over the "X" events (45420; 45371 start off a whole
// microsecond).
TEST(ForeignAttribution, TheNanosecondsOfAnNsResolutionTraceAreReadExactly) {
  auto ev = ReadKinetoEvents(kKineto +
                             "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  ASSERT_TRUE(static_cast<bool>(ev)) << ev.error().message;
  ASSERT_EQ(ev->events.size(), 45420u);
  int64_t off_whole = 0, sum_ns_part = 0, dur_ns = 0;
  for (const auto& e : ev->events) {
    off_whole += e.ts_ns % 1000 != 0 ? 1 : 0;
    sum_ns_part += e.ts_ns % 1000;
    dur_ns += e.dur_ns;
  }
  EXPECT_EQ(off_whole, 45371);
  EXPECT_EQ(sum_ns_part, 22601991);
  EXPECT_EQ(dur_ns, 3437226132);
}

// Whole microseconds (1661203462584767) times 1000 in a double are not whole nanoseconds: a child
// op ending in its parent's microsecond could end after it.
TEST(ForeignAttribution, WholeMicrosecondTimestampsStayWholeMicroseconds) {
  auto ev = ReadKinetoEvents(kKineto + "trace_diff__control__control.json.gz");
  ASSERT_TRUE(static_cast<bool>(ev)) << ev.error().message;
  int64_t off = 0;
  for (const auto& e : ev->events) off += e.ts_ns % 1000 != 0 || e.dur_ns % 1000 != 0 ? 1 : 0;
  EXPECT_EQ(off, 0);
}

// PyTorch 1.8's Kineto named its categories "Kernel" and "Runtime" (HTA's trace_file_list trace):
// its 4 kernels are device units, and the cutlass one reaches the GEMM rules.
TEST(ForeignAttribution, PyTorch18CategoryNamesAreKernelsAndRuntimeCalls) {
  KinetoEvents ev;
  const Attribution a =
      AttributeFile(kKineto + "trace_file_list__inference_rank_1.json.gz", "pytorch", &ev);
  EXPECT_TRUE(a.device_trace);
  ASSERT_EQ(a.units.size(), 4u);
  int64_t gemm = 0;
  for (const auto& u : a.units) {
    EXPECT_TRUE(u.device);
    gemm += FamilyOf(u) == "gemm" ? 1 : 0;
  }
  EXPECT_EQ(gemm, 2);  // the cutlass kernel and cuBLAS' gemmk1_kernel
  EXPECT_EQ(a.launched_units, 4);  // each has its "Runtime" cudaLaunchKernel (python3: correlation ids)
}

// ROCm's BLAS runs Tensile kernels ("Cijk_Alik_Bljk_SB_Bias_..."): HTA's MI250 trace has 2 of
// its 14.
TEST(ForeignAttribution, RocmTensileKernelsAreGemms) {
  KinetoEvents ev;
  const Attribution a = AttributeFile(
      kKineto + "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz", "pytorch", &ev);
  int64_t tensile = 0;
  for (const auto& u : a.units) {
    if (ev.events[u.event].name.rfind("Cijk_", 0) != 0) continue;
    ++tensile;
    EXPECT_EQ(FamilyOf(u), "gemm");
  }
  EXPECT_EQ(tensile, 2);
}

// NCCL 2.19+ runs many collectives as "ncclDevKernel_Generic_4(...)", a name that says none;
// PyTorch 2.x records the collective in the kernel's args. The real 2-rank trace with its NCCL
// kernels so renamed still gives its 15 all-reduces (the renaming is done here, on the file's
// text).
TEST(ForeignAttribution, NcclKernelsNamedForNoCollectiveAreMatchedByTheirCollectiveArgument) {
  std::string text = ReadText(kKineto + "nccl_parser_config__nccl_data.json.gz");
  int64_t renamed = 0;
  for (const std::string_view from : {"ncclKernel_AllReduce_", "ncclKernel_Broadcast_"}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      const size_t end = text.find('"', at);
      text.replace(at, end - at, "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)");
      ++renamed;
    }
  }
  ASSERT_EQ(renamed, 21);
  auto ev = ParseKinetoEvents(text, "nccl_data (renamed)");
  ASSERT_TRUE(static_cast<bool>(ev)) << ev.error().message;
  const Attribution a = Attribute(*ev, **AttributionTableFor("pytorch"));
  int64_t collectives = 0, all_reduce = 0;
  for (const auto& u : a.units) {
    collectives += u.comm ? 1 : 0;
    all_reduce += u.comm && u.rule != nullptr && !u.rule->ops.empty() &&
                  u.rule->ops.front() == OpKind::kDpAllReduce;
  }
  EXPECT_EQ(collectives, 21);
  EXPECT_EQ(all_reduce, 15);
}

// An execution trace (ExecutionTraceObserver's "nodes", HTA's execution_trace) has no times.
TEST(ForeignAttribution, AnExecutionTraceIsRefusedAsNotAProfilerTrace) {
  const std::string file = kKineto + "execution_trace__benchmark_simple_add_et.json.gz";
  auto ev = ReadKinetoEvents(file);
  ASSERT_FALSE(static_cast<bool>(ev));
  EXPECT_EQ(ev.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(ev.error().message.find(file), std::string::npos) << ev.error().message;
  EXPECT_NE(ev.error().message.find("execution trace"), std::string::npos) << ev.error().message;
  auto bad =
      ParseKinetoEvents(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1]})", "bad.json");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(bad.error().message.find("bad.json: not JSON at byte"), std::string::npos)
      << bad.error().message;
}

// Bad input names the file and what is wrong: a trace cut off while it was written, an event whose
// time is no time (HTA's PyTorch 1.8 trace, edited here), a Chrome trace of another profiler.
TEST(ForeignAttribution, BrokenTracesAreBadInputSayingWhatIsWrong) {
  const std::string text = ReadText(kKineto + "trace_file_list__inference_rank_1.json.gz");
  auto cut = ParseKinetoEvents(text.substr(0, text.size() / 2), "cut.json");
  ASSERT_FALSE(static_cast<bool>(cut));
  EXPECT_EQ(cut.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(cut.error().message.find("cut.json: the JSON ends early"), std::string::npos)
      << cut.error().message;

  std::string bad_ts = text;
  const size_t at = bad_ts.find("\"ts\": ");
  ASSERT_NE(at, std::string::npos);
  bad_ts.insert(at + 6, "\"abc\", \"was\": ");
  auto no_time = ParseKinetoEvents(bad_ts, "bad_ts.json");
  ASSERT_FALSE(static_cast<bool>(no_time));
  EXPECT_NE(no_time.error().message.find("bad_ts.json: event 0 ("), std::string::npos)
      << no_time.error().message;
  EXPECT_NE(no_time.error().message.find("ts \"abc\" is not a time in microseconds"),
            std::string::npos)
      << no_time.error().message;

  // The file reader streams: a gzip cut short is the inflater's error, an empty file says so.
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string gz = (dir / ("foreign_cut_" + std::to_string(::getpid()) + ".json.gz")).string();
  const std::string empty = (dir / ("foreign_empty_" + std::to_string(::getpid()) + ".json")).string();
  {
    std::ifstream whole(kKineto + "trace_file_list__inference_rank_1.json.gz", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
    std::ofstream(gz, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    std::ofstream{empty};
  }
  auto cut_gz = ReadKinetoEvents(gz);
  ASSERT_FALSE(static_cast<bool>(cut_gz));
  EXPECT_NE(cut_gz.error().message.find("truncated gzip"), std::string::npos) << cut_gz.error().message;
  auto nothing = ReadKinetoEvents(empty);
  ASSERT_FALSE(static_cast<bool>(nothing));
  EXPECT_NE(nothing.error().message.find(empty + ": empty"), std::string::npos) << nothing.error().message;
  std::filesystem::remove(gz);
  std::filesystem::remove(empty);

  auto other = ParseKinetoEvents(
      R"({"traceEvents": [{"ph": "X", "name": "fusion.12", "ts": 5, "dur": 2}]})", "jax.json");
  ASSERT_FALSE(static_cast<bool>(other));
  EXPECT_NE(other.error().message.find("jax.json: no event of the PyTorch profiler's categories"),
            std::string::npos)
      << other.error().message;
}

}  // namespace
}  // namespace parallax::profiler
