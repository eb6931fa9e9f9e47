// parallax: one command-line program, a subcommand per DESIGN.md. Thin: parse, call, print.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/command.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"parallax: plan, run and inspect hybrid-parallel training of large transformers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", parallax::cli::VersionText(), "Print the version, commit and backends built");
  parallax::cli::SetExample(&app, "parallax plan --model llama3-8b --cluster dgx-h100 --nodes 2 --global-batch 256");
  parallax::cli::CliState state;
  parallax::cli::RegisterPlanCommands(app, state);
  parallax::cli::RegisterRunCommand(app, state);
  parallax::cli::RegisterCalibrateCommand(app, state);
  parallax::cli::RegisterRefineCommand(app, state);
  parallax::cli::RegisterTuneCommand(app, state);
  parallax::cli::RegisterTraceCommand(app, state);
  parallax::cli::RegisterModelCommand(app, state);
  parallax::cli::RegisterClusterCommand(app, state);
  parallax::cli::RegisterReportCommand(app, state);
  parallax::cli::RegisterCompareModesCommand(app, state);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    // CLI11 returns 0 for --help/--version; every real parse error is bad input.
    return rc == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parallax: internal error: %s\n", e.what());
    return 1;
  }
  return state.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {  // building the command line itself failed (out of memory)
    std::fprintf(stderr, "parallax: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "parallax: internal error: unknown exception\n");
  }
  return 1;
}
