#include "model/cost_db.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace parallax {
namespace {

constexpr int64_t kCostDbVersion = 1;
constexpr std::array<std::pair<CollectiveKind, const char*>, 6> kCollectiveNames{{
    {CollectiveKind::kAllReduce, "all_reduce"},
    {CollectiveKind::kReduceScatter, "reduce_scatter"},
    {CollectiveKind::kAllGather, "all_gather"},
    {CollectiveKind::kAllToAll, "all_to_all"},
    {CollectiveKind::kBroadcast, "broadcast"},
    {CollectiveKind::kSendRecv, "send_recv"},
}};

const Json& ArrayAt(ObjectReader& r, std::string_view key) {
  const Json& a = r.Raw(key);
  if (!a.is_array()) r.Fail(key, "expected an array");
  return a;
}

//! Reads each element of the array at `key` through `read`, as an object named by its JSON path.
template <class Read>
void ForEachObject(ObjectReader& r, std::string_view key, const std::string& file, Read&& read) {
  const Json& a = ArrayAt(r, key);
  const std::string path = r.PathOf(key);
  for (size_t i = 0; i < a.size(); ++i) {
    ObjectReader o(a[i], file, path + "/" + std::to_string(i));
    read(o);
  }
}

MeasurementStats ReadStats(ObjectReader& r) {
  MeasurementStats s;
  s.repetitions = r.NonNegativeInt("repetitions", 0);
  s.spread_s = r.NonNegativeNumber("spread_s", 0);
  return s;
}

void WriteStats(Json& j, const MeasurementStats& s) {
  if (s.repetitions > 0) j["repetitions"] = s.repetitions;
  if (s.spread_s > 0) j["spread_s"] = s.spread_s;
}

}  // namespace

const char* ToString(CollectiveKind k) {
  for (const auto& [kind, name] : kCollectiveNames) {
    if (kind == k) return name;
  }
  return "?";
}

Result<CollectiveKind> CollectiveFromString(const std::string& s) {
  for (const auto& [kind, name] : kCollectiveNames) {
    if (s == name) return kind;
  }
  return BadInput("unknown collective \"" + s +
                  "\" (expected all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, send_recv)");
}

double CostDb::RunFactorOf(const std::string& family, DType dtype) const {
  for (const auto& f : run_factors) {
    if (f.Matches(family, dtype)) return f.factor;
  }
  if (family == "gemm") return 1.0;
  // A memory-bound family no trace timed: the pooled factor of those one did.
  for (const auto& f : run_factors) {
    if (f.family == kMemoryBoundRunFactor) return f.factor;
  }
  return 1.0;
}

Result<CostDb> CostDbFromJson(const Json& j, const std::string& file) {
  return CatchJsonErrors([&]() -> Result<CostDb> {
    ObjectReader r(j, file, "");
    r.Header("costdb", kCostDbVersion);
    CostDb db;
    db.device = r.String("device");
    db.cluster = r.Has("cluster") ? r.String("cluster") : "";
    db.contention_factor = r.PositiveNumber("contention_factor", 1.0);
    if (db.contention_factor < 1.0) r.Fail("contention_factor", "must be >= 1 (a slowdown factor)");
    db.launch_overhead_us = r.NonNegativeNumber("launch_overhead_us", 0);
    db.op_gap_us = r.NonNegativeNumber("op_gap_us", 0);
    db.catalogue = r.NonNegativeInt("catalogue", 0);
    if (r.Has("gemm")) {
      ForEachObject(r, "gemm", file, [&](ObjectReader& g) {
        GemmSample s;
        s.m = g.PositiveInt("m");
        s.n = g.PositiveInt("n");
        s.k = g.PositiveInt("k");
        s.batch = g.PositiveInt("batch", 1);
        auto dt = DTypeFromString(g.String("dtype", "bf16"));
        if (!dt) g.Fail("dtype", dt.error().message);
        s.dtype = *dt;
        s.time_s = g.PositiveNumber("time_s");
        s.stats = ReadStats(g);
        s.source = g.String("source", "");
        s.accumulate = g.Bool("accumulate", false);
        g.Finish();
        db.gemms.push_back(s);
      });
    }
    if (r.Has("kernels")) {
      ForEachObject(r, "kernels", file, [&](ObjectReader& g) {
        KernelSample s;
        s.op = g.String("op");
        s.bytes = g.PositiveInt("bytes");
        s.time_s = g.PositiveNumber("time_s");
        s.stats = ReadStats(g);
        s.source = g.String("source", "");
        g.Finish();
        db.kernels.push_back(s);
      });
    }
    if (r.Has("collectives")) {
      ForEachObject(r, "collectives", file, [&](ObjectReader& c) {
        CollectiveCurve curve;
        auto op = CollectiveFromString(c.String("op"));
        if (!op) c.Fail("op", op.error().message);
        curve.op = *op;
        curve.group_size = c.PositiveInt("group_size");
        if (curve.group_size < 2) c.Fail("group_size", "must be >= 2");
        curve.spans_nodes = c.Bool("spans_nodes", false);
        curve.source = c.String("source", "calibrate");
        curve.origin = c.String("origin", "");
        curve.placement = c.Choice("placement", {"in-place", "out-of-place", kHostPlacement}, "");
        ForEachObject(c, "points", file, [&](ObjectReader& p) {
          CollectivePoint pt;
          pt.bytes = p.PositiveInt("bytes");
          pt.time_s = p.PositiveNumber("time_s");
          pt.algbw_GBps = p.NonNegativeNumber("algbw_GBps", 0);
          pt.busbw_GBps = p.NonNegativeNumber("busbw_GBps", 0);
          pt.stats = ReadStats(p);
          p.Finish();
          curve.points.push_back(pt);
        });
        if (curve.points.empty()) c.Fail("points", "must hold at least one point");
        std::sort(curve.points.begin(), curve.points.end(),
                  [](const CollectivePoint& x, const CollectivePoint& y) { return x.bytes < y.bytes; });
        c.Finish();
        db.collectives.push_back(std::move(curve));
      });
    }
    if (r.Has("contention")) {
      ObjectReader c = r.Object("contention");
      db.contention.source = c.String("source");
      db.contention.samples = c.NonNegativeInt("samples", 0);
      db.contention.spread = c.NonNegativeNumber("spread", 0);
      c.Finish();
    }
    if (r.Has("run_op_times")) {
      ObjectReader t = r.Object("run_op_times");
      db.run_op_times.mean_over_median = t.PositiveNumber("mean_over_median");
      db.run_op_times.instances = t.NonNegativeInt("instances", 0);
      db.run_op_times.source = t.String("source", "");
      t.Finish();
    }
    if (r.Has("run_factors")) {
      ForEachObject(r, "run_factors", file, [&](ObjectReader& f) {
        RunFactor rf;
        rf.family = f.String("family");
        if (rf.family.empty()) f.Fail("family", "must not be empty");
        if (rf.family == "gemm") {
          auto dt = DTypeFromString(f.String("dtype"));
          if (!dt) f.Fail("dtype", dt.error().message);
          rf.dtype = *dt;
        }
        rf.factor = f.PositiveNumber("factor");
        rf.ops = f.NonNegativeInt("ops", 0);
        rf.source = f.String("source", "");
        f.Finish();
        for (const auto& prev : db.run_factors) {
          if (prev.Matches(rf.family, rf.dtype)) f.Fail("family", "\"" + rf.family + "\" appears twice");
        }
        db.run_factors.push_back(std::move(rf));
      });
    }
    if (r.Has("noise")) {
      ObjectReader n = r.Object("noise");
      db.noise.source = n.String("source");
      db.noise.quantum_s = n.PositiveNumber("quantum_s");
      db.noise.ranks = n.PositiveInt("ranks", 1);
      db.noise.duration_s = n.NonNegativeNumber("duration_s", 0);
      ForEachObject(n, "windows", file, [&](ObjectReader& w) {
        NoiseWindow nw;
        nw.window_s = w.PositiveNumber("window_s");
        if (!db.noise.windows.empty() && nw.window_s <= db.noise.windows.back().window_s) {
          w.Fail("window_s", "windows must be in ascending window_s");
        }
        const Json& q = ArrayAt(w, "detour_s");
        if (q.empty()) w.Fail("detour_s", "must hold at least one quantile");
        for (size_t i = 0; i < q.size(); ++i) {
          auto fail = [&](const char* what) {
            throw JsonInputError{file + ": " + w.PathOf("detour_s") + "/" + std::to_string(i) + ": " + what};
          };
          if (!q[i].is_number()) fail("expected a number");
          const double v = q[i].get<double>();
          if (!std::isfinite(v)) fail("must be a finite number");
          if (!nw.detour_s.empty() && v < nw.detour_s.back()) fail("quantiles must be ascending");
          nw.detour_s.push_back(v);
        }
        w.Finish();
        db.noise.windows.push_back(std::move(nw));
      });
      if (db.noise.windows.empty()) n.Fail("windows", "must hold at least one window");
      n.Finish();
    }
    if (r.Has("skipped")) {
      ForEachObject(r, "skipped", file, [&](ObjectReader& k) {
        SkippedMeasurement s;
        s.what = k.String("what");
        s.reason = k.String("reason");
        k.Finish();
        db.skipped.push_back(std::move(s));
      });
    }
    r.Finish();
    return db;
  });
}

Json CostDbToJson(const CostDb& db) {
  Json gemms = Json::array();
  for (const auto& g : db.gemms) {
    Json s{{"m", g.m}, {"n", g.n}, {"k", g.k}, {"dtype", ToString(g.dtype)}, {"time_s", g.time_s}};
    if (g.batch != 1) s["batch"] = g.batch;
    if (g.accumulate) s["accumulate"] = true;
    WriteStats(s, g.stats);
    if (!g.source.empty()) s["source"] = g.source;
    gemms.push_back(std::move(s));
  }
  Json kernels = Json::array();
  for (const auto& k : db.kernels) {
    Json s{{"op", k.op}, {"bytes", k.bytes}, {"time_s", k.time_s}};
    WriteStats(s, k.stats);
    if (!k.source.empty()) s["source"] = k.source;
    kernels.push_back(std::move(s));
  }
  Json colls = Json::array();
  for (const auto& c : db.collectives) {
    Json pts = Json::array();
    for (const auto& p : c.points) {
      Json pt{{"bytes", p.bytes}, {"time_s", p.time_s}, {"algbw_GBps", p.algbw_GBps}, {"busbw_GBps", p.busbw_GBps}};
      WriteStats(pt, p.stats);
      pts.push_back(std::move(pt));
    }
    Json curve{{"op", ToString(c.op)}, {"group_size", c.group_size}, {"spans_nodes", c.spans_nodes},
               {"source", c.source}, {"points", pts}};
    if (!c.origin.empty()) curve["origin"] = c.origin;
    if (!c.placement.empty()) curve["placement"] = c.placement;
    colls.push_back(std::move(curve));
  }
  Json j{{"kind", "costdb"}, {"version", kCostDbVersion}, {"device", db.device},
         {"contention_factor", db.contention_factor}, {"gemm", gemms}, {"kernels", kernels},
         {"collectives", colls}};
  if (!db.cluster.empty()) j["cluster"] = db.cluster;
  if (db.launch_overhead_us > 0) j["launch_overhead_us"] = db.launch_overhead_us;
  if (db.op_gap_us > 0) j["op_gap_us"] = db.op_gap_us;
  if (db.catalogue > 0) j["catalogue"] = db.catalogue;
  if (!db.contention.source.empty()) {
    j["contention"] = {{"source", db.contention.source}, {"samples", db.contention.samples},
                       {"spread", db.contention.spread}};
  }
  if (!db.run_factors.empty()) {
    Json factors = Json::array();
    for (const auto& f : db.run_factors) {
      Json o{{"family", f.family}, {"factor", f.factor}, {"ops", f.ops}};
      if (f.family == "gemm") o["dtype"] = ToString(f.dtype);
      if (!f.source.empty()) o["source"] = f.source;
      factors.push_back(std::move(o));
    }
    j["run_factors"] = factors;
  }
  if (db.run_op_times.measured()) {
    j["run_op_times"] = {{"mean_over_median", db.run_op_times.mean_over_median},
                         {"instances", db.run_op_times.instances},
                         {"source", db.run_op_times.source}};
  }
  if (db.noise.measured()) {
    Json windows = Json::array();
    for (const auto& w : db.noise.windows) windows.push_back({{"window_s", w.window_s}, {"detour_s", w.detour_s}});
    j["noise"] = {{"source", db.noise.source}, {"quantum_s", db.noise.quantum_s}, {"ranks", db.noise.ranks},
                  {"duration_s", db.noise.duration_s}, {"windows", windows}};
  }
  if (!db.skipped.empty()) {
    Json skipped = Json::array();
    for (const auto& s : db.skipped) skipped.push_back({{"what", s.what}, {"reason", s.reason}});
    j["skipped"] = skipped;
  }
  return j;
}

Result<CostDb> LoadCostDbFile(const std::string& path) {
  PX_ASSIGN(const Json j, LoadJsonFile(path));
  return CostDbFromJson(j, path);
}

Status SaveCostDbFile(const std::string& path, const CostDb& db) { return WriteJsonAtomic(path, CostDbToJson(db)); }

}  // namespace parallax
