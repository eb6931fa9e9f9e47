#include "tests/planner/validation_util.h"

#include "model/json_io.h"

namespace parallax::planner::testing {

std::vector<MegatronRow> LoadMegatronRows(const std::string& path) {
  std::vector<MegatronRow> rows;
  auto j = LoadJsonFile(path);
  if (!j) return rows;
  const Json& cols = (*j)["columns"];
  auto col = [&](const char* name) {
    for (size_t i = 0; i < cols.size(); ++i) {
      if (cols[i].get<std::string>() == name) return i;
    }
    return size_t{0};
  };
  for (const Json& r : (*j)["rows"]) {
    MegatronRow m;
    m.params_B = r[col("params_B")].get<double>();
    m.heads = r[col("heads")].get<int64_t>();
    m.hidden = r[col("hidden")].get<int64_t>();
    m.layers = r[col("layers")].get<int64_t>();
    m.tp = r[col("tp")].get<int64_t>();
    m.pp = r[col("pp")].get<int64_t>();
    m.gpus = r[col("gpus")].get<int64_t>();
    m.global_batch = r[col("global_batch")].get<int64_t>();
    m.tflops_per_gpu = r[col("tflops_per_gpu")].get<double>();
    rows.push_back(m);
  }
  return rows;
}

}  // namespace parallax::planner::testing
