// CPU backend kernels against straightforward reference loops (fresh random inputs, never zeros)
// and input gradients against central finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>
#include <functional>
#include <random>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/fused_kernels.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {
namespace {

using Vec = std::vector<float>;

Vec Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double MaxRelError(const Vec& a, const Vec& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-12);
}

// Central finite-difference gradient of scalar f with respect to x (in double via float steps).
Vec NumericGrad(Vec& x, const std::function<double()>& f, float h = 1e-2f) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    const double up = f();
    x[i] = keep - h;
    const double down = f();
    x[i] = keep;
    g[i] = static_cast<float>((up - down) / (2.0 * h));
  }
  return g;
}

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

class CpuKernels : public ::testing::Test {
 protected:
  CpuBackend be;
  std::mt19937 rng{42};
};

TEST_F(CpuKernels, GemmMatchesReferenceForEveryTranspose) {
  const int64_t m = 7, n = 5, k = 9;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      Vec a = Random(static_cast<size_t>(m * k), rng), b = Random(static_cast<size_t>(k * n), rng);
      Vec c = Random(static_cast<size_t>(m * n), rng), ref = c;
      const int64_t lda = ta == Trans::kNo ? k : m, ldb = tb == Trans::kNo ? n : k;
      be.Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p) {
            const float av = ta == Trans::kNo ? a[static_cast<size_t>(i * k + p)] : a[static_cast<size_t>(p * m + i)];
            const float bv = tb == Trans::kNo ? b[static_cast<size_t>(p * n + j)] : b[static_cast<size_t>(j * k + p)];
            s += static_cast<double>(av) * bv;
          }
          ref[static_cast<size_t>(i * n + j)] = static_cast<float>(0.5 * s + 2.0 * ref[static_cast<size_t>(i * n + j)]);
        }
      }
      EXPECT_LT(MaxRelError(c, ref), 1e-5) << "ta=" << (ta == Trans::kYes) << " tb=" << (tb == Trans::kYes);
    }
  }
}

TEST_F(CpuKernels, LayerNormForwardAndGradients) {
  const int64_t rows = 3, cols = 8;
  Vec x = Random(rows * cols, rng), gamma = Random(cols, rng), beta = Random(cols, rng), w = Random(rows * cols, rng);
  Vec y(rows * cols), mean(rows), rstd(rows);
  be.LayerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mu += x[r * cols + c];
    mu /= cols;
    for (int64_t c = 0; c < cols; ++c) var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
    var /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double ref = (x[r * cols + c] - mu) / std::sqrt(var + 1e-5) * gamma[c] + beta[c];
      EXPECT_NEAR(y[r * cols + c], ref, 1e-5);
    }
  }
  auto loss = [&] {
    Vec yy(rows * cols), mm(rows), rr(rows);
    be.LayerNormForward(x.data(), gamma.data(), beta.data(), yy.data(), mm.data(), rr.data(), rows, cols, 1e-5f);
    return Dot(yy, w);
  };
  Vec dx(rows * cols), dgamma(cols, 0.0f), dbeta(cols, 0.0f);
  be.LayerNormBackward(w.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
                       dbeta.data(), rows, cols);
  EXPECT_LT(MaxRelError(dx, NumericGrad(x, loss)), 2e-3);
  EXPECT_LT(MaxRelError(dgamma, NumericGrad(gamma, loss)), 2e-3);
  EXPECT_LT(MaxRelError(dbeta, NumericGrad(beta, loss)), 2e-3);
}

TEST_F(CpuKernels, RmsNormForwardAndGradients) {
  const int64_t rows = 4, cols = 6;
  Vec x = Random(rows * cols, rng), gamma = Random(cols, rng), w = Random(rows * cols, rng);
  Vec y(rows * cols), rstd(rows);
  be.RmsNormForward(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols, 1e-5f);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < cols; ++c) ms += x[r * cols + c] * x[r * cols + c];
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_NEAR(y[r * cols + c], x[r * cols + c] / std::sqrt(ms / cols + 1e-5) * gamma[c], 1e-5);
    }
  }
  auto loss = [&] {
    Vec yy(rows * cols), rr(rows);
    be.RmsNormForward(x.data(), gamma.data(), yy.data(), rr.data(), rows, cols, 1e-5f);
    return Dot(yy, w);
  };
  Vec dx(rows * cols), dgamma(cols, 0.0f);
  be.RmsNormBackward(w.data(), x.data(), gamma.data(), rstd.data(), dx.data(), dgamma.data(), rows, cols);
  EXPECT_LT(MaxRelError(dx, NumericGrad(x, loss)), 2e-3);
  EXPECT_LT(MaxRelError(dgamma, NumericGrad(gamma, loss)), 2e-3);
}

TEST_F(CpuKernels, GeluAndSwigluGradients) {
  const int64_t n = 16;
  Vec x = Random(n, rng), up = Random(n, rng), w = Random(n, rng);
  Vec y(n);
  be.GeluForward(x.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    EXPECT_NEAR(y[i], 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-6);
  }
  auto gelu_loss = [&] {
    Vec yy(n);
    be.GeluForward(x.data(), yy.data(), n);
    return Dot(yy, w);
  };
  Vec dx(n);
  be.GeluBackward(x.data(), w.data(), dx.data(), n);
  EXPECT_LT(MaxRelError(dx, NumericGrad(x, gelu_loss)), 2e-3);

  be.SwigluForward(x.data(), up.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] / (1 + std::exp(-x[i])) * up[i], 1e-6);
  auto swiglu_loss = [&] {
    Vec yy(n);
    be.SwigluForward(x.data(), up.data(), yy.data(), n);
    return Dot(yy, w);
  };
  Vec dg(n), du(n);
  be.SwigluBackward(x.data(), up.data(), w.data(), dg.data(), du.data(), n);
  EXPECT_LT(MaxRelError(dg, NumericGrad(x, swiglu_loss)), 2e-3);
  EXPECT_LT(MaxRelError(du, NumericGrad(up, swiglu_loss)), 2e-3);
}

TEST_F(CpuKernels, RotaryMatchesFormulaAndInverts) {
  struct Shape {
    int64_t seq, batch, heads, d;
  };
  for (const Shape sh : {Shape{5, 2, 3, 4}, Shape{130, 2, 2, 64}, Shape{7, 1, 2, 38}}) {
    const int64_t seq = sh.seq, batch = sh.batch, heads = sh.heads, d = sh.d, half = d / 2;
    Vec x = Random(seq * batch * heads * d, rng), y = x;
    be.Rotary(y.data(), seq, batch, heads, d, 0, false);
    Vec ref(x.size());
    for (int64_t p = 0; p < seq; ++p) {
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = ((p * batch + b) * heads + h) * d;
          for (int64_t j = 0; j < half; ++j) {
            const double th = p * std::pow(10000.0, -2.0 * j / d);
            ref[base + j] = static_cast<float>(x[base + j] * std::cos(th) - x[base + j + half] * std::sin(th));
            ref[base + j + half] = static_cast<float>(x[base + j + half] * std::cos(th) + x[base + j] * std::sin(th));
          }
        }
      }
    }
    // theta = pos * freq is rounded to fp32 first (as the kernel does): 1e-7 relative of up to 130 rad.
    EXPECT_LT(MaxRelError(y, ref), 5e-5) << "d " << d;
    be.Rotary(y.data(), seq, batch, heads, d, 0, true);
    EXPECT_LT(MaxRelError(y, x), 1e-5) << "d " << d;
  }
}

// Reference attention in double, straight from the definition, over the keys each row sees
// (AttentionShape::VisibleKeys); lse (optional) gets each row's log-sum-exp, -inf when it sees none.
Vec ReferenceAttention(const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v, Vec* lse = nullptr) {
  Vec out(static_cast<size_t>(s.q_elements()), 0.0f);
  if (lse) lse->assign(static_cast<size_t>(s.stats_floats()), -INFINITY);
  const int64_t group = s.heads / s.kv_heads;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t j0 = s.FirstVisibleKey(i), n = s.VisibleKeys(i) - j0;
        if (n <= 0) continue;
        std::vector<double> sc(static_cast<size_t>(n));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < s.head_dim; ++e) {
            dot += q[((i * s.batch + b) * s.heads + h) * s.head_dim + e] *
                   k[(((j0 + j) * s.batch + b) * s.kv_heads + h / group) * s.head_dim + e];
          }
          sc[j] = dot / std::sqrt(static_cast<double>(s.head_dim));
          mx = std::max(mx, sc[j]);
        }
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        if (lse) (*lse)[(i * s.batch + b) * s.heads + h] = static_cast<float>(mx + std::log(sum));
        for (int64_t e = 0; e < s.head_dim; ++e) {
          double o = 0;
          for (int64_t j = 0; j < n; ++j) {
            o += sc[j] / sum * v[(((j0 + j) * s.batch + b) * s.kv_heads + h / group) * s.head_dim + e];
          }
          out[((i * s.batch + b) * s.heads + h) * s.head_dim + e] = static_cast<float>(o);
        }
      }
    }
  }
  return out;
}

//! Forward then backward of the CPU kernels on one shape (dout given).
struct AttentionRun {
  Vec out, lse, dq, dk, dv;
};
AttentionRun RunAttention(CpuBackend& be, const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v,
                          const Vec& dout) {
  AttentionRun r{Vec(q.size()), Vec(static_cast<size_t>(s.stats_floats())), Vec(q.size()), Vec(k.size()),
                 Vec(v.size())};
  be.AttentionForward(s, q.data(), k.data(), v.data(), r.out.data(), r.lse.data());
  be.AttentionBackward(s, {.q = q.data(), .k = k.data(), .v = v.data(), .out = r.out.data(), .lse = r.lse.data(),
                           .dout = dout.data(), .dq = r.dq.data(), .dk = r.dk.data(), .dv = r.dv.data()});
  return r;
}

TEST_F(CpuKernels, AttentionForwardBackwardWithGroupedQueries) {
  const AttentionShape s{.batch = 2, .seq = 5, .heads = 4, .kv_heads = 2, .head_dim = 3};
  const size_t qn = static_cast<size_t>(s.q_elements()), kn = static_cast<size_t>(s.kv_elements());
  Vec q = Random(qn, rng), k = Random(kn, rng), v = Random(kn, rng), w = Random(qn, rng);
  const AttentionRun r = RunAttention(be, s, q, k, v, w);
  Vec ref_lse;
  EXPECT_LT(MaxRelError(r.out, ReferenceAttention(s, q, k, v, &ref_lse)), 1e-5);
  EXPECT_LT(MaxRelError(r.lse, ref_lse), 1e-5);
  auto loss = [&] {
    Vec o(qn), l(static_cast<size_t>(s.stats_floats()));
    be.AttentionForward(s, q.data(), k.data(), v.data(), o.data(), l.data());
    return Dot(o, w);
  };
  EXPECT_LT(MaxRelError(r.dq, NumericGrad(q, loss)), 3e-3);
  EXPECT_LT(MaxRelError(r.dk, NumericGrad(k, loss)), 3e-3);
  EXPECT_LT(MaxRelError(r.dv, NumericGrad(v, loss)), 3e-3);
}

TEST_F(CpuKernels, VocabParallelEmbeddingAndCrossEntropyMatchFullVocabulary) {
  const int64_t rows = 6, vocab = 10, hidden = 4, half = vocab / 2;
  Vec table = Random(vocab * hidden, rng);
  std::vector<int32_t> tokens{0, 3, 9, 5, 4, 7};
  // Two vocabulary halves sum to the full lookup.
  Vec full(rows * hidden), lo(rows * hidden), hi(rows * hidden);
  be.EmbeddingForward(tokens.data(), rows, table.data(), 0, vocab, hidden, full.data());
  be.EmbeddingForward(tokens.data(), rows, table.data(), 0, half, hidden, lo.data());
  be.EmbeddingForward(tokens.data(), rows, table.data() + half * hidden, half, half, hidden, hi.data());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_FLOAT_EQ(full[i], lo[i] + hi[i]);
  for (int64_t t = 0; t < rows; ++t) EXPECT_FLOAT_EQ(full[t * hidden + 1], table[tokens[t] * hidden + 1]);
  Vec dtable(vocab * hidden, 0.0f), dout = Random(rows * hidden, rng);
  be.EmbeddingBackward(tokens.data(), rows, dout.data(), 0, vocab, hidden, dtable.data());
  EXPECT_FLOAT_EQ(dtable[9 * hidden + 2], dout[2 * hidden + 2]);
  EXPECT_FLOAT_EQ(dtable[1 * hidden], 0.0f);

  // Cross-entropy split over two vocabulary halves equals the full-vocabulary loss and gradient.
  Vec logits = Random(rows * vocab, rng, 2.0f);
  std::vector<int32_t> targets{1, 8, 4, 5, 0, 9};
  auto ce = [&] {
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -1e300, s = 0;
      for (int64_t c = 0; c < vocab; ++c) mx = std::max<double>(mx, logits[r * vocab + c]);
      for (int64_t c = 0; c < vocab; ++c) s += std::exp(logits[r * vocab + c] - mx);
      total += std::log(s) + mx - logits[r * vocab + targets[r]];
    }
    return total;
  };
  Vec part0(rows * half), part1(rows * half);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < half; ++c) {
      part0[r * half + c] = logits[r * vocab + c];
      part1[r * half + c] = logits[r * vocab + half + c];
    }
  }
  Vec m0(rows), m1(rows), gmax(rows), s0(rows), t0(rows), s1(rows), t1(rows);
  be.RowMax(part0.data(), rows, half, m0.data());
  be.RowMax(part1.data(), rows, half, m1.data());
  for (int64_t r = 0; r < rows; ++r) gmax[r] = std::max(m0[r], m1[r]);
  be.CrossEntropyStats(part0.data(), rows, half, gmax.data(), targets.data(), 0, s0.data(), t0.data());
  be.CrossEntropyStats(part1.data(), rows, half, gmax.data(), targets.data(), half, s1.data(), t1.data());
  double loss = 0;
  Vec sum(rows);
  for (int64_t r = 0; r < rows; ++r) {
    sum[r] = s0[r] + s1[r];
    loss += std::log(sum[r]) + gmax[r] - (t0[r] + t1[r]);
  }
  EXPECT_NEAR(loss, ce(), 1e-4);
  Vec d0(rows * half), d1(rows * half), d(rows * vocab);
  be.CrossEntropyBackward(part0.data(), rows, half, gmax.data(), sum.data(), targets.data(), 0, 1.0f, d0.data());
  be.CrossEntropyBackward(part1.data(), rows, half, gmax.data(), sum.data(), targets.data(), half, 1.0f, d1.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < half; ++c) {
      d[r * vocab + c] = d0[r * half + c];
      d[r * vocab + half + c] = d1[r * half + c];
    }
  }
  EXPECT_LT(MaxRelError(d, NumericGrad(logits, ce)), 3e-3);
}

TEST_F(CpuKernels, AdamWMatchesTheAlgorithm) {
  const int64_t n = 8;
  Vec p = Random(n, rng), g = Random(n, rng), m = Random(n, rng, 0.1f), v(n);
  for (auto& x : v) x = std::abs(Random(1, rng)[0]) * 0.01f;
  Vec p2 = p, m2 = m, v2 = v;
  AdamWParams a;
  a.lr = 1e-2;
  a.beta1 = 0.9;
  a.beta2 = 0.95;
  a.eps = 1e-8;
  a.weight_decay = 0.1;
  a.step = 3;
  a.grad_scale = 0.5;
  be.AdamW(p.data(), g.data(), m.data(), v.data(), n, a);
  for (int64_t i = 0; i < n; ++i) {
    const double gg = g[i] * 0.5;
    const double mm = 0.9 * m2[i] + 0.1 * gg, vv = 0.95 * v2[i] + 0.05 * gg * gg;
    const double mh = mm / (1 - std::pow(0.9, 3)), vh = vv / (1 - std::pow(0.95, 3));
    const double ref = p2[i] - 1e-2 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * p2[i]);
    EXPECT_NEAR(p[i], ref, 1e-6);
    EXPECT_NEAR(m[i], mm, 1e-7);
    EXPECT_NEAR(v[i], vv, 1e-8);
  }
}

TEST_F(CpuKernels, Bf16CastsRoundToNearestEven) {
  const Vec x{1.0f, -2.5f, 3.14159265f, 1.00390625f /* tie: rounds to even 1.0 */, 1.01171875f /* tie -> 1.015625 */};
  std::vector<uint16_t> b(x.size());
  Vec back(x.size());
  be.CastToBf16(x.data(), b.data(), static_cast<int64_t>(x.size()));
  be.CastFromBf16(b.data(), back.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(b[0], 0x3f80);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_NEAR(back[2], 3.140625f, 1e-7);
  EXPECT_EQ(back[3], 1.0f);
  EXPECT_EQ(back[4], 1.015625f);
}

// The vectorised casts equal the scalar FloatToBf16 / Bf16ToFloat bit for bit on every compiled
// instruction set: every bf16 value back to fp32, and every bf16 value's neighbourhood in fp32
// (low halves 0, 1, 0x7fff, 0x8000 ties, 0x8001, 0xffff and two others: rounding up, down, to
// even, carries into the exponent, infinities, every NaN payload, subnormals, both signs).
TEST_F(CpuKernels, Bf16CastsEqualTheScalarCastsBitForBit) {
  std::vector<uint16_t> every(65536);
  for (uint32_t i = 0; i < 65536; ++i) every[i] = static_cast<uint16_t>(i);
  Vec probes;
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (const uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x1234u, 0xc3a1u}) {
      probes.push_back(std::bit_cast<float>((hi << 16) | lo));
    }
  }
  const int64_t n = static_cast<int64_t>(probes.size()) - 3;  // a ragged tail for the scalar path
  std::vector<int64_t> targets = vec::TargetsForTest();
  targets.push_back(0);  // and the run-time choice
  for (const int64_t target : targets) {
    vec::ForceTargetForTest(target);
    const std::string name = vec::TargetName();
    Vec wide(every.size());
    be.CastFromBf16(every.data(), wide.data(), static_cast<int64_t>(every.size()));
    std::vector<uint16_t> narrow(static_cast<size_t>(n));
    be.CastToBf16(probes.data(), narrow.data(), n);
    vec::ForceTargetForTest(0);
    for (size_t i = 0; i < every.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(Bf16ToFloat(every[i])))
          << name << " bf16 0x" << std::hex << i;
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(narrow[static_cast<size_t>(i)], FloatToBf16(probes[static_cast<size_t>(i)]))
          << name << " fp32 0x" << std::hex << std::bit_cast<uint32_t>(probes[static_cast<size_t>(i)]);
    }
  }
}

TEST_F(CpuKernels, BiasAndVectorHelpers) {
  Vec y = Random(6, rng), bias = Random(3, rng), y0 = y;
  be.AddBias(y.data(), bias.data(), 2, 3);
  EXPECT_FLOAT_EQ(y[4], y0[4] + bias[1]);
  Vec db(3, 0.0f);
  be.BiasBackward(y.data(), db.data(), 2, 3);
  EXPECT_FLOAT_EQ(db[2], y[2] + y[5]);
  EXPECT_NEAR(be.SumSquares(y.data(), 6), Dot(y, y), 1e-5);
}

// ---- SIMD kernels at sizes that cross vector tails and attention blocks, against double loops ----

// GELU (tanh form) in double as x * sigmoid(2u), which equals 0.5 x (1 + tanh u) and, unlike it,
// does not cancel for negative x.
double GeluU(double v) { return std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v); }
double SigmoidRef(double z) { return 1 / (1 + std::exp(-z)); }
double GeluRef(double v) { return v * SigmoidRef(2 * GeluU(v)); }
double GeluGradRef(double v) {
  const double s = SigmoidRef(2 * GeluU(v));
  return s + v * s * (1 - s) * 2 * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * v * v);
}

// Inputs: a dense sweep of [-12, 12] plus normal samples of growing spread, so every branch of
// the exp range reduction and both saturated tails are hit.
Vec ActivationInputs(std::mt19937& rng) {
  Vec x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float s : {0.1f, 1.0f, 3.0f, 10.0f}) {
    const Vec r = Random(100003, rng, s);
    x.insert(x.end(), r.begin(), r.end());
  }
  return x;
}

// Forward error in ulps of 1 (2^-23 relative), divided by what rounding the
// inputs and intermediates of a float evaluation must cost: `scale` is the sum of the absolute
// terms times (1 + condition number). 1e-35 absolute is below anything training produces (the
// exp argument is capped at 88, so gelu(x < -10.3) is ~1e-37 instead of smaller).
double Ulps(double got, double ref, double scale) {
  const double err = std::abs(got - ref);
  if (err < 1e-35) return 0;
  return err / (std::ldexp(1.0, -23) * std::max(scale, 1e-35));
}

TEST_F(CpuKernels, GeluIsAccurateOnManyRandomInputs) {
  const Vec x = ActivationInputs(rng);
  const int64_t n = static_cast<int64_t>(x.size());
  Vec y(x.size()), dy = Random(x.size(), rng), dx(x.size());
  be.GeluForward(x.data(), y.data(), n);
  be.GeluBackward(x.data(), dy.data(), dx.data(), n);
  double worst_y = 0, worst_dx = 0, worst_rel_pos = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], ref = GeluRef(v), s = SigmoidRef(2 * GeluU(v));
    // d log(gelu)/d log(x) = x gelu'(x) / gelu(x); the exp argument 2u carries |2u (1 - s)| of it.
    const double cond = 1 + std::abs(v * GeluGradRef(v) / ref);
    worst_y = std::max(worst_y, Ulps(y[i], ref, std::abs(ref) * cond));
    if (v >= 0) worst_rel_pos = std::max(worst_rel_pos, std::abs(y[i] - ref) / std::max(std::abs(ref), 1e-30));
    const double d2u = 2 * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * v * v);
    const double terms = s + std::abs(v * s * (1 - s) * d2u);
    const double amp = 1 + std::abs(2 * GeluU(v)) * (1 - s) + std::abs(v * d2u);
    worst_dx = std::max(worst_dx, Ulps(dx[i], dy[i] * GeluGradRef(v), std::abs(dy[i]) * terms * amp));
  }
  std::printf("gelu: worst %.2f ulp (forward), %.2f (backward); worst relative error for x >= 0 %.3g\n",
              worst_y, worst_dx, worst_rel_pos);
  EXPECT_LT(worst_y, 3.0);
  EXPECT_LT(worst_dx, 3.0);
  EXPECT_LT(worst_rel_pos, 2e-7);
}

TEST_F(CpuKernels, SwigluIsAccurateOnManyRandomInputs) {
  const Vec g = ActivationInputs(rng);
  const int64_t n = static_cast<int64_t>(g.size());
  Vec up = Random(g.size(), rng), dy = Random(g.size(), rng), y(g.size()), dg(g.size()), du(g.size());
  be.SwigluForward(g.data(), up.data(), y.data(), n);
  be.SwigluBackward(g.data(), up.data(), dy.data(), dg.data(), du.data(), n);
  double worst_y = 0, worst_dg = 0, worst_du = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double v = g[i], s = SigmoidRef(v);
    const double cond = 2 + std::abs(v) * (1 - s);  // silu(g) * up: |1 + g (1 - s)| bounded by 1 + |g|(1 - s)
    worst_y = std::max(worst_y, Ulps(y[i], v * s * up[i], std::abs(v * s * up[i]) * cond));
    worst_du = std::max(worst_du, Ulps(du[i], dy[i] * v * s, std::abs(dy[i] * v * s) * cond));
    const double terms = std::abs(dy[i] * up[i]) * (s + std::abs(v) * s * (1 - s));
    worst_dg = std::max(worst_dg, Ulps(dg[i], dy[i] * up[i] * s * (1 + v * (1 - s)), terms * (cond + 1)));
  }
  std::printf("swiglu: worst %.2f / %.2f / %.2f ulp (y, dgate, dup)\n", worst_y, worst_dg, worst_du);
  EXPECT_LT(worst_y, 3.0);
  EXPECT_LT(worst_dg, 3.0);
  EXPECT_LT(worst_du, 3.0);
}

TEST_F(CpuKernels, NormsOnLongRowsMatchDoubleLoops) {
  const int64_t rows = 5, cols = 1003;  // not a multiple of any vector width
  Vec x = Random(rows * cols, rng, 2.0f), gamma = Random(cols, rng), beta = Random(cols, rng);
  Vec dy = Random(rows * cols, rng);
  for (auto& v : x) v += 0.5f;  // a mean away from zero
  Vec y(rows * cols), mean(rows), rstd(rows), dx(rows * cols), dgamma(cols, 0.0f), dbeta(cols, 0.0f);
  be.LayerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
  be.LayerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
                       dbeta.data(), rows, cols);
  Vec ry(rows * cols), rdx(rows * cols), rdgamma(cols, 0.0f), rdbeta(cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double mu = 0, var = 0, sg = 0, sgx = 0;
    for (int64_t c = 0; c < cols; ++c) mu += xr[c];
    mu /= cols;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= cols;
    const double rs = 1 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(mean[r], mu, 1e-6);
    EXPECT_NEAR(rstd[r], rs, 1e-6 * rs);
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (xr[c] - mu) * rs, g = dy[r * cols + c] * gamma[c];
      ry[r * cols + c] = static_cast<float>(xhat * gamma[c] + beta[c]);
      sg += g;
      sgx += g * xhat;
      rdgamma[c] += static_cast<float>(dy[r * cols + c] * xhat);
      rdbeta[c] += dy[r * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (xr[c] - mu) * rs;
      rdx[r * cols + c] = static_cast<float>(rs * (dy[r * cols + c] * gamma[c] - sg / cols - xhat * sgx / cols));
    }
  }
  EXPECT_LT(MaxRelError(y, ry), 2e-6);
  EXPECT_LT(MaxRelError(dx, rdx), 2e-6);
  EXPECT_LT(MaxRelError(dgamma, rdgamma), 2e-6);
  EXPECT_LT(MaxRelError(dbeta, rdbeta), 2e-6);

  Vec rms_y(rows * cols), rms_rstd(rows), rms_dx(rows * cols), rms_dgamma(cols, 0.0f);
  be.RmsNormForward(x.data(), gamma.data(), rms_y.data(), rms_rstd.data(), rows, cols, 1e-5f);
  be.RmsNormBackward(dy.data(), x.data(), gamma.data(), rms_rstd.data(), rms_dx.data(), rms_dgamma.data(), rows, cols);
  Vec ref_y(rows * cols), ref_dx(rows * cols), ref_dgamma(cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double ms = 0, sgx = 0;
    for (int64_t c = 0; c < cols; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const double rs = 1 / std::sqrt(ms / cols + 1e-5);
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = xr[c] * rs;
      ref_y[r * cols + c] = static_cast<float>(xhat * gamma[c]);
      sgx += dy[r * cols + c] * gamma[c] * xhat;
      ref_dgamma[c] += static_cast<float>(dy[r * cols + c] * xhat);
    }
    for (int64_t c = 0; c < cols; ++c) {
      ref_dx[r * cols + c] = static_cast<float>(rs * (dy[r * cols + c] * gamma[c] - xr[c] * rs * sgx / cols));
    }
  }
  EXPECT_LT(MaxRelError(rms_y, ref_y), 2e-6);
  EXPECT_LT(MaxRelError(rms_dx, ref_dx), 2e-6);
  EXPECT_LT(MaxRelError(rms_dgamma, ref_dgamma), 2e-6);
}

// Attention backward in double, straight from the definition (dS = P (dP - rowsum(P dP)) / sqrt(d)),
// over the keys each row sees.
void ReferenceAttentionBackward(const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v, const Vec& dout,
                                Vec* dq, Vec* dk, Vec* dv) {
  const int64_t group = s.heads / s.kv_heads, d = s.head_dim;
  dq->assign(q.size(), 0.0f);
  dk->assign(k.size(), 0.0f);
  dv->assign(v.size(), 0.0f);
  auto qi = [&](int64_t i, int64_t b, int64_t h) { return ((i * s.batch + b) * s.heads + h) * d; };
  auto kj = [&](int64_t j, int64_t b, int64_t h) { return ((j * s.batch + b) * s.kv_heads + h / group) * d; };
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t j0 = s.FirstVisibleKey(i), n = s.VisibleKeys(i) - j0;
        if (n <= 0) continue;
        std::vector<double> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n));
        double mx = -1e300, sum = 0, pdp = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0, dd = 0;
          for (int64_t e = 0; e < d; ++e) {
            dot += static_cast<double>(q[qi(i, b, h) + e]) * k[kj(j0 + j, b, h) + e];
            dd += static_cast<double>(dout[qi(i, b, h) + e]) * v[kj(j0 + j, b, h) + e];
          }
          p[j] = dot * scale;
          dp[j] = dd;
          mx = std::max(mx, p[j]);
        }
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < n; ++j) pdp += (p[j] /= sum) * dp[j];
        for (int64_t j = 0; j < n; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * scale;
          for (int64_t e = 0; e < d; ++e) {
            (*dq)[qi(i, b, h) + e] += static_cast<float>(ds * k[kj(j0 + j, b, h) + e]);
            (*dk)[kj(j0 + j, b, h) + e] += static_cast<float>(ds * q[qi(i, b, h) + e]);
            (*dv)[kj(j0 + j, b, h) + e] += static_cast<float>(p[j] * dout[qi(i, b, h) + e]);
          }
        }
      }
    }
  }
}

// Causal, with blocks of 64 rows and GQA; then one ring-attention block of each kind: queries
// against a longer key range (offset 40), a fully visible block, and an offset that leaves the first
// rows with no key (out 0, lse -inf, zero gradients).
TEST_F(CpuKernels, BlockedAttentionMatchesDefinitionForEveryMask) {
  const std::vector<AttentionShape> shapes = {
      {.batch = 2, .seq = 150, .heads = 4, .kv_heads = 2, .head_dim = 16},
      {.batch = 1, .seq = 64, .heads = 2, .kv_heads = 2, .head_dim = 8},
      {.batch = 3, .seq = 65, .heads = 2, .kv_heads = 1, .head_dim = 5},
      {.batch = 2, .seq = 70, .heads = 2, .kv_heads = 1, .head_dim = 8, .kv_seq = 110, .causal_offset = 40},
      {.batch = 2, .seq = 70, .heads = 2, .kv_heads = 2, .head_dim = 8, .kv_seq = 50, .causal = false},
      {.batch = 1, .seq = 90, .heads = 2, .kv_heads = 1, .head_dim = 8, .kv_seq = 90, .causal_offset = -70},
      // Local attention: a sliding window shorter than a block and one longer, chunks that cut
      // blocks (24 does not divide 64), and ring blocks of a windowed sequence (query chunk at
      // position 96 against keys from 32 and from 80).
      {.batch = 2, .seq = 150, .heads = 4, .kv_heads = 2, .head_dim = 8, .window = 13},
      {.batch = 1, .seq = 150, .heads = 2, .kv_heads = 1, .head_dim = 8, .window = 100},
      {.batch = 2, .seq = 150, .heads = 2, .kv_heads = 2, .head_dim = 8, .window = 24, .chunked = true},
      {.batch = 1, .seq = 40, .heads = 2, .kv_heads = 1, .head_dim = 8, .kv_seq = 40, .causal_offset = 64,
       .window = 50, .query_start = 96},
      {.batch = 1, .seq = 40, .heads = 2, .kv_heads = 1, .head_dim = 8, .kv_seq = 40, .causal_offset = 16,
       .window = 50, .chunked = true, .query_start = 96},
  };
  for (const AttentionShape& s : shapes) {
    const std::string name = "seq " + std::to_string(s.seq) + " keys " + std::to_string(s.keys()) + " offset " +
                             std::to_string(s.causal_offset) + (s.causal ? "" : " full") + " window " +
                             std::to_string(s.window) + (s.chunked ? " chunked" : "");
    const size_t qn = static_cast<size_t>(s.q_elements()), kn = static_cast<size_t>(s.kv_elements());
    Vec q = Random(qn, rng), k = Random(kn, rng), v = Random(kn, rng), dout = Random(qn, rng);
    const AttentionRun r = RunAttention(be, s, q, k, v, dout);
    Vec ref_lse, rdq, rdk, rdv;
    EXPECT_LT(MaxRelError(r.out, ReferenceAttention(s, q, k, v, &ref_lse)), 2e-6) << name;
    int lse_bad = 0;
    for (size_t i = 0; i < ref_lse.size(); ++i) {
      const bool empty = std::isinf(ref_lse[i]);
      lse_bad += empty ? r.lse[i] != ref_lse[i] : std::abs(r.lse[i] - ref_lse[i]) > 1e-5f * (1 + std::abs(ref_lse[i]));
    }
    EXPECT_EQ(lse_bad, 0) << name;
    ReferenceAttentionBackward(s, q, k, v, dout, &rdq, &rdk, &rdv);
    EXPECT_LT(MaxRelError(r.dq, rdq), 1e-5) << name;
    EXPECT_LT(MaxRelError(r.dk, rdk), 1e-5) << name;
    EXPECT_LT(MaxRelError(r.dv, rdv), 1e-5) << name;
  }
}

// Ring attention's contract (backend.h AttentionArgs): the queries of chunk 1 (positions [S, 2S))
// against key chunk 0 (fully visible) and chunk 1 (the diagonal) give (out, lse) pairs that merge into
// the attention over both chunks; backward of each block from the merged out and lse gives dq parts
// that sum to the whole dq, and each chunk's dk, dv.
TEST_F(CpuKernels, AttentionBlocksMergeIntoTheWholeAndBackwardSplitsByBlock) {
  const int64_t S = 70, B = 2, H = 4, KVH = 2, D = 8;
  const AttentionShape whole{.batch = B, .seq = S, .heads = H, .kv_heads = KVH, .head_dim = D, .kv_seq = 2 * S,
                             .causal_offset = S};
  const AttentionShape before{.batch = B, .seq = S, .heads = H, .kv_heads = KVH, .head_dim = D, .causal = false};
  const AttentionShape diagonal{.batch = B, .seq = S, .heads = H, .kv_heads = KVH, .head_dim = D};
  const size_t qn = static_cast<size_t>(whole.q_elements()), kn = static_cast<size_t>(whole.kv_elements());
  Vec q = Random(qn, rng), k = Random(kn, rng), v = Random(kn, rng), dout = Random(qn, rng);
  const AttentionRun all = RunAttention(be, whole, q, k, v, dout);
  const size_t half = kn / 2;  // keys are sequence-major: chunk 0 is the first half of the rows
  const auto mid = static_cast<std::ptrdiff_t>(half);
  const Vec k0(k.begin(), k.begin() + mid), k1(k.begin() + mid, k.end());
  const Vec v0(v.begin(), v.begin() + mid), v1(v.begin() + mid, v.end());
  Vec o0(qn), o1(qn), l0(static_cast<size_t>(whole.stats_floats())), l1(l0.size());
  be.AttentionForward(before, q.data(), k0.data(), v0.data(), o0.data(), l0.data());
  be.AttentionForward(diagonal, q.data(), k1.data(), v1.data(), o1.data(), l1.data());
  Vec out(qn), lse(l0.size());
  for (size_t r = 0; r < lse.size(); ++r) {
    const double m = std::max(l0[r], l1[r]);
    const double w0 = std::exp(l0[r] - m), w1 = std::exp(l1[r] - m);
    lse[r] = static_cast<float>(m + std::log(w0 + w1));
    for (int64_t e = 0; e < D; ++e) {
      const size_t i = r * static_cast<size_t>(D) + static_cast<size_t>(e);
      out[i] = static_cast<float>((w0 * o0[i] + w1 * o1[i]) / (w0 + w1));
    }
  }
  EXPECT_LT(MaxRelError(out, all.out), 1e-5);
  EXPECT_LT(MaxRelError(lse, all.lse), 1e-5);
  Vec dq0(qn), dq1(qn), dk0(half), dk1(half), dv0(half), dv1(half);
  be.AttentionBackward(before, {.q = q.data(), .k = k0.data(), .v = v0.data(), .out = out.data(), .lse = lse.data(),
                                .dout = dout.data(), .dq = dq0.data(), .dk = dk0.data(), .dv = dv0.data()});
  be.AttentionBackward(diagonal, {.q = q.data(), .k = k1.data(), .v = v1.data(), .out = out.data(), .lse = lse.data(),
                                  .dout = dout.data(), .dq = dq1.data(), .dk = dk1.data(), .dv = dv1.data()});
  Vec dq(qn), dk = dk0, dv = dv0;
  for (size_t i = 0; i < qn; ++i) dq[i] = dq0[i] + dq1[i];
  dk.insert(dk.end(), dk1.begin(), dk1.end());
  dv.insert(dv.end(), dv1.begin(), dv1.end());
  EXPECT_LT(MaxRelError(dq, all.dq), 1e-5);
  EXPECT_LT(MaxRelError(dk, all.dk), 1e-5);
  EXPECT_LT(MaxRelError(dv, all.dv), 1e-5);
}

// One call per block equals the per-row Max / ExpShiftSum / Scale calls bit for bit and gives their
// log-sum-exp; the probabilities rebuilt from it and the gradient from delta = rowsum(p dp) equal the
// per-row SoftmaxGrad calls to rounding. With and without room for a full-width tail (ld 150, and ld
// = the last row's length 77, which is no multiple of the vector width), and zeros past each row.
TEST_F(CpuKernels, ScoreRowsEqualThePerRowLoops) {
  for (const int64_t ld : {int64_t{150}, int64_t{77}}) {
    const int64_t first = 13, count = ld - first + 1;
    const vec::ScoreRows rows{.ld = ld, .first_len = first, .cap = ld, .count = count, .zero_to = ld};
    const size_t n = static_cast<size_t>(count * ld);
    Vec x = Random(n, rng), g = Random(n, rng);
    Vec want = x, got = x, rebuilt = x, gwant = g, ggot = g, lse_want(static_cast<size_t>(count)), delta = lse_want;
    for (int64_t r = 0; r < count; ++r) {
      float* row = want.data() + r * ld;
      const int64_t len = first + r;
      const float mx = vec::Max(row, len);
      const double sum = vec::ExpShiftSum(row, len, mx);
      vec::Scale(row, len, static_cast<float>(1.0 / sum));
      std::fill(row + len, row + ld, 0.0f);
      lse_want[static_cast<size_t>(r)] = mx + static_cast<float>(std::log(sum));
      delta[static_cast<size_t>(r)] = static_cast<float>(vec::Dot(row, g.data() + r * ld, len));
      float* grow = gwant.data() + r * ld;
      vec::SoftmaxGrad(row, grow, len, 0.125f);
      std::fill(grow + len, grow + ld, 0.0f);
    }
    Vec lse(static_cast<size_t>(count));
    vec::SoftmaxRowsLse(got.data(), rows, lse.data(), 1);
    EXPECT_EQ(got, want) << "ld " << ld;
    EXPECT_EQ(lse, lse_want) << "ld " << ld;
    vec::ExpMinusLseRows(rebuilt.data(), rows, lse.data(), 1);
    EXPECT_LT(MaxRelError(rebuilt, want), 1e-5) << "ld " << ld;
    vec::SoftmaxGradDeltaRows(got.data(), ggot.data(), rows, delta.data(), 0.125f);
    EXPECT_LT(MaxRelError(ggot, gwant), 1e-5) << "ld " << ld;
    for (int64_t r = 0; r < count; ++r) {  // zeros past the visible keys exactly
      for (int64_t j = first + r; j < ld; ++j) {
        EXPECT_EQ(ggot[static_cast<size_t>(r * ld + j)], 0.0f);
        EXPECT_EQ(rebuilt[static_cast<size_t>(r * ld + j)], 0.0f);
      }
    }
  }
}

TEST_F(CpuKernels, CrossEntropyOnLongRowsMatchesDoubleLoops) {
  const int64_t rows = 7, vocab = 1003;
  Vec logits = Random(rows * vocab, rng, 3.0f);
  std::vector<int32_t> targets;
  for (int64_t r = 0; r < rows; ++r) targets.push_back(static_cast<int32_t>((r * 389) % vocab));
  Vec mx(rows), sum(rows), tl(rows), d(rows * vocab);
  be.RowMax(logits.data(), rows, vocab, mx.data());
  be.CrossEntropyStats(logits.data(), rows, vocab, mx.data(), targets.data(), 0, sum.data(), tl.data());
  be.CrossEntropyBackward(logits.data(), rows, vocab, mx.data(), sum.data(), targets.data(), 0, 0.25f, d.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * vocab;
    EXPECT_EQ(mx[r], *std::max_element(l, l + vocab));
    double s = 0;
    for (int64_t c = 0; c < vocab; ++c) s += std::exp(static_cast<double>(l[c]) - mx[r]);
    EXPECT_NEAR(sum[r], s, 1e-6 * s);
    EXPECT_EQ(tl[r], l[targets[r]]);
    for (int64_t c = 0; c < vocab; ++c) {
      const double ref = (std::exp(static_cast<double>(l[c]) - mx[r]) / sum[r] - (c == targets[r] ? 1 : 0)) * 0.25;
      EXPECT_NEAR(d[r * vocab + c], ref, 1e-7) << r << "," << c;
    }
  }
}

TEST_F(CpuKernels, AdamWOnALongVectorMatchesTheAlgorithm) {
  const int64_t n = 1001;
  Vec p = Random(n, rng), g = Random(n, rng), m = Random(n, rng, 0.1f), v = Random(n, rng, 0.1f);
  for (auto& x : v) x = x * x;
  const Vec p0 = p, m0 = m, v0 = v;
  AdamWParams a;
  a.lr = 3e-4;
  a.weight_decay = 0.1;
  a.step = 17;
  a.grad_scale = 0.8;
  be.AdamW(p.data(), g.data(), m.data(), v.data(), n, a);
  // The kernel runs with fp32 betas: the reference takes the same rounded values.
  const double b1 = 0.9f, b2 = 0.95f, ob1 = 1.0f - 0.9f, ob2 = 1.0f - 0.95f;
  for (int64_t i = 0; i < n; ++i) {
    const double gg = g[i] * 0.8;
    const double mm = b1 * m0[i] + ob1 * gg, vv = b2 * v0[i] + ob2 * gg * gg;
    const double mh = mm / (1 - std::pow(0.9, 17)), vh = vv / (1 - std::pow(0.95, 17));
    const double ref = p0[i] - 3e-4 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * p0[i]);
    EXPECT_NEAR(p[i], ref, 2e-7 * std::max(1.0, std::abs(ref)));
    // A few fp32 roundings of the terms (the sum of m may cancel).
    EXPECT_NEAR(m[i], mm, 4e-7 * (std::abs(b1 * m0[i]) + std::abs(ob1 * gg)));
    EXPECT_NEAR(v[i], vv, 4e-7 * vv);
  }
}

TEST_F(CpuKernels, FusedChainsEqualTheUnfusedKernels) {
  const int64_t rows = 6, cols = 333;
  const Vec pre = Random(rows * cols, rng, 2.0f), bias = Random(cols, rng), dy = Random(rows * cols, rng);
  // bias + GELU forward and backward.
  Vec x1 = pre, y1(rows * cols), x2 = pre, y2(rows * cols);
  BiasGeluForward(x1.data(), bias.data(), y1.data(), rows, cols);
  be.AddBias(x2.data(), bias.data(), rows, cols);
  be.GeluForward(x2.data(), y2.data(), rows * cols);
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(y1, y2);
  Vec dx1(rows * cols), db1(cols, 0.5f), dx2(rows * cols), db2(cols, 0.5f);
  BiasGeluBackward(x1.data(), dy.data(), dx1.data(), db1.data(), rows, cols);
  be.GeluBackward(x2.data(), dy.data(), dx2.data(), rows * cols);
  be.BiasBackward(dx2.data(), db2.data(), rows, cols);
  EXPECT_EQ(dx1, dx2);
  EXPECT_LT(MaxRelError(db1, db2), 1e-6);

  // residual + LayerNorm / RMSNorm forward, and norm backward added into the residual gradient.
  const Vec res = Random(rows * cols, rng), gamma = Random(cols, rng), beta = Random(cols, rng);
  Vec h1(rows * cols), n1(rows * cols), mean1(rows), rstd1(rows);
  ResidualLayerNormForward(pre.data(), res.data(), bias.data(), h1.data(), gamma.data(), beta.data(), n1.data(),
                           mean1.data(), rstd1.data(), rows, cols, 1e-5f);
  Vec h2 = pre, n2(rows * cols), mean2(rows), rstd2(rows);
  be.Axpy(h2.data(), res.data(), rows * cols, 1.0f);
  be.AddBias(h2.data(), bias.data(), rows, cols);
  be.LayerNormForward(h2.data(), gamma.data(), beta.data(), n2.data(), mean2.data(), rstd2.data(), rows, cols, 1e-5f);
  EXPECT_EQ(h1, h2);
  EXPECT_EQ(n1, n2);
  EXPECT_EQ(rstd1, rstd2);
  Vec dres1 = dy, dg1(cols, 0.0f), dbeta1(cols, 0.0f), dn(rows * cols), dg2(cols, 0.0f), dbeta2(cols, 0.0f);
  LayerNormBackwardAdd(res.data(), h1.data(), gamma.data(), mean1.data(), rstd1.data(), dres1.data(), dg1.data(),
                       dbeta1.data(), rows, cols);
  be.LayerNormBackward(res.data(), h2.data(), gamma.data(), mean2.data(), rstd2.data(), dn.data(), dg2.data(),
                       dbeta2.data(), rows, cols);
  Vec dres2 = dy;
  be.Axpy(dres2.data(), dn.data(), rows * cols, 1.0f);
  EXPECT_LT(MaxRelError(dres1, dres2), 1e-6);
  EXPECT_EQ(dg1, dg2);
  EXPECT_EQ(dbeta1, dbeta2);

  Vec rh1(rows * cols), rn1(rows * cols), rr1(rows), rn2(rows * cols), rr2(rows);
  ResidualRmsNormForward(pre.data(), res.data(), nullptr, rh1.data(), gamma.data(), rn1.data(), rr1.data(), rows, cols,
                         1e-5f);
  Vec rh2 = pre;
  be.Axpy(rh2.data(), res.data(), rows * cols, 1.0f);
  be.RmsNormForward(rh2.data(), gamma.data(), rn2.data(), rr2.data(), rows, cols, 1e-5f);
  EXPECT_EQ(rh1, rh2);
  EXPECT_EQ(rn1, rn2);
  Vec rd1 = dy, rg1(cols, 0.0f), rdn(rows * cols), rg2(cols, 0.0f);
  RmsNormBackwardAdd(res.data(), rh1.data(), gamma.data(), rr1.data(), rd1.data(), rg1.data(), rows, cols);
  be.RmsNormBackward(res.data(), rh2.data(), gamma.data(), rr2.data(), rdn.data(), rg2.data(), rows, cols);
  Vec rd2 = dy;
  be.Axpy(rd2.data(), rdn.data(), rows * cols, 1.0f);
  EXPECT_LT(MaxRelError(rd1, rd2), 1e-6);
  EXPECT_EQ(rg1, rg2);
}

// SIMD versions of the backend's small vector helpers (for the backend to call) against its loops.
TEST_F(CpuKernels, VectorHelpersMatchTheBackendLoops) {
  const int64_t rows = 7, cols = 301, n = rows * cols;
  const Vec x = Random(n, rng), bias = Random(cols, rng);
  Vec y1 = Random(n, rng), y2 = y1;
  vec::Axpy(y1.data(), x.data(), n, -0.37f);
  be.Axpy(y2.data(), x.data(), n, -0.37f);
  EXPECT_LT(MaxRelError(y1, y2), 1e-6);
  vec::AddBias(y1.data(), bias.data(), rows, cols);
  be.AddBias(y2.data(), bias.data(), rows, cols);
  EXPECT_LT(MaxRelError(y1, y2), 1e-6);
  Vec db1 = Random(cols, rng), db2 = db1;
  vec::BiasGrad(x.data(), db1.data(), rows, cols);
  be.BiasBackward(x.data(), db2.data(), rows, cols);
  EXPECT_LT(MaxRelError(db1, db2), 1e-6);
  EXPECT_NEAR(vec::SumSquares(x.data(), n), Dot(x, x), 1e-6 * Dot(x, x));
  const float last = y1[static_cast<size_t>(n - 1)];
  vec::Fill(y1.data(), n - 1, 2.5f);
  EXPECT_EQ(y1[0], 2.5f);
  EXPECT_EQ(y1[static_cast<size_t>(n - 2)], 2.5f);
  EXPECT_EQ(y1[static_cast<size_t>(n - 1)], last);  // one past the end untouched
}

// Every instruction set compiled in (AVX-512, AVX2, SSE4, portable) gives the same results as the
// one the dispatcher picks, within a few roundings, at a size with a vector tail on each.
TEST_F(CpuKernels, EveryCompiledInstructionSetAgrees) {
  const int64_t rows = 3, cols = 263, n = rows * cols;
  const Vec x = Random(n, rng, 3.0f), dy = Random(n, rng), gamma = Random(cols, rng), beta = Random(cols, rng);
  const Vec grad = Random(n, rng), m0 = Random(n, rng, 0.1f), v0 = [&] {
    Vec v = Random(n, rng, 0.1f);
    for (auto& e : v) e *= e;
    return v;
  }();
  const AttentionShape s{2, 70, 2, 1, 16};
  const int64_t qn = s.seq * s.batch * s.heads * s.head_dim, kn = s.seq * s.batch * s.kv_heads * s.head_dim;
  const Vec q = Random(qn, rng), k = Random(kn, rng), v = Random(kn, rng), dout = Random(qn, rng);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) targets[static_cast<size_t>(r)] = static_cast<int32_t>(r * 97 % cols);
  // All outputs of one pass, concatenated.
  auto run = [&] {
    Vec all;
    auto add = [&](const Vec& part) { all.insert(all.end(), part.begin(), part.end()); };
    Vec y(n), d(n), d2(n), mean(rows), rstd(rows), dg(cols, 0.0f), db(cols, 0.0f);
    be.GeluForward(x.data(), y.data(), n);
    be.GeluBackward(x.data(), dy.data(), d.data(), n);
    add(y), add(d);
    be.SwigluForward(x.data(), dy.data(), y.data(), n);
    be.SwigluBackward(x.data(), dy.data(), grad.data(), d.data(), d2.data(), n);
    add(y), add(d), add(d2);
    be.LayerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
    be.LayerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), d.data(), dg.data(), db.data(),
                         rows, cols);
    add(y), add(d), add(dg), add(db);
    be.RmsNormForward(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols, 1e-5f);
    be.RmsNormBackward(dy.data(), x.data(), gamma.data(), rstd.data(), d.data(), dg.data(), rows, cols);
    add(y), add(d), add(dg);
    Vec mx(rows), se(rows), tl(rows);
    be.RowMax(x.data(), rows, cols, mx.data());
    be.CrossEntropyStats(x.data(), rows, cols, mx.data(), targets.data(), 0, se.data(), tl.data());
    be.CrossEntropyBackward(x.data(), rows, cols, mx.data(), se.data(), targets.data(), 0, 0.5f, d.data());
    add(mx), add(se), add(d);
    Vec p = x, mm = m0, vv = v0;
    AdamWParams a;
    a.lr = 1e-3;
    a.weight_decay = 0.1;
    a.step = 5;
    be.AdamW(p.data(), grad.data(), mm.data(), vv.data(), n, a);
    add(p), add(mm), add(vv);
    const AttentionRun r = RunAttention(be, s, q, k, v, dout);
    add(r.out), add(r.lse), add(r.dq), add(r.dk), add(r.dv);
    Vec rot = x;
    be.Rotary(rot.data(), 3, 1, 1, cols - 1, 0, false);  // 3 rows of 262 = 3 x 263 - 3 floats
    add(rot);
    return all;
  };
  const Vec chosen = run();
  const std::vector<int64_t> compiled = vec::TargetsForTest();
  EXPECT_GE(compiled.size(), 1u);
  for (int64_t target : compiled) {
    vec::ForceTargetForTest(target);
    const Vec got = run();
    const std::string name = vec::TargetName();
    vec::ForceTargetForTest(0);
    ASSERT_EQ(got.size(), chosen.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], chosen[i], 2e-5 * std::max(1.0f, std::abs(chosen[i]))) << name << " element " << i;
    }
    std::printf("instruction set %s agrees with %s\n", name.c_str(), vec::TargetName());
  }
}


}  // namespace
}  // namespace parallax::executor
