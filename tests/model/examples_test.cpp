// Every file in examples/ loads and validates (the README points users at them).
#include <gtest/gtest.h>

#include <filesystem>

#include "model/cost_db.h"
#include "model/implementation.h"
#include "model/load.h"

namespace parallax {
namespace {

TEST(Examples, EveryExampleLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(PARALLAX_SOURCE_DIR "/examples")) {
    if (e.path().extension() != ".json") continue;
    const std::string path = e.path().string();
    auto j = LoadJsonFile(path);
    ASSERT_TRUE(j) << j.error().message;
    const std::string kind = j->value("kind", "hf");
    SCOPED_TRACE(path);
    if (kind == "model" || kind == "hf") EXPECT_TRUE(LoadModelFile(path)) << LoadModelFile(path).error().message;
    else if (kind == "cluster") EXPECT_TRUE(LoadClusterFile(path)) << LoadClusterFile(path).error().message;
    else if (kind == "plan") EXPECT_TRUE(LoadPlanFile(path)) << LoadPlanFile(path).error().message;
    else if (kind == "costdb") EXPECT_TRUE(LoadCostDbFile(path)) << LoadCostDbFile(path).error().message;
    else if (kind == "implementation") {
      EXPECT_TRUE(ResolveImplementation(path)) << ResolveImplementation(path).error().message;
    }
    else ADD_FAILURE() << "unknown kind " << kind;
    ++n;
  }
  EXPECT_GE(n, 6);
}

}  // namespace
}  // namespace parallax
