// Highway implementations of vector_kernels.h, compiled once per instruction set by
// foreach_target.h and chosen at run time by HWY_DYNAMIC_DISPATCH (Highway's documented pattern).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "executor/cpu/vector_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#ifndef PARALLAX_EXECUTOR_CPU_VECTOR_KERNELS_ONCE
#define PARALLAX_EXECUTOR_CPU_VECTOR_KERNELS_ONCE
#include "executor/cpu/vector_kernels.h"
#include "executor/dtype.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace parallax::executor::vec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;
constexpr float kExpArgMax = 88.0f;  // exp(88) < FLT_MAX: keeps 1 + exp() finite
constexpr int64_t kSumBlock = 512;   // float partial sums per block, blocks summed in double

// Applies `f(offset, mask_or_full)` over [0, n) a vector at a time, the tail with a mask.
// f(i, count) gets count == Lanes(d) except for the last call.
template <class F>
HWY_INLINE void ForEach(int64_t n, const F& f) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) f(i, lanes);
  if (i < n) f(i, n - i);
}

// Tails go through a stack buffer: Highway's MaskedLoad/BlendedStore are full-width loads and
// stores on some targets (SSE4, portable), which would touch memory past the end of the array.
constexpr size_t kMaxLanes = 64;  // 2048-bit vectors (the widest SVE) of float

HWY_INLINE V Load(const float* p, int64_t count) {
  const D d;
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::LoadU(d, p);
  alignas(64) float buf[kMaxLanes] = {};
  std::memcpy(buf, p, static_cast<size_t>(count) * sizeof(float));
  return hn::LoadU(d, buf);
}

HWY_INLINE void Store(V v, float* p, int64_t count) {
  const D d;
  if (count == static_cast<int64_t>(hn::Lanes(d))) {
    hn::StoreU(v, d, p);
    return;
  }
  alignas(64) float buf[kMaxLanes];
  hn::StoreU(v, d, buf);
  std::memcpy(p, buf, static_cast<size_t>(count) * sizeof(float));
}

// exp(-z) with the argument capped so that 1 + exp(-z) stays finite.
HWY_INLINE V ExpNegCapped(V z) {
  const D d;
  return hn::Exp(d, hn::Min(hn::Neg(z), hn::Set(d, kExpArgMax)));
}

// Where the cap was hit (z < -88), x sigmoid(z) and its derivatives are below 1e-36: return 0
// there rather than the value at the cap.
HWY_INLINE V ZeroWhereCapped(V z, V v) {
  const D d;
  return hn::IfThenZeroElse(hn::Lt(z, hn::Set(d, -kExpArgMax)), v);
}

// 2u = 2 sqrt(2/pi) (x + 0.044715 x^3)
HWY_INLINE V GeluTwoU(V x) {
  const D d;
  const V x2 = hn::Mul(x, x);
  return hn::Mul(hn::Mul(x, hn::Set(d, 2.0f * kSqrt2OverPi)), hn::MulAdd(x2, hn::Set(d, kGeluCoef), hn::Set(d, 1.0f)));
}

void GeluImpl(const float* x, float* y, int64_t n) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V v = Load(x + i, c);
    const V two_u = GeluTwoU(v);
    Store(ZeroWhereCapped(two_u, hn::Div(v, hn::Add(one, ExpNegCapped(two_u)))), y + i, c);
  });
}

void GeluGradImpl(const float* x, const float* dy, float* dx, int64_t n) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  const V k2 = hn::Set(d, 2.0f * kSqrt2OverPi);
  const V c3 = hn::Set(d, 3.0f * kGeluCoef);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V v = Load(x + i, c);
    const V two_u = GeluTwoU(v);
    const V e = ExpNegCapped(two_u);
    const V s = hn::Div(one, hn::Add(one, e));  // sigmoid(2u) = (1 + tanh u) / 2
    const V one_minus_s = hn::Mul(e, s);
    // d/dx [x s(2u)] = s + x s (1 - s) d(2u)/dx
    const V d2u = hn::Mul(k2, hn::MulAdd(c3, hn::Mul(v, v), one));
    const V g = ZeroWhereCapped(two_u, hn::MulAdd(hn::Mul(hn::Mul(v, s), one_minus_s), d2u, s));
    Store(hn::Mul(g, Load(dy + i, c)), dx + i, c);
  });
}

void SwigluImpl(const float* gate, const float* up, float* y, int64_t n) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V g = Load(gate + i, c);
    const V silu = ZeroWhereCapped(g, hn::Div(g, hn::Add(one, ExpNegCapped(g))));
    Store(hn::Mul(silu, Load(up + i, c)), y + i, c);
  });
}

void SwigluGradImpl(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V g = Load(gate + i, c);
    const V e = ExpNegCapped(g);
    const V s = hn::Div(one, hn::Add(one, e));
    const V dyv = Load(dy + i, c);
    const V uv = Load(up + i, c);
    // d silu/dg = s (1 + g (1 - s)), 1 - s = e s
    const V dsilu = ZeroWhereCapped(g, hn::Mul(s, hn::MulAdd(g, hn::Mul(e, s), one)));
    Store(hn::Mul(hn::Mul(dyv, uv), dsilu), dgate + i, c);
    Store(hn::Mul(dyv, ZeroWhereCapped(g, hn::Mul(g, s))), dup + i, c);
  });
}

void RotateHalfImpl(float* x, const float* cos, const float* sin, int64_t half) {
  ForEach(half, [&](int64_t i, int64_t c) {
    const V x1 = Load(x + i, c), x2 = Load(x + half + i, c);
    const V co = Load(cos + i, c), si = Load(sin + i, c);
    Store(hn::NegMulAdd(x2, si, hn::Mul(x1, co)), x + i, c);
    Store(hn::MulAdd(x1, si, hn::Mul(x2, co)), x + half + i, c);
  });
}

float MaxImpl(const float* x, int64_t n) {
  const D d;
  V m = hn::Set(d, x[0]);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V v = Load(x + i, c);
    m = c == static_cast<int64_t>(hn::Lanes(d)) ? hn::Max(m, v)
                                                 : hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(c)), hn::Max(m, v), m);
  });
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// Sum over [0, n) of term(i, count) (a vector), float within blocks of kSumBlock, double across.
template <class F>
HWY_INLINE double BlockSum(int64_t n, const F& term) {
  const D d;
  double total = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t e = std::min(n, b + kSumBlock);
    V acc0 = hn::Zero(d), acc1 = hn::Zero(d);
    bool odd = false;
    ForEach(e - b, [&](int64_t i, int64_t c) {
      if (odd) {
        acc1 = hn::Add(acc1, term(b + i, c));
      } else {
        acc0 = hn::Add(acc0, term(b + i, c));
      }
      odd = !odd;
    });
    total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1))));
  }
  return total;
}

// Masked-out lanes of a tail are loaded as zero, so exp(0 - shift) there must be zeroed again.
HWY_INLINE V ZeroTail(V v, int64_t c) {
  const D d;
  if (c == static_cast<int64_t>(hn::Lanes(d))) return v;
  return hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(c)), v);
}

double ExpShiftSumImpl(float* x, int64_t n, float shift) {
  const D d;
  const V sh = hn::Set(d, shift);
  return BlockSum(n, [&](int64_t i, int64_t c) {
    const V e = hn::Exp(d, hn::Sub(Load(x + i, c), sh));
    Store(e, x + i, c);
    return ZeroTail(e, c);
  });
}

double SumExpShiftImpl(const float* x, int64_t n, float shift) {
  const D d;
  const V sh = hn::Set(d, shift);
  return BlockSum(n, [&](int64_t i, int64_t c) { return ZeroTail(hn::Exp(d, hn::Sub(Load(x + i, c), sh)), c); });
}

void ExpShiftScaleImpl(const float* x, float* y, int64_t n, float shift, float mul) {
  const D d;
  const V sh = hn::Set(d, shift);
  const V mu = hn::Set(d, mul);
  ForEach(n, [&](int64_t i, int64_t c) { Store(hn::Mul(hn::Exp(d, hn::Sub(Load(x + i, c), sh)), mu), y + i, c); });
}

void ScaleImpl(float* x, int64_t n, float s) {
  const D d;
  const V sv = hn::Set(d, s);
  ForEach(n, [&](int64_t i, int64_t c) { Store(hn::Mul(Load(x + i, c), sv), x + i, c); });
}

void AddImpl(float* y, const float* x, int64_t n) {
  ForEach(n, [&](int64_t i, int64_t c) { Store(hn::Add(Load(y + i, c), Load(x + i, c)), y + i, c); });
}

void AxpyImpl(float* y, const float* x, int64_t n, float alpha) {
  const D d;
  const V a = hn::Set(d, alpha);
  ForEach(n, [&](int64_t i, int64_t c) { Store(hn::MulAdd(a, Load(x + i, c), Load(y + i, c)), y + i, c); });
}

void FillImpl(float* x, int64_t n, float value) {
  const D d;
  const V v = hn::Set(d, value);
  ForEach(n, [&](int64_t i, int64_t c) { Store(v, x + i, c); });
}

double SumSquaresImpl(const float* x, int64_t n) {
  return BlockSum(n, [&](int64_t i, int64_t c) {
    const V v = Load(x + i, c);
    return hn::Mul(v, v);
  });
}

void AddBiasImpl(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    ForEach(cols, [&](int64_t i, int64_t c) { Store(hn::Add(Load(row + i, c), Load(bias + i, c)), row + i, c); });
  }
}

// Column sums four rows at a time so dbias is loaded and stored once per four rows.
void BiasGradImpl(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* r0 = dy + r * cols;
    ForEach(cols, [&](int64_t i, int64_t c) {
      const V s = hn::Add(hn::Add(Load(r0 + i, c), Load(r0 + cols + i, c)),
                          hn::Add(Load(r0 + 2 * cols + i, c), Load(r0 + 3 * cols + i, c)));
      Store(hn::Add(Load(dbias + i, c), s), dbias + i, c);
    });
  }
  for (; r < rows; ++r) {
    const float* row = dy + r * cols;
    ForEach(cols, [&](int64_t i, int64_t c) { Store(hn::Add(Load(dbias + i, c), Load(row + i, c)), dbias + i, c); });
  }
}

double DotImpl(const float* a, const float* b, int64_t n) {
  return BlockSum(n, [&](int64_t i, int64_t c) { return hn::Mul(Load(a + i, c), Load(b + i, c)); });
}

void SoftmaxGradImpl(const float* p, float* dp, int64_t n, float scale) {
  const D d;
  const float dot = static_cast<float>(DotImpl(p, dp, n));
  const V dotv = hn::Set(d, dot);
  const V sc = hn::Set(d, scale);
  ForEach(n, [&](int64_t i, int64_t c) {
    Store(hn::Mul(hn::Mul(Load(p + i, c), hn::Sub(Load(dp + i, c), dotv)), sc), dp + i, c);
  });
}

// Rows of a causal score block (row r has len = first_len + r valid columns, leading dimension
// ld): where the row has room for its last vector (len rounded up to whole vectors <= ld), the
// tail is loaded and stored full width under a mask instead of through the stack buffer; lanes
// past len read don't-care values (masked out of every result) and are stored as zeros. Results
// equal the per-row Max/ExpShiftSum/Scale and SoftmaxGrad calls (same lanes, same sum order).
HWY_INLINE V LoadRow(const float* p, int64_t count, bool room) {
  const D d;
  if (count == static_cast<int64_t>(hn::Lanes(d)) || !room) return Load(p, count);
  return hn::LoadU(d, p);
}

HWY_INLINE void StoreRow(V v, float* p, int64_t count, bool room) {
  const D d;
  if (count == static_cast<int64_t>(hn::Lanes(d)) || !room) return Store(v, p, count);
  hn::StoreU(hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(count)), v), d, p);
}

HWY_INLINE int64_t RoundUpToLanes(int64_t n) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  return (n + lanes - 1) / lanes * lanes;
}

// Zeros of row columns [written, zero_to).
HWY_INLINE void ZeroRowTail(float* x, int64_t written, int64_t zero_to) {
  if (zero_to > written) std::memset(x + written, 0, static_cast<size_t>(zero_to - written) * sizeof(float));
}

// Zeros of the `start` columns before x (the keys a local-attention row no longer sees).
HWY_INLINE void ZeroRowHead(float* x, int64_t start) {
  if (start > 0) std::memset(x - start, 0, static_cast<size_t>(start) * sizeof(float));
}

void SoftmaxRowsLseImpl(float* rows, const ScoreRows& s, float* lse, int64_t lse_stride) {
  const D d;
  for (int64_t r = 0; r < s.count; ++r) {
    const int64_t start = s.Start(r);
    float* x = rows + r * s.ld + start;
    ZeroRowHead(x, start);
    const int64_t len = s.Len(r) - start, padded = RoundUpToLanes(len), zero_to = s.zero_to - start;
    if (len == 0) {
      ZeroRowTail(x, 0, zero_to);
      lse[r * lse_stride] = -INFINITY;
      continue;
    }
    const bool room = start + padded <= s.ld;
    V m = hn::Set(d, x[0]);
    ForEach(len, [&](int64_t i, int64_t c) {
      const V v = LoadRow(x + i, c, room);
      m = c == static_cast<int64_t>(hn::Lanes(d)) ? hn::Max(m, v)
                                                   : hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(c)), hn::Max(m, v), m);
    });
    const float max = hn::GetLane(hn::MaxOfLanes(d, m));
    const V sh = hn::Set(d, max);
    const double sum = BlockSum(len, [&](int64_t i, int64_t c) {
      const V e = ZeroTail(hn::Exp(d, hn::Sub(LoadRow(x + i, c, room), sh)), c);
      StoreRow(e, x + i, c, room);
      return e;
    });
    const V inv = hn::Set(d, static_cast<float>(1.0 / sum));
    ForEach(len, [&](int64_t i, int64_t c) { StoreRow(hn::Mul(LoadRow(x + i, c, room), inv), x + i, c, room); });
    ZeroRowTail(x, room ? padded : len, zero_to);
    lse[r * lse_stride] = max + static_cast<float>(std::log(sum));
  }
}

void ExpMinusLseRowsImpl(float* rows, const ScoreRows& s, const float* lse, int64_t lse_stride) {
  const D d;
  for (int64_t r = 0; r < s.count; ++r) {
    const int64_t start = s.Start(r);
    float* x = rows + r * s.ld + start;
    ZeroRowHead(x, start);
    const int64_t len = s.Len(r) - start, padded = RoundUpToLanes(len);
    const bool room = start + padded <= s.ld;
    const V sh = hn::Set(d, lse[r * lse_stride]);
    if (len > 0) {
      ForEach(len, [&](int64_t i, int64_t c) {
        StoreRow(hn::Exp(d, hn::Sub(LoadRow(x + i, c, room), sh)), x + i, c, room);
      });
    }
    ZeroRowTail(x, len > 0 && room ? padded : len, s.zero_to - start);
  }
}

void SoftmaxGradDeltaRowsImpl(const float* p, float* dp, const ScoreRows& s, const float* delta, float scale) {
  const D d;
  const V sc = hn::Set(d, scale);
  for (int64_t r = 0; r < s.count; ++r) {
    const int64_t start = s.Start(r);
    const float* pr = p + r * s.ld + start;
    float* g = dp + r * s.ld + start;
    ZeroRowHead(g, start);
    const int64_t len = s.Len(r) - start, padded = RoundUpToLanes(len);
    const bool room = start + padded <= s.ld;
    const V dv = hn::Set(d, delta[r]);
    if (len > 0) {
      ForEach(len, [&](int64_t i, int64_t c) {
        StoreRow(hn::Mul(hn::Mul(LoadRow(pr + i, c, room), hn::Sub(LoadRow(g + i, c, room), dv)), sc), g + i, c, room);
      });
    }
    ZeroRowTail(g, len > 0 && room ? padded : len, s.zero_to - start);
  }
}

void LayerNormRowImpl(const float* x, const float* gamma, const float* beta, float* y, int64_t n, float eps,
                      float* mean, float* rstd) {
  const D d;
  const double mu = BlockSum(n, [&](int64_t i, int64_t c) { return Load(x + i, c); }) / static_cast<double>(n);
  const V m = hn::Set(d, static_cast<float>(mu));
  const double var = BlockSum(n, [&](int64_t i, int64_t c) {
                       const V xc = ZeroTail(hn::Sub(Load(x + i, c), m), c);
                       return hn::Mul(xc, xc);
                     }) /
                     static_cast<double>(n);
  const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
  const V r = hn::Set(d, rs);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V g = hn::Mul(Load(gamma + i, c), r);
    const V b = beta ? Load(beta + i, c) : hn::Zero(d);
    Store(hn::MulAdd(hn::Sub(Load(x + i, c), m), g, b), y + i, c);
  });
  *mean = static_cast<float>(mu);
  *rstd = rs;
}

void LayerNormGradRowImpl(const float* dy, const float* x, const float* gamma, float mean, float rstd, float* dx,
                          float* dgamma, float* dbeta, int64_t n, bool accumulate) {
  const D d;
  const V m = hn::Set(d, mean);
  const V r = hn::Set(d, rstd);
  // Pass 1: dgamma, dbeta and the two row sums.
  double sum_g = 0, sum_gx = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t e = std::min(n, b + kSumBlock);
    V ag = hn::Zero(d), agx = hn::Zero(d);
    ForEach(e - b, [&](int64_t j, int64_t c) {
      const int64_t i = b + j;
      const V dyv = Load(dy + i, c);
      const V xhat = hn::Mul(hn::Sub(Load(x + i, c), m), r);
      const V g = hn::Mul(dyv, Load(gamma + i, c));
      ag = hn::Add(ag, g);
      agx = hn::MulAdd(g, xhat, agx);
      Store(hn::MulAdd(dyv, xhat, Load(dgamma + i, c)), dgamma + i, c);
      if (dbeta) Store(hn::Add(dyv, Load(dbeta + i, c)), dbeta + i, c);
    });
    sum_g += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, ag)));
    sum_gx += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, agx)));
  }
  const V mg = hn::Set(d, static_cast<float>(sum_g / static_cast<double>(n)));
  const V mgx = hn::Set(d, static_cast<float>(sum_gx / static_cast<double>(n)));
  // Pass 2: dx = rstd (dy gamma - mean(g) - xhat mean(g xhat)).
  ForEach(n, [&](int64_t i, int64_t c) {
    const V xhat = hn::Mul(hn::Sub(Load(x + i, c), m), r);
    const V g = hn::Mul(Load(dy + i, c), Load(gamma + i, c));
    V out = hn::Mul(r, hn::NegMulAdd(xhat, mgx, hn::Sub(g, mg)));
    if (accumulate) out = hn::Add(out, Load(dx + i, c));
    Store(out, dx + i, c);
  });
}

void RmsNormRowImpl(const float* x, const float* gamma, float* y, int64_t n, float eps, float* rstd) {
  const D d;
  const double ms = BlockSum(n, [&](int64_t i, int64_t c) {
                      const V v = Load(x + i, c);
                      return hn::Mul(v, v);
                    }) /
                    static_cast<double>(n);
  const float rs = static_cast<float>(1.0 / std::sqrt(ms + eps));
  const V r = hn::Set(d, rs);
  ForEach(n, [&](int64_t i, int64_t c) { Store(hn::Mul(hn::Mul(Load(x + i, c), r), Load(gamma + i, c)), y + i, c); });
  *rstd = rs;
}

void RmsNormGradRowImpl(const float* dy, const float* x, const float* gamma, float rstd, float* dx, float* dgamma,
                        int64_t n, bool accumulate) {
  const D d;
  const V r = hn::Set(d, rstd);
  double sum_gx = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t e = std::min(n, b + kSumBlock);
    V agx = hn::Zero(d);
    ForEach(e - b, [&](int64_t j, int64_t c) {
      const int64_t i = b + j;
      const V dyv = Load(dy + i, c);
      const V xhat = hn::Mul(Load(x + i, c), r);
      agx = hn::MulAdd(hn::Mul(dyv, Load(gamma + i, c)), xhat, agx);
      Store(hn::MulAdd(dyv, xhat, Load(dgamma + i, c)), dgamma + i, c);
    });
    sum_gx += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, agx)));
  }
  const V mgx = hn::Set(d, static_cast<float>(sum_gx / static_cast<double>(n)));
  ForEach(n, [&](int64_t i, int64_t c) {
    const V xhat = hn::Mul(Load(x + i, c), r);
    const V g = hn::Mul(Load(dy + i, c), Load(gamma + i, c));
    V out = hn::Mul(r, hn::NegMulAdd(xhat, mgx, g));
    if (accumulate) out = hn::Add(out, Load(dx + i, c));
    Store(out, dx + i, c);
  });
}

void AdamWImpl(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWScalars& s) {
  const D d;
  const V b1 = hn::Set(d, s.beta1), b2 = hn::Set(d, s.beta2);
  const V ob1 = hn::Set(d, 1.0f - s.beta1), ob2 = hn::Set(d, 1.0f - s.beta2);
  const V step = hn::Set(d, s.step_size), ibc2 = hn::Set(d, s.inv_sqrt_bc2), eps = hn::Set(d, s.eps);
  const V decay = hn::Set(d, s.decay), gs = hn::Set(d, s.grad_scale);
  ForEach(n, [&](int64_t i, int64_t c) {
    const V g = hn::Mul(Load(grad + i, c), gs);
    const V mv = hn::MulAdd(b1, Load(m + i, c), hn::Mul(ob1, g));
    const V vv = hn::MulAdd(b2, Load(v + i, c), hn::Mul(ob2, hn::Mul(g, g)));
    const V denom = hn::MulAdd(hn::Sqrt(vv), ibc2, eps);
    const V p = hn::NegMulAdd(step, hn::Div(mv, denom), hn::Mul(Load(param + i, c), decay));
    Store(mv, m + i, c);
    Store(vv, v + i, c);
    Store(p, param + i, c);
  });
}

// fp32 <-> bf16 bit for bit as FloatToBf16 / Bf16ToFloat (executor/dtype.h): round to nearest
// even on the bits, a NaN stays a quiet NaN. Integer lanes; the tail goes through the scalar ones.
void F32ToBf16Impl(const float* x, uint16_t* y, int64_t n) {
  const hn::ScalableTag<int32_t> di;
  const hn::Rebind<uint16_t, decltype(di)> dh;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(di));
  const auto one = hn::Set(di, 1), bias = hn::Set(di, 0x7fff), abs_mask = hn::Set(di, 0x7fffffff);
  const auto inf = hn::Set(di, 0x7f800000), quiet = hn::Set(di, 0x40), low16 = hn::Set(di, 0xffff);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = hn::BitCast(di, hn::LoadU(hn::RebindToFloat<decltype(di)>(), x + i));
    const auto high = hn::And(hn::ShiftRight<16>(bits), low16);  // logical: the sign bit stays
    const auto rounded = hn::And(hn::ShiftRight<16>(hn::Add(bits, hn::Add(bias, hn::And(high, one)))), low16);
    const auto nan = hn::Gt(hn::And(bits, abs_mask), inf);
    hn::StoreU(hn::DemoteTo(dh, hn::IfThenElse(nan, hn::Or(high, quiet), rounded)), dh, y + i);
  }
  for (; i < n; ++i) y[i] = FloatToBf16(x[i]);
}

void Bf16ToF32Impl(const uint16_t* x, float* y, int64_t n) {
  const hn::ScalableTag<int32_t> di;
  const hn::Rebind<uint16_t, decltype(di)> dh;
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(di));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto wide = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<decltype(di)>(), hn::LoadU(dh, x + i)));
    hn::StoreU(hn::BitCast(d, hn::ShiftLeft<16>(wide)), d, y + i);
  }
  for (; i < n; ++i) y[i] = Bf16ToFloat(x[i]);
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace parallax::executor::vec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace parallax::executor::vec {

HWY_EXPORT(GeluImpl);
HWY_EXPORT(GeluGradImpl);
HWY_EXPORT(SwigluImpl);
HWY_EXPORT(SwigluGradImpl);
HWY_EXPORT(MaxImpl);
HWY_EXPORT(RotateHalfImpl);
HWY_EXPORT(ExpShiftSumImpl);
HWY_EXPORT(ExpShiftScaleImpl);
HWY_EXPORT(SumExpShiftImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(AxpyImpl);
HWY_EXPORT(FillImpl);
HWY_EXPORT(SumSquaresImpl);
HWY_EXPORT(AddBiasImpl);
HWY_EXPORT(BiasGradImpl);
HWY_EXPORT(SoftmaxGradImpl);
HWY_EXPORT(SoftmaxRowsLseImpl);
HWY_EXPORT(ExpMinusLseRowsImpl);
HWY_EXPORT(SoftmaxGradDeltaRowsImpl);
HWY_EXPORT(LayerNormRowImpl);
HWY_EXPORT(LayerNormGradRowImpl);
HWY_EXPORT(RmsNormRowImpl);
HWY_EXPORT(RmsNormGradRowImpl);
HWY_EXPORT(AdamWImpl);
HWY_EXPORT(F32ToBf16Impl);
HWY_EXPORT(Bf16ToF32Impl);
HWY_EXPORT(TargetNameImpl);

void Gelu(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluImpl)(x, y, n); }
void GeluGrad(const float* x, const float* dy, float* dx, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluGradImpl)(x, dy, dx, n); }
void Swiglu(const float* gate, const float* up, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(SwigluImpl)(gate, up, y, n); }
void SwigluGrad(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SwigluGradImpl)(gate, up, dy, dgate, dup, n);
}
void RotateHalf(float* x, const float* cos, const float* sin, int64_t half) {
  HWY_DYNAMIC_DISPATCH(RotateHalfImpl)(x, cos, sin, half);
}
float Max(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(MaxImpl)(x, n); }
double ExpShiftSum(float* x, int64_t n, float shift) { return HWY_DYNAMIC_DISPATCH(ExpShiftSumImpl)(x, n, shift); }
double SumExpShift(const float* x, int64_t n, float shift) {
  return HWY_DYNAMIC_DISPATCH(SumExpShiftImpl)(x, n, shift);
}
void ExpShiftScale(const float* x, float* y, int64_t n, float shift, float mul) {
  HWY_DYNAMIC_DISPATCH(ExpShiftScaleImpl)(x, y, n, shift, mul);
}
void Scale(float* x, int64_t n, float s) { HWY_DYNAMIC_DISPATCH(ScaleImpl)(x, n, s); }
void Add(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(AddImpl)(y, x, n); }
void Axpy(float* y, const float* x, int64_t n, float alpha) { HWY_DYNAMIC_DISPATCH(AxpyImpl)(y, x, n, alpha); }
void Fill(float* x, int64_t n, float value) { HWY_DYNAMIC_DISPATCH(FillImpl)(x, n, value); }
double SumSquares(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumSquaresImpl)(x, n); }
void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  HWY_DYNAMIC_DISPATCH(AddBiasImpl)(y, bias, rows, cols);
}
void BiasGrad(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  HWY_DYNAMIC_DISPATCH(BiasGradImpl)(dy, dbias, rows, cols);
}
double Dot(const float* a, const float* b, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n); }
void SoftmaxGrad(const float* p, float* dp, int64_t n, float scale) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGradImpl)(p, dp, n, scale);
}
void SoftmaxRowsLse(float* rows, const ScoreRows& s, float* lse, int64_t lse_stride) {
  HWY_DYNAMIC_DISPATCH(SoftmaxRowsLseImpl)(rows, s, lse, lse_stride);
}
void ExpMinusLseRows(float* rows, const ScoreRows& s, const float* lse, int64_t lse_stride) {
  HWY_DYNAMIC_DISPATCH(ExpMinusLseRowsImpl)(rows, s, lse, lse_stride);
}
void SoftmaxGradDeltaRows(const float* p, float* dp, const ScoreRows& s, const float* delta, float scale) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGradDeltaRowsImpl)(p, dp, s, delta, scale);
}
void LayerNormRow(const float* x, const float* gamma, const float* beta, float* y, int64_t n, float eps, float* mean,
                  float* rstd) {
  HWY_DYNAMIC_DISPATCH(LayerNormRowImpl)(x, gamma, beta, y, n, eps, mean, rstd);
}
void LayerNormGradRow(const float* dy, const float* x, const float* gamma, float mean, float rstd, float* dx,
                      float* dgamma, float* dbeta, int64_t n, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(LayerNormGradRowImpl)(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, n, accumulate);
}
void RmsNormRow(const float* x, const float* gamma, float* y, int64_t n, float eps, float* rstd) {
  HWY_DYNAMIC_DISPATCH(RmsNormRowImpl)(x, gamma, y, n, eps, rstd);
}
void RmsNormGradRow(const float* dy, const float* x, const float* gamma, float rstd, float* dx, float* dgamma,
                    int64_t n, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(RmsNormGradRowImpl)(dy, x, gamma, rstd, dx, dgamma, n, accumulate);
}
void AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWScalars& s) {
  HWY_DYNAMIC_DISPATCH(AdamWImpl)(param, grad, m, v, n, s);
}
void F32ToBf16(const float* x, uint16_t* y, int64_t n) { HWY_DYNAMIC_DISPATCH(F32ToBf16Impl)(x, y, n); }
void Bf16ToF32(const uint16_t* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(Bf16ToF32Impl)(x, y, n); }
const char* TargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }
std::vector<int64_t> TargetsForTest() { return hwy::SupportedAndGeneratedTargets(); }
void ForceTargetForTest(int64_t target) { hwy::SetSupportedTargetsForTest(target); }

}  // namespace parallax::executor::vec
#endif  // HWY_ONCE
