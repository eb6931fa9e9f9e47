// The validation table reader: a missing column or a bad cell is an error naming the file and
// JSON path (it once read column 0 silently), and the real table loads with its ten rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/planner/validation_util.h"

namespace parallax::planner::testing {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

constexpr const char* kColumns =
    R"("columns":["params_B","heads","hidden","layers","tp","pp","gpus","global_batch","tflops_per_gpu"])";

TEST(MegatronRows, RealTableLoadsTenRows) {
  auto rows = LoadMegatronRows(PARALLAX_TEST_DATA_DIR "/validation/megatron_sc21_table1.json");
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 10u);
  EXPECT_DOUBLE_EQ(rows->front().params_B, 1.7);
  EXPECT_GT(rows->front().tflops_per_gpu, 100);
}

TEST(MegatronRows, ReadsColumnsByNameInAnyOrder) {
  const std::string path = Write("px_rows_reordered.json",
      R"({"columns":["tflops_per_gpu","global_batch","gpus","pp","tp","layers","hidden","heads","params_B"],)"
      R"("rows":[[140,512,32,1,4,40,4096,32,7.5]]})");
  auto rows = LoadMegatronRows(path);
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].hidden, 4096);
  EXPECT_EQ((*rows)[0].tp, 4);
  EXPECT_DOUBLE_EQ((*rows)[0].tflops_per_gpu, 140);
}

TEST(MegatronRows, MissingColumnIsAnErrorNotColumnZero) {
  const std::string path = Write("px_rows_missing.json",
      R"({"columns":["params_B","heads","hidden","layers","tp","pp","gpus","tflops_per_gpu"],)"
      R"("rows":[[1.7,24,2304,24,1,1,32,137]]})");
  auto rows = LoadMegatronRows(path);
  ASSERT_FALSE(rows);
  EXPECT_NE(rows.error().message.find("px_rows_missing.json: /columns: no column \"global_batch\""),
            std::string::npos) << rows.error().message;
}

TEST(MegatronRows, ShortRowAndWrongTypeNameTheCell) {
  auto short_row = LoadMegatronRows(Write("px_rows_short.json", "{" + std::string(kColumns) +
                                                                     R"(,"rows":[[1.7,24,2304,24,1,1,32,512]]})"));
  ASSERT_FALSE(short_row);
  EXPECT_NE(short_row.error().message.find("px_rows_short.json: /rows/0/8: missing"), std::string::npos)
      << short_row.error().message;
  auto text = LoadMegatronRows(Write("px_rows_text.json", "{" + std::string(kColumns) +
                                                                R"(,"rows":[[1.7,"24",2304,24,1,1,32,512,137]]})"));
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("px_rows_text.json: /rows/0/1: column \"heads\" is not a number"),
            std::string::npos) << text.error().message;
}

}  // namespace
}  // namespace parallax::planner::testing
