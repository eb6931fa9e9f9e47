#pragma once
// Compute cost of one op on one device (DESIGN.md "Cost model: compute").
//
// With CostDb measurements: GEMMs interpolate the measured TFLOP/s between the nearest measured
// shapes in log(m, n, k) space; memory-bound kernels interpolate measured bandwidth in log(bytes).
// Without: a roofline whose size dependence comes from the hardware, not from fitting:
//   GEMM   = max(waves x tile_time, bytes / (hbm x dram_fraction)) + kernel overhead, where
//            waves = ceil(tiles / SMs) (wave quantization), tiles pad m, n, k to the CTA tile
//            (tile quantization) and tile_time includes the cp.async pipeline fill/drain of
//            `stages` k-steps; the best of the candidate tiles is taken, as cuBLAS heuristics do.
//   memory = (bytes + bytes_in_flight) / (hbm x dram_fraction)   (Little's law latency term).

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/cost_db.h"
#include "model/device_spec.h"
#include "planner/cost/device_traits.h"

namespace parallax::planner {

class ComputeModel {
 public:
  //! `db` may be null (roofline only); it must outlive the model.
  ComputeModel(const DeviceSpec& device, DType dtype, const CostDb* db = nullptr);

  //! Seconds for `batch` independent GEMMs C[m,n] = A[m,k] B[k,n].
  double Gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) const;
  //! Seconds for a memory-bound kernel of family `op` (an OpKind name) moving `bytes`.
  double MemoryBound(std::string_view op, double bytes) const;

  double peak_flops() const { return peak_flops_; }
  int64_t element_bytes() const { return element_bytes_; }
  //! Slowdown of compute while communication kernels share the SMs (>= 1): the CostDb's
  //! measured factor when given, else the SM share NCCL channels take (channels / SMs).
  double contention_factor() const { return contention_; }
  const DeviceTraits& traits() const { return traits_; }

 private:
  double RooflineGemm(int64_t m, int64_t n, int64_t k, int64_t batch) const;
  double MeasuredGemm(int64_t m, int64_t n, int64_t k, int64_t batch) const;

  DeviceTraits traits_;
  DType dtype_;
  double peak_flops_ = 0;
  double hbm_Bps_ = 0;
  int64_t element_bytes_ = 2;
  double contention_ = 1.0;
  std::vector<GemmSample> gemms_;      // measured, this dtype
  const CostDb* db_ = nullptr;
};

}  // namespace parallax::planner
