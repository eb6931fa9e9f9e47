#pragma once
// Micro-architectural figures the datasheet peak does not carry: SM count and the GEMM tile
// shapes cuBLAS/CUTLASS pick from, keyed by the device name. DeviceSpec has no field for these
// (see the planner report); unknown devices get kGeneric (no wave/tile quantization).

#include <cstdint>
#include <vector>

#include "model/device_spec.h"

namespace parallax::planner {

struct GemmTile {
  int64_t m = 128, n = 128, k = 32;  //!< CTA tile; k = one main-loop step
  int64_t stages = 3;                //!< cp.async pipeline depth (fill/drain cost per tile, in k steps)
};

struct DeviceTraits {
  int64_t sm_count = 0;          //!< 0: no wave quantization (CPU / unknown device)
  std::vector<GemmTile> tiles;   //!< candidate CTA tiles; the fastest is taken (cuBLAS heuristics)
  //! Fraction of the datasheet tensor peak a full-tile main loop sustains: the clock under dense
  //! MMA load vs the boost clock the datasheet peak assumes.
  double mma_sustained_fraction = 1.0;
  //! Fraction of hbm_GBps a streaming kernel reaches (DRAM refresh, read/write turnaround).
  double dram_fraction = 1.0;
  //! Bytes in flight needed to saturate DRAM (Little's law: bandwidth x loaded latency).
  double dram_bytes_in_flight = 0;
  //! SMs one NCCL channel occupies while communication overlaps compute (1 CTA per channel).
  int64_t nccl_channels = 0;
  //! GPU-side cost of one kernel (launch to first instruction + tail), seconds.
  double kernel_overhead_s = 0;
};

DeviceTraits TraitsFor(const DeviceSpec& device);

}  // namespace parallax::planner
