#pragma once
// Each subcommand lives in its own cmd_*.cpp and registers itself on the root CLI11 app.
// Callbacks store their exit status in CliState; main() returns it.

#include <CLI/CLI.hpp>
#include <string>

#include "model/cluster_spec.h"
#include "model/cost_db.h"
#include "model/json_io.h"
#include "model/result.h"

namespace parallax::cli {

struct CliState {
  int exit_code = 0;
};

void RegisterModelCommand(CLI::App& root, CliState& state);
void RegisterClusterCommand(CLI::App& root, CliState& state);
void RegisterPlanCommands(CLI::App& root, CliState& state);  // plan, simulate
void RegisterRunCommand(CLI::App& root, CliState& state);
void RegisterCalibrateCommand(CLI::App& root, CliState& state);
void RegisterRefineCommand(CLI::App& root, CliState& state);
void RegisterTuneCommand(CLI::App& root, CliState& state);
void RegisterTraceCommand(CLI::App& root, CliState& state);
void RegisterReportCommand(CLI::App& root, CliState& state);
void RegisterCompareModesCommand(CLI::App& root, CliState& state);

//! `parallax --version`: version, git commit and the optional backends built (CUDA/MPI/GUI).
std::string VersionText();
//! Sets the one example line a command's --help ends with.
void SetExample(CLI::App* cmd, const std::string& command_line);

//! Prints `e` to stderr ("parallax: <message>"), and with --json also {"error": ..., "exit_status":
//! ...} and the fields of `details` on stdout; returns the exit status for it (2 bad input, 1 otherwise).
int ReportError(const Error& e, bool json, const Json& details = Json::object());
//! A GPU backend with a cluster whose device is not a GPU (no SMs: the default local-cpu, say)
//! would calibrate or run under the wrong device's name and memory: bad input naming the option.
Status CheckBackendDevice(const std::string& backend, const ClusterSpec& cluster);
//! Prints one JSON object on stdout (the --json contract).
void PrintJson(const Json& j);
//! Warns on stderr when the CostDb at `path` was keyed by another op catalogue version than this
//! build's (model/op_catalogue.h CatalogueMismatch): its samples may be read at other sizes.
void WarnIfOtherCatalogue(const CostDb& db, const std::string& path);

}  // namespace parallax::cli
