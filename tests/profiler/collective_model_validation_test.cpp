// The collective cost model (planner/cost/collective.h: NCCL's ring / tree with LL, LL128 and
// Simple, no CostDb) against real nccl-tests outputs of one 8-GPU NVSwitch node, read from
// tests/data/nccl-tests. Label `validation`: it prints measured / predicted per size and per band
// and fails while a point of 1 MiB or more is more than 10% off (docs/validation.md, "The collective
// model against nccl-tests"). Below 1 MiB these single-process `-g 8` outputs sit on a ~35 us floor
// even at 0 bytes (eight kernels launched from one thread), which says nothing of a
// one-process-per-GPU job.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/load.h"
#include "planner/cost/collective.h"
#include "planner/cost/placement.h"
#include "profiler/nccl_tests/output_parser.h"

namespace parallax::profiler {
namespace {

struct Case {
  const char* file;
  const char* cluster;  // the preset with the same NVLink generation and GPU count per node
};

// superbench: 8x A100-SXM4-40GB (NVLink3 + NVSwitch, as dgx-a100's 80 GB parts); nccl-tests issue
// 290: 8x H100 80GB HBM3 (NVLink4 + NVSwitch, as dgx-h100). The 2-node outputs in the same folder
// come from cloud systems whose NICs differ from the DGX presets, so they are not compared here.
const Case kCases[] = {
    {"a100_1node8_all_reduce_perf_superbench.txt", "dgx-a100"},
    {"a100_1node8_reduce_scatter_perf_superbench.txt", "dgx-a100"},
    {"a100_1node8_all_gather_perf_superbench.txt", "dgx-a100"},
    {"a100_1node8_alltoall_perf_superbench.txt", "dgx-a100"},
    {"h100_1node8_all_reduce_perf_nccl-tests-issue290.txt", "dgx-h100"},
};

struct Band {
  const char* name;
  double lo, hi;  // bytes, [lo, hi)
  double sum_log = 0;
  double worst = 0;  // |measured / predicted - 1|
  int n = 0;
};

TEST(CollectiveModelValidation, OneNodeNcclTestsWithinTenPercent) {
  const std::vector<Band> none = {{"1-16 MiB", 1 << 20, 16 << 20}, {"16-256 MiB", 16 << 20, 256 << 20},
                                  {">= 256 MiB", 256 << 20, 1e30}};
  std::vector<Band> total = none;
  for (const Case& c : kCases) {
    const std::string path = std::string(PARALLAX_TEST_DATA_DIR) + "/nccl-tests/" + c.file;
    auto out = ReadNcclTestsFile(path);
    ASSERT_TRUE(out) << out.error().message;
    const int64_t n = out->group_size();
    ASSERT_EQ(n, 8) << c.file;
    auto cluster = ResolveCluster(c.cluster, 1);
    ASSERT_TRUE(cluster);
    const planner::CollectiveModel model(*cluster);
    Layout l;
    l.tp = n;
    const planner::PlacedGroup g = planner::PlaceGroup(l, *cluster, planner::GroupKind::kTp);
    std::printf("%s (%s, %s)\n%12s %10s %10s %8s\n", c.file, c.cluster, ToString(out->op), "bytes", "meas us",
                "pred us", "meas/pred");
    std::vector<Band> bands = none;
    for (const auto& row : out->rows) {
      if (row.bytes < (1 << 20) || row.out_of_place.time_us <= 0 || !row.out_of_place.valid) continue;
      const double pred = model.Time(out->op, static_cast<double>(row.bytes), g) * 1e6;
      const double r = row.out_of_place.time_us / pred;
      std::printf("%12lld %10.1f %10.1f %8.2f\n", static_cast<long long>(row.bytes), row.out_of_place.time_us, pred, r);
      for (size_t i = 0; i < bands.size(); ++i) {
        const double b = static_cast<double>(row.bytes);
        if (b < bands[i].lo || b >= bands[i].hi) continue;
        for (Band* band : {&bands[i], &total[i]}) {
          band->sum_log += std::log(r);
          band->worst = std::max(band->worst, std::abs(r - 1));
          ++band->n;
        }
      }
      EXPECT_LT(std::abs(r - 1), 0.10) << c.file << " at " << row.bytes << " bytes";
    }
    for (const Band& b : bands) {
      if (b.n > 0) std::printf("  %-11s geomean meas/pred %.2f, worst %+.0f%% (%d sizes)\n", b.name, std::exp(b.sum_log / b.n), 100 * b.worst, b.n);
    }
  }
  std::printf("all five outputs:\n");
  for (const Band& b : total) {
    if (b.n > 0) std::printf("  %-11s geomean meas/pred %.2f, worst %.0f%% off (%d points)\n", b.name, std::exp(b.sum_log / b.n), 100 * b.worst, b.n);
  }
}

}  // namespace
}  // namespace parallax::profiler
