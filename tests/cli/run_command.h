#pragma once
// Runs the parallax binary in a shell and captures stdout, stderr and the exit status.

#include <string>

namespace parallax::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

//! `args` is appended to the binary path as-is (shell syntax).
CommandResult RunParallax(const std::string& args);
//! Writes `text` to a fresh temporary file with the given name and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& text);

}  // namespace parallax::test
