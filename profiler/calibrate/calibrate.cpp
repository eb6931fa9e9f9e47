#include "profiler/calibrate/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "model/op_catalogue.h"
#include "planner/cost/collective.h"
#include "planner/cost/noise.h"
#include "planner/memory/memory_model.h"
#include "executor/host_threads.h"
#include "profiler/calibrate/backend_timer.h"
#include "profiler/calibrate/calibration_set.h"
#include "profiler/calibrate/collective_probe.h"
#include "profiler/calibrate/compression_probe.h"
#include "profiler/calibrate/host_plane_probe.h"
#include "profiler/calibrate/kernel_probe.h"
#include "profiler/calibrate/noise_probe.h"

namespace parallax::profiler {
namespace {

using executor::Backend;
using executor::Communicator;
using executor::StreamKind;

constexpr double kGuessFlops = 20e9;  // ETA weights only
constexpr double kGuessBps = 5e9;

MeasureFn ComputeMeasure(Backend& backend, std::shared_ptr<KernelProbe> probe) {
  return [&backend, probe](int64_t n) -> Result<std::vector<double>> {
    PX_TRY(probe->Prepare(backend));
    return TimeRuns(backend, StreamKind::kCompute, n, [&] { return probe->Run(backend); });
  };
}

struct CurveKey {
  CollectiveKind kind;
  int64_t group;
  bool operator<(const CurveKey& o) const { return std::tie(kind, group) < std::tie(o.kind, o.group); }
};

std::vector<int64_t> CollectiveSizes(int64_t max_bytes, bool quick) {
  std::vector<int64_t> out;
  for (int64_t b = 1024; b <= max_bytes; b *= quick ? 4 : 2) out.push_back(b);
  return out;
}

//! The fastest measured GEMM of each dtype, TFLOP/s.
std::map<DType, double> BestGemmTflops(const CostDb& db) {
  std::map<DType, double> peak;
  for (const auto& g : db.gemms) peak[g.dtype] = std::max(peak[g.dtype], g.tflops());
  return peak;
}

}  // namespace

double ContentionFromOverlap(double compute_s, double comm_s, double both_s) {
  const double hidden = compute_s + comm_s - both_s;
  if (comm_s <= 0 || hidden >= comm_s) return 1.0;
  if (hidden <= comm_s / kMaxContention) return kMaxContention;
  return std::max(1.0, comm_s / hidden);
}

double StreamingBandwidthGBps(const CostDb& db) {
  // The largest copy: the small ones run from cache.
  double bw = 0;
  int64_t bw_bytes = 0;
  for (const auto& k : db.kernels) {
    if (k.op == "elementwise" && k.bytes > bw_bytes && k.time_s > 0) {
      bw_bytes = k.bytes;
      bw = static_cast<double>(k.bytes) / k.time_s / 1e9;
    }
  }
  return bw;
}

DeviceSpec MeasuredDevice(DeviceSpec d, const CostDb& db) {
  const std::map<DType, double> peak = BestGemmTflops(db);
  const bool bf16 = peak.count(DType::kBf16) != 0, fp16 = peak.count(DType::kFp16) != 0;
  if (peak.count(DType::kFp32) != 0) d.peak_tflops.fp32 = peak.at(DType::kFp32);
  if (bf16) d.peak_tflops.bf16 = peak.at(DType::kBf16);
  if (fp16) d.peak_tflops.fp16 = peak.at(DType::kFp16);
  // The measured best 16-bit GEMM is a sustained rate: on a device with a tile model it becomes
  // the sustained matmul rate, so that model is not scaled a second time (by the datasheet clock
  // ratio or a published MSMF) below what this machine measured. Tensor cores run bf16 and fp16 at
  // one rate (A100 and H100 datasheets), so the one measured stands for both.
  const double p16 = std::max(bf16 ? peak.at(DType::kBf16) : 0.0, fp16 ? peak.at(DType::kFp16) : 0.0);
  if (d.is_gpu() && p16 > 0) {
    if (!bf16) d.peak_tflops.bf16 = p16;
    if (!fp16) d.peak_tflops.fp16 = p16;
    d.arch.sustained_matmul_tflops = p16;
  }
  // The measured copy rate is what a streaming kernel reaches: it becomes the bandwidth with a
  // streaming fraction of 1, and the fractions stated against the pin bandwidth (unfused
  // attention) keep their ratio to the streaming one.
  if (const double bw = StreamingBandwidthGBps(db); bw > 0) {
    Microarch& a = d.arch;
    const double stream = a.dram_fraction > 0 ? a.dram_fraction : 1.0;
    auto rescale = [&](double& f) {
      if (f > 0) f = std::min(1.0, f / stream);
    };
    rescale(a.unfused_attention_fraction);
    rescale(a.unfused_attention_bwd_fraction);
    a.dram_fraction = 1.0;
    d.hbm_GBps = bw;
  }
  return d;
}

namespace {

//! Where the job's ranks run: ranks per node are the ranks on rank 0's host (launchers fill nodes
//! evenly); without hosts, one node of every rank.
struct JobShape {
  int64_t ranks = 1, nodes = 1, per_node = 1;
};

JobShape ShapeOf(const Communicator& world, const std::vector<std::string>& hosts) {
  JobShape j;
  j.ranks = world.size();
  std::set<std::string> distinct(hosts.begin(), hosts.end());
  j.nodes = std::max<int64_t>(1, static_cast<int64_t>(distinct.size()));
  j.per_node = hosts.empty() ? j.ranks : std::count(hosts.begin(), hosts.end(), hosts.front());
  return j;
}

//! A rank per CPU at a time where some node's ranks outnumber its CPUs: rank i of a node takes turn
//! i / cpus; the turns are as many as the most crowded node needs (agreed over the world).
Result<Turns> TurnsOf(Communicator& world, const executor::HostThreads& t) {
  double count = t.oversubscribed ? std::ceil(static_cast<double>(t.ranks_on_node) / static_cast<double>(t.node_cpus)) : 1;
  PX_TRY(world.HostAllReduce(&count, 1, executor::ReduceOp::kMax));
  if (count <= 1) return Turns{};
  return Turns{.mine = t.node_index / t.node_cpus, .count = static_cast<int64_t>(count)};
}

//! What this backend is calibrated on: GEMMs in fp32 and each 16-bit type it supports (fp16 not
//! quick), memory-bound families in the dtype it trains in by default.
CalibrationSetOptions SetOptionsFor(const Backend& backend, const CalibrateOptions& o, int64_t per_node) {
  CalibrationSetOptions so;
  so.model = o.model;
  so.ranks_per_node = per_node;
  so.quick = o.quick;
  so.gemm_dtypes = {executor::DType::kF32};
  if (backend.SupportsPrecision(Precision::kBf16)) so.gemm_dtypes.push_back(executor::DType::kBf16);
  if (!o.quick && backend.SupportsPrecision(Precision::kFp16)) so.gemm_dtypes.push_back(executor::DType::kF16);
  // Memory-bound families in the dtype this backend trains in by default: fp32 on the CPU (its
  // 16-bit kernels convert to fp32), bf16 on an accelerator.
  so.kernel_dtype = backend.name() == "cpu" || !backend.SupportsPrecision(Precision::kBf16) ? executor::DType::kF32
                                                                                             : executor::DType::kBf16;
  return so;
}

CalibratorOptions CalibratorOptionsFor(const CalibrateOptions& o, const std::atomic<bool>* stop) {
  CalibratorOptions co;
  co.warmup = 3;
  co.repetitions = o.quick ? 9 : 15;
  co.max_remeasures = 2;
  // Three rounds over every point (calibrator.h): each median pools runs from the beginning,
  // middle and end of the calibration, so a machine that changes speed meanwhile (this project's
  // 2-core VMs switch between two speeds within seconds) shifts all points alike.
  co.rounds = o.rounds > 0 ? o.rounds : kDefaultRounds;
  co.stop = stop;
  return co;
}

//! What the items of one calibration share: where they run, the calibrator they are added to, the
//! stop flag their agreed measurements set, and the database their records fill. Every reference
//! outlives the calibrator's run.
struct ItemContext {
  Backend& backend;
  Communicator& world;
  const CalibrateOptions& o;
  Calibrator& cal;
  std::atomic<bool>& stop;
  CostDb& db;
  Turns turns;  //!< compute is timed in turns where the ranks outnumber their CPUs
};

//! A compute item's measurement: `probe` agreed over the world (the mean of the ranks).
MeasureFn AgreedCompute(ItemContext& x, const std::shared_ptr<KernelProbe>& probe) {
  return Agreed(x.world, InTurns(x.world, ComputeMeasure(x.backend, probe), x.turns), RankReduce::kMean, x.o.interrupt,
                &x.stop);
}

//! The launch overhead, every GEMM point and every kernel-family point of `set`.
void AddKernelItems(ItemContext& x, const CalibrationSet& set) {
  CostDb& db = x.db;
  {
    // Host cost of one kernel call doing (almost) nothing: a one-element copy.
    ProbeShape p;
    p.kind = ProbeKind::kCopy;
    p.n = 1;
    auto probe = std::make_shared<KernelProbe>(p);
    CalibrationItem item;
    item.what = "launch overhead (" + p.Describe() + ")";
    item.measure = AgreedCompute(x, probe);
    item.record = [&db](const Measurement& m) { db.launch_overhead_us = m.median_s * 1e6; };
    item.release = [probe] { probe->Release(); };
    x.cal.Add(std::move(item));
  }
  for (const GemmPoint& g : set.gemms) {
    auto probe = std::make_shared<KernelProbe>(g.probe);
    const ProbeShape& p = g.probe;
    CalibrationItem item;
    item.what = p.Describe();
    item.expected_s = 2.0 * static_cast<double>(p.m) * p.n * p.k * p.batch / kGuessFlops + 5e-6;
    item.measure = AgreedCompute(x, probe);
    item.record = [&db, probe](const Measurement& m) {
      const ProbeShape& s = probe->shape();
      db.gemms.push_back(
          {s.m, s.n, s.k, s.batch, ModelDType(s.dtype), m.median_s, m.stats(), "calibrate", s.beta != 0});
    };
    item.release = [probe] { probe->Release(); };
    x.cal.Add(std::move(item));
  }
  for (const KernelPoint& k : set.kernels) {
    auto probe = std::make_shared<KernelProbe>(k.probe);
    CalibrationItem item;
    item.what = k.family + " " + std::to_string(k.bytes) + " B (" + k.probe.Describe() + ")";
    item.expected_s = static_cast<double>(k.probe.FootprintBytes()) / kGuessBps + 5e-6;
    item.measure = AgreedCompute(x, probe);
    item.record = [&db, probe, family = k.family, bytes = k.bytes](const Measurement& m) {
      db.kernels.push_back({family, bytes, m.median_s, m.stats(), "calibrate"});
    };
    item.release = [probe] { probe->Release(); };
    x.cal.Add(std::move(item));
  }
}

//! The split groups and the curves their items fill (both must outlive the calibrator's run);
//! the host plane's mailbox and curves (placement "host", HostPlaneProbe).
struct CollectiveItems {
  std::vector<std::unique_ptr<Communicator>> groups;
  std::map<CurveKey, CollectiveCurve> curves;
  std::unique_ptr<executor::Mailbox> mailbox;
  std::map<CurveKey, CollectiveCurve> host_curves;
};

//! One point of a curve from a measured median.
CollectivePoint PointOf(CollectiveKind kind, int64_t group, int64_t bytes, const Measurement& m) {
  CollectivePoint pt;
  pt.bytes = bytes;
  pt.time_s = m.median_s;
  pt.algbw_GBps = static_cast<double>(bytes) / m.median_s / 1e9;
  pt.busbw_GBps = pt.algbw_GBps * planner::CollectiveModel::BusFactor(kind, group);
  pt.stats = m.stats();
  return pt;
}

//! An item measuring one point of `curve`, `bytes` (nccl-tests' size), with `measure` agreed over
//! the world as a collective is (it ends with its slowest member); `latency_s` sizes its expected
//! time (progress weights only).
CalibrationItem CurvePointItem(ItemContext& x, CollectiveCurve& curve, int64_t bytes, std::string what,
                               MeasureFn measure, double latency_s) {
  CalibrationItem item;
  item.what = std::move(what);
  item.expected_s = static_cast<double>(bytes) / 1e9 + latency_s;
  item.measure = Agreed(x.world, std::move(measure), RankReduce::kMax, x.o.interrupt, &x.stop);
  item.record = [&curve, bytes](const Measurement& m) {
    curve.points.push_back(PointOf(curve.op, curve.group_size, bytes, m));
  };
  return item;
}

//! The host plane the classic modes exchange over (host_plane_probe.h): a mailbox message between
//! ranks 0 and 1 and the world's host all-gather and all-reduce, by size. Only where the communicator has a
//! mailbox (the CPU backend under MPI); the sizes stop at 4 MiB (the classic modes' messages are a
//! model's gradient or a shard of it).
void AddHostPlaneItems(ItemContext& x, const JobShape& job, CollectiveItems& c) {
  if (x.world.size() < 2) return;
  auto mailbox = x.world.OpenMailbox();
  if (!mailbox) return;
  c.mailbox = std::move(*mailbox);
  const int64_t ranks = x.world.size();
  const bool spans = job.nodes > 1;
  for (CollectiveKind kind : {CollectiveKind::kSendRecv, CollectiveKind::kAllGather, CollectiveKind::kAllReduce}) {
    const int64_t g = kind == CollectiveKind::kSendRecv ? 2 : ranks;
    CollectiveCurve& curve = c.host_curves[{kind, g}];
    curve.op = kind;
    curve.group_size = g;
    curve.spans_nodes = spans && kind != CollectiveKind::kSendRecv;
    curve.source = "calibrate";
    curve.placement = kHostPlacement;
    curve.origin = "host plane (mailbox, host all-gather and all-reduce), " + std::to_string(ranks) + " ranks";
    for (int64_t bytes : CollectiveSizes(int64_t{4} << 20, true)) {
      if (bytes < ranks) continue;
      const int64_t size = bytes / g * g;
      auto probe = std::make_shared<HostPlaneProbe>(kind, size, x.world, c.mailbox.get());
      x.cal.Add(CurvePointItem(x, curve, size,
                               std::string("host ") + ToString(kind) + " " + std::to_string(g) + " ranks " +
                                   std::to_string(bytes) + " B",
                               [probe](int64_t n) { return probe->Measure(n); }, 50e-6));
    }
  }
}

//! The host kernels of gradient compression (compression_probe.h): every kernel of
//! model/compression_kernels.h at 4Ki, 32Ki and 256Ki units quick (gpt-tiny's gradient is 218K
//! values; a 1Mi top-k selection alone takes 17 ms a run on the 2-core VM), 4Ki to 4Mi x4 apart in
//! full, timed on every rank at once and agreed as compute is (the ranks' mean), into the CostDb
//! kernel family of the kernel's name (bytes: units x BytesPerUnit).
void AddCompressionItems(ItemContext& x) {
  const int64_t largest = x.o.quick ? int64_t{1} << 18 : int64_t{1} << 22;
  for (int k = 0; k < kCompressionKernels; ++k) {
    const auto kernel = static_cast<CompressionKernel>(k);
    for (int64_t units = 4096; units <= largest; units *= x.o.quick ? 8 : 4) {
      auto probe = std::make_shared<CompressionProbe>(kernel, units, x.world, x.turns);
      const auto bytes = static_cast<int64_t>(static_cast<double>(probe->units()) * BytesPerUnit(kernel));
      CalibrationItem item;
      item.what = std::string(KernelFamily(kernel)) + " " + std::to_string(probe->units()) + " units";
      item.expected_s = static_cast<double>(bytes) / kGuessBps + 5e-6;
      item.measure = Agreed(x.world, [probe](int64_t n) { return probe->Measure(n); }, RankReduce::kMean,
                            x.o.interrupt, &x.stop);
      item.record = [&db = x.db, kernel, bytes](const Measurement& m) {
        db.kernels.push_back({KernelFamily(kernel), bytes, m.median_s, m.stats(), "calibrate"});
      };
      item.release = [probe] { probe->Release(); };
      x.cal.Add(std::move(item));
    }
  }
}

//! One item per collective kind and size over the group `group` of `g` ranks, filling its curves.
void AddCollectiveCurveItems(ItemContext& x, const JobShape& job, Communicator& group, int64_t g, bool spans,
                             CollectiveItems& c) {
  const int64_t max_bytes =
      x.o.max_collective_bytes > 0 ? x.o.max_collective_bytes : (x.o.quick ? (4 << 20) : (64 << 20));
  // all_to_all: the MoE token dispatch and combine (the planner prices them with its curve).
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                              CollectiveKind::kBroadcast, CollectiveKind::kSendRecv, CollectiveKind::kAllToAll}) {
    CollectiveCurve& curve = c.curves[{kind, g}];
    curve.op = kind;
    curve.group_size = g;
    curve.spans_nodes = spans;
    curve.source = "calibrate";
    curve.origin = x.backend.name() + " backend, " + std::to_string(job.ranks) + " ranks on " +
                   std::to_string(job.nodes) + " node(s)";
    for (int64_t bytes : CollectiveSizes(max_bytes, x.o.quick)) {
      auto probe = std::make_shared<CollectiveProbe>(kind, bytes, group, x.world);
      CalibrationItem item = CurvePointItem(
          x, curve, bytes, std::string(ToString(kind)) + " " + std::to_string(g) + " ranks " + std::to_string(bytes) + " B",
          [&backend = x.backend, probe](int64_t n) { return probe->Measure(backend, n); }, 30e-6);
      item.release = [probe] { probe->Release(); };
      x.cal.Add(std::move(item));
    }
  }
}

//! Collectives: every group size g that divides the ranks, as N/g groups of consecutive ranks
//! (TP groups are consecutive in Megatron order; every group runs at once, as they do in training).
Status AddCollectiveItems(ItemContext& x, const JobShape& job, CollectiveItems& c) {
  const int64_t n = job.ranks;
  for (int64_t g = 2; g <= n; ++g) {
    if (n % g != 0) continue;
    std::vector<int> members;
    const int64_t first = x.world.rank() / g * g;
    for (int64_t r = first; r < first + g; ++r) members.push_back(static_cast<int>(r));
    PX_ASSIGN(auto split, x.world.Split(members));
    double spans = 0;
    if (!x.o.hosts.empty()) {
      for (int r : members) {
        spans = std::max(spans, x.o.hosts[static_cast<size_t>(r)] != x.o.hosts[static_cast<size_t>(first)] ? 1.0 : 0.0);
      }
    }
    PX_TRY(x.world.HostAllReduce(&spans, 1, executor::ReduceOp::kMax));
    Communicator& group = *split;
    c.groups.push_back(std::move(split));
    AddCollectiveCurveItems(x, job, group, g, spans > 0, c);
  }
  return {};
}

//! The three contention items' medians, and the GEMM count of the third.
struct Contention {
  double gemm_s = 0, comm_s = 0, both_s = 0, spread = 0;
  int64_t reps = 0, gemms = 1;
};

//! The measurement of contention item `part` (0: the GEMM alone, 1: the all-reduce alone, 2: the
//! all-reduce enqueued, then R GEMMs, then the compute stream waiting for it).
MeasureFn ContentionMeasure(ItemContext& x, const std::shared_ptr<KernelProbe>& probe,
                            const std::shared_ptr<CollectiveProbe>& comm, int part,
                            const std::shared_ptr<Contention>& contention) {
  return [&backend = x.backend, &world = x.world, probe, comm, part, contention](int64_t n) -> Result<std::vector<double>> {
    Status prepared = probe->Prepare(backend);
    if (prepared) prepared = comm->Prepare(backend);
    PX_TRY(AllPrepared(world, prepared));  // before the barriers
    if (part == 2) {
      // R from (a) and (b), whose agreed medians are the same on every rank.
      const double r = contention->gemm_s > 0 ? std::ceil(1.5 * contention->comm_s / contention->gemm_s) : 1;
      contention->gemms = std::clamp<int64_t>(static_cast<int64_t>(r), 1, 4096);
    }
    const int64_t gemms = contention->gemms;
    auto run = [&]() -> Status {
      executor::Event done;
      if (part >= 1) {
        PX_TRY(comm->EnqueueOnly(backend));
        done = backend.RecordEvent(executor::StreamKind::kDpComm);
      }
      if (part != 1) {
        for (int64_t i = 0; i < (part == 2 ? gemms : 1); ++i) {
          PX_TRY(probe->Run(backend));
        }
      }
      if (part >= 1) {
        Status st = backend.WaitEvent(executor::StreamKind::kCompute, done);
        backend.ReleaseEvents(std::span<const executor::Event>(&done, 1));
        return st;
      }
      return {};
    };
    return TimeRuns(backend, StreamKind::kCompute, n, run, [&]() -> Status {
      PX_TRY(backend.Synchronize());
      return world.Barrier();
    });
  };
}

//! Contention, end to end: how much of a gradient all-reduce the compute beside it hides. Three
//! items, in order: (a) one mid-size GEMM alone, t_g; (b) one layer's gradient all-reduce alone on
//! the DP stream, t_m (the compute stream waits for it); (c) the all-reduce enqueued, then R GEMMs
//! (R t_g >= 1.5 t_m, so the all-reduce lies inside the compute) and the compute stream waiting
//! for the all-reduce, t_b. The planner's overlap model (planner/sim/simulator.cpp: compute beside
//! a DP collective of isolated length t_m runs k times slower over it) gives
//! t_b = R t_g + t_m (1 - 1/k), so k = t_m / (R t_g + t_m - t_b): the factor that makes the model
//! reproduce what this backend hides. A GPU hides most of it (k near 1); the CPU backend, whose
//! collectives progress on the cores that compute, hides little (large k). Only with several ranks.
void AddContentionItems(ItemContext& x, executor::DType dtype, const std::shared_ptr<Contention>& contention) {
  if (x.world.size() <= 1) return;
  ProbeShape gp;
  gp.kind = ProbeKind::kGemm;
  gp.dtype = dtype;
  gp.tb = executor::Trans::kYes;
  if (x.o.model != nullptr) {
    gp.m = x.o.model->seq_len;
    gp.n = x.o.model->ffn_hidden;
    gp.k = x.o.model->hidden;
  } else {
    gp.m = gp.n = gp.k = 256;
  }
  auto probe = std::make_shared<KernelProbe>(gp);
  // One layer's gradient all-reduce (what overlaps a layer's backward), else 1 MiB.
  const int64_t grad_bytes =
      x.o.model != nullptr ? 4 * planner::LayerParamsPerTpRank(*x.o.model, 1) : int64_t{1} << 20;
  auto comm = std::make_shared<CollectiveProbe>(CollectiveKind::kAllReduce, grad_bytes, x.world, x.world);
  const double gemm_guess = 2.0 * static_cast<double>(gp.m) * gp.n * gp.k / kGuessFlops;
  const double comm_guess = static_cast<double>(grad_bytes) / 1e9 + 30e-6;
  const char* kParts[] = {" alone", "all-reduce alone", " beside an all-reduce (until both end)"};
  for (int part = 0; part < 3; ++part) {
    CalibrationItem item;
    item.what = std::string("contention: ") + (part == 1 ? "" : gp.Describe()) + kParts[part];
    item.expected_s = part == 0 ? gemm_guess : part == 1 ? comm_guess : 2.5 * comm_guess + gemm_guess;
    item.measure = Agreed(x.world, ContentionMeasure(x, probe, comm, part, contention), RankReduce::kMean,
                          x.o.interrupt, &x.stop);
    item.interleave = false;  // (c)'s GEMM count comes from (a)'s and (b)'s recorded medians
    item.record = [contention, part](const Measurement& m) {
      (part == 0 ? contention->gemm_s : part == 1 ? contention->comm_s : contention->both_s) = m.median_s;
      if (part == 2) {
        contention->spread = m.relative_spread();
        contention->reps = m.repetitions;
      }
    };
    x.cal.Add(std::move(item));
  }
}

//! System noise: fixed work quanta on every rank at once (noise_probe.h), into `db.noise`, or a
//! skipped entry when it could not be measured. The error: interrupted.
Status MeasureSystemNoise(Backend& backend, Communicator& world, const CalibrateOptions& o, executor::DType dtype,
                          const Turns& turns, CostDb& db) {
  // Long enough for windows of 256 quanta (~20 ms) quick, 1024 (~80 ms) in full.
  NoiseOptions no;
  no.duration_s = o.quick ? 0.5 : 2.0;
  if (o.progress != nullptr) std::fprintf(o.progress, "calibrate: system noise (fixed work quanta, %.1f s)\n", no.duration_s);
  no.dtype = dtype;
  no.interrupt = o.interrupt;
  no.turns = turns;
  auto noise = MeasureNoise(backend, world, no);
  if (!noise) {
    if (o.interrupt != nullptr && o.interrupt->load()) return IoError("interrupted: nothing written");
    db.skipped.push_back({"system noise (fixed work quanta)", noise.error().message});
  } else {
    db.noise = *noise;
  }
  return {};
}

//! The measured curves into `db`, each by size (a curve without points is left out).
void AppendCurves(std::map<CurveKey, CollectiveCurve>& curves, CostDb& db) {
  for (auto& [key, curve] : curves) {
    if (curve.points.empty()) continue;
    std::sort(curve.points.begin(), curve.points.end(),
              [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
    db.collectives.push_back(std::move(curve));
  }
}

//! The device plane's and the host plane's curves and the contention factor into `db`.
void CollectMeasured(CollectiveItems& c, const Contention& contention, CostDb& db) {
  AppendCurves(c.curves, db);
  AppendCurves(c.host_curves, db);
  if (contention.gemm_s > 0 && contention.comm_s > 0 && contention.both_s > 0) {
    db.contention_factor = ContentionFromOverlap(contention.gemms * contention.gemm_s, contention.comm_s,
                                                 contention.both_s);
    db.contention = {"calibrate", contention.reps, contention.spread};
  }
}

//! `o.base` with what `db` measured: the device (MeasuredDevice, and the backend's memory), and the
//! links from the two-rank send/receive curves; `links` gets those as JSON.
ClusterSpec MeasuredCluster(const CalibrateOptions& o, const JobShape& job, const Backend& backend, const CostDb& db,
                            const executor::HostThreads& threads, Json& links) {
  ClusterSpec c = o.base;
  c.nodes = job.nodes;
  c.gpus_per_node = job.per_node;
  // The CPUs the node's ranks share: its compute was timed a rank per CPU (Turns), the planner adds
  // the sharing (ClusterSpec::SlowestCoreShare).
  if (backend.name() == "cpu") c.cpus_per_node = threads.node_cpus;
  DeviceSpec& d = c.device;
  d = MeasuredDevice(d, db);
  // The CPU backend's ranks on a node share the host's memory (local-cpu divides it the same way).
  const double mem_GiB = static_cast<double>(backend.DeviceMemoryBytes()) / (1024.0 * 1024.0 * 1024.0) /
                         static_cast<double>(backend.name() == "cpu" ? job.per_node : 1);
  if (mem_GiB > 0) d.memory_GiB = mem_GiB;
  links = Json::object();
  for (const auto& curve : db.collectives) {
    if (curve.op != CollectiveKind::kSendRecv || curve.group_size != 2) continue;
    LinkSpec& link = curve.spans_nodes ? c.inter_node : c.intra_node;
    link.bandwidth_GBps = 0;
    for (const auto& p : curve.points) link.bandwidth_GBps = std::max(link.bandwidth_GBps, p.algbw_GBps);
    const auto& small = curve.points.front();
    link.latency_us = std::max(0.01, (small.time_s - static_cast<double>(small.bytes) / (link.bandwidth_GBps * 1e9)) * 1e6);
    links[curve.spans_nodes ? "inter_node" : "intra_node"] = {{"bandwidth_GBps", link.bandwidth_GBps},
                                                              {"latency_us", link.latency_us}};
  }
  return c;
}

//! The --json summary of a finished calibration (`out.db`, `out.report`, `out.seconds` set).
Json Summary(const CalibrateResult& out, const JobShape& job, const Json& links) {
  const CostDb& db = out.db;
  const CalibrationReport& report = out.report;
  Json peaks = Json::object();
  for (const auto& [dt, tf] : BestGemmTflops(db)) peaks[ToString(dt)] = tf;
  Json summary = {{"seconds", out.seconds},
                  {"ranks", job.ranks},
                  {"nodes", job.nodes},
                  {"gemm_samples", db.gemms.size()},
                  {"kernel_samples", db.kernels.size()},
                  {"collective_curves", db.collectives.size()},
                  {"measured", report.measured},
                  {"remeasured", report.remeasured},
                  {"still_noisy", report.still_noisy},
                  {"skipped", report.skipped.size()},
                  {"peak_tflops", peaks},
                  {"memory_bandwidth_GBps", StreamingBandwidthGBps(db)},
                  {"links", links},
                  {"contention_factor", db.contention_factor},
                  {"launch_overhead_us", db.launch_overhead_us}};
  if (db.noise.measured()) {
    const planner::NoiseModel nm(db.noise);
    summary["noise"] = {{"quantum_us", db.noise.quantum_s * 1e6},
                        {"mean_excess_1ms", nm.MeanExcess(1e-3) / 1e-3},
                        {"sync_excess_us_1ms_2ranks", nm.SyncExcess(1e-3, 2) * 1e6},
                        {"sync_excess_us_100ms_2ranks", nm.SyncExcess(0.1, 2) * 1e6}};
  }
  return summary;
}

}  // namespace

Result<CalibrateResult> RunCalibration(Backend& backend, Communicator& world, const CalibrateOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const JobShape job = ShapeOf(world, o.hosts);
  const CalibrationSetOptions so = SetOptionsFor(backend, o, job.per_node);
  // How the ranks share their nodes' CPUs: the backend waits accordingly (ranks that outnumber their
  // CPUs yield at once, as in a run), and compute is timed in turns of a rank per CPU.
  PX_ASSIGN(const executor::HostThreads threads, executor::PlanHostThreads(world, backend.IntraOpThreads()));
  backend.UseHostThreads(threads);
  PX_ASSIGN(const Turns turns, TurnsOf(world, threads));
  const CalibrationSet set = BuildCalibrationSet(so);
  std::atomic<bool> stop{false};
  Calibrator cal(CalibratorOptionsFor(o, &stop));

  CalibrateResult out;
  CostDb& db = out.db;
  db.device = o.base.device.name;
  db.cluster = o.base.name;
  db.catalogue = kOpCatalogueVersion;  // the byte counts and GEMM kinds its samples are keyed by

  ItemContext items{backend, world, o, cal, stop, db, turns};
  AddKernelItems(items, set);
  CollectiveItems collectives;
  PX_TRY(AddCollectiveItems(items, job, collectives));
  AddHostPlaneItems(items, job, collectives);
  AddCompressionItems(items);
  auto contention = std::make_shared<Contention>();
  AddContentionItems(items, so.kernel_dtype, contention);

  std::unique_ptr<ProgressBar> bar;
  if (o.progress != nullptr) bar = std::make_unique<ProgressBar>(o.progress, "calibrate", cal.TotalWeight());
  auto report = cal.Run(bar.get());
  PX_TRY(backend.Synchronize());
  if (!report) return report.error();
  if (stop.load()) return IoError("interrupted: nothing written");
  out.report = *report;
  db.skipped = report->skipped;
  PX_TRY(MeasureSystemNoise(backend, world, o, so.kernel_dtype, turns, db));
  CollectMeasured(collectives, *contention, db);

  Json links;
  out.cluster = MeasuredCluster(o, job, backend, db, threads, links);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.summary = Summary(out, job, links);
  return out;
}

}  // namespace parallax::profiler
