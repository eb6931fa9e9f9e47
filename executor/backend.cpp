#include "executor/backend.h"

#include "executor/mailbox.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

namespace parallax::executor {

Result<std::unique_ptr<Mailbox>> Communicator::OpenMailbox() {
  return Error{"this communicator has no host mailbox: the classic modes (parameter servers, async, backup workers) "
               "run under MPI with the cpu backend",
               ErrorKind::kBadInput};
}

const char* ToString(MemoryKind k) {
  switch (k) {
    case MemoryKind::kWeights: return "weights";
    case MemoryKind::kGradients: return "gradients";
    case MemoryKind::kOptimizer: return "optimizer";
    case MemoryKind::kActivations: return "activations";
    case MemoryKind::kWorkspace: return "workspace";
  }
  return "?";
}

const char* ToString(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kBf16: return "bf16";
    case DType::kF16: return "fp16";
    case DType::kI32: return "int32";
    case DType::kF64: return "fp64";
    case DType::kE4M3: return "fp8_e4m3";
    case DType::kE5M2: return "fp8_e5m2";
  }
  return "?";
}

const char* ToString(StreamKind s) {
  switch (s) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kTpComm: return "tp-comm";
    case StreamKind::kDpComm: return "dp-comm";
    case StreamKind::kPpComm: return "pp-comm";
    case StreamKind::kCpComm: return "cp-comm";
    case StreamKind::kEpComm: return "ep-comm";
  }
  return "?";
}

uint16_t FloatToBf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN stays NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Bf16ToFloat(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

uint16_t FloatToF16(float x) {
  // IEEE 754 binary32 -> binary16, round to nearest even, with subnormals, overflow to inf.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value = mantissa * 2^-24.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14 - (exp - 127) + 23 - 10 - 1 ... aligns to 2^-24 units
    uint32_t half = mant >> (shift);
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float F16ToFloat(uint16_t x) {
  const uint32_t sign = static_cast<uint32_t>(x & 0x8000u) << 16;
  const uint32_t exp = (x >> 10) & 0x1fu;
  const uint32_t mant = x & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// ---- tensors ---------------------------------------------------------------------------------

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    Reset();
    backend_ = o.backend_;
    data_ = o.data_;
    numel_ = o.numel_;
    dtype_ = o.dtype_;
    kind_ = o.kind_;
    block_bytes_ = o.block_bytes_;
    o.backend_ = nullptr;
    o.data_ = nullptr;
    o.numel_ = 0;
    o.block_bytes_ = 0;
  }
  return *this;
}

void Tensor::Reset() {
  if (data_ != nullptr && backend_ != nullptr) backend_->Release(data_, bytes(), block_bytes_, kind_);
  backend_ = nullptr;
  data_ = nullptr;
  numel_ = 0;
  block_bytes_ = 0;
}

// ---- caching allocator -----------------------------------------------------------------------
// Freed blocks are kept by size and handed out again to requests of the same rounded size (the
// hot path of a training step allocates the same shapes every micro-batch). Sizes round up to
// 512 B below 1 MiB and to 128 KiB above, so a block is at most 1/8 larger than asked for.

struct Backend::Cache {
  std::multimap<int64_t, void*> free_blocks;  // block bytes -> block
  int64_t cached_bytes = 0;
};

namespace {
int64_t RoundBlock(int64_t bytes) {
  constexpr int64_t kSmall = 512, kLarge = int64_t{128} * 1024, kMiB = int64_t{1} << 20;
  if (bytes <= 0) return kSmall;
  const int64_t unit = bytes < kMiB ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}
std::string Mib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

Backend::Backend() = default;
Backend::~Backend() = default;

void Backend::ReleaseCache() {
  if (!cache_) return;
  for (auto& [bytes, p] : cache_->free_blocks) RawFree(p);
  stats_.reserved_bytes -= cache_->cached_bytes;
  cache_->free_blocks.clear();
  cache_->cached_bytes = 0;
}

void Backend::EmptyCache() { ReleaseCache(); }

void Backend::SetMemoryLimit(int64_t bytes) { stats_.limit_bytes = bytes > 0 ? bytes : DeviceMemoryBytes(); }

Result<Tensor> Backend::Allocate(int64_t numel, DType dtype, MemoryKind kind) {
  if (!cache_) cache_ = std::make_unique<Cache>();
  if (stats_.limit_bytes == 0) stats_.limit_bytes = DeviceMemoryBytes();
  if (numel < 0) return Error{"negative allocation", ErrorKind::kInternal};
  const int64_t bytes = numel * SizeOf(dtype);
  const int64_t block = RoundBlock(bytes);
  void* p = nullptr;
  // Exact size class first (the common case), else fresh memory.
  if (auto it = cache_->free_blocks.find(block); it != cache_->free_blocks.end()) {
    p = it->second;
    cache_->free_blocks.erase(it);
    cache_->cached_bytes -= block;
  } else {
    if (stats_.reserved_bytes + block > stats_.limit_bytes) ReleaseCache();
    if (stats_.reserved_bytes + block <= stats_.limit_bytes) p = RawAllocate(block);
    if (p == nullptr && cache_->cached_bytes > 0) {
      ReleaseCache();
      p = RawAllocate(block);
    }
    if (p == nullptr) {
      const int64_t free_bytes = std::max<int64_t>(0, stats_.limit_bytes - stats_.reserved_bytes);
      return Error{name() + " backend: out of memory: asked for " + std::to_string(bytes) + " bytes (" + Mib(bytes) +
                       ") of " + ToString(kind) + ", " + std::to_string(free_bytes) + " bytes (" + Mib(free_bytes) +
                       ") free of a " + Mib(stats_.limit_bytes) + " limit, " + Mib(stats_.current_bytes) + " in use",
                   ErrorKind::kInternal};
    }
    stats_.reserved_bytes += block;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  stats_.current_bytes += bytes;
  stats_.current_by_kind[static_cast<size_t>(kind)] += bytes;
  if (stats_.current_bytes > stats_.peak_bytes) {
    stats_.peak_bytes = stats_.current_bytes;
    stats_.at_peak_by_kind = stats_.current_by_kind;
  }
  return Tensor(this, p, numel, dtype, kind, block);
}

Result<Tensor> Backend::AllocateZeroed(int64_t numel, DType dtype, MemoryKind kind) {
  auto t = Allocate(numel, dtype, kind);
  if (t && numel > 0) {
    if (dtype == DType::kI32 || dtype == DType::kF64) {
      // Fill works on float types; zero bytes are zero in every type.
      std::vector<char> zeros(static_cast<size_t>(t->bytes()), 0);
      CopyBytesToDevice(t->ptr(), zeros.data(), numel);
    } else {
      Fill(t->ptr(), numel, 0.0f);
    }
  }
  return t;
}

void Backend::Release(void* p, int64_t numel_bytes, int64_t block_bytes, MemoryKind kind) {
  stats_.current_bytes -= numel_bytes;
  stats_.current_by_kind[static_cast<size_t>(kind)] -= numel_bytes;
  cache_->free_blocks.emplace(block_bytes, p);
  cache_->cached_bytes += block_bytes;
}

void Backend::ResetPeak() {
  stats_.peak_bytes = stats_.current_bytes;
  stats_.at_peak_by_kind = stats_.current_by_kind;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

// ---- fused chains: generic defaults from the unfused kernels ---------------------------------

void Backend::Fp8Cast(const Fp8CastArgs& /*a*/) {
  Fail(Error{name() + " backend: no FP8 casts", ErrorKind::kInternal});
}

void Backend::Fp8Gemm(const Fp8GemmArgs& /*g*/) {
  Fail(Error{name() + " backend: no FP8 GEMMs", ErrorKind::kInternal});
}

void Backend::Fp8ScaleUpdate(const Fp8ScaleUpdateArgs& /*a*/) {
  Fail(Error{name() + " backend: no FP8 scale update", ErrorKind::kInternal});
}

void Backend::BiasGeluForward(const BiasGeluArgs& a) {
  if (a.bias) AddBias({.y = a.x, .bias = a.bias, .rows = a.rows, .cols = a.cols});
  GeluForward({.x = a.x, .y = a.y, .n = a.rows * a.cols});
}

void Backend::BiasGeluBackward(const BiasGeluBackwardArgs& a) {
  GeluBackward({.x = a.x, .dy = a.dy, .dx = a.dx, .n = a.rows * a.cols});
  if (a.dbias) BiasBackward({.dy = a.dx, .dbias = a.dbias, .rows = a.rows, .cols = a.cols});
}

namespace {
// out = x + residual (+ bias), the unfused way: Copy, Axpy, AddBias.
void JoinResidual(Backend& be, const ResidualAddArgs& a) {
  be.Copy({.dst = a.out, .src = a.residual, .n = a.rows * a.cols});
  be.Axpy({.y = a.out, .x = a.x, .n = a.rows * a.cols, .alpha = 1.0f});
  if (a.bias) be.AddBias({.y = a.out, .bias = a.bias, .rows = a.rows, .cols = a.cols});
}

ResidualAddArgs JoinOf(const ResidualNormArgs& a) {
  return {.x = a.x, .residual = a.residual, .bias = a.bias, .out = a.h, .rows = a.rows, .cols = a.cols};
}

NormArgs NormOfSum(const ResidualNormArgs& a) {
  return {.x = a.h, .gamma = a.gamma, .beta = a.beta, .y = a.y, .mean = a.mean, .rstd = a.rstd, .rows = a.rows,
          .cols = a.cols, .eps = a.eps};
}

// dx += the input gradient of `backward` (LayerNormBackward or RmsNormBackward), computed into a
// workspace tensor.
void BackwardAddThroughWorkspace(Backend& be, const NormBackwardArgs& a,
                                 void (Backend::*backward)(const NormBackwardArgs&)) {
  auto tmp = be.Allocate(a.rows * a.cols, a.dx.dtype, MemoryKind::kWorkspace);
  if (!tmp) return be.Fail(tmp.error());
  NormBackwardArgs into = a;
  into.dx = tmp->ptr();
  (be.*backward)(into);
  be.Axpy({.y = a.dx, .x = tmp->ptr(), .n = a.rows * a.cols, .alpha = 1.0f});
}
}  // namespace

void Backend::ResidualAdd(const ResidualAddArgs& a) { JoinResidual(*this, a); }

void Backend::Copy2D(const Copy2DArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    if (a.accumulate) {
      Axpy({.y = a.dst + r * a.dst_ld, .x = a.src + r * a.src_ld, .n = a.cols, .alpha = 1.0f});
    } else {
      Copy({.dst = a.dst + r * a.dst_ld, .src = a.src + r * a.src_ld, .n = a.cols});
    }
  }
}

void Backend::ResidualLayerNormForward(const ResidualNormArgs& a) {
  JoinResidual(*this, JoinOf(a));
  LayerNormForward(NormOfSum(a));
}

void Backend::ResidualRmsNormForward(const ResidualNormArgs& a) {
  JoinResidual(*this, JoinOf(a));
  RmsNormForward(NormOfSum(a));
}

void Backend::LayerNormBackwardAdd(const NormBackwardArgs& a) {
  BackwardAddThroughWorkspace(*this, a, &Backend::LayerNormBackward);
}

void Backend::RmsNormBackwardAdd(const NormBackwardArgs& a) {
  BackwardAddThroughWorkspace(*this, a, &Backend::RmsNormBackward);
}

std::string RankList(const std::vector<int>& ranks) {
  // Built piecewise: GCC 12 at -O3 warns falsely (-Wrestrict) on `"," + std::to_string(...)`
  // (docs/hardening.md).
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s.push_back(',');
    s.append(std::to_string(ranks[i]));
  }
  s.push_back(']');
  return s;
}

}  // namespace parallax::executor
