// Gradient compression runs the host kernels model/compression_kernels.h lists for it, on as many
// units as the list says: the list the planner prices and calibrate times is what the executor runs.
#include <gtest/gtest.h>

#include <random>

#include "executor/cpu/local_communicator.h"
#include "executor/runtime/classic/compression.h"
#include "model/compression_kernels.h"
#include "model/load.h"

namespace parallax::executor {
namespace {

//! A model's flat layout: two matrices, a vector and a padding tail outside every parameter.
std::vector<FlatParam> Params() { return {{0, 12, 8, true}, {96, 1, 8, false}, {104, 8, 5, true}}; }
constexpr int64_t kSize = 150;

std::array<double, kCompressionKernels> Listed(const std::string& compression, int64_t steps) {
  const SyncMode m = ParseInlineLayout("compression=" + compression)->sync;
  std::vector<std::pair<double, double>> matrices;
  for (const FlatParam& p : Params()) {
    if (p.rows > 1 && p.cols > 1) matrices.emplace_back(static_cast<double>(p.rows), static_cast<double>(p.cols));
  }
  std::array<double, kCompressionKernels> out{};
  for (const KernelRun& k : CompressionStepOf(m, kSize, 1, matrices).kernels) {
    out[static_cast<size_t>(k.kernel)] += k.units * static_cast<double>(k.calls * steps);
  }
  return out;
}

TEST(CompressionKernels, EachMethodRunsTheKernelsItsStepListsOnTheListedUnits) {
  for (const std::string c : {"bf16", "int8", "topk:0.1", "powersgd:2"}) {
    const SyncMode m = ParseInlineLayout("compression=" + c)->sync;
    GradientCompressor compressor(m, Params(), kSize);
    SelfCommunicator self;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (int step = 0; step < 2; ++step) {
      std::vector<float> g(kSize);
      for (float& x : g) x = normal(rng);
      ASSERT_TRUE(compressor.MeanOverWorkers(self, &g)) << c;
    }
    const auto listed = Listed(c, 2);
    for (int k = 0; k < kCompressionKernels; ++k) {
      EXPECT_DOUBLE_EQ(compressor.kernel_units()[static_cast<size_t>(k)], listed[static_cast<size_t>(k)])
          << c << " " << KernelFamily(static_cast<CompressionKernel>(k));
    }
    double listed_units = 0;
    for (double u : listed) listed_units += u;
    EXPECT_GT(listed_units, 0.0) << c;  // the comparison above is over something
  }
}

}  // namespace
}  // namespace parallax::executor
