// Presets agree with the published tables they come from.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "model/counting.h"
#include "model/load.h"
#include "model/presets.h"

namespace parallax {
namespace {

TEST(Presets, MegatronTableSizesMatchTheirPublishedParameterCounts) {
  auto j = LoadJsonFile(PARALLAX_TEST_DATA_DIR "/validation/megatron_sc21_table1.json");
  ASSERT_TRUE(j) << j.error().message;
  const auto& cols = (*j)["columns"];
  auto col = [&](const char* name) {
    for (size_t i = 0; i < cols.size(); ++i) {
      if (cols[i] == name) return i;
    }
    ADD_FAILURE() << name;
    return size_t{0};
  };
  int rows = 0;
  for (const auto& row : (*j)["rows"]) {
    const double params_b = row[col("params_B")].get<double>();
    char name[64];
    std::snprintf(name, sizeof name, params_b >= 1000 ? "megatron-%.0fb" : "megatron-%.1fb", params_b);
    auto m = ModelPreset(name);
    ASSERT_TRUE(m) << name;
    EXPECT_EQ(m->heads, row[col("heads")].get<int64_t>()) << name;
    EXPECT_EQ(m->hidden, row[col("hidden")].get<int64_t>()) << name;
    EXPECT_EQ(m->layers, row[col("layers")].get<int64_t>()) << name;
    EXPECT_EQ(m->seq_len, (*j)["training"]["seq_len"].get<int64_t>());
    EXPECT_EQ(m->vocab, (*j)["training"]["vocab"].get<int64_t>());
    // The paper's P = 12 l h^2 (1 + 13/12h + (V+s)/12lh), rounded to 0.1B.
    const double p = static_cast<double>(CountModel(*m).params_total) / 1e9;
    EXPECT_NEAR(p, params_b, 0.05 * params_b + 0.06) << name;
    ++rows;
  }
  EXPECT_EQ(rows, 10);
}

TEST(Presets, EveryIssueNamedPresetExists) {
  for (const char* m : {"gpt-tiny", "gpt-1.3b", "gpt3-175b", "llama-7b", "llama-13b", "llama-33b", "llama-65b",
                        "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3.1-405b"}) {
    EXPECT_TRUE(ModelPreset(m)) << m;
  }
  for (const char* d : {"a100-sxm-40g", "a100-sxm-80g", "h100-sxm-80g", "h200-sxm-141g", "cpu", "b200", "gb200", "b300",
                        "gb300"}) {
    EXPECT_TRUE(DevicePreset(d)) << d;
  }
  for (const char* c : {"dgx-a100", "dgx-h100", "dgx-h200", "local-cpu", "dgx-b200", "gb200-nvl72", "gb300-nvl72"}) {
    EXPECT_TRUE(ClusterPreset(c)) << c;
  }
  const auto tiny = *ModelPreset("gpt-tiny");
  EXPECT_EQ(tiny.layers, 4);
  EXPECT_EQ(tiny.hidden, 64);
  EXPECT_EQ(tiny.heads, 4);
  EXPECT_EQ(tiny.vocab, 256);
  EXPECT_EQ(tiny.seq_len, 32);
}

TEST(Presets, DatasheetFigures) {
  const auto a100 = *DevicePreset("a100-sxm-80g");
  EXPECT_DOUBLE_EQ(a100.peak_tflops.bf16, 312);
  EXPECT_DOUBLE_EQ(a100.peak_tflops.fp8, 0);  // no FP8 tensor cores on Ampere
  EXPECT_DOUBLE_EQ(a100.hbm_GBps, 2039);
  const auto h200 = *DevicePreset("h200-sxm-141g");
  EXPECT_DOUBLE_EQ(h200.hbm_GBps, 4800);
  EXPECT_GT(h200.memory_GiB, 139);
  const auto h100 = *ClusterPreset("dgx-h100");
  EXPECT_DOUBLE_EQ(h100.intra_node.bandwidth_GBps, 450);
  EXPECT_DOUBLE_EQ(h100.inter_node.bandwidth_GBps, 400);  // 8 x 400 Gb/s
}

TEST(Presets, BlackwellDevicesCarryTheirDatasheetFiguresDense) {
  // NVIDIA's tables give sparse rates; the presets hold half of them (model/presets.cpp).
  struct Row {
    const char* name;
    double bf16, fp8, fp4, memory_GB, hbm_GBps;
    int64_t sms;
  };
  // B200's memory is what CUDA reports (178.35 GiB = 191.5 GB), the others the datasheet's.
  for (const Row& r : {Row{"b200", 2250, 4500, 9000, 178.35 * 1.073741824, 7700, 148},
                       Row{"gb200", 2500, 5000, 10000, 186, 8000, 148},
                       Row{"b300", 2250, 4500, 13500, 288, 7700, 160}, Row{"gb300", 2500, 5000, 15000, 288, 8000, 160}}) {
    const auto d = DevicePreset(r.name);
    ASSERT_TRUE(d) << r.name;
    EXPECT_DOUBLE_EQ(d->peak_tflops.bf16, r.bf16) << r.name;
    EXPECT_DOUBLE_EQ(d->peak_tflops.fp16, r.bf16) << r.name;
    EXPECT_DOUBLE_EQ(d->peak_tflops.fp8, r.fp8) << r.name;
    EXPECT_DOUBLE_EQ(d->peak_tflops.fp4, r.fp4) << r.name;
    EXPECT_NEAR(d->memory_GiB * 1024.0 * 1024.0 * 1024.0 / 1e9, r.memory_GB, 1e-6) << r.name;
    EXPECT_DOUBLE_EQ(d->hbm_GBps, r.hbm_GBps) << r.name;
    EXPECT_EQ(d->arch.sm_count, r.sms) << r.name;
    EXPECT_TRUE(d->is_gpu());
    EXPECT_FALSE(d->arch.gemm_tiles.empty());
  }
}

TEST(Presets, BlackwellClustersDescribeTheirNvlinkDomains) {
  const auto dgx = *ClusterPreset("dgx-b200");
  EXPECT_EQ(dgx.gpus_per_node, 8);
  EXPECT_EQ(dgx.domain_size(), 8);  // the node is the domain
  EXPECT_DOUBLE_EQ(dgx.intra_node.bandwidth_GBps, 900);  // NVLink 5: 1.8 TB/s both directions
  EXPECT_DOUBLE_EQ(dgx.inter_node.bandwidth_GBps, 400);  // 8 x ConnectX-7 400 Gb/s
  for (const char* name : {"gb200-nvl72", "gb300-nvl72"}) {
    const auto rack = *ClusterPreset(name);
    EXPECT_EQ(rack.gpus_per_node, 4) << name;  // a compute tray
    EXPECT_EQ(rack.nodes, 18) << name;         // one rack
    EXPECT_EQ(rack.domain_size(), 72) << name;
    EXPECT_EQ(rack.total_gpus(), 72) << name;
    EXPECT_DOUBLE_EQ(rack.intra_node.bandwidth_GBps, 900) << name;
  }
  EXPECT_DOUBLE_EQ(ClusterPreset("gb200-nvl72")->inter_node.bandwidth_GBps, 200);  // 4 x ConnectX-7
  EXPECT_DOUBLE_EQ(ClusterPreset("gb300-nvl72")->inter_node.bandwidth_GBps, 400);  // 4 x ConnectX-8
}

TEST(Presets, UnknownNamesListTheKnownOnes) {
  auto m = ResolveModel("gpt-5");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("unknown model \"gpt-5\""), std::string::npos);
  EXPECT_NE(m.error().message.find("llama3-8b"), std::string::npos);
  auto c = ResolveCluster("dgx-x900");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("dgx-h100"), std::string::npos);
}

}  // namespace
}  // namespace parallax

namespace parallax {
namespace {

// Issue 10 item 7: the local CPU cluster is this machine (one device per online core), not a
// fixed 4 devices.
TEST(Presets, LocalCpuHasOneDevicePerCoreOfThisMachine) {
  const auto c = *ClusterPreset("local-cpu");
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpus_per_node, static_cast<int64_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GT(c.device.memory_GiB, 0);
  EXPECT_EQ(c.device.name, "cpu");
}

}  // namespace
}  // namespace parallax
