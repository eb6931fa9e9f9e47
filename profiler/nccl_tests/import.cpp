#include "profiler/nccl_tests/import.h"

#include <algorithm>
#include <iterator>

#include "planner/cost/collective.h"

namespace parallax::profiler {
namespace {

bool Has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

CollectiveCurve CurveOf(const NcclTestsOutput& out, bool in_place) {
  CollectiveCurve c;
  c.op = out.op;
  c.group_size = out.group_size();
  c.spans_nodes = out.spans_nodes();
  c.source = "nccl-tests";
  c.origin = BaseName(out.file);
  c.placement = in_place ? "in-place" : "out-of-place";
  const double factor = planner::CollectiveModel::BusFactor(out.op, c.group_size);
  for (const NcclTestsRow& r : out.rows) {
    const NcclTestsColumn& col = in_place ? r.in_place : r.out_of_place;
    if (r.bytes == 0 || !col.valid || col.time_us <= 0) continue;
    CollectivePoint p;
    p.bytes = r.bytes;
    p.time_s = col.time_us * 1e-6;
    p.algbw_GBps = static_cast<double>(r.bytes) / p.time_s / 1e9;
    p.busbw_GBps = p.algbw_GBps * factor;
    // nccl-tests averages `iters` timed runs into the one figure it prints.
    c.points.push_back(p);
  }
  return c;
}

}  // namespace

std::string DeviceFromNcclTestsName(const std::string& printed) {
  if (Has(printed, "A100") && Has(printed, "40GB")) return "a100-sxm-40g";
  if (Has(printed, "A100") && Has(printed, "80GB") && !Has(printed, "PCIe")) return "a100-sxm-80g";
  // "H100 80GB HBM3" is the SXM5 part (the PCIe card prints "H100 PCIe").
  if (Has(printed, "H100") && Has(printed, "HBM3") && !Has(printed, "PCIe")) return "h100-sxm-80g";
  if (Has(printed, "H200")) return "h200-sxm-141g";
  return printed;
}

Result<NcclTestsImport> ImportNcclTests(const NcclTestsOutput& out) {
  NcclTestsImport imp;
  imp.device = DeviceFromNcclTestsName(out.ranks.front().device_name);
  for (const auto& r : out.ranks) {
    if (DeviceFromNcclTestsName(r.device_name) != imp.device) {
      return BadInput(out.file + ": rank " + std::to_string(r.rank) + " runs on \"" + r.device_name +
                      "\" but rank 0 on \"" + out.ranks.front().device_name +
                      "\": one curve cannot describe a mixed group");
    }
  }
  if (out.group_size() < 2) {
    return BadInput(out.file + ": one rank: a collective curve needs a group of at least 2 ranks");
  }
  const bool in_place_first = out.op == CollectiveKind::kAllReduce;
  for (bool in_place : {in_place_first, !in_place_first}) {
    CollectiveCurve c = CurveOf(out, in_place);
    if (!c.points.empty()) imp.curves.push_back(std::move(c));
  }
  for (const NcclTestsRow& r : out.rows) {
    for (bool in_place : {false, true}) {
      const NcclTestsColumn& col = in_place ? r.in_place : r.out_of_place;
      if (r.bytes == 0 || col.valid) continue;
      imp.skipped.push_back({std::string(ToString(out.op)) + " " + std::to_string(out.group_size()) + " ranks " +
                                 std::to_string(r.bytes) + " B " + (in_place ? "in-place" : "out-of-place") + " (" +
                                 BaseName(out.file) + ":" + std::to_string(r.line) + ")",
                             "nccl-tests counted " + col.check + " wrong results"});
    }
  }
  if (imp.curves.empty()) return BadInput(out.file + ": no row with a positive size and a valid result");
  return imp;
}

Status ImportNcclTestsFiles(const std::vector<std::string>& files, CostDb& db, const std::string& device_override,
                            std::vector<CollectiveCurve>* replaced) {
  std::string device = db.device;
  std::vector<CollectiveCurve> curves;
  std::vector<SkippedMeasurement> skipped;
  for (const std::string& f : files) {
    PX_ASSIGN(auto out, ReadNcclTestsFile(f));
    PX_ASSIGN(auto imp, ImportNcclTests(out));
    if (!device_override.empty()) imp.device = device_override;
    if (device.empty()) device = imp.device;
    if (imp.device != device) {
      std::string msg = f;
      msg += ": measured on \"" + imp.device + "\" but the cost database is for \"";
      msg += device;
      msg += "\" (import each device's outputs into its own database)";
      return BadInput(msg);
    }
    std::move(imp.curves.begin(), imp.curves.end(), std::back_inserter(curves));
    std::move(imp.skipped.begin(), imp.skipped.end(), std::back_inserter(skipped));
  }
  // The imported curves price their collective from now on: a curve of the same collective, group
  // size and node span that the database held before (calibrate's own, over our communicator, or
  // an earlier import's) goes. Both placements of these files stay, in-place all-reduce first.
  const auto superseded = [&curves](const CollectiveCurve& old) {
    return std::any_of(curves.begin(), curves.end(), [&old](const CollectiveCurve& c) {
      return c.op == old.op && c.group_size == old.group_size && c.spans_nodes == old.spans_nodes;
    });
  };
  if (replaced != nullptr) {
    std::copy_if(db.collectives.begin(), db.collectives.end(), std::back_inserter(*replaced), superseded);
  }
  std::erase_if(db.collectives, superseded);
  db.device = device;
  std::move(curves.begin(), curves.end(), std::back_inserter(db.collectives));
  std::move(skipped.begin(), skipped.end(), std::back_inserter(db.skipped));
  return Status::Ok();
}

}  // namespace parallax::profiler
