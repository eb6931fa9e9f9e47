#include "planner/cost/device_traits.h"

namespace parallax::planner {

DeviceTraits TraitsFor(const DeviceSpec& device) {
  const Microarch& a = device.arch;
  DeviceTraits t;
  if (a.sm_count <= 0 || a.gemm_tiles.empty()) {
    // CPU / no micro-architecture: BLAS blocks are small relative to the problem; no quantization.
    t.tiles = {GemmTile{1, 1, 1, 0}};
    t.dram_fraction = a.dram_fraction;
    return t;
  }
  t.sm_count = a.sm_count;
  t.tiles = a.gemm_tiles;
  if (a.peak_clock_MHz > 0 && a.sustained_clock_MHz > 0) t.mma_sustained_fraction = a.sustained_clock_MHz / a.peak_clock_MHz;
  t.dram_fraction = a.dram_fraction;
  t.dram_bytes_in_flight = device.hbm_GBps * 1e9 * a.dram_latency_us * 1e-6;
  t.nccl_channels = a.nccl_channels;
  t.kernel_overhead_s = a.kernel_overhead_us * 1e-6;
  t.sfu_ops_per_s = static_cast<double>(a.sm_count) * a.sfu_ops_per_clock_per_sm * a.sustained_clock_MHz * 1e6;
  t.warp_specialized_mma = a.warp_specialized_mma;
  return t;
}

}  // namespace parallax::planner
