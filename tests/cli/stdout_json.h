#pragma once
// A command's stdout read as the one JSON object `--json` prints (a test failure when it is not).

#include <gtest/gtest.h>

#include "model/json_io.h"
#include "run_command.h"

namespace parallax::test {

inline Json StdoutJson(const CommandResult& r) {
  auto j = ParseJsonText(r.out, "stdout");
  EXPECT_TRUE(j) << r.out << r.err;
  return j ? *j : Json::object();
}

}  // namespace parallax::test
