// Subcommands whose issues have not landed yet: they are listed (so --help shows the whole
// contract of DESIGN.md) and say plainly that this build cannot do them, exit status 1.
#include <cstdio>

#include "cli/command.h"

namespace parallax::cli {
namespace {

void AddPending(CLI::App& root, CliState& state, const char* name, const char* what) {
  auto* cmd = root.add_subcommand(name, what);
  cmd->allow_extras();
  cmd->callback([&state, name] {
    std::fprintf(stderr, "parallax %s: not available in this build yet\n", name);
    state.exit_code = 1;
  });
}

}  // namespace

void RegisterCalibrateCommand(CLI::App& root, CliState& state) {
  AddPending(root, state, "calibrate", "Measure kernels and collectives into a cost database");
}
void RegisterRefineCommand(CLI::App& root, CliState& state) {
  AddPending(root, state, "refine", "Fit the cost database from a measured trace");
}

}  // namespace parallax::cli
