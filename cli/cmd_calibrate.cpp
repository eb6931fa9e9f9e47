// `parallax calibrate`: fills a cost database. This build imports nccl-tests outputs
// (`--import-nccl-tests FILE... -o costdb.json`); measuring kernels and collectives through the
// backend (profiler/calibrate/calibrator.h drives it) needs the typed backend seam of issue 9
// and says so. Thin: parse, call, print.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "profiler/nccl_tests/import.h"

namespace parallax::cli {
namespace {

struct CalibrateOptions {
  std::string backend = "cpu";
  std::string output, cluster_out, model, device, costdb;
  std::vector<std::string> nccl_tests;
  bool quick = false;
  bool json = false;
};

int RunCalibrate(const CalibrateOptions& o) {
  if (o.nccl_tests.empty()) {
    return ReportError(Error{"measuring through the " + o.backend +
                                 " backend needs the typed backend seam (streams, events, timed kernels) that this "
                                 "build does not have yet; import measured collectives with "
                                 "--import-nccl-tests FILE... -o costdb.json",
                             ErrorKind::kInternal},
                       o.json);
  }
  if (!o.cluster_out.empty() || !o.model.empty() || o.quick) {
    return ReportError(BadInput("--cluster-out, --model and --quick belong to a measuring run; an import only takes "
                                "--import-nccl-tests, -o, --costdb and --device"),
                       o.json);
  }
  CostDb db;
  if (!o.costdb.empty()) {
    auto in = LoadCostDbFile(o.costdb);
    if (!in) return ReportError(in.error(), o.json);
    db = *in;
  }
  if (!o.device.empty()) {
    if (!db.device.empty() && db.device != o.device) {
      return ReportError(BadInput(o.costdb + ": /device: the database is for \"" + db.device + "\", not \"" +
                                  o.device + "\""),
                         o.json);
    }
  }
  const size_t before = db.collectives.size();
  if (Status s = profiler::ImportNcclTestsFiles(o.nccl_tests, db, o.device); !s) return ReportError(s.error(), o.json);
  if (Status s = SaveCostDbFile(o.output, db); !s) return ReportError(s.error(), o.json);
  Json curves = Json::array();
  for (size_t i = before; i < db.collectives.size(); ++i) {
    const auto& c = db.collectives[i];
    curves.push_back({{"op", ToString(c.op)}, {"group_size", c.group_size}, {"spans_nodes", c.spans_nodes},
                      {"placement", c.placement}, {"origin", c.origin}, {"points", c.points.size()},
                      {"peak_busbw_GBps", c.points.empty() ? 0.0 : c.points.back().busbw_GBps}});
  }
  if (o.json) {
    PrintJson(Json{{"costdb", o.output}, {"device", db.device}, {"imported", curves}, {"skipped", db.skipped.size()}});
    return 0;
  }
  std::printf("%-14s %5s %-6s %-12s %6s %14s  %s\n", "collective", "ranks", "nodes", "placement", "points",
              "busbw @ max", "from");
  for (const auto& c : curves) {
    std::printf("%-14s %5lld %-6s %-12s %6lld %9.1f GB/s  %s\n", c["op"].get<std::string>().c_str(),
                static_cast<long long>(c["group_size"].get<int64_t>()), c["spans_nodes"].get<bool>() ? "multi" : "one",
                c["placement"].get<std::string>().c_str(), static_cast<long long>(c["points"].get<int64_t>()),
                c["peak_busbw_GBps"].get<double>(), c["origin"].get<std::string>().c_str());
  }
  if (!db.skipped.empty()) std::printf("%zu measurement(s) skipped (listed in the database)\n", db.skipped.size());
  std::printf("wrote %s (device %s)\n", o.output.c_str(), db.device.c_str());
  return 0;
}

}  // namespace

void RegisterCalibrateCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = root.add_subcommand("calibrate", "Measure kernels and collectives into a cost database");
  cmd->add_option("--backend", o->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "Cost database to write (atomically)")->required();
  cmd->add_option("--cluster-out", o->cluster_out, "Also write a measured cluster file");
  cmd->add_option("--model", o->model, "Focus the GEMM grid on this model's shapes");
  cmd->add_flag("--quick", o->quick, "A coarse grid (under 2 minutes on 2 CPU ranks)");
  cmd->add_option("--import-nccl-tests", o->nccl_tests,
                  "nccl-tests outputs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, "
                  "broadcast_perf, sendrecv_perf) to import as collective curves")
      ->expected(1, -1);
  cmd->add_option("--costdb", o->costdb, "Start from this cost database (imports add to it)");
  cmd->add_option("--device", o->device, "Device the imported outputs ran on (default: from their rank lines)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &state] { state.exit_code = RunCalibrate(*o); });
}

}  // namespace parallax::cli
