// `parallax run`: lands with the executor issue.
#include <cstdio>

#include "cli/command.h"

namespace parallax::cli {

void RegisterRunCommand(CLI::App& root, CliState& state) {
  auto* cmd = root.add_subcommand("run", "Run a plan for real under mpirun");
  cmd->allow_extras();
  cmd->callback([&state] {
    std::fprintf(stderr, "parallax run: not available in this build yet\n");
    state.exit_code = 1;
  });
}

}  // namespace parallax::cli
