// CPU backend kernels against straightforward reference loops (fresh random inputs, never zeros)
// and input gradients against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "executor/cpu/cpu_backend.h"

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
  const int64_t seq = 5, batch = 2, heads = 3, d = 4;
  Vec x = Random(seq * batch * heads * d, rng), y = x;
  be.Rotary(y.data(), seq, batch, heads, d, false);
  for (int64_t p = 0; p < seq; ++p) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = ((p * batch + b) * heads + h) * d;
        for (int64_t j = 0; j < d / 2; ++j) {
          const double th = p * std::pow(10000.0, -2.0 * j / d);
          EXPECT_NEAR(y[base + j], x[base + j] * std::cos(th) - x[base + j + 2] * std::sin(th), 1e-5);
          EXPECT_NEAR(y[base + j + 2], x[base + j + 2] * std::cos(th) + x[base + j] * std::sin(th), 1e-5);
        }
      }
    }
  }
  be.Rotary(y.data(), seq, batch, heads, d, true);
  EXPECT_LT(MaxRelError(y, x), 1e-5);
}

// Reference attention in double, straight from the definition.
Vec ReferenceAttention(const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v) {
  Vec out(static_cast<size_t>(s.seq * s.batch * s.heads * s.head_dim));
  const int64_t group = s.heads / s.kv_heads;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<double> sc(static_cast<size_t>(i + 1));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < s.head_dim; ++e) {
            dot += q[((i * s.batch + b) * s.heads + h) * s.head_dim + e] *
                   k[((j * s.batch + b) * s.kv_heads + h / group) * s.head_dim + e];
          }
          sc[j] = dot / std::sqrt(static_cast<double>(s.head_dim));
          mx = std::max(mx, sc[j]);
        }
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < s.head_dim; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) {
            o += sc[j] / sum * v[((j * s.batch + b) * s.kv_heads + h / group) * s.head_dim + e];
          }
          out[((i * s.batch + b) * s.heads + h) * s.head_dim + e] = static_cast<float>(o);
        }
      }
    }
  }
  return out;
}

TEST_F(CpuKernels, AttentionForwardBackwardWithGroupedQueries) {
  const AttentionShape s{2, 5, 4, 2, 3};
  const size_t qn = static_cast<size_t>(s.seq * s.batch * s.heads * s.head_dim);
  const size_t kn = static_cast<size_t>(s.seq * s.batch * s.kv_heads * s.head_dim);
  Vec q = Random(qn, rng), k = Random(kn, rng), v = Random(kn, rng), w = Random(qn, rng);
  Vec out(qn), probs(static_cast<size_t>(s.probs_floats()));
  be.AttentionForward(s, q.data(), k.data(), v.data(), out.data(), probs.data());
  EXPECT_LT(MaxRelError(out, ReferenceAttention(s, q, k, v)), 1e-5);
  auto loss = [&] {
    Vec o(qn);
    be.AttentionForward(s, q.data(), k.data(), v.data(), o.data(), nullptr);
    return Dot(o, w);
  };
  Vec dq(qn), dk(kn), dv(kn), dq2(qn), dk2(kn), dv2(kn);
  be.AttentionBackward(s, q.data(), k.data(), v.data(), probs.data(), w.data(), dq.data(), dk.data(), dv.data());
  EXPECT_LT(MaxRelError(dq, NumericGrad(q, loss)), 3e-3);
  EXPECT_LT(MaxRelError(dk, NumericGrad(k, loss)), 3e-3);
  EXPECT_LT(MaxRelError(dv, NumericGrad(v, loss)), 3e-3);
  // Without saved probabilities (selective recompute) the result is the same.
  be.AttentionBackward(s, q.data(), k.data(), v.data(), nullptr, w.data(), dq2.data(), dk2.data(), dv2.data());
  EXPECT_LT(MaxRelError(dq2, dq), 1e-6);
  EXPECT_LT(MaxRelError(dk2, dk), 1e-6);
  EXPECT_LT(MaxRelError(dv2, dv), 1e-6);
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

TEST_F(CpuKernels, BiasAndVectorHelpers) {
  Vec y = Random(6, rng), bias = Random(3, rng), y0 = y;
  be.AddBias(y.data(), bias.data(), 2, 3);
  EXPECT_FLOAT_EQ(y[4], y0[4] + bias[1]);
  Vec db(3, 0.0f);
  be.BiasBackward(y.data(), db.data(), 2, 3);
  EXPECT_FLOAT_EQ(db[2], y[2] + y[5]);
  EXPECT_NEAR(be.SumSquares(y.data(), 6), Dot(y, y), 1e-5);
}

}  // namespace
}  // namespace parallax::executor
