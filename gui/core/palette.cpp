#include "gui/core/palette.h"

#include <algorithm>
#include <cmath>

#include "model/op_identity.h"

namespace parallax::gui {
namespace {

Rgb Make(int r, int g, int b) {
  return 0xff000000u | (static_cast<Rgb>(std::clamp(r, 0, 255)) << 16) |
         (static_cast<Rgb>(std::clamp(g, 0, 255)) << 8) | static_cast<Rgb>(std::clamp(b, 0, 255));
}

uint32_t Fnv1a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}

bool Contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

// Base shades per family (ColorBrewer-like, readable with black text).
Rgb Base(OpFamily f) {
  switch (f) {
    case OpFamily::kGemm:
      return Make(86, 140, 214);
    case OpFamily::kAttention:
      return Make(150, 110, 205);
    case OpFamily::kPointwise:
      return Make(96, 178, 110);
    case OpFamily::kTpComm:
      return Make(240, 150, 60);
    case OpFamily::kDpComm:
      return Make(220, 80, 80);
    case OpFamily::kPpComm:
      return Make(220, 190, 60);
    case OpFamily::kOptimizer:
      return Make(160, 120, 80);
    case OpFamily::kComm:
      return Make(235, 120, 70);
    case OpFamily::kMemory:
      return Make(70, 180, 180);
    case OpFamily::kOther:
      break;
  }
  return Make(150, 150, 160);
}

}  // namespace

OpFamily FamilyOfName(std::string_view name) {
  if (auto k = OpKindFromString(name)) {
    switch (*k) {
      case OpKind::kQkv:
      case OpKind::kAttnOut:
      case OpKind::kFc1:
      case OpKind::kFc2:
      case OpKind::kLmHead:
      case OpKind::kMtpProj:
      case OpKind::kRouter:
      case OpKind::kExpertFc1:
      case OpKind::kExpertFc2:
        return OpFamily::kGemm;
      case OpKind::kAttnCore:
        return OpFamily::kAttention;
      case OpKind::kTpAllReduce:
      case OpKind::kTpAllGather:
      case OpKind::kTpReduceScatter:
        return OpFamily::kTpComm;
      case OpKind::kDpAllReduce:
      case OpKind::kDpReduceScatter:
      case OpKind::kDpAllGather:
        return OpFamily::kDpComm;
      case OpKind::kPpSend:
      case OpKind::kPpRecv:
        return OpFamily::kPpComm;
      case OpKind::kCpSendRecv:
        return OpFamily::kComm;
      case OpKind::kOptimizer:
      case OpKind::kGradClip:
        return OpFamily::kOptimizer;
      case OpKind::kGradZero:
      case OpKind::kShardCopy:
      case OpKind::kGradFold:
      case OpKind::kGradAccum:
        return OpFamily::kMemory;
      default:
        return OpFamily::kPointwise;
    }
  }
  if (Contains(name, "nccl") || Contains(name, "NCCL")) return OpFamily::kComm;
  if (Contains(name, "Memcpy") || Contains(name, "Memset") || Contains(name, "memcpy"))
    return OpFamily::kMemory;
  if (Contains(name, "gemm") || Contains(name, "GEMM") || Contains(name, "sm80_") ||
      Contains(name, "sm90_") || Contains(name, "cutlass") || Contains(name, "matmul")) {
    return OpFamily::kGemm;
  }
  if (Contains(name, "flash") || Contains(name, "attention") || Contains(name, "softmax"))
    return OpFamily::kAttention;
  return OpFamily::kOther;
}

Rgb ColorOfName(std::string_view name) {
  const OpFamily f = FamilyOfName(name);
  const uint32_t h = Fnv1a(name);
  if (f == OpFamily::kOther) {
    // Hashed hue on a muted wheel: HSV(h, 0.45, 0.85).
    const double hue = static_cast<double>(h % 360);
    const double s = 0.45, v = 0.85;
    const double c = v * s, x = c * (1 - std::fabs(std::fmod(hue / 60.0, 2.0) - 1)), m = v - c;
    double r = 0, g = 0, b = 0;
    if (hue < 60)
      r = c, g = x;
    else if (hue < 120)
      r = x, g = c;
    else if (hue < 180)
      g = c, b = x;
    else if (hue < 240)
      g = x, b = c;
    else if (hue < 300)
      r = x, b = c;
    else
      r = c, b = x;
    return Make(static_cast<int>((r + m) * 255), static_cast<int>((g + m) * 255),
                static_cast<int>((b + m) * 255));
  }
  const Rgb base = Base(f);
  const int d = static_cast<int>(h % 41) - 20;  // +-20 brightness keeps a family recognisable
  return Make(static_cast<int>((base >> 16) & 255) + d, static_cast<int>((base >> 8) & 255) + d,
              static_cast<int>(base & 255) + d);
}

Rgb ErrorColor(double rel_error, double full_scale_ratio) {
  const double ratio = std::max(1.0 + rel_error, 1e-9);  // predicted / measured
  const double t = std::clamp(std::fabs(std::log(ratio)) / std::log(full_scale_ratio), 0.0, 1.0);
  const int fade = static_cast<int>(235 - 145 * t);
  // Predicted longer than measured (err > 0): red; shorter: blue.
  return rel_error >= 0 ? Make(235, fade, fade) : Make(fade, fade, 235);
}

Rgb Darker(Rgb c, int percent) {
  auto ch = [&](int shift) { return static_cast<int>(((c >> shift) & 255) * percent / 100); };
  return Make(ch(16), ch(8), ch(0));
}

std::vector<Rgb> ColorTable(const traces::Trace& trace) {
  std::vector<Rgb> out(trace.strings().size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = ColorOfName(trace.Str(static_cast<traces::StringId>(i)));
  return out;
}

}  // namespace parallax::gui
