// `parallax plan` and `parallax simulate`: land with the planner issue.
#include <cstdio>

#include "cli/command.h"

namespace parallax::cli {

void RegisterPlanCommands(CLI::App& root, CliState& state) {
  for (const char* name : {"plan", "simulate"}) {
    auto* cmd = root.add_subcommand(name, name[0] == 'p' ? "Search the fastest layout that fits"
                                                          : "Predict one layout's step time, memory and trace");
    cmd->allow_extras();
    cmd->callback([&state, name] {
      std::fprintf(stderr, "parallax %s: not available in this build yet\n", name);
      state.exit_code = 1;
    });
  }
}

}  // namespace parallax::cli
