#include "planner/cost/device_traits.h"

#include <algorithm>

namespace parallax::planner {

DeviceTraits TraitsFor(const DeviceSpec& device) {
  const Microarch& a = device.arch;
  DeviceTraits t;
  if (a.sm_count <= 0 || a.gemm_tiles.empty()) {
    // CPU / no micro-architecture: BLAS blocks are small relative to the problem; no quantization.
    t.tiles = {GemmTile{1, 1, 1, 0}};
    t.dram_fraction = a.dram_fraction;
    t.attention_fraction = a.unfused_attention_fraction > 0 ? a.unfused_attention_fraction : a.dram_fraction;
    t.attention_bwd_fraction = a.unfused_attention_bwd_fraction > 0 ? a.unfused_attention_bwd_fraction : a.dram_fraction;
    return t;
  }
  t.sm_count = a.sm_count;
  t.tiles = a.gemm_tiles;
  if (a.peak_clock_MHz > 0 && a.sustained_clock_MHz > 0) t.mma_sustained_fraction = a.sustained_clock_MHz / a.peak_clock_MHz;
  const double peak16 = std::max(device.peak_tflops.bf16, device.peak_tflops.fp16);
  if (a.sustained_matmul_tflops > 0 && peak16 > 0) {
    // The measured sustainable rate is reached at a fat, wave-perfect shape (mamf-finder's MSMF
    // anchors on the fattest shapes, K up to 16384): there the tile model loses only the pipeline
    // fill of each tile, ksteps / (ksteps + stages) with ksteps = 16384 / tile k.
    double fill = 0;
    for (const GemmTile& g : a.gemm_tiles) {
      const double ksteps = 16384.0 / static_cast<double>(g.k);
      fill = std::max(fill, ksteps / (ksteps + static_cast<double>(g.stages)));
    }
    t.mma_sustained_fraction = std::min(1.0, a.sustained_matmul_tflops / peak16 / fill);
  }
  t.dram_fraction = a.dram_fraction;
  t.attention_fraction = a.unfused_attention_fraction > 0 ? a.unfused_attention_fraction : a.dram_fraction;
  t.attention_bwd_fraction = a.unfused_attention_bwd_fraction > 0 ? a.unfused_attention_bwd_fraction : a.dram_fraction;
  t.dram_bytes_in_flight = device.hbm_GBps * 1e9 * a.dram_latency_us * 1e-6;
  t.nccl_channels = a.nccl_channels;
  t.kernel_overhead_s = a.kernel_overhead_us * 1e-6;
  t.sfu_ops_per_s = static_cast<double>(a.sm_count) * a.sfu_ops_per_clock_per_sm * a.sustained_clock_MHz * 1e6;
  t.warp_specialized_mma = a.warp_specialized_mma;
  t.accumulate_epilogue_fraction = a.accumulate_epilogue_fraction;
  if (a.fa2_attention_fraction > 0) t.fa2_attention_fraction = a.fa2_attention_fraction;
  return t;
}

}  // namespace parallax::planner
