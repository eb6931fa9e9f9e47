#include "planner/cost/compute.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parallax::planner {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ComputeModel::ComputeModel(const DeviceSpec& device, DType dtype, const CostDb* db)
    : traits_(TraitsFor(device)), dtype_(dtype), db_(db) {
  peak_flops_ = device.peak_tflops.For(dtype) * 1e12;
  if (peak_flops_ <= 0) peak_flops_ = device.peak_tflops.fp32 * 1e12;
  hbm_Bps_ = device.hbm_GBps * 1e9;
  element_bytes_ = (dtype == DType::kFp32 || dtype == DType::kTf32) ? 4 : (dtype == DType::kFp8 ? 1 : 2);
  if (db_ && db_->contention_factor > 1.0) {
    contention_ = db_->contention_factor;
  } else if (traits_.sm_count > 0) {
    contention_ = 1.0 + static_cast<double>(traits_.nccl_channels) / static_cast<double>(traits_.sm_count);
  }
  if (db_) {
    for (const auto& g : db_->gemms) {
      if (g.dtype == dtype && g.time_s > 0 && g.m > 0 && g.n > 0 && g.k > 0) gemms_.push_back(g);
    }
  }
}

double ComputeModel::Gemm(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  if (!gemms_.empty()) return MeasuredGemm(m, n, k, batch);
  return RooflineGemm(m, n, k, batch);
}

double ComputeModel::RooflineGemm(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  const double bytes = static_cast<double>(element_bytes_) *
                       (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) * batch;
  const double mem_s = bytes / (hbm_Bps_ * traits_.dram_fraction);
  const double flops = 2.0 * static_cast<double>(m) * n * k * batch;
  const double sustained = peak_flops_ * traits_.mma_sustained_fraction;
  if (traits_.sm_count <= 0) return std::max(flops / sustained, mem_s) + traits_.kernel_overhead_s;
  const double per_sm = sustained / static_cast<double>(traits_.sm_count);
  double best = std::numeric_limits<double>::infinity();
  for (const GemmTile& t : traits_.tiles) {
    const int64_t tiles = CeilDiv(m, t.m) * CeilDiv(n, t.n) * batch;
    const int64_t waves = CeilDiv(tiles, traits_.sm_count);
    const int64_t ksteps = CeilDiv(k, t.k);
    const double tile_s = 2.0 * t.m * t.n * t.k * static_cast<double>(ksteps + t.stages) / per_sm;
    best = std::min(best, static_cast<double>(waves) * tile_s);
  }
  return std::max(best, mem_s) + traits_.kernel_overhead_s;
}

double ComputeModel::MeasuredGemm(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  // Inverse-distance weighting of measured TFLOP/s over the 4 nearest shapes in log space.
  const double lm = std::log(static_cast<double>(m)), ln = std::log(static_cast<double>(n)),
               lk = std::log(static_cast<double>(k));
  struct Near {
    double d2;
    double tflops;
  };
  std::vector<Near> near;
  near.reserve(gemms_.size());
  for (const auto& g : gemms_) {
    const double dm = std::log(static_cast<double>(g.m)) - lm, dn = std::log(static_cast<double>(g.n)) - ln,
                 dk = std::log(static_cast<double>(g.k)) - lk;
    near.push_back({dm * dm + dn * dn + dk * dk, g.tflops()});
  }
  const size_t keep = std::min<size_t>(4, near.size());
  std::partial_sort(near.begin(), near.begin() + static_cast<std::ptrdiff_t>(keep), near.end(),
                    [](const Near& a, const Near& b) { return a.d2 < b.d2; });
  double wsum = 0, tsum = 0;
  for (size_t i = 0; i < keep; ++i) {
    if (near[i].d2 < 1e-12) {
      wsum = 1;
      tsum = near[i].tflops;
      break;
    }
    const double w = 1.0 / near[i].d2;
    wsum += w;
    tsum += w * near[i].tflops;
  }
  const double tflops = tsum / wsum;
  return 2.0 * static_cast<double>(m) * n * k * batch / (tflops * 1e12);
}

double ComputeModel::MemoryBound(std::string_view op, double bytes) const {
  if (bytes <= 0) return 0;
  if (db_) {
    // Measured bandwidth of this kernel family, linear in log(bytes), clamped at the ends.
    const KernelSample* lo = nullptr;
    const KernelSample* hi = nullptr;
    for (const auto& s : db_->kernels) {
      if (s.op != op || s.time_s <= 0 || s.bytes <= 0) continue;
      if (static_cast<double>(s.bytes) <= bytes && (!lo || s.bytes > lo->bytes)) lo = &s;
      if (static_cast<double>(s.bytes) >= bytes && (!hi || s.bytes < hi->bytes)) hi = &s;
    }
    if (lo || hi) {
      if (!lo) lo = hi;
      if (!hi) hi = lo;
      const double bw_lo = static_cast<double>(lo->bytes) / lo->time_s;
      const double bw_hi = static_cast<double>(hi->bytes) / hi->time_s;
      double bw = bw_lo;
      if (hi->bytes != lo->bytes) {
        const double f = (std::log(bytes) - std::log(static_cast<double>(lo->bytes))) /
                         (std::log(static_cast<double>(hi->bytes)) - std::log(static_cast<double>(lo->bytes)));
        bw = bw_lo + f * (bw_hi - bw_lo);
      }
      return bytes / bw;
    }
  }
  return (bytes + traits_.dram_bytes_in_flight) / (hbm_Bps_ * traits_.dram_fraction) + traits_.kernel_overhead_s;
}

}  // namespace parallax::planner
