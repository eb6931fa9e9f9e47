// Device timeline (executor/runtime/device_timeline.h): a device tracer's records attributed to
// the recorded ops by external correlation, ops re-timed from their kernels, clocks aligned, and
// the kernels, host launches and launch->kernel flows written to the measured trace. GPU-free:
// synthetic records in CUPTI's shape; on a GPU the same code consumes CUPTI's (profiler/cuda).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "executor/cpu/local_communicator.h"
#include "executor/runtime/device_timeline.h"
#include "executor/runtime/training_loop.h"
#include "tests/executor/train_helpers.h"
#include "traces/chrome_reader.h"

namespace parallax::executor {
namespace {

MeasuredOp Op(OpKind kind, int64_t start_ns, int64_t dur_ns) {
  MeasuredOp o;
  o.id = OpIdentity{0, 0, 0, 0, 0, kind, Phase::kFwd};
  o.stream = StreamOf(kind);
  o.start_ns = start_ns;
  o.dur_ns = dur_ns;
  return o;
}

ActivityRecord Rec(ActivityKind k, int64_t start, int64_t end, uint32_t corr, uint32_t stream, std::string name) {
  ActivityRecord r;
  r.kind = k;
  r.start_ns = start;
  r.end_ns = end;
  r.correlation = corr;
  r.stream = stream;
  r.name = std::move(name);
  return r;
}

TEST(DeviceTimeline, AttributesKernelsByExternalCorrelationAndRetimesOps) {
  // Recorder clock: events say qkv at 1000 (500 long), the tp all-reduce at 2000 (900 long). The
  // tracer's clock runs 1,000,000 ns ahead; its kernels are what the GPU really did.
  std::vector<MeasuredOp> ops = {Op(OpKind::kQkv, 1000, 500), Op(OpKind::kTpAllReduce, 2000, 900)};
  const uint64_t first_key = 11;  // the recorder numbers its ops from here: qkv 11, all-reduce 12
  const std::vector<ActivityRecord> records = {
      Rec(ActivityKind::kRuntime, 1000950, 1000990, 1, 7, "cudaLaunchKernel"),
      Rec(ActivityKind::kKernel, 1001010, 1001210, 1, 3, "sm90_xmma_gemm"),  // qkv: 10 ns after its event
      Rec(ActivityKind::kRuntime, 1001000, 1001020, 2, 7, "cudaLaunchKernel"),
      Rec(ActivityKind::kKernel, 1001220, 1001300, 2, 3, "bias_add"),        // qkv's second kernel
      Rec(ActivityKind::kRuntime, 1001900, 1001950, 3, 7, "cudaLaunchKernel"),
      Rec(ActivityKind::kKernel, 1002010, 1002610, 3, 5,
          "_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LL"),                    // the all-reduce: 10 ns after
      Rec(ActivityKind::kMemset, 1003000, 1003010, 9, 3, "memset"),          // outside every op
      Rec(ActivityKind::kSync, 1003100, 1003200, 0, 3, "cudaEventSynchronize"),
  };
  const std::vector<ExternalLink> links = {{1, 11}, {2, 11}, {3, 12}, {4, 99}};
  std::vector<DeviceSlice> slices;
  const TimelineSummary s = BuildDeviceTimeline(records, links, first_key, ops, slices);

  EXPECT_TRUE(s.aligned);
  EXPECT_EQ(s.clock_offset_ns, 1000 - 1001010);  // both ops: event start - first kernel = -1000010
  EXPECT_EQ(s.device_records, 4);
  EXPECT_EQ(s.attributed, 3);
  EXPECT_EQ(s.ops_retimed, 2);
  EXPECT_EQ(s.nccl_kernels, 1);
  EXPECT_EQ(s.nccl_in_collectives, 1);
  // qkv: first kernel start to last kernel end (290 ns of GPU time, not the event's 500).
  EXPECT_EQ(ops[0].start_ns, 1000);
  EXPECT_EQ(ops[0].dur_ns, 1001300 - 1001010);
  EXPECT_EQ(ops[1].start_ns, 2000);
  EXPECT_EQ(ops[1].dur_ns, 600);

  ASSERT_EQ(slices.size(), records.size());
  const DeviceSlice& gemm = slices[1];
  EXPECT_EQ(gemm.op, 0);
  EXPECT_EQ(gemm.start_ns, 1000);
  EXPECT_EQ(gemm.dur_ns, 200);
  EXPECT_EQ(gemm.launch_ns, 1000950 + s.clock_offset_ns);
  EXPECT_EQ(gemm.launch_thread, 7u);
  EXPECT_FALSE(gemm.nccl);
  EXPECT_EQ(slices[5].op, 1);
  EXPECT_TRUE(slices[5].nccl);
  EXPECT_EQ(slices[0].op, 0);   // the runtime call that launched qkv's kernel belongs to qkv
  EXPECT_EQ(slices[6].op, -1);  // the memset outside every op
  EXPECT_EQ(slices[6].launch_ns, -1);
}

TEST(DeviceTimeline, MedianAlignmentIgnoresAnOutlierAndKeepsUnmatchedOps) {
  // Three ops whose events agree with their kernels up to +-5 ns, one whose event was late (a
  // host stall before it): the median offset ignores it.
  std::vector<MeasuredOp> ops = {Op(OpKind::kQkv, 100, 50), Op(OpKind::kFc1, 300, 50), Op(OpKind::kFc2, 500, 50),
                                 Op(OpKind::kAttnOut, 9000, 50), Op(OpKind::kAttnCore, 800, 77)};
  const uint64_t first_key = 1;
  std::vector<ActivityRecord> records;
  std::vector<ExternalLink> links;
  const int64_t dev[] = {5100, 5295, 5505, 5700};  // tracer clock = recorder + 5000 (+-5), op 3 at 700
  for (uint32_t i = 0; i < 4; ++i) {
    records.push_back(Rec(ActivityKind::kKernel, dev[i], dev[i] + 40, i + 1, 1, "k"));
    links.push_back({i + 1, first_key + i});
  }
  std::vector<DeviceSlice> slices;
  const TimelineSummary s = BuildDeviceTimeline(records, links, first_key, ops, slices);
  // Deltas: -5000, -4995, -5005, +3300 -> median (upper of the middle two) -4995 or -5000.
  EXPECT_GE(s.clock_offset_ns, -5000);
  EXPECT_LE(s.clock_offset_ns, -4995);
  EXPECT_NEAR(static_cast<double>(ops[3].start_ns), 700, 5);  // the late event is corrected by its kernel
  EXPECT_EQ(ops[3].dur_ns, 40);
  EXPECT_EQ(ops[4].start_ns, 800);  // no device records: the event times stay
  EXPECT_EQ(ops[4].dur_ns, 77);
}

TEST(DeviceTimeline, WithoutAnyMatchTheFallbackOffsetIsUsedAndOpsStay) {
  std::vector<MeasuredOp> ops = {Op(OpKind::kQkv, 100, 50)};
  const std::vector<ActivityRecord> records = {Rec(ActivityKind::kKernel, 1000, 1100, 5, 1, "k")};
  std::vector<DeviceSlice> slices;
  const TimelineSummary s = BuildDeviceTimeline(records, {}, 1, ops, slices, -900);
  EXPECT_FALSE(s.aligned);
  EXPECT_EQ(s.clock_offset_ns, -900);
  EXPECT_EQ(s.attributed, 0);
  EXPECT_EQ(ops[0].start_ns, 100);
  EXPECT_EQ(ops[0].dur_ns, 50);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].start_ns, 100);
}

TEST(DeviceTimeline, NcclKernelNames) {
  EXPECT_TRUE(IsNcclKernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_TRUE(IsNcclKernel("_Z29ncclDevKernel_AllGather_RING_LLP24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_FALSE(IsNcclKernel("sm90_xmma_gemm_bf16bf16_bf16f32"));
  EXPECT_FALSE(IsNcclKernel("nccl"));
}

// A device tracer in CUPTI's shape: each op's launch is a runtime call with a new correlation id,
// linked to the op's key, and one kernel whose GPU time is known (tracer clock: 1 us per op slot).
class FakeTracer final : public DeviceActivity {
 public:
  std::string source() const override { return "fake-cupti"; }
  void EnterOp(uint64_t key) override {
    const uint32_t corr = ++corr_;
    const int64_t t = 1'000'000'000 + static_cast<int64_t>(corr) * 1000;
    pending_.push_back({ActivityKind::kRuntime, t, t + 50, corr, 42, -1, "cudaLaunchKernel"});
    const int64_t dur = 100 + static_cast<int64_t>(key % 7) * 10;
    pending_.push_back({ActivityKind::kKernel, t + 100, t + 100 + dur, corr, 3, -1, "kernel_" + std::to_string(key)});
    links_.push_back({corr, key});
    kernel_dur_[key] = dur;
    ++open_;
  }
  void ExitOp() override { --open_; }
  Status Drain(std::vector<ActivityRecord>& records, std::vector<ExternalLink>& links) override {
    records.insert(records.end(), pending_.begin(), pending_.end());
    links.insert(links.end(), links_.begin(), links_.end());
    stats_.records += static_cast<int64_t>(pending_.size() + links_.size());
    pending_.clear();
    links_.clear();
    return {};
  }
  ActivityStats stats() const override { return stats_; }
  int open_ = 0;
  std::map<uint64_t, int64_t> kernel_dur_;

 private:
  uint32_t corr_ = 0;
  std::vector<ActivityRecord> pending_;
  std::vector<ExternalLink> links_;
  ActivityStats stats_;
};

TEST(DeviceTimeline, TrainingWithATracerWritesGpuTimedOpsKernelsLaunchesAndFlows) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("parallax_device_timeline_" + std::to_string(::getpid()) + ".json");
  auto world = LocalCommunicator();
  CpuBackend be;
  FakeTracer fake;
  TrainingRunOptions o;
  o.steps = 2;
  o.trace_path = path.string();
  o.activity = &fake;
  bool failed = false;
  auto report = RunTraining(testing::TinyPlan("dp=1,micro_batch=2", 4), be, *world, o, nullptr, nullptr, &failed);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(fake.open_, 0) << "every EnterOp has its ExitOp";
  const ProfilingReport& p = report->profiling;
  EXPECT_EQ(p.source, "fake-cupti");
  ASSERT_GT(p.device_records, 20);
  EXPECT_EQ(p.attributed, p.device_records);
  EXPECT_EQ(p.ops_retimed, p.device_records);  // one kernel per op

  auto trace = traces::ReadChromeTrace(path.string());
  ASSERT_TRUE(trace) << trace.error().message;
  int64_t op_slices = 0, kernels = 0, launches = 0;
  for (size_t i = 0; i < trace->slices().size(); ++i) {
    const traces::Slice& s = trace->slices()[i];
    const traces::Track& track = trace->tracks()[s.track];
    const std::string_view name = trace->Str(s.name);
    if (s.has(traces::slice_flags::kHasIdentity)) {
      ++op_slices;
      // Each op slice lasts exactly its kernel's GPU time (100..160 ns), not an event interval.
      EXPECT_GE(s.dur_ns, 100);
      EXPECT_LE(s.dur_ns, 160);
    } else if (name.rfind("kernel_", 0) == 0) {
      ++kernels;
      EXPECT_EQ(track.name, "GPU stream 3");
      EXPECT_TRUE(track.device);
      EXPECT_EQ(track.stream, traces::Stream::kCompute);
      EXPECT_EQ(trace->Str(s.category), "kernel");
    } else if (name == "cudaLaunchKernel") {
      ++launches;
      EXPECT_EQ(track.stream, traces::Stream::kHost);
      EXPECT_EQ(track.name, "host thread 42");
      EXPECT_EQ(trace->Str(s.category), "cuda_runtime");
    }
  }
  EXPECT_EQ(op_slices, p.device_records);
  EXPECT_EQ(kernels, p.device_records);
  EXPECT_EQ(launches, p.device_records);
  EXPECT_EQ(static_cast<int64_t>(trace->flows().size()), p.device_records);  // launch -> kernel
  for (size_t i = 0; i < trace->flows().size(); ++i) {
    const traces::Flow& f = trace->flows()[i];
    EXPECT_EQ(trace->tracks()[f.from_track].stream, traces::Stream::kHost);
    EXPECT_EQ(f.to_ns - f.from_ns, 100);  // launch start -> kernel start, one clock
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace parallax::executor

namespace parallax::executor {
namespace {

// ZeRO partitions over the data-parallel group: with dp = 1 a ZeRO stage runs as stage 0, so the
// recorded ops are stage 0's (no shard copies, size-1 gathers, zero-fills or folds the planner
// would not predict for that layout).
TEST(ZeroWithOneDataParallelRank, RunsAsStageZero) {
  using Key = std::tuple<std::string, std::string, int64_t, int64_t>;  // op, phase, layer, micro-batch
  auto ops_of = [](const char* layout) {
    auto world = LocalCommunicator();
    CpuBackend be;
    TrainerOptions topt;
    topt.record_ops = true;
    auto t = Trainer::Create(testing::TinyPlan(layout, 2), be, *world, topt);
    EXPECT_TRUE(t) << t.error().message;
    std::map<Key, int> out;
    if (!t || !(*t)->Step()) return out;
    for (const MeasuredOp& o : (*t)->recorder().ops()) {
      ++out[{ToString(o.id.op), ToString(o.id.phase), o.id.layer, o.id.microbatch}];
    }
    return out;
  };
  const auto zero0 = ops_of("dp=1,micro_batch=2");
  ASSERT_FALSE(zero0.empty());
  for (const char* layout : {"dp=1,micro_batch=2,zero=1", "dp=1,micro_batch=2,zero=2", "dp=1,micro_batch=2,zero=3"}) {
    EXPECT_EQ(ops_of(layout), zero0) << layout;
  }
}

}  // namespace
}  // namespace parallax::executor
