// `parallax calibrate`: fills a cost database.
//   mpirun -np N parallax calibrate [--backend cpu|cuda] -o costdb.json [--cluster-out cluster.json]
//                                   [--model M] [--quick] [--rounds R] [--json]
// measures GEMMs, kernel families, collectives and contention through the backend seam
// (profiler/calibrate/calibrate.h); `--import-nccl-tests FILE... -o costdb.json` imports measured
// collectives instead. Thin: parse, call, print.
#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/inputs.h"
#include "executor/backend_registry.h"
#include "executor/launch.h"
#include "model/load.h"
#include "profiler/calibrate/calibrate.h"
#include "profiler/nccl_tests/import.h"

namespace parallax::cli {
namespace {

struct CalibrateOptions {
  std::string backend = "cpu";
  std::string output, cluster_out, model, device, costdb;
  std::vector<std::string> nccl_tests;
  std::string cluster = "local-cpu";
  bool quick = false;
  bool json = false;
  bool no_progress = false;
  double timeout_s = 120;
  int64_t max_collective_bytes = 0;
  int64_t rounds = 0;
};

std::atomic<bool> g_interrupted{false};  // set by SIGINT; read by the measurement loop

extern "C" void OnInterrupt(int) { g_interrupted.store(true); }

//! Measures through the backend under mpirun (every rank runs this; rank 0 prints and writes).
int RunMeasure(const CalibrateOptions& o) {
  auto launch = executor::InitLaunch(nullptr, nullptr);
  const bool root = launch->world_rank() == 0;
  auto fail = [&](const Error& e) { return root ? ReportError(e, o.json) : ExitCodeFor(e); };
  if (o.output.empty()) return fail(BadInput("calibrate: -o costdb.json is required"));
  auto model = OptionalModel(o.model);
  if (!model) return fail(model.error());
  auto base = ResolveCluster(o.cluster);
  if (!base) return fail(base.error());
  auto backend = executor::CreateBackend(o.backend);
  if (!backend) return fail(backend.error());
  if (Status st = CheckBackendDevice(o.backend, *base); !st) return fail(st.error());
  auto world = (*backend)->ConnectWorld(*launch, o.timeout_s);
  if (!world) return fail(world.error());
  executor::Communicator& comm = **world;

  // Every rank's host, for node spans and ranks per node.
  constexpr size_t kHostLen = 128;
  std::array<char, kHostLen> mine{};
  std::strncpy(mine.data(), launch->host().c_str(), kHostLen - 1);
  std::vector<char> all(kHostLen * static_cast<size_t>(comm.size()));
  if (Status st = comm.HostAllGather(mine.data(), all.data(), kHostLen); !st) return fail(st.error());
  profiler::CalibrateOptions co;
  for (int r = 0; r < comm.size(); ++r) co.hosts.emplace_back(all.data() + kHostLen * static_cast<size_t>(r));
  co.model = *model ? &**model : nullptr;
  co.quick = o.quick;
  co.base = *base;
  co.progress = root && !o.no_progress ? stderr : nullptr;
  co.interrupt = &g_interrupted;
  co.max_collective_bytes = o.max_collective_bytes;
  co.rounds = o.rounds;
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  auto r = profiler::RunCalibration(**backend, comm, co);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!r) return fail(r.error());
  // Only rank 0 writes, atomically, once everything is measured.
  Status written;
  if (root) {
    written = SaveCostDbFile(o.output, r->db);
    if (written && !o.cluster_out.empty()) {
      written = WriteJsonAtomic(o.cluster_out, ClusterToJson(r->cluster));
    }
  }
  double ok = written ? 0.0 : 1.0;
  (void)comm.HostAllReduce(&ok, 1, executor::ReduceOp::kMax);
  if (!written) return fail(written.error());
  if (ok > 0) return 1;
  if (!root) return 0;
  Json j = r->summary;
  j["costdb"] = o.output;
  if (!o.cluster_out.empty()) j["cluster"] = o.cluster_out;
  j["device"] = r->db.device;
  Json skipped = Json::array();
  for (const auto& s : r->db.skipped) skipped.push_back({{"what", s.what}, {"reason", s.reason}});
  j["skipped_points"] = skipped;
  if (o.json) {
    PrintJson(j);
    return 0;
  }
  std::printf("calibrated %s backend on %lld rank(s) in %.1f s: %zu GEMM samples, %zu kernel samples, %zu collective "
              "curves (%lld re-measured, %lld still noisy, %zu skipped)\n",
              o.backend.c_str(), static_cast<long long>(comm.size()), r->seconds, r->db.gemms.size(),
              r->db.kernels.size(), r->db.collectives.size(), static_cast<long long>(r->report.remeasured),
              static_cast<long long>(r->report.still_noisy), r->db.skipped.size());
  for (const auto& [dt, tf] : r->summary["peak_tflops"].items()) {
    std::printf("  peak %-5s %8.3f TFLOP/s (best measured GEMM)\n", dt.c_str(), tf.get<double>());
  }
  std::printf("  memory bandwidth %.2f GB/s (streaming copy)\n", r->summary["memory_bandwidth_GBps"].get<double>());
  for (const auto& [name, l] : r->summary["links"].items()) {
    std::printf("  %s link %.2f GB/s, %.1f us (send/recv)\n", name.c_str(), l["bandwidth_GBps"].get<double>(),
                l["latency_us"].get<double>());
  }
  std::printf("  launch overhead %.2f us per kernel call\n", r->db.launch_overhead_us);
  std::printf("  contention factor %.3f (1 = compute hides a gradient all-reduce entirely, %.0f = not at all)\n",
              r->db.contention_factor, profiler::kMaxContention);
  if (r->summary.contains("noise")) {
    const Json& n = r->summary["noise"];
    std::printf("  system noise: 1 ms of work takes %.2f%% more than its median on average; 2 ranks wait %.1f us "
                "for the later one after 1 ms, %.1f us after 100 ms\n",
                100 * n["mean_excess_1ms"].get<double>(), n["sync_excess_us_1ms_2ranks"].get<double>(),
                n["sync_excess_us_100ms_2ranks"].get<double>());
  }
  for (const auto& s : r->db.skipped) std::printf("  skipped: %s: %s\n", s.what.c_str(), s.reason.c_str());
  std::printf("wrote %s%s%s\n", o.output.c_str(), o.cluster_out.empty() ? "" : " and ", o.cluster_out.c_str());
  return 0;
}

int RunCalibrate(const CalibrateOptions& o) {
  if (o.nccl_tests.empty()) return RunMeasure(o);
  if (!o.cluster_out.empty() || !o.model.empty() || o.quick || o.rounds > 0) {
    return ReportError(BadInput("--cluster-out, --model, --quick and --rounds belong to a measuring run; an import "
                                "only takes "
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
  std::vector<CollectiveCurve> replaced;
  if (Status s = profiler::ImportNcclTestsFiles(o.nccl_tests, db, o.device, &replaced); !s) {
    return ReportError(s.error(), o.json);
  }
  if (Status s = SaveCostDbFile(o.output, db); !s) return ReportError(s.error(), o.json);
  Json curves = Json::array();
  Json gone = Json::array();
  for (const auto& c : replaced) {
    gone.push_back({{"op", ToString(c.op)}, {"group_size", c.group_size}, {"spans_nodes", c.spans_nodes}, {"source", c.source}});
  }
  for (size_t i = before - replaced.size(); i < db.collectives.size(); ++i) {
    const auto& c = db.collectives[i];
    curves.push_back({{"op", ToString(c.op)}, {"group_size", c.group_size}, {"spans_nodes", c.spans_nodes},
                      {"placement", c.placement}, {"origin", c.origin}, {"points", c.points.size()},
                      {"peak_busbw_GBps", c.points.empty() ? 0.0 : c.points.back().busbw_GBps}});
  }
  if (o.json) {
    PrintJson(Json{{"costdb", o.output},
                   {"device", db.device},
                   {"imported", curves},
                   {"replaced", gone},
                   {"skipped", db.skipped.size()}});
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
  for (const auto& c : gone) {
    std::printf("replaced: %s over %lld ranks (%s nodes) from %s\n", c["op"].get<std::string>().c_str(),
                static_cast<long long>(c["group_size"].get<int64_t>()), c["spans_nodes"].get<bool>() ? "multi" : "one",
                c["source"].get<std::string>().c_str());
  }
  if (!db.skipped.empty()) std::printf("%zu measurement(s) skipped (listed in the database)\n", db.skipped.size());
  std::printf("wrote %s (device %s)\n", o.output.c_str(), db.device.c_str());
  return 0;
}

}  // namespace

void RegisterCalibrateCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = root.add_subcommand("calibrate", "Measure kernels and collectives into a cost database");
  SetExample(cmd, "mpirun -np 2 parallax calibrate --quick -o costdb.json --cluster-out cluster.json");
  cmd->add_option("--backend", o->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "Cost database to write (atomically)")->required();
  cmd->add_option("--cluster-out", o->cluster_out, "Also write a measured cluster file");
  cmd->add_option("--model", o->model, "Focus the GEMM grid on this model's shapes");
  cmd->add_flag("--quick", o->quick, "A coarse grid (under 2 minutes on 2 CPU ranks)");
  cmd->add_option("--import-nccl-tests", o->nccl_tests,
                  "nccl-tests outputs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, "
                  "broadcast_perf, sendrecv_perf) to import as collective curves")
      ->expected(1, -1);
  cmd->add_option("--cluster", o->cluster, "Cluster the measured one starts from (names, unmeasured figures)")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Seconds a rank waits for a peer before naming it lost")
      ->capture_default_str();
  cmd->add_option("--max-collective-bytes", o->max_collective_bytes,
                  "Largest collective message (default 4 MiB with --quick, else 64 MiB)");
  cmd->add_option("--rounds", o->rounds,
                  "Rounds each point's repetitions are spread over, across all points (default 3; 1: each "
                  "point's runs back to back)")
      ->check(Within(1, 1000));
  cmd->add_flag("--no-progress", o->no_progress, "No progress bar on stderr");
  cmd->add_option("--costdb", o->costdb, "Start from this cost database (imports add to it)");
  cmd->add_option("--device", o->device, "Device the imported outputs ran on (default: from their rank lines)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &state] { state.exit_code = RunCalibrate(*o); });
}

}  // namespace parallax::cli
