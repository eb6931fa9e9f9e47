#pragma once
// Stable slice colours: one hue family per op family (GEMMs blue, attention violet, norms and
// activations green, TP comm orange, DP comm red, PP comm gold, optimizer brown, memory teal),
// other names hashed onto a fixed palette so a name keeps its colour across files and runs.
// Colours are 0xAARRGGBB (QRgb layout) so the core needs no Qt.

#include <cstdint>
#include <string_view>
#include <vector>

#include "traces/trace.h"

namespace parallax::gui {

using Rgb = uint32_t;

enum class OpFamily : uint8_t {
  kGemm,
  kAttention,
  kPointwise,
  kTpComm,
  kDpComm,
  kPpComm,
  kOptimizer,
  kComm,
  kMemory,
  kOther
};

//! Family of a slice name: parallax op names ("qkv", "tp_allreduce"), NCCL kernels, memcpy/memset.
OpFamily FamilyOfName(std::string_view name);
//! The colour of a name: its family's base shade varied by a hash of the name.
Rgb ColorOfName(std::string_view name);
//! Signed relative error (predicted - measured) / measured -> colour: blue (predicted too short)
//! .. white (exact) .. red (too long), on a log scale of predicted/measured that saturates at a
//! factor of `full_scale_ratio` either way (errors span orders of magnitude on new hardware).
Rgb ErrorColor(double rel_error, double full_scale_ratio = 8.0);
Rgb Darker(Rgb c, int percent);  //!< percent of the original brightness (e.g. 70)

//! One colour per interned string of a trace (index = StringId), computed once.
std::vector<Rgb> ColorTable(const traces::Trace& trace);

}  // namespace parallax::gui
