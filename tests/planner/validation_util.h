#pragma once
// Shared by the validation test and the benchmark notes: the Megatron-LM SC'21 table 1 rows.

#include <string>
#include <vector>

#include "model/cluster_spec.h"
#include "model/model_spec.h"

namespace parallax::planner::testing {

struct MegatronRow {
  double params_B = 0;
  int64_t heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, global_batch = 0;
  double tflops_per_gpu = 0;
};

//! The rows of `path` ({"columns": [names], "rows": [[values]]}). A missing column, a short row or
//! a value of the wrong type is bad input naming the file and the JSON path.
Result<std::vector<MegatronRow>> LoadMegatronRows(const std::string& path);

}  // namespace parallax::planner::testing
