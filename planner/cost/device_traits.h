#pragma once
// The device figures the compute model uses, derived from DeviceSpec::arch (model/device_spec.h,
// sourced in model/presets.cpp). Nothing here is matched by device name: a device JSON without a
// "microarch" object gets no tile/wave quantization and the plain datasheet roofline.

#include <cstdint>
#include <vector>

#include "model/device_spec.h"

namespace parallax::planner {

using parallax::GemmTile;

struct DeviceTraits {
  int64_t sm_count = 0;          //!< 0: no wave quantization (CPU / device without microarch)
  std::vector<GemmTile> tiles;   //!< candidate CTA tiles; the fastest is taken (cuBLAS heuristics)
  //! Fraction of the datasheet tensor peak a full-tile main loop sustains: the clock under dense
  //! MMA load vs the clock the datasheet peak assumes.
  double mma_sustained_fraction = 1.0;
  double dram_fraction = 1.0;       //!< fraction of hbm_GBps a streaming kernel reaches
  //! Fractions of hbm_GBps an unfused attention core's s x s passes reach (forward, backward).
  double attention_fraction = 1.0;
  double attention_bwd_fraction = 1.0;
  double dram_bytes_in_flight = 0;  //!< bytes in flight needed to saturate DRAM (Little's law)
  int64_t nccl_channels = 0;        //!< SMs NCCL occupies while communication overlaps compute
  double kernel_overhead_s = 0;     //!< GPU-side cost of one kernel
  double sfu_ops_per_s = 0;         //!< exp throughput of the whole device at the sustained clock
  bool warp_specialized_mma = false;
  double accumulate_epilogue_fraction = 0;  //!< Microarch::accumulate_epilogue_fraction
  double fa2_attention_fraction = 1;        //!< Microarch::fa2_attention_fraction (1 when not measured)
};

DeviceTraits TraitsFor(const DeviceSpec& device);

}  // namespace parallax::planner
