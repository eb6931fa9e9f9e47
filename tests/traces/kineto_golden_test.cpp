// Golden tests on real PyTorch profiler (Kineto) traces in tests/data/traces/kineto/.
// Every expected number was derived independently with derive_golden.py (Python gzip + json,
// exact decimal timestamps), not by printing what this reader returns.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "traces/chrome_reader.h"
#include "traces/kineto.h"

namespace parallax::traces {
namespace {

const std::string kDir = PARALLAX_TEST_DATA_DIR "/traces/kineto/";

struct Loaded {
  Trace trace;
  ReadStats stats;
};

Loaded Load(const std::string& file) {
  ReadStats stats;
  auto t = ReadChromeTrace(kDir + file, {}, &stats);
  if (!t.ok()) {
    ADD_FAILURE() << t.error().message;
    return {Trace(), stats};
  }
  return {std::move(t.value()), stats};
}

size_t CountFlagged(const Trace& t, uint8_t flag) {
  size_t n = 0;
  t.slices().ForEach([&](const Slice& s) { n += s.has(flag) ? 1 : 0; });
  return n;
}

TEST(KinetoGolden, CpuOnlyTrace) {
  auto [t, st] = Load("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  EXPECT_EQ(st.events, 30);
  EXPECT_EQ(st.phases, (std::map<std::string, int64_t>{{"M", 12}, {"X", 16}, {"i", 2}}));
  EXPECT_EQ(st.categories, (std::map<std::string, int64_t>{
                               {"", 14}, {"Trace", 1}, {"cpu_op", 4}, {"user_annotation", 11}}));
  EXPECT_EQ(t.tracks().size(), 6u);
  EXPECT_EQ(t.slices().size(), 18u);
  EXPECT_EQ(t.first_ns(), 1212075525586016);
  EXPECT_EQ(t.last_ns(), 1212076832503044);
  EXPECT_EQ(st.nccl_kernels, 0);
  EXPECT_EQ(t.flows().size(), 0u);
  EXPECT_EQ(CountFlagged(t, slice_flags::kCompute), 0u);
  EXPECT_EQ(t.metadata.rank, 34);
  EXPECT_EQ(t.metadata.world_size, 300);
  // No GPU: every track is host or other, none is a device stream.
  for (const Track& tr : t.tracks()) EXPECT_FALSE(tr.device) << tr.name;
  EXPECT_TRUE(st.warnings.empty());
}

TEST(KinetoGolden, NcclTraceWithCollectiveArgs) {
  auto [t, st] = Load("nccl_parser_config__nccl_data.json.gz");
  EXPECT_EQ(st.events, 40573);
  EXPECT_EQ(st.phases, (std::map<std::string, int64_t>{
                           {"M", 38}, {"X", 26933}, {"f", 9195}, {"i", 2}, {"s", 4405}}));
  EXPECT_EQ(st.categories, (std::map<std::string, int64_t>{{"", 40},
                                                           {"Trace", 1},
                                                           {"ac2g", 12514},
                                                           {"cpu_op", 14346},
                                                           {"cuda_runtime", 8740},
                                                           {"fwdbwd", 1086},
                                                           {"gpu_memcpy", 960},
                                                           {"gpu_memset", 114},
                                                           {"gpu_user_annotation", 30},
                                                           {"kernel", 2700},
                                                           {"user_annotation", 42}}));
  EXPECT_EQ(t.tracks().size(), 8u);
  EXPECT_EQ(t.slices().size(), 26935u);
  EXPECT_EQ(t.first_ns(), 4458676388068751);
  EXPECT_EQ(t.last_ns(), 4458677117099727);
  EXPECT_EQ(st.nccl_kernels, 21);
  EXPECT_EQ(t.flows().size(), 4317u);
  EXPECT_EQ(CountFlagged(t, slice_flags::kComm), 21u);
  EXPECT_EQ(CountFlagged(t, slice_flags::kCompute), 2700u - 21u);
  EXPECT_EQ(CountFlagged(t, slice_flags::kMemory), 960u + 114u);

  // Collective name, message size (nelems x dtype bytes) and group size from the NCCL args.
  std::map<std::string, int> collectives;
  int64_t bytes = 0;
  // Structured bindings are captured through a reference (clang 14 cannot capture them).
  t.slices().ForEach([&, &tr = t](const Slice& s) {
    if (!s.has(slice_flags::kComm)) return;
    const SliceArgs* a = tr.args(s);
    ASSERT_NE(a, nullptr);
    ++collectives[std::string(tr.Str(a->collective))];
    bytes += a->bytes;
    EXPECT_EQ(a->group_size, 2);
  });
  EXPECT_EQ(collectives, (std::map<std::string, int>{{"allreduce", 15}, {"broadcast", 6}}));
  EXPECT_EQ(bytes, 307323096);  // 18 Float (4 B) + 3 Long (8 B) messages
  EXPECT_EQ(t.metadata.rank, 0);
  EXPECT_EQ(t.metadata.world_size, 2);
}

TEST(KinetoGolden, EightRankTraceNcclKernelsWithoutArgs) {
  auto [t, st] = Load("trace_diff__control__control.json.gz");
  EXPECT_EQ(st.events, 109123);
  EXPECT_EQ(st.phases, (std::map<std::string, int64_t>{
                           {"M", 42}, {"X", 74937}, {"f", 24692}, {"i", 2}, {"s", 9450}}));
  EXPECT_EQ(st.categories, (std::map<std::string, int64_t>{{"", 44},
                                                           {"Trace", 1},
                                                           {"async_cpu_to_gpu", 34142},
                                                           {"cpu_op", 40506},
                                                           {"cuda_runtime", 24692},
                                                           {"gpu_memcpy", 228},
                                                           {"gpu_memset", 654},
                                                           {"kernel", 8568},
                                                           {"user_annotation", 288}}));
  EXPECT_EQ(t.tracks().size(), 10u);
  EXPECT_EQ(t.slices().size(), 74939u);
  EXPECT_EQ(t.first_ns(), 1661203462584767000);
  EXPECT_EQ(t.last_ns(), 1661203463125562000);
  EXPECT_EQ(st.nccl_kernels, 60);
  EXPECT_EQ(t.flows().size(), 9450u);
  // Without Kineto collective args the collective comes from the kernel name.
  std::map<std::string, int> collectives;
  t.slices().ForEach([&, &tr = t](const Slice& s) {
    if (s.has(slice_flags::kComm)) ++collectives[std::string(tr.Str(tr.args(s)->collective))];
  });
  EXPECT_EQ(collectives, (std::map<std::string, int>{{"allreduce", 18}, {"sendrecv", 42}}));
  // Rank 3's GPU streams are device tracks of rank 3 (distributedInfo.rank).
  std::set<int64_t> device_tids;
  for (const Track& tr : t.tracks()) {
    if (tr.device) {
      EXPECT_EQ(tr.rank, 3);
      EXPECT_EQ(tr.pid, 3);
      device_tids.insert(tr.tid);
    }
  }
  EXPECT_EQ(device_tids, (std::set<int64_t>{7, 20, 21, 22}));
}

TEST(KinetoGolden, NcclNameParsing) {
  EXPECT_TRUE(IsNcclKernel("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_FALSE(IsNcclKernel("void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_EQ(NcclCollectiveFromKernelName("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"), "reducescatter");
  EXPECT_EQ(NcclCollectiveFromKernelName("ncclKernel_Reduce_RING_LL_Sum_float"), "reduce");
  EXPECT_EQ(NcclCollectiveFromKernelName("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), "sendrecv");
  EXPECT_EQ(NcclCollectiveFromKernelName("gemm"), "");
  EXPECT_EQ(KinetoDtypeBytes("BFloat16"), 2);
  EXPECT_EQ(KinetoDtypeBytes("Mystery"), 0);
}

// PyTorch 1.8's Kineto wrote "Kernel", "Runtime" (HTA's trace_file_list trace, distributedInfo rank
// 1): its 4 kernels are device compute on rank 1, its runtime calls host, as today's names are.
TEST(KinetoGolden, PyTorch18CategoryNamesAreDeviceAndHostTracks) {
  auto [t, st] = Load("trace_file_list__inference_rank_1.json.gz");
  EXPECT_EQ(st.categories.at("Kernel"), 4);
  EXPECT_EQ(CountFlagged(t, slice_flags::kCompute), 4u);
  int device = 0, host = 0;
  for (const Track& tr : t.tracks()) {
    if (tr.device) {
      ++device;
      EXPECT_EQ(tr.stream, Stream::kCompute);
      EXPECT_EQ(tr.rank, 1);
    }
    host += tr.stream == Stream::kHost ? 1 : 0;
  }
  EXPECT_EQ(device, 1);
  EXPECT_EQ(host, 1);
}

// HTA's ns_resolution_trace: absolute microseconds with three decimals, 19 significant digits
// (1712195495406752.797). Expected: python3 json with parse_float=Decimal over the "X" events.
TEST(KinetoGolden, NsResolutionTraceKeepsEveryNanosecond) {
  const Trace t = Load("ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz").trace;
  EXPECT_EQ(t.first_ns(), 1712195495406752797);
  EXPECT_EQ(t.last_ns(), 1712195496004644183);  // the "Record Window End" instant
  int64_t kernels = 0, sub_us = 0;
  t.slices().ForEach([&](const Slice& s) {
    if (t.Str(s.category) != "kernel") return;
    ++kernels;
    sub_us += s.start_ns % 1000;
  });
  EXPECT_EQ(kernels, 4350);
  EXPECT_EQ(sub_us, 2163387);
}

}  // namespace
}  // namespace parallax::traces
