// Issue 37 item 7, "further published MoE runs": tests/data/validation/moe_more.json, 17 Megatron-Core
// MoE pre-training rows beside moe_h100_bf16.json and the FP8/GB200 set (gpt-oss-120b, Qwen3-30B-A3B,
// Qwen3-235B-A22B and DeepSeek-V3 on H100, B200, GB200 and GB300, in BF16, FP8 and MXFP8), from
// Megatron-Bridge's performance summary (26.04.01 container, each row's workload config at the same
// commit) and the Megatron-MoE model zoo's Qwen3 table. Each row is predicted with its published
// layout and the facts of its recipe (the row's "recipe": dispatcher, recompute modules, TP overlap,
// gradient dtype, each cited to file and line in the row; the Slurm NVLink segment of the GB200 /
// GB300 jobs, cited in moe_row_plan.h) under the megatron-core profile, nothing fitted. The facts the
// planner cannot express (CUDA graphs, the EP all-to-all overlap, the MTP module's compute,
// recompute modules it has no module for) are printed beside the row.
// Target (issue 37): mean <= 10%, every row within 20%; a row predicted not to fit, or rejected,
// is a miss (100%).
#include <gtest/gtest.h>

#include "tests/planner/moe_row_plan.h"

namespace parallax::planner {
namespace {

TEST(MoeMoreValidation, FurtherPublishedRunsWithinTwentyPercentMeanTen) {
  const testing::MoeRowsSummary s =
      testing::PredictMoeRows(PARALLAX_TEST_DATA_DIR "/validation/moe_more.json", "moe_more.json");
  ASSERT_GT(s.rows, 0);
  EXPECT_LE(s.abs_sum / s.rows, 10.0);
}

}  // namespace
}  // namespace parallax::planner
