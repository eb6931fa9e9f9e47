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
  // A device without FP8 tensor cores (the CPU; Ampere is refused before pricing) runs FP8 GEMMs at
  // its 16-bit rate.
  if (peak_flops_ <= 0 && dtype == DType::kFp8) peak_flops_ = device.peak_tflops.For(DType::kBf16) * 1e12;
  if (peak_flops_ <= 0) peak_flops_ = device.peak_tflops.fp32 * 1e12;
  hbm_Bps_ = device.hbm_GBps * 1e9;
  element_bytes_ = (dtype == DType::kFp32 || dtype == DType::kTf32) ? 4 : (dtype == DType::kFp8 ? 1 : 2);
  out_bytes_ = dtype == DType::kFp8 ? 2 : element_bytes_;  // an FP8 GEMM writes bf16 (Transformer Engine)
  if (db_ && db_->contention_factor > 1.0) {
    contention_ = db_->contention_factor;
  } else if (traits_.sm_count > 0) {
    contention_ = 1.0 + static_cast<double>(traits_.nccl_channels) / static_cast<double>(traits_.sm_count);
  }
  if (db_) {
    BuildGemmCorrection();
    BuildKernelCorrection();
    noise_ = NoiseModel(db_->noise, db_->run_op_times);
  }
}

void ComputeModel::BuildGemmCorrection() {
  const double gemm_run_factor = db_->RunFactorOf("gemm", dtype_);
  for (const auto& g : db_->gemms) {
    if (g.dtype != dtype_ || g.time_s <= 0 || g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) continue;
    GemmPoint p;
    p.x = {std::log(static_cast<double>(g.m)), std::log(static_cast<double>(g.n)), std::log(static_cast<double>(g.k)),
           std::log(static_cast<double>(g.batch))};
    // A calibrated (isolated) time becomes an in-run time when refine measured how much longer
    // GEMMs ran inside steps; a sample refine took from a trace is one already.
    const double t = g.source == "refine" ? g.time_s : g.time_s * gemm_run_factor;
    p.log_ratio = std::log(t / RooflineGemm(g.m, g.n, g.k, g.batch, g.accumulate));
    if (g.accumulate) {
      accumulate_points_.push_back(p);
      continue;
    }
    p.score_log_ratio =
        g.batch > 1 ? std::log(t / RooflineGemmAt(g.m, g.n, g.k, g.batch, traits_.attention_fraction)) : p.log_ratio;
    gemm_points_.push_back(p);
  }
  if (gemm_points_.empty()) return;
  // A full grid: every combination of the distinct coordinates measured exactly once.
  size_t cells = 1;
  for (size_t a = 0; a < 4; ++a) {
    auto& axis = grid_axes_[a];
    for (const auto& p : gemm_points_) axis.push_back(p.x[a]);
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end(), [](double u, double v) { return std::abs(u - v) < 1e-9; }),
               axis.end());
    cells *= axis.size();
  }
  if (cells != gemm_points_.size()) return;
  grid_values_.assign(cells, std::numeric_limits<double>::quiet_NaN());
  score_grid_values_.assign(cells, 0.0);
  for (const auto& p : gemm_points_) {
    size_t idx = 0;
    for (size_t a = 0; a < 4; ++a) {
      const auto& axis = grid_axes_[a];
      const auto it = std::lower_bound(axis.begin(), axis.end(), p.x[a] - 1e-9);
      idx = idx * axis.size() + static_cast<size_t>(it - axis.begin());
    }
    grid_values_[idx] = p.log_ratio;
    score_grid_values_[idx] = p.score_log_ratio;
  }
  gemm_grid_ = std::none_of(grid_values_.begin(), grid_values_.end(), [](double v) { return std::isnan(v); });
}

void ComputeModel::BuildKernelCorrection() {
  for (const auto& s : db_->kernels) {
    if (s.time_s <= 0 || s.bytes <= 0) continue;
    const double bytes = static_cast<double>(s.bytes);
    const double t = s.source == "refine" ? s.time_s : s.time_s * db_->RunFactorOf(s.op);
    kernel_points_[s.op].push_back({std::log(bytes), std::log(t / RooflineMemory(bytes))});
  }
  for (auto& [op, pts] : kernel_points_) {
    std::sort(pts.begin(), pts.end(), [](const KernelPoint& a, const KernelPoint& b) { return a.log_bytes < b.log_bytes; });
  }
}

double ComputeModel::Gemm(int64_t m, int64_t n, int64_t k, int64_t batch, bool accumulate) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  const double roofline = RooflineGemm(m, n, k, batch, accumulate);
  if ((accumulate || gemm_points_.empty()) && !accumulate_points_.empty()) {
    // Its own kind's samples; with no plain sample, theirs carry to a plain GEMM too.
    const std::array<double, 4> q{std::log(static_cast<double>(m)), std::log(static_cast<double>(n)),
                                  std::log(static_cast<double>(k)), std::log(static_cast<double>(batch))};
    return roofline * std::exp(ScatteredLogRatio(accumulate_points_, q, false));
  }
  if (gemm_points_.empty()) return roofline;
  return roofline * std::exp(GemmLogRatio(m, n, k, batch));
}

double ComputeModel::RooflineGemm(int64_t m, int64_t n, int64_t k, int64_t batch, bool accumulate) const {
  return RooflineGemmAt(m, n, k, batch, traits_.dram_fraction, accumulate);
}

double ComputeModel::ScoreGemm(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  // One roofline per shape in both directions: the forward's QK^T and AV shapes recur in the
  // backward, and refine pools a shape's samples over both.
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  const double roofline = RooflineGemmAt(m, n, k, batch, traits_.attention_fraction);
  if (gemm_points_.empty()) return roofline;
  return roofline * std::exp(GemmLogRatio(m, n, k, batch, /*score=*/true));
}

double ComputeModel::ScoreMemory(std::string_view op, double bytes, bool bwd) const {
  if (bytes <= 0) return 0;
  if (HasKernelFamily(op)) return MemoryBound(op, bytes);  // the family itself measured
  const double roofline = RooflineMemoryAt(bytes, bwd ? traits_.attention_bwd_fraction : traits_.attention_fraction);
  if (kernel_points_.empty()) return roofline;
  // The ratio of what MemoryBound falls back to (the forward family for a backward one, then the
  // streaming "elementwise" curve) over this roofline.
  return roofline * MemoryBound(op, bytes) / RooflineMemory(bytes);
}

double ComputeModel::RooflineGemmAt(int64_t m, int64_t n, int64_t k, int64_t batch, double dram_fraction,
                                    bool accumulate) const {
  // Operands in the compute dtype; C written in its output dtype, or read and written in fp32 when
  // accumulating.
  const double c_bytes = accumulate ? 8.0 : static_cast<double>(out_bytes_);
  const double bytes = (static_cast<double>(element_bytes_) * (static_cast<double>(m) * k + static_cast<double>(k) * n) +
                        c_bytes * static_cast<double>(m) * n) *
                       static_cast<double>(batch);
  const double mem_s = bytes / (hbm_Bps_ * dram_fraction);
  const double flops = 2.0 * static_cast<double>(m) * n * k * batch;
  const double sustained = peak_flops_ * traits_.mma_sustained_fraction;
  // The accumulating epilogue's extra C traffic the main loop does not hide (device figure).
  const double epilogue_s = accumulate ? traits_.accumulate_epilogue_fraction * (c_bytes - static_cast<double>(out_bytes_)) *
                                             static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(batch) /
                                             (hbm_Bps_ * traits_.dram_fraction)
                                       : 0.0;
  // (a memory-bound GEMM already streams every C byte in mem_s).
  if (traits_.sm_count <= 0) return time_share_ * (std::max(flops / sustained + epilogue_s, mem_s) + traits_.kernel_overhead_s);
  const double per_sm = sustained / static_cast<double>(traits_.sm_count);
  double best = std::numeric_limits<double>::infinity();
  for (const GemmTile& t : traits_.tiles) {
    const int64_t tiles = CeilDiv(m, t.m) * CeilDiv(n, t.n) * batch;
    const int64_t waves = CeilDiv(tiles, traits_.sm_count);
    const int64_t ksteps = CeilDiv(k, t.k);
    const double tile_s = 2.0 * t.m * t.n * t.k * static_cast<double>(ksteps + t.stages) / per_sm;
    best = std::min(best, static_cast<double>(waves) * tile_s);
  }
  return time_share_ * (std::max(best + epilogue_s, mem_s) + traits_.kernel_overhead_s);
}

double ComputeModel::GemmLogRatio(int64_t m, int64_t n, int64_t k, int64_t batch, bool score) const {
  const std::vector<double>& cells = score ? score_grid_values_ : grid_values_;
  const std::array<double, 4> q{std::log(static_cast<double>(m)), std::log(static_cast<double>(n)),
                                std::log(static_cast<double>(k)), std::log(static_cast<double>(batch))};
  if (gemm_grid_) {
    // Multilinear in log space over the bracketing grid cell; outside the grid, the edge value.
    std::array<size_t, 4> lo{};
    std::array<double, 4> frac{};
    for (size_t a = 0; a < 4; ++a) {
      const auto& axis = grid_axes_[a];
      if (axis.size() == 1 || q[a] <= axis.front()) {
        lo[a] = 0;
        frac[a] = 0;
      } else if (q[a] >= axis.back()) {
        lo[a] = axis.size() - 2;
        frac[a] = 1;
      } else {
        const size_t hi = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), q[a]) - axis.begin());
        lo[a] = hi - 1;
        frac[a] = (q[a] - axis[lo[a]]) / (axis[hi] - axis[lo[a]]);
      }
    }
    double value = 0;
    for (unsigned corner = 0; corner < 16; ++corner) {
      double w = 1;
      size_t idx = 0;
      bool used = true;
      for (size_t a = 0; a < 4; ++a) {
        const bool up = ((corner >> a) & 1U) != 0;
        const auto& axis = grid_axes_[a];
        if (up && axis.size() == 1) {
          used = false;
          break;
        }
        w *= up ? frac[a] : 1 - frac[a];
        idx = idx * axis.size() + lo[a] + (up ? 1 : 0);
      }
      if (used && w > 0) value += w * cells[idx];
    }
    return value;
  }
  return ScatteredLogRatio(gemm_points_, q, score);
}

double ComputeModel::ScatteredLogRatio(const std::vector<GemmPoint>& points, const std::array<double, 4>& q,
                                       bool score) {
  // Inverse-square-distance weighting in log space, exact at a sample.
  double wsum = 0, vsum = 0;
  for (const auto& p : points) {
    double d2 = 0;
    for (size_t a = 0; a < 4; ++a) d2 += (p.x[a] - q[a]) * (p.x[a] - q[a]);
    const double r = score ? p.score_log_ratio : p.log_ratio;
    if (d2 < 1e-18) return r;
    wsum += 1.0 / d2;
    vsum += r / d2;
  }
  return wsum > 0 ? vsum / wsum : 0.0;
}

double ComputeModel::FlashAttention(const FlashShape& f) const {
  if (f.batch <= 0 || f.seq_q <= 0 || f.seq_kv <= 0 || f.head_dim <= 0) return 0;
  // Causal: key blocks on and below the diagonal (128-row query tiles).
  const double blocks = static_cast<double>(std::max<int64_t>(f.seq_q / 128, 1));
  const double causal = f.causal ? 0.5 + 0.5 / blocks : 1.0;
  const double products = f.backward ? 5.0 : 2.0;  // fwd QK^T, PV; bwd + dP, dV, dQ, dK (S recomputed)
  const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(f.seq_kv) * products * causal));
  const double mma_s = Gemm(f.seq_q, f.head_dim, k, f.batch);
  const double exps = static_cast<double>(f.batch) * static_cast<double>(f.seq_q) * static_cast<double>(f.seq_kv) * causal;
  const double exp_s = traits_.sfu_ops_per_s > 0 ? time_share_ * exps / traits_.sfu_ops_per_s : 0;
  return traits_.warp_specialized_mma ? std::max(mma_s, exp_s) : mma_s + exp_s;
}

double ComputeModel::RooflineMemory(double bytes) const { return RooflineMemoryAt(bytes, traits_.dram_fraction); }

double ComputeModel::RooflineMemoryAt(double bytes, double dram_fraction) const {
  return time_share_ * ((bytes + traits_.dram_bytes_in_flight) / (hbm_Bps_ * dram_fraction) + traits_.kernel_overhead_s);
}

double ComputeModel::MemoryBound(std::string_view op, double bytes) const {
  if (bytes <= 0) return 0;
  const double roofline = RooflineMemory(bytes);
  auto it = kernel_points_.find(op);
  constexpr std::string_view kBwd = "_bwd";
  if (it == kernel_points_.end() && op.size() > kBwd.size() && op.substr(op.size() - kBwd.size()) == kBwd) {
    it = kernel_points_.find(op.substr(0, op.size() - kBwd.size()));
  }
  if (it == kernel_points_.end()) it = kernel_points_.find(std::string_view("elementwise"));
  if (it == kernel_points_.end()) return roofline;
  const auto& pts = it->second;
  const double x = std::log(bytes);
  double log_ratio = pts.front().log_ratio;
  if (x >= pts.back().log_bytes) {
    log_ratio = pts.back().log_ratio;
  } else if (x > pts.front().log_bytes) {
    const auto hi = std::upper_bound(pts.begin(), pts.end(), x,
                                     [](double v, const KernelPoint& p) { return v < p.log_bytes; });
    const auto lo = hi - 1;
    const double f = (x - lo->log_bytes) / (hi->log_bytes - lo->log_bytes);
    log_ratio = lo->log_ratio + f * (hi->log_ratio - lo->log_ratio);
  }
  return roofline * std::exp(log_ratio);
}

}  // namespace parallax::planner
