#pragma once
// Compute cost of one op on one device (DESIGN.md "Cost model: compute").
//
// Without measurements: a roofline whose size dependence comes from the hardware, not from fitting:
//   GEMM   = max(waves x tile_time, bytes / (hbm x dram_fraction)) + kernel overhead, where
//            waves = ceil(tiles / SMs) (wave quantization), tiles pad m, n, k to the CTA tile
//            (tile quantization) and tile_time includes the cp.async pipeline fill/drain of
//            `stages` k-steps; the best of the candidate tiles is taken, as cuBLAS heuristics do.
//   memory = (bytes + bytes_in_flight) / (hbm x dram_fraction)   (Little's law latency term).
//
// With CostDb measurements, each measured point gives the ratio measured / roofline at its shape;
// the ratio is interpolated in log space and multiplies the roofline of the queried shape, so a
// query at a measured shape costs exactly what was measured, and between measured shapes the
// roofline's quantization structure is kept while its level follows the measurements.
//   GEMMs:  axes log m, log n, log k, log batch. When the samples of a dtype form a full grid
//           (what `parallax calibrate` writes) the log ratio is multilinear between the grid
//           points, clamped to the grid's edge value outside it; scattered samples (from traces)
//           use inverse-square-distance weighting in the same log space (exact at a sample).
//   Memory-bound kernels: per op family, piecewise linear in log bytes, clamped at the ends;
//           an op with no samples of its own uses the "elementwise" family if measured, else the
//           roofline.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/cost_db.h"
#include "model/device_spec.h"
#include "model/op_catalogue.h"
#include "planner/cost/device_traits.h"
#include "planner/cost/noise.h"

namespace parallax::planner {

class ComputeModel {
 public:
  //! `db` may be null (roofline only); it must outlive the model. `dtype` kFp8: FP8 GEMM inputs
  //! (1 B) at the device's FP8 rate with bf16 output, the tile model unchanged (the 16-bit CTA tiles
  //! and sustained fraction: no public sustained FP8 rate to scale it by).
  ComputeModel(const DeviceSpec& device, DType dtype, const CostDb* db = nullptr);

  //! Seconds for `batch` independent GEMMs C[m,n] = A[m,k] B[k,n]; `accumulate`: C += A B into an
  //! fp32 buffer (GemmShape::accumulate), whose epilogue reads and writes 4-byte C. Measured
  //! samples of the same kind correct it when the CostDb has any (a weight-gradient GEMM's
  //! epilogue and operand layout are not the forward's), else those of the other kind.
  double Gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1, bool accumulate = false) const;
  //! The roofline alone (what Gemm returns without measurements).
  double RooflineGemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1, bool accumulate = false) const;
  //! The roofline alone for a memory-bound kernel.
  double RooflineMemory(double bytes) const;
  //! Seconds for a fused (flash) attention kernel: its GEMM work through the tile model as one
  //! main loop per query tile (m = seq_q, n = head_dim, k = seq_kv x products x causal share),
  //! plus the softmax exponentials on the SFUs, overlapped with the MMAs only on devices with
  //! warp-specialized async MMA (FlashAttention-3, Shah et al. 2024, section 3; FA2 serialises them).
  double FlashAttention(const FlashShape& f) const;
  //! Seconds for a memory-bound kernel of family `op` (an OpKind name) moving `bytes`.
  //! Falls back from "<op>_bwd" to "<op>", then to "elementwise", then to the roofline.
  double MemoryBound(std::string_view op, double bytes) const;
  //! The GEMMs and the memory-bound passes of an unfused attention core (QK^T, scale-mask-softmax,
  //! dropout, AV and their gradients), which write and read the s x s scores. On the roofline their
  //! bytes move at the device's unfused-attention fraction of HBM bandwidth
  //! (DeviceTraits::attention_fraction: the GEMMs in both directions and the forward passes;
  //! attention_bwd_fraction: the backward's softmax and dropout passes). With a CostDb the measured
  //! ratio over the roofline is interpolated as Gemm and MemoryBound do, over these rooflines: a
  //! batched sample (batch > 1, the attention shapes) against the score GEMM roofline, a batch-1
  //! sample's ratio carried as to any unmeasured shape; the op's own kernel family, else the
  //! measured "elementwise" curve's ratio. A measured shape costs what was measured, and samples
  //! equal to the roofline reproduce the roofline.
  double ScoreGemm(int64_t m, int64_t n, int64_t k, int64_t batch) const;
  double ScoreMemory(std::string_view op, double bytes, bool bwd) const;
  //! Whether the CostDb measured family `op` itself (no fallback).
  bool HasKernelFamily(std::string_view op) const { return kernel_points_.find(op) != kernel_points_.end(); }

  double peak_flops() const { return peak_flops_; }
  int64_t element_bytes() const { return element_bytes_; }
  //! Slowdown of compute while communication kernels share the SMs (>= 1): the CostDb's
  //! measured factor when given, else the SM share NCCL channels take (channels / SMs).
  double contention_factor() const { return contention_; }
  const DeviceTraits& traits() const { return traits_; }
  //! Measured host time of one kernel call (CostDb::launch_overhead_us), seconds; 0: not measured.
  double measured_launch_overhead_s() const { return db_ != nullptr ? db_->launch_overhead_us * 1e-6 * time_share_ : 0.0; }
  //! Measured host time between two consecutive compute ops of the executor (CostDb::op_gap_us),
  //! seconds; 0: not measured.
  double measured_op_gap_s() const { return db_ != nullptr ? db_->op_gap_us * 1e-6 * time_share_ : 0.0; }
  //! Every time this model returns, multiplied by `share` >= 1: the rank time-shares its CPU with
  //! others (ClusterSpec::SlowestCoreShare). The measured samples' ratios to the roofline are kept,
  //! so the share scales measured and roofline times alike.
  void set_time_share(double share) { time_share_ = share; }
  double time_share() const { return time_share_; }
  //! The measured system noise (CostDb::noise, and CostDb::run_op_times for the mean excess; none
  //! without a database or a measurement).
  const NoiseModel& noise() const { return noise_; }

 private:
  //! log(measured / roofline) interpolated at the query (0 without samples).
  double GemmLogRatio(int64_t m, int64_t n, int64_t k, int64_t batch, bool score = false) const;
  double RooflineGemmAt(int64_t m, int64_t n, int64_t k, int64_t batch, double dram_fraction,
                        bool accumulate = false) const;
  double RooflineMemoryAt(double bytes, double dram_fraction) const;
  void BuildGemmCorrection();
  void BuildKernelCorrection();

  //! One measured GEMM as a point in log(m, n, k, batch) with its log ratio to the roofline.
  struct GemmPoint {
    std::array<double, 4> x{};
    double log_ratio = 0;
    //! What a score-GEMM query interpolates (ScoreGemm): a batched sample against the score
    //! roofline (the attention fraction), a batch-1 sample as log_ratio.
    double score_log_ratio = 0;
  };
  //! Inverse-square-distance weighting of `points` at the log-space query `q` (exact at a point;
  //! 0 without points); `score`: their score_log_ratio.
  static double ScatteredLogRatio(const std::vector<GemmPoint>& points, const std::array<double, 4>& q, bool score);
  //! One measured memory-bound point: log bytes and its log ratio to the roofline.
  struct KernelPoint {
    double log_bytes = 0;
    double log_ratio = 0;
  };

  DeviceTraits traits_;
  DType dtype_;
  double peak_flops_ = 0;
  double hbm_Bps_ = 0;
  int64_t element_bytes_ = 2;
  int64_t out_bytes_ = 2;  //!< bytes of a GEMM's output element (bf16 for FP8 inputs)
  double contention_ = 1.0;
  double time_share_ = 1.0;
  std::vector<GemmPoint> gemm_points_;                 // measured, this dtype, C written
  std::vector<GemmPoint> accumulate_points_;           // measured, this dtype, C += A B (fp32)
  std::array<std::vector<double>, 4> grid_axes_;      // sorted distinct coordinates, when a full grid
  std::vector<double> grid_values_;                   // log ratios, row-major over grid_axes_
  std::vector<double> score_grid_values_;             // score_log_ratio, the same cells
  bool gemm_grid_ = false;
  std::map<std::string, std::vector<KernelPoint>, std::less<>> kernel_points_;  // by op family
  const CostDb* db_ = nullptr;
  NoiseModel noise_;
};

}  // namespace parallax::planner
