#include "tests/planner/validation_util.h"

#include "model/json_io.h"

namespace parallax::planner::testing {

Result<std::vector<MegatronRow>> LoadMegatronRows(const std::string& path) {
  auto j = LoadJsonFile(path);
  if (!j) return j.error();
  if (!j->is_object() || !j->contains("columns") || !(*j)["columns"].is_array()) {
    return BadInput(path + ": /columns: missing or not an array");
  }
  if (!j->contains("rows") || !(*j)["rows"].is_array()) return BadInput(path + ": /rows: missing or not an array");
  const Json& cols = (*j)["columns"];
  std::vector<MegatronRow> rows;
  size_t row_index = 0;
  std::string error;
  // The index of column `name`; an error names the file when it is absent.
  auto col = [&](const char* name) -> size_t {
    for (size_t i = 0; i < cols.size(); ++i) {
      if (cols[i].is_string() && cols[i].get<std::string>() == name) return i;
    }
    if (error.empty()) error = path + ": /columns: no column \"" + name + "\"";
    return cols.size();
  };
  // The cell of column `name` in the current row, as a number; errors name its JSON path.
  auto cell = [&](const Json& r, const char* name) -> double {
    const size_t i = col(name);
    if (!error.empty()) return 0;
    const std::string where = path + ": /rows/" + std::to_string(row_index) + "/" + std::to_string(i);
    if (i >= r.size()) {
      error = where + ": missing (the row is shorter than /columns)";
      return 0;
    }
    if (!r[i].is_number()) {
      error = where + ": column \"" + name + "\" is not a number";
      return 0;
    }
    return r[i].get<double>();
  };
  for (const Json& r : (*j)["rows"]) {
    if (!r.is_array()) return BadInput(path + ": /rows/" + std::to_string(row_index) + ": expected an array");
    MegatronRow m;
    m.params_B = cell(r, "params_B");
    m.heads = static_cast<int64_t>(cell(r, "heads"));
    m.hidden = static_cast<int64_t>(cell(r, "hidden"));
    m.layers = static_cast<int64_t>(cell(r, "layers"));
    m.tp = static_cast<int64_t>(cell(r, "tp"));
    m.pp = static_cast<int64_t>(cell(r, "pp"));
    m.gpus = static_cast<int64_t>(cell(r, "gpus"));
    m.global_batch = static_cast<int64_t>(cell(r, "global_batch"));
    m.tflops_per_gpu = cell(r, "tflops_per_gpu");
    if (!error.empty()) return BadInput(error);
    rows.push_back(m);
    ++row_index;
  }
  return rows;
}

}  // namespace parallax::planner::testing
