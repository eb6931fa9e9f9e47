#pragma once
// CostDb: measured costs for one device and cluster (filled by `parallax calibrate`, nccl-tests
// import and `refine`; read by the planner's cost model).

#include <cstdint>
#include <string>
#include <vector>

#include "model/device_spec.h"
#include "model/json_io.h"

namespace parallax {

//! How a measured time was obtained: a median over `repetitions` timed runs (after warm-up) and
//! the interquartile range of those runs. Both 0 when unknown (files written before they existed,
//! imports that print one averaged figure).
struct MeasurementStats {
  int64_t repetitions = 0;
  double spread_s = 0;  //!< q3 - q1 of the repetitions, seconds
};

//! One measured GEMM: `batch` independent C[m,n] = A[m,k] B[k,n] in `dtype` (one strided-batched
//! call when batch > 1, as attention's score and context products run). `accumulate`: C[m,n] +=
//! A B into an fp32 buffer (a weight gradient accumulated in its GEMM, GemmShape::accumulate),
//! whose epilogue reads and writes 4-byte C; a shape measured both ways is two samples.
struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  DType dtype = DType::kBf16;
  double time_s = 0;
  MeasurementStats stats{};
  std::string source{};  //!< "calibrate", "refine" (empty: unknown)
  bool accumulate = false;
  double tflops() const { return 2.0 * static_cast<double>(m) * n * k * batch / time_s / 1e12; }
};

//! One measured memory-bound kernel family point (norm, softmax, activation, optimizer...).
struct KernelSample {
  std::string op;  //!< an OpKind name ("attn_norm", "act", "optimizer", ...) or "attn_core"
  int64_t bytes = 0;  //!< bytes read + written
  double time_s = 0;
  MeasurementStats stats{};
  std::string source{};  //!< "calibrate", "refine" (empty: unknown)
};

//! One point of a collective's bandwidth-vs-size curve, nccl-tests definitions.
struct CollectivePoint {
  int64_t bytes = 0;     //!< message size as nccl-tests prints it ("size")
  double time_s = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  MeasurementStats stats{};
};

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kSendRecv };

struct CollectiveCurve {
  CollectiveKind op = CollectiveKind::kAllReduce;
  int64_t group_size = 0;
  bool spans_nodes = false;  //!< group crosses node boundaries
  std::string source;        //!< "calibrate", "nccl-tests", "refine"
  std::string origin{};      //!< where it came from (an imported file's name); may be empty
  //! "in-place", "out-of-place", kHostPlacement, or empty (unknown / not applicable)
  std::string placement{};
  std::vector<CollectivePoint> points;  //!< sorted by bytes
};

//! The placement of a host-plane curve: mailbox messages and the host all-gather the classic modes
//! exchange over (profiler/calibrate/host_plane_probe.h), which only their pricing reads
//! (planner/cost/collective.h HostTime).
inline constexpr const char* kHostPlacement = "host";

//! A measurement that could not be taken (out of memory at a large shape, a failed validation
//! row in an import): kept so the database says what is missing and why.
struct SkippedMeasurement {
  std::string what;    //!< "gemm m=65536 n=65536 k=8192 bf16", "all_reduce 8 ranks 8 B (file:line)"
  std::string reason;
};

//! Compute slowdown while communication overlaps it, as fitted from measurements.
struct ContentionFit {
  std::string source;   //!< "calibrate", "refine"
  int64_t samples = 0;  //!< overlapped op instances the factor was fitted on
  double spread = 0;    //!< interquartile range of the per-op slowdowns
};

//! How much longer one family's ops took inside training steps than calibrate's isolated timings
//! predicted (operands colder, the other ranks' work beside them), measured by `refine` on a
//! trace: the planner multiplies that family's calibrated samples by `factor`. Samples that
//! `refine` took from a trace are in-run times already and are not scaled.
//! The run factor of the memory-bound kernel families pooled (refine): what a family the trace did
//! not time takes (CostDb::RunFactorOf).
inline constexpr const char* kMemoryBoundRunFactor = "memory_bound";

struct RunFactor {
  std::string family;          //!< "gemm" (the GEMMs of `dtype`) or a kernel family ("act", "attention_bwd", ...)
  DType dtype = DType::kFp32;  //!< GEMMs only
  double factor = 1.0;         //!< in-run time / calibrated time, summed over the family's ops (> 0)
  int64_t ops = 0;             //!< op descriptions (pooled instances) it was measured on
  std::string source{};        //!< "refine"

  //! Whether this is the factor of `name` (for "gemm", of GEMMs in `type`; other families have none).
  bool Matches(const std::string& name, DType type) const {
    return family == name && (name != "gemm" || dtype == type);
  }
};

//! Operating-system and device noise, measured with fixed work quanta (FWQ: every rank runs the
//! same short kernel back to back at once and times each run; LLNL's FWQ benchmark, Petrini et
//! al. SC'03, Hoefler et al. SC'10). Per window length: the distribution of the time one rank
//! takes for work whose median time is window_s, less window_s. A calibrated op time is a median:
//! this is what it leaves out (the mean above the median, and the spread a synchronization of
//! several ranks waits on).
struct NoiseWindow {
  double window_s = 0;            //!< median time of the window's work
  std::vector<double> detour_s;   //!< quantiles at (i + 0.5) / n of (time - window_s), ascending
};

struct SystemNoise {
  std::string source;        //!< "calibrate" (empty: not measured)
  double quantum_s = 0;      //!< median time of one quantum
  int64_t ranks = 0;         //!< ranks that ran the quanta at once (their quantiles are averaged)
  double duration_s = 0;     //!< time each rank ran quanta
  std::vector<NoiseWindow> windows;  //!< ascending window_s
  bool measured() const { return !windows.empty(); }
};

//! How a measured run's compute op times spread around their medians (`parallax refine`): samples
//! are medians, a step pays the mean. On a steady machine the mean sits a little above the median
//! (what the calibrated noise's mean excess charges); on one that switches between speeds it can
//! sit below (a share of the ops ran at the faster speed).
struct RunOpTimes {
  double mean_over_median = 0;  //!< sum of measured op times / sum of their groups' medians (0: not measured)
  int64_t instances = 0;        //!< op instances it is over
  std::string source;           //!< "refine"
  bool measured() const { return mean_over_median > 0; }
};

struct CostDb {
  std::string device;   //!< device name the measurements belong to
  std::string cluster;  //!< cluster name (collectives); may be empty
  std::vector<GemmSample> gemms;
  std::vector<KernelSample> kernels;
  std::vector<CollectiveCurve> collectives;
  double contention_factor = 1.0;  //!< compute slowdown while communication overlaps (>= 1)
  ContentionFit contention{};      //!< how contention_factor was obtained (empty source: not fitted)
  //! Host time of one kernel call that does no work, measured (0: not measured; the implementation
  //! profile's figure applies). Replaces the profile's launch overhead as the per-kernel floor.
  double launch_overhead_us = 0;
  //! Mean host time between two consecutive compute ops of one micro-batch's forward or backward
  //! on our executor, during which the device idles (recorder, allocator and launch work between
  //! the ops; refine measures it on a trace). Charged to every compute op the catalogue prices;
  //! 0: not measured.
  double op_gap_us = 0;
  std::vector<RunFactor> run_factors{};
  std::vector<SkippedMeasurement> skipped{};
  SystemNoise noise{};  //!< not measured: predictions carry no noise
  //! Measured: replaces the calibrated noise's mean excess of a compute op by (ratio - 1) x its time
  RunOpTimes run_op_times{};
  //! The op catalogue version (kOpCatalogueVersion, model/op_catalogue.h) whose byte counts and
  //! GEMM kinds key the samples; 0: not recorded (files written before the stamp).
  int64_t catalogue = 0;

  //! The in-run factor of `family` (for "gemm", of `dtype`); 1 when none was measured.
  double RunFactorOf(const std::string& family, DType dtype = DType::kFp32) const;
};

const char* ToString(CollectiveKind k);
Result<CollectiveKind> CollectiveFromString(const std::string& s);

Result<CostDb> CostDbFromJson(const Json& j, const std::string& file);
Json CostDbToJson(const CostDb& db);
Result<CostDb> LoadCostDbFile(const std::string& path);
Status SaveCostDbFile(const std::string& path, const CostDb& db);

}  // namespace parallax
