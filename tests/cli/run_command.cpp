#include "run_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace parallax::test {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempDir() {
  const auto dir = std::filesystem::temp_directory_path() / ("parallax_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace

CommandResult RunParallax(const std::string& args) {
  static int counter = 0;
  const std::string base = TempDir() + "/cmd" + std::to_string(counter++);
  const std::string cmd = std::string(PARALLAX_CLI) + " " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(base + ".out");
  r.err = Slurp(base + ".err");
  return r;
}

std::string WriteTempFile(const std::string& name, const std::string& text) {
  std::string path = TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace parallax::test
